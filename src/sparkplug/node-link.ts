// The edge node's own MQTT session (mqtt.js), whichever broker it is on: the embedded one over
// its loopback listener (via: local) or an upstream broker (via: {urls}). Each session is a new
// client with a clean start and the NDEATH as its will, because every CONNECT carries a new
// bdSeq in its will (Sparkplug 3.0 "Edge Node Session Establishment"); mqtt.js's own reconnect
// is off and the edge node reconnects with its backoff.
import type { IClientOptions, MqttClient } from 'mqtt';

export interface LinkOptions {
  url: string;
  clientId: string;
  username?: string;
  password?: string;
  protocolVersion: 4 | 5;
  keepaliveSeconds: number;
  connectTimeoutMs: number;
  tls?: { ca?: Buffer; cert?: Buffer; key?: Buffer; rejectUnauthorized: boolean };
  /** The NDEATH: QoS 1, not retained. */
  will: { topic: string; payload: Buffer };
}

export interface NodeLink {
  /** The broker's URL, without credentials. */
  readonly server: string;
  /** QoS 0, not retained, unless told; resolves once written to the connection. */
  publish(topic: string, payload: Buffer, options?: { qos?: 0 | 1 }): Promise<void>;
  /** QoS 1 subscriptions; rejects when the broker refuses one of them. */
  subscribe(filters: string[]): Promise<void>;
  onMessage(handler: (topic: string, payload: Buffer) => void): void;
  /**
   * Resolves once the broker has read every packet sent before it: a PINGREQ goes out and its
   * PINGRESP comes back (a broker handles a connection's packets in order). QoS 0 publishes have
   * no acknowledgement of their own; this is the proof that they left the gateway. Rejects when
   * the session ends first.
   */
  confirm(): Promise<void>;
  /** Resolves with the reason once the session is over (lost, or ended by end()). */
  readonly closed: Promise<string>;
  /** MQTT 5: a DISCONNECT can ask the broker to publish the will (reason code 0x04). */
  readonly disconnectsWithWill: boolean;
  /**
   * Ends the session. clean: a DISCONNECT, so the broker discards the will (the caller has
   * published the NDEATH itself) — or, with `withWill` on MQTT 5, publishes it (Disconnect with
   * Will Message); otherwise the connection is cut and the broker sends the will.
   */
  end(clean: boolean, withWill?: boolean): Promise<void>;
}

/** MQTT 5 DISCONNECT reason code: Disconnect with Will Message. */
const DISCONNECT_WITH_WILL = 0x04;

const END_TIMEOUT_MS = 2000;

/** A URL as shown: without the user:password@ part. */
export const withoutCredentials = (url: string) => url.replace(/\/\/[^/@]*@/, '//');

/** Opens the session; `signal` abandons a connect in progress (the edge node stops). */
export async function openLink(o: LinkOptions, signal?: AbortSignal): Promise<NodeLink> {
  signal?.throwIfAborted();
  const { connect } = await import('mqtt');
  const options: IClientOptions = {
    clientId: o.clientId,
    protocolVersion: o.protocolVersion,
    clean: true,
    keepalive: o.keepaliveSeconds,
    reconnectPeriod: 0,
    connectTimeout: o.connectTimeoutMs,
    will: { topic: o.will.topic, payload: o.will.payload, qos: 1, retain: false },
    // MQTT 5: clean start and a session that ends with the connection (Sparkplug 3.0).
    ...(o.protocolVersion === 5 ? { properties: { sessionExpiryInterval: 0 } } : {}),
    ...(o.username !== undefined ? { username: o.username } : {}),
    ...(o.password !== undefined ? { password: o.password } : {}),
    ...(o.tls ? { ...o.tls } : {}),
  };
  const client: MqttClient = connect(o.url, options);
  await new Promise<void>((resolve, reject) => {
    const fail = (err: Error) => {
      client.removeAllListeners('connect');
      client.end(true);
      reject(err);
    };
    client.once('connect', () => {
      client.removeListener('error', fail);
      client.removeListener('close', closedEarly);
      resolve();
    });
    const closedEarly = () => fail(new Error('connection refused or closed'));
    const aborted = () => fail(new Error('the edge node stopped while connecting'));
    client.once('error', fail);
    client.once('close', closedEarly);
    signal?.addEventListener('abort', aborted, { once: true });
    client.once('connect', () => signal?.removeEventListener('abort', aborted));
  });
  let reason: string | undefined;
  client.on('error', (err) => (reason ??= err.message));
  // PINGREQs sent and PINGRESPs received, mqtt.js's keepalive pings included: the n-th answer is the n-th ping's.
  let pings = 0;
  let pongs = 0;
  const waiting: Array<{ ping: number; resolve(): void; reject(err: Error): void }> = [];
  client.on('packetsend', (packet) => void (packet.cmd === 'pingreq' && pings++));
  client.on('packetreceive', (packet) => {
    if (packet.cmd !== 'pingresp') return;
    pongs++;
    while (waiting.length && waiting[0]!.ping <= pongs) waiting.shift()!.resolve();
  });
  const closed = new Promise<string>((resolve) => {
    client.once('close', () => {
      client.end(true);
      const why = reason ?? 'connection closed';
      for (const w of waiting.splice(0)) w.reject(new Error(why));
      resolve(why);
    });
  });
  return {
    server: withoutCredentials(o.url),
    publish: async (topic, payload, opts = {}) => {
      await client.publishAsync(topic, payload, { qos: opts.qos ?? 0, retain: false });
    },
    async subscribe(filters) {
      const granted = await client.subscribeAsync(filters, { qos: 1 });
      const refused = granted.filter((g) => g.qos === 128 || g.qos > 2);
      if (refused.length) throw new Error(`the broker refused the subscription to ${refused.map((g) => g.topic).join(', ')}`);
    },
    onMessage(handler) {
      client.on('message', (topic, payload) => handler(topic, payload));
    },
    confirm() {
      if (!client.connected) return Promise.reject(new Error(reason ?? 'connection closed'));
      return new Promise<void>((resolve, reject) => {
        client.sendPing();
        waiting.push({ ping: pings, resolve, reject });
      });
    },
    closed,
    disconnectsWithWill: o.protocolVersion === 5,
    async end(clean, withWill = false) {
      reason ??= 'session ended';
      if (!clean) {
        client.end(true);
        await closed;
        return;
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          client.end(true);
          resolve();
        }, END_TIMEOUT_MS);
        client.end(false, withWill && o.protocolVersion === 5 ? { reasonCode: DISCONNECT_WITH_WILL } : {}, () => {
          clearTimeout(timer);
          resolve();
        });
      });
    },
  };
}
