// A new subscription's retained messages reach the client before the live messages it matches.
// aedes 2.0.0-beta.1 makes a subscription live, then (a turn of the event loop later, after its
// emitter's callback) writes the SUBACK and streams the retained messages from the store: a
// message published in between reached the subscriber first, and the older retained value
// after it — a SCADA subscribing to `plant/#` while a reading arrived showed the stale value.
// Mosquitto queues the retained messages while it handles the SUBSCRIBE, before anything else.
//
// From the moment a SUBSCRIBE is read until aedes has handed over its retained messages, live
// deliveries to that client whose topic the SUBSCRIBE's filters match wait here, in order, and go
// right after the last retained copy (released by the end of aedes' retained pipe, or at once
// when the SUBSCRIBE sends none). Deliveries on other topics pass. A delivery that waits lets
// aedes' emitter go on at once (it is ours to deliver). Bounded: at most MAX_HELD deliveries
// and MAX_HOLD_MS, beyond which they go as they come.
import type { Aedes, Client } from 'aedes';
import type { Readable, Writable } from 'node:stream';
import { stateOf, type GatewayClient } from './client-state.js';
import { letPass } from './delivery-order.js';
import type { DeliverFn, QueuedDelivery } from './mqtt5/flow-control.js';
import { topicMatches } from './persistence/topic-filter.js';

const MAX_HELD = 1000;
const MAX_HOLD_MS = 1000;

interface DeliveringClient {
  deliver0: DeliverFn;
  deliverQoS: DeliverFn;
  duplicates: Record<string, number>;
  closed?: boolean;
}

interface Held {
  qos: boolean;
  packet: QueuedDelivery;
}

function settled(): void {}

/** The gate of one client (made at its first SUBSCRIBE; its deliver functions wrapped then). */
export class RetainedFirst {
  /** The filters of each SUBSCRIBE read whose retained messages are not all handed over, oldest first. */
  private readonly open: string[][] = [];
  private held: Held[] = [];
  private timer: NodeJS.Timeout | undefined;
  private readonly deliver0: DeliverFn;
  private readonly deliverQoS: DeliverFn;

  constructor(private readonly client: DeliveringClient) {
    this.deliver0 = client.deliver0;
    this.deliverQoS = client.deliverQoS;
    client.deliver0 = deliverThrough0.bind(this);
    client.deliverQoS = deliverThroughQoS.bind(this);
  }

  /** A SUBSCRIBE was read: its filters' live deliveries wait for its retained messages. */
  subscribing(filters: string[]): void {
    this.open.push(filters);
    this.timer ??= setTimeout(() => this.releaseAll(), MAX_HOLD_MS).unref();
  }

  /** aedes has handed over the retained messages of the oldest open SUBSCRIBE (or had none to send). */
  retainedSent(): void {
    this.open.shift();
    if (this.open.length === 0) this.releaseAll();
  }

  deliver(qos: boolean, packet: QueuedDelivery, done: (err?: unknown) => void): void {
    const fn = qos ? this.deliverQoS : this.deliver0;
    // Retained copies sent for a subscription carry no broker id; they never wait.
    if (this.open.length === 0 || !packet.brokerId || this.held.length >= MAX_HELD || !this.waits(packet.topic)) return fn(packet, done);
    this.held.push({ qos, packet });
    setImmediate(done);
  }

  private waits(topic: string): boolean {
    for (const filters of this.open) for (const filter of filters) if (topicMatches(filter, topic)) return true;
    return false;
  }

  private releaseAll(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.open.length = 0;
    const held = this.held;
    if (held.length === 0) return;
    this.held = [];
    if (this.client.closed) return;
    for (const { qos, packet } of held) {
      // aedes' duplicate check saw later messages meanwhile (delivery-order.ts).
      letPass(this.client, packet);
      (qos ? this.deliverQoS : this.deliver0)(packet, settled);
    }
  }
}

function deliverThrough0(this: RetainedFirst, packet: QueuedDelivery, done: (err?: unknown) => void): void {
  this.deliver(false, packet, done);
}

function deliverThroughQoS(this: RetainedFirst, packet: QueuedDelivery, done: (err?: unknown) => void): void {
  this.deliver(true, packet, done);
}

/** At a SUBSCRIBE the client reads (inbound-packets.ts): opens its gate. */
export function subscribeRead(client: GatewayClient, filters: string[]): void {
  const st = client.gatewayd;
  if (st === undefined) return;
  (st.retainedFirst ??= new RetainedFirst(client as unknown as DeliveringClient)).subscribing(filters);
}

interface RetainedSource {
  createRetainedStreamCombi(patterns: string[]): Readable;
}

/**
 * Closes the gates: aedes emits 'subscribe' right before it asks its persistence for the retained
 * messages of that SUBSCRIBE (or asks nothing: none of its subscriptions wants them). The gate
 * opens again for what comes after the end of the pipe aedes feeds those messages into.
 */
export function installRetainedFirst(aedes: Aedes): void {
  const persistence = (aedes as unknown as { persistence: RetainedSource }).persistence;
  let answering: RetainedFirst | undefined;
  aedes.on('subscribe', (_subs: unknown, client: Client) => {
    const gate = stateOf(client)?.retainedFirst;
    if (gate === undefined) return;
    answering = gate;
    queueMicrotask(() => {
      if (answering !== gate) return;
      answering = undefined;
      gate.retainedSent();
    });
  });
  const stream = persistence.createRetainedStreamCombi.bind(persistence);
  persistence.createRetainedStreamCombi = (patterns) => {
    const source = stream(patterns);
    const gate = answering;
    answering = undefined;
    if (gate === undefined) return source;
    const pipe = source.pipe.bind(source);
    source.pipe = (<T extends NodeJS.WritableStream>(destination: T, options?: { end?: boolean }): T => {
      let sent = false;
      const done = () => {
        if (sent) return;
        sent = true;
        gate.retainedSent();
      };
      const writable = destination as unknown as Writable;
      writable.once('finish', done);
      writable.once('close', done);
      writable.once('error', done);
      return pipe(destination, options);
    }) as typeof source.pipe;
    return source;
  };
}
