// Overlapping subscriptions of one client: several of its subscriptions match a message. MQTT
// 3.1.1 [MQTT-3.3.5-1] and 5 [MQTT-3.3.4-2] want the message delivered at the highest QoS granted
// among them, and MQTT 5 [MQTT-3.3.4-3..5] with the identifier of every one of them. Exists
// because aedes 2.0.0-beta.1 sends one copy (its duplicate check by broker counter drops the
// others) with the QoS and the subscription identifier of whichever subscription came first
// (aedes issues #1074 and #1090; Paho test_subscribe_identifiers, test_overlapping_subscriptions).
//
// A client's subscriptions are noted as they are granted; once two can overlap (most clients'
// never do), the first copy of each live message is completed before it goes (every matching
// identifier, the highest granted QoS) and the other copies of that message are dropped here.
// Until then a delivery costs one flag test. Made at the client's first granted subscription
// (authorize-subscribe.ts, which aedes also calls for the subscriptions it restores, before it
// takes the client's delivery functions for them): a client that only publishes carries none. All copies of one message reach the client's
// delivery functions in one synchronous pass of aedes' emitter, so "the same message as the last
// one" is how a further copy is told apart, also when flow control holds the first one back.
import { topicMatches } from '../persistence/topic-filter.js';
import type { DeliverFn, QueuedDelivery } from './flow-control.js';
import { letPass } from '../delivery-order.js';
import { isSharedFilter } from './shared-subscriptions.js';

/** What aedes keeps per subscription of a client (client.subscriptions[filter]). */
export interface ClientSubscription {
  qos: number;
  si?: number;
  nl?: boolean;
}

/** The parts of an aedes client the merge reads. */
export interface SubscriberView {
  id: string;
  subscriptions: Record<string, ClientSubscription>;
  deliver0: DeliverFn;
  deliverQoS: DeliverFn;
  /** aedes' record of the last message delivered per broker (delivery-order.ts). */
  duplicates: Record<string, number>;
}

interface LiveDelivery extends QueuedDelivery {
  brokerId?: string | null;
  brokerCounter?: number;
  clientId?: string;
}

/** Filters remembered per connection to notice overlaps (beyond: assumed to overlap). */
const TRACKING_LIMIT = 1000;

/** Can one topic match both filters? (Conservative for `$` topics: only costs the merge.) */
export function filtersOverlap(a: string, b: string): boolean {
  const x = a.split('/');
  const y = b.split('/');
  for (let i = 0; ; i++) {
    const p = x[i];
    const q = y[i];
    if (p === '#' || q === '#') return true; // '#' also matches the parent level
    if (p === undefined || q === undefined) return p === q;
    if (p !== q && p !== '+' && q !== '+') return false;
  }
}

export class OverlappingSubscriptions {
  private overlapping = false;
  /** The first filter granted, and the others while none overlap (a set from the second on). */
  private first: string | undefined;
  private granted: Set<string> | undefined;
  private lastBrokerId: string | undefined;
  private lastCounter = -1;

  /** The client's delivery functions it wraps. */
  private readonly deliver0: DeliverFn;
  private readonly deliverQoS: DeliverFn;

  /**
   * Wraps the client's deliver0/deliverQoS (before any subscription of it exists) with functions
   * bound to this object (no closures per client). `keepOrder`: right before them, also does what
   * delivery-order.ts does (an MQTT 3.1.1 client, whose functions nothing else wraps).
   */
  constructor(
    private readonly client: SubscriberView,
    private readonly keepOrder = false,
  ) {
    this.deliver0 = client.deliver0;
    this.deliverQoS = client.deliverQoS;
    client.deliver0 = deliverThrough0.bind(this);
    client.deliverQoS = deliverThroughQoS.bind(this);
  }

  /** A delivery of aedes through the client's deliver0 (qos false) or deliverQoS. */
  deliver(qos: boolean, packet: LiveDelivery, done: (err?: unknown) => void): void {
    const same = qos ? this.deliverQoS : this.deliver0;
    if (this.overlapping) this.merge(packet, done, same);
    // A live QoS 1 message through deliverQoS is at its subscription's QoS already; a retained
    // copy for a new subscription (no broker id) comes through deliverQoS at any QoS.
    else this.send(same, qos && (packet.qos === 2 || !packet.brokerId) ? this.downgraded(packet) : packet, done);
  }

