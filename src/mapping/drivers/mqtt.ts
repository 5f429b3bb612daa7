// Mqtt connection: an external broker (mqtt.js). Read endpoints subscribe there and are bridged
// to the data plane; write endpoints publish there. mqtt.js's own reconnect is off: the runtime
// reconnects with its backoff.
import type { MqttClient } from 'mqtt';
import type { EndpointDef } from '../service-files.js';
import { decodePayload, topicMatches } from '../topics.js';
import type { ConnectionDriver } from './types.js';

export interface MqttConfiguration {
  url: string;
  clientId?: string;
  username?: string;
  password?: string;
  timeoutMs: number;
}

export function createMqttDriver(cfg: MqttConfiguration, defaultClientId: string): ConnectionDriver {
  let client: MqttClient | undefined;
  let lostListener: (reason: string) => void = () => {};
  const handlers = new Set<{ filter: string; fn: (topic: string, value: unknown) => void }>();
  const last = new Map<string, unknown>();

  return {
    async connect() {
      // mqtt.js is loaded by the first connection to an external broker.
      const { connect: connectMqtt } = await import('mqtt');
      return new Promise<void>((resolve, reject) => {
        const c = connectMqtt(cfg.url, {
          clientId: cfg.clientId ?? defaultClientId,
          ...(cfg.username !== undefined ? { username: cfg.username } : {}),
          ...(cfg.password !== undefined ? { password: cfg.password } : {}),
          reconnectPeriod: 0,
          connectTimeout: cfg.timeoutMs,
          protocolVersion: 4,
          clean: true,
        });
        let up = false;
        const fail = (err: Error) => {
          if (up) return;
          up = true; // settled
          c.end(true);
          reject(err);
        };
        c.once('connect', () => {
          if (up) return;
          up = true;
          client = c;
          c.on('close', () => {
            if (client !== c) return;
            client = undefined;
            c.end(true);
            lostListener('connection to the external broker closed');
          });
          resolve();
        });
        c.on('error', (err) => fail(err));
        c.once('close', () => fail(new Error('connection refused or closed')));
        c.on('message', (topic, payload) => {
          const value = decodePayload(payload);
          for (const h of handlers) {
            if (!topicMatches(h.filter, topic)) continue;
            last.set(h.filter, value);
            h.fn(topic, value);
          }
        });
      });
    },
    async disconnect() {
      const c = client;
      client = undefined;
      if (!c) return;
      // Bounded: an external broker that stopped answering must not hold up the daemon's stop.
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          c.end(true);
          resolve();
        }, 2000);
        c.end(false, {}, () => {
          clearTimeout(timer);
          resolve();
        });
      });
    },
    onLost(listener) {
      lostListener = listener;
    },
    async read(ep: EndpointDef) {
      return last.get(ep.address.topic as string) ?? null;
    },
    async write(ep: EndpointDef, value: unknown) {
      const c = client;
      if (!c) throw new Error('not connected');
      const payload = typeof value === 'string' ? value : JSON.stringify(value ?? null);
      await c.publishAsync(ep.address.topic as string, payload, { qos: (ep.address.qos ?? 0) as 0 | 1 });
    },
    async subscribe(ep: EndpointDef, fn) {
      const c = client;
      if (!c) throw new Error('not connected');
      const h = { filter: ep.address.topic as string, fn };
      handlers.add(h);
      try {
        await c.subscribeAsync(h.filter, { qos: (ep.address.qos ?? 0) as 0 | 1 });
      } catch (err) {
        handlers.delete(h);
        throw err;
      }
      return () => {
        handlers.delete(h);
        if (client === c && ![...handlers].some((o) => o.filter === h.filter)) c.unsubscribe(h.filter);
      };
    },
  };
}
