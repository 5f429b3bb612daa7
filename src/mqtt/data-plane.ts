// The data plane: the in-process port of trusted system components (the protocol-mapping
// runtime, bridges). They publish and subscribe without a client session, so without client
// authentication or publish authorization; delivery to clients is NOT bypassed: every message
// still reaches a client only through authorizeForward (the client's read permission).
import type { Aedes, Client } from 'aedes';
import { type BrokerContext, type MessageOrigin } from './broker-context.js';

export type { MessageOrigin } from './broker-context.js';
import { stateOf } from './client-state.js';
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
  /** The publish (aedes' brokerCounter) of a QoS 1/2 message: copies carrying it hold its publisher's acknowledgement. */
  publishId?: number;
}

export interface DataPlane {
  /**
   * A publish from the daemon itself (QoS 0 by default); rejects on $SYS topics or a stopped broker.
   * `durable`: resolves only once every copy the publish made is safe (durable, or taken by its
   * recipient), for a message the daemon acknowledges to someone else (a bridge's upstream).
   */
  publish(topic: string, payload: Buffer, opts?: { qos?: 0 | 1 | 2; retain?: boolean; properties?: DataPlaneProperties; durable?: boolean; origin?: MessageOrigin }): Promise<void>;
  /**
   * Every publish matching `filter` (from clients or the data plane), with its MQTT 5 properties
   * and where it came from; returns the unsubscribe function.
   */
  subscribe(filter: string, handler: (topic: string, payload: Buffer, properties: DataPlaneProperties | undefined, origin: MessageOrigin) => void): () => void;
  /**
   * Like subscribe, for a consumer that keeps each message before its publisher may be told it
   * arrived (bridges' store-and-forward queues): the handler gets the QoS, the retain flag and the
   * publish's id, stages its copy with that id as the storage policy's tag and calls `done` at
   * once. A QoS 1/2 publisher's PUBACK/PUBREC waits until every copy carrying the id is safe
   * (persistence/durable-acks.ts), so a publish never waits here: it would hold one of aedes'
   * delivery slots (its `concurrency`).
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
        const before = (aedes as unknown as { counter: number }).counter;
        // The payload travels through aedes as this very object: subscribers find the origin by it.
        if (opts.origin) ctx.origins.set(payload, opts.origin);
        aedes.publish(packet, (err?: Error | null) => {
          if (err) return reject(err);
          if (!opts.durable || publishId === undefined || !ctx.persistence) return resolve();
          ctx.persistence.whenSettled(publishId).then(resolve, reject);
        });
        // aedes numbers the publish (brokerCounter) synchronously; its copies carry that number.
        const after = (aedes as unknown as { counter: number }).counter;
        const publishId = after !== before ? after : undefined;
      }),
    subscribe: (filter, handler) =>
      listen(ctx, filter, (packet, cb) => {
        const payload = payloadOf(packet);
        handler(packet.topic, payload, packet.properties, originOf(ctx, packet, payload));
        cb();
      }),
    tap: (filter, handler) => {
      const unlisten = listen(ctx, filter, (packet, cb) => {
        const message: TappedPublish = { topic: packet.topic, payload: payloadOf(packet), qos: packet.qos, retain: packet.retain };
        if (packet.properties) message.properties = packet.properties;
        if (packet.qos > 0 && packet.brokerCounter !== undefined) message.publishId = packet.brokerCounter;
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
  brokerCounter?: number;
  /** Set by aedes on a client's publish. */
  clientId?: string;
  topic: string;
  payload: Buffer | string;
  qos: 0 | 1 | 2;
  retain: boolean;
  properties?: DataPlaneProperties;
}

/** A client's publish: its id and its user while it is connected; the daemon's: what its publish said. */
function originOf(ctx: BrokerContext, packet: EmittedPacket, payload: Buffer): MessageOrigin {
  if (packet.clientId === undefined) return ctx.origins.get(payload) ?? {};
  const client = (ctx.aedes as (Aedes & { clients: Record<string, Client | undefined> }) | undefined)?.clients[packet.clientId];
  const st = stateOf(client);
  const principal = st?.principal;
  const remote = st?.remote ? { remote: st.remote } : {};
  return principal ? { clientId: packet.clientId, userId: principal.userId, username: principal.username, ...remote } : { clientId: packet.clientId, ...remote };
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
