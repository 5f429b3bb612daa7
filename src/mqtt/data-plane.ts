// The data plane: the in-process port of trusted system components (the protocol-mapping
// runtime, bridges). They publish and subscribe without a client session, so without client
// authentication or publish authorization; delivery to clients is NOT bypassed: every message
// still reaches a client only through authorizeForward (the client's read permission).
import type { Aedes } from 'aedes';
import { isSysTopic, type BrokerContext } from './broker-context.js';

/** MQTT 5 properties a data-plane message carries end to end (clients of 3.1.1 do not see them). */
export interface DataPlaneProperties {
  correlationData?: Buffer;
  responseTopic?: string;
  contentType?: string;
  userProperties?: Record<string, string | string[]>;
  messageExpiryInterval?: number;
}

export interface DataPlane {
  /** QoS 0 or 1 publish from the daemon itself; rejects on $SYS topics or a stopped broker. */
  publish(topic: string, payload: Buffer, opts?: { qos?: 0 | 1; retain?: boolean; properties?: DataPlaneProperties }): Promise<void>;
  /** Every publish matching `filter` (from clients or the data plane), with its MQTT 5 properties; returns the unsubscribe function. */
  subscribe(filter: string, handler: (topic: string, payload: Buffer, properties?: DataPlaneProperties) => void): () => void;
}

export function createDataPlane(ctx: BrokerContext): DataPlane {
  return {
    publish: (topic, payload, opts = {}) =>
      new Promise<void>((resolve, reject) => {
        const aedes = ctx.aedes;
        if (!aedes || ctx.stopping) return reject(new Error('broker is not running'));
        if (isSysTopic(topic)) return reject(new Error('$SYS topics are reserved'));
        const packet = {
          cmd: 'publish',
          topic,
          payload,
          qos: opts.qos ?? 0,
          retain: opts.retain ?? false,
          dup: false,
          ...(opts.properties ? { properties: opts.properties } : {}),
        } as unknown as Parameters<Aedes['publish']>[0];
        // Delivery goes through each subscriber's deliverQoS → authorizeForward.
        aedes.publish(packet, (err?: Error | null) => (err ? reject(err) : resolve()));
      }),
    subscribe: (filter, handler) => {
      const aedes = ctx.aedes;
      if (!aedes || ctx.stopping) throw new Error('broker is not running');
      const explicitSys = filter.startsWith('$');
      const listener = (packet: { topic: string; payload: Buffer | string; properties?: DataPlaneProperties }, cb: () => void) => {
        // `#` and `+` never match $ topics (MQTT 3.1.1 §4.7.2), as for clients.
        if (explicitSys || !packet.topic.startsWith('$')) {
          try {
            handler(packet.topic, Buffer.isBuffer(packet.payload) ? packet.payload : Buffer.from(packet.payload), packet.properties);
          } catch (err) {
            ctx.log.error('data plane handler failed', { filter, topic: packet.topic, error: (err as Error).message });
          }
        }
        cb();
      };
      aedes.subscribe(filter, listener as never, () => {});
      let active = true;
      return () => {
        if (!active) return;
        active = false;
        if (ctx.aedes && !ctx.aedes.closed) ctx.aedes.unsubscribe(filter, listener as never, () => {});
      };
    },
  };
}
