// The browser's MQTT connection to the gateway's broker (/mqtt over WebSocket) as the signed-in
// user, with the session token as password: the broker shows and accepts exactly what that user
// may read and write. Used by the pages that load mqtt.js (topic explorer, live values).
import mqtt, { type MqttClient } from 'mqtt/dist/mqtt.esm';
import type { Session } from './session.js';

export function brokerUrl(): string {
  return `${window.location.protocol === 'https:' ? 'wss' : 'ws'}://${window.location.host}/mqtt`;
}

/** A new MQTT 3.1.1 connection; reconnecting is the caller's (reconnectPeriod 0): a fresh client never re-sends a refused publish. */
export function connectAsSession(s: Session, prefix: string): MqttClient {
  return mqtt.connect(brokerUrl(), {
    username: s.username,
    password: s.token,
    clientId: `${prefix}-${Math.random().toString(36).slice(2, 10)}`,
    protocolVersion: 4,
    clean: true,
    // Native timers: mqtt.js's default runs them in a blob: worker, which the CSP forbids.
    // Background tabs fire them at most once a minute, so the keepalive is 60 s.
    timerVariant: 'native',
    keepalive: 60,
    connectTimeout: 10_000,
    reconnectPeriod: 0,
  });
}

/** SUBACK 0x80 (or no answer) means the broker refused the filter: no read permission covers it. */
export function subscribeChecked(c: MqttClient, filter: string, done: (granted: boolean) => void): void {
  c.subscribe(filter, { qos: 1 }, (err, granted) => done(!err && !!granted?.length && granted[0]!.qos !== 128));
}