  /**
   * A message goes at the lower of its QoS and its subscription's [MQTT-3.8.4-6]: aedes looks the
   * granted QoS up by the message's topic, which finds only a subscription to that very topic,
   * never one through a wildcard filter (a QoS 2 message through a QoS 1 `a/#`, a retained QoS 1
   * message for a QoS 0 `a/#`). Here exactly one subscription matches (none overlap).
   */
  private atMostGranted(packet: LiveDelivery): LiveDelivery {
    let qos = -1;
    for (const filter in this.client.subscriptions) {
      if (!isSharedFilter(filter) && topicMatches(filter, packet.topic)) qos = Math.max(qos, this.client.subscriptions[filter]!.qos);
    }
    return qos >= 0 && qos < packet.qos ? { ...packet, qos } : packet;
  }

  private downgraded(packet: LiveDelivery): LiveDelivery {
    const subscriptions = this.client.subscriptions;
    // Most clients hold one subscription: `first`, and no set of the others.
    const filters: Iterable<string> = this.granted ?? (this.first !== undefined ? [this.first] : Object.keys(subscriptions));
    for (const filter of filters) {
      const sub = subscriptions[filter];
      if (sub === undefined || isSharedFilter(filter) || !topicMatches(filter, packet.topic)) continue;
      return sub.qos < packet.qos ? { ...packet, qos: sub.qos } : packet;
    }
    return packet;
  }

  private send(fn: DeliverFn, packet: LiveDelivery, done: (err?: unknown) => void): void {
    if (this.keepOrder) letPass(this.client, packet);
    fn(packet, done);
  }

  /** A subscription was granted (the filter as aedes names it). */
  subscriptionGranted(filter: string): void {
    if (this.overlapping || isSharedFilter(filter)) return;
    if (this.first === undefined || this.first === filter) {
      if (!this.overlapsAny(Object.keys(this.client.subscriptions), filter)) this.first = filter;
      else this.overlap();
      return;
    }
    const granted = (this.granted ??= new Set([this.first]));
    if (granted.size >= TRACKING_LIMIT || this.overlapsAny(Object.keys(this.client.subscriptions), filter) || this.overlapsAny(granted, filter)) return this.overlap();
    granted.add(filter);
  }

  private overlap(): void {
    this.overlapping = true;
    this.first = undefined;
    this.granted = undefined;
  }

  private overlapsAny(filters: Iterable<string>, filter: string): boolean {
    for (const other of filters) {
      if (other !== filter && !isSharedFilter(other) && filtersOverlap(other, filter)) return true;
    }
    return false;
  }

  private merge(packet: LiveDelivery, done: (err?: unknown) => void, same: DeliverFn): void {
    const brokerId = packet.brokerId;
    // Retained messages sent for a new subscription carry no broker id (and that subscription's
    // identifier): never merged, at most at the highest QoS granted among the matching subscriptions.
    if (!brokerId) return this.send(same, this.atMostGranted(packet), done);
    const counter = packet.brokerCounter ?? 0;
    if (brokerId === this.lastBrokerId && counter === this.lastCounter) {
      setImmediate(done); // a further copy of the message just delivered
      return;
    }
    this.lastBrokerId = brokerId;
    this.lastCounter = counter;
    const client = this.client;
    let qos = -1;
    const ids: number[] = [];
    for (const filter in client.subscriptions) {
      if (isSharedFilter(filter)) continue; // a shared subscription delivers its own copy
      const sub = client.subscriptions[filter]!;
      if (sub.nl && packet.clientId === client.id) continue;
      if (!topicMatches(filter, packet.topic)) continue;
      if (sub.qos > qos) qos = sub.qos;
      if (sub.si !== undefined && !ids.includes(sub.si)) ids.push(sub.si);
    }
    if (qos < 0) return this.send(same, packet, done);
    let properties = packet.properties;
    if (properties?.subscriptionIdentifier !== undefined || ids.length > 0) {
      const { subscriptionIdentifier: _one, ...rest } = properties ?? {};
      properties = ids.length === 0 ? rest : { ...rest, subscriptionIdentifier: ids.length === 1 ? ids[0] : ids };
    }
    const out: LiveDelivery = { ...packet, qos: Math.min(packet.qos, qos), ...(properties ? { properties } : {}) };
    this.send(out.qos > 0 ? this.deliverQoS : this.deliver0, out, done);
  }
}

function deliverThrough0(this: OverlappingSubscriptions, packet: LiveDelivery, done: (err?: unknown) => void): void {
  this.deliver(false, packet, done);
}

function deliverThroughQoS(this: OverlappingSubscriptions, packet: LiveDelivery, done: (err?: unknown) => void): void {
  this.deliver(true, packet, done);
}
