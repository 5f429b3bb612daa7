// The data plane: the in-process port of trusted system components (the protocol-mapping
// runtime, bridges). They publish and subscribe without a client session, so without client
// authentication or publish authorization; delivery to clients is NOT bypassed: every message
// still reaches a client only through authorizeForward (the client's read permission).
import type { Aedes } from 'aedes';
import { type BrokerContext } from './broker-context.js';
import { isSysTopic } from './topic-rules.js';

/** MQTT 5 properties a data-plane message carries end to end (clients of 3.1.1 do not see them). */
export interface DataPlaneProperties {
  correlationData?: Buffer;
  responseTopic?: string;
  contentType?: string;
  userProperties?: Record<string, string | string[]>;
  messageExpiryInterval?: number;
}

/** A publish as a tap sees it (see DataPlane.tap). */
export interface TappedPublish {
  topic: string;
  payload: Buffer;
  qos: 0 | 1 | 2;
  retain: boolean;
  properties?: DataPlaneProperties;
}

export interface DataPlane {
  /** QoS 0 or 1 publish from the daemon itself; rejects on $SYS topics or a stopped broker. */
  publish(topic: string, payload: Buffer, opts?: { qos?: 0 | 1; retain?: boolean; properties?: DataPlaneProperties }): Promise<void>;
  /** Every publish matching `filter` (from clients or the data plane), with its MQTT 5 properties; returns the unsubscribe function. */
  subscribe(filter: string, handler: (topic: string, payload: Buffer, properties?: DataPlaneProperties) => void): () => void;
  /**
   * Like subscribe, for a consumer that stores each message before its publisher may be told it
   * arrived (bridges' store-and-forward queues): the handler gets the QoS and retain flag and
   * calls `done` once the message is safe. aedes finishes a publish when every matching handler
   * called back, and only then releases a QoS 1 publisher's PUBACK (held until the publish is
   * durable, persistence/durable-acks.ts) or writes a QoS 2 PUBREC. Handlers should call back at
   * once for QoS 0 and batch their writes: a publish waiting here holds one of aedes' delivery
   * slots (its `concurrency`).
   */
  tap(filter: string, handler: (message: TappedPublish, done: () => void) => void): () => void;
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
    subscribe: (filter, handler) =>
      listen(ctx, filter, (packet, cb) => {
        handler(packet.topic, payloadOf(packet), packet.properties);
        cb();
      }),
    tap: (filter, handler) => {
      const unlisten = listen(ctx, filter, (packet, cb) => {
        const message: TappedPublish = { topic: packet.topic, payload: payloadOf(packet), qos: packet.qos, retain: packet.retain };
        if (packet.properties) message.properties = packet.properties;
        handler(message, cb);
      });
      // The durable-ack gate holds a matching publisher's PUBACK until the tap called back.
      ctx.tapFilters.push(filter);
      let tapped = true;
      return () => {
        if (!tapped) return;
        tapped = false;
        ctx.tapFilters.splice(ctx.tapFilters.indexOf(filter), 1);
        unlisten();
      };
    },
  };
}

interface EmittedPacket {
  topic: string;
  payload: Buffer | string;
  qos: 0 | 1 | 2;
  retain: boolean;
  properties?: DataPlaneProperties;
}

const payloadOf = (packet: EmittedPacket) => (Buffer.isBuffer(packet.payload) ? packet.payload : Buffer.from(packet.payload));

/** An mqemitter listener on `filter`; a handler that throws is logged and called back. Returns the unsubscribe function. */
function listen(ctx: BrokerContext, filter: string, handle: (packet: EmittedPacket, cb: () => void) => void): () => void {
  const aedes = ctx.aedes;
  if (!aedes || ctx.stopping) throw new Error('broker is not running');
  const explicitSys = filter.startsWith('$');
  const listener = (packet: EmittedPacket, cb: () => void) => {
    // `#` and `+` never match $ topics (MQTT 3.1.1 §4.7.2), as for clients.
    if (!explicitSys && packet.topic.startsWith('$')) return cb();
    let called = false;
    const once = () => {
      if (called) return;
      called = true;
      cb();
    };
    try {
      handle(packet, once);
    } catch (err) {
      ctx.log.error('data plane handler failed', { filter, topic: packet.topic, error: (err as Error).message });
      once();
    }
  };
  aedes.subscribe(filter, listener as never, () => {});
  let active = true;
  return () => {
    if (!active) return;
    active = false;
    if (ctx.aedes && !ctx.aedes.closed) ctx.aedes.unsubscribe(filter, listener as never, () => {});
  };
}
