// Subscription identifiers of overlapping subscriptions (MQTT 5 §3.3.4, [MQTT-3.3.4-3..5]).
// Exists because aedes 2.0.0-beta.1 echoes the identifier of the subscription it delivers
// through, but when several subscriptions of one client match a message it sends one copy (its
// duplicate check by broker counter drops the others) carrying the identifier, and the QoS, of
// whichever subscription came first (aedes issues #1090 and #1074; Paho
// test_subscribe_identifiers). The broker announces identifiers as available, so that copy must
// carry every matching identifier. For a client whose subscriptions overlap (noted when one is
// granted; most clients' never do) the first copy of a message is completed before it goes: all
// matching identifiers, and the highest QoS granted among the matching subscriptions (one copy at
// that QoS, as MQTT-3.3.4-2 allows). Any other client pays one flag test per delivery.
import { topicMatches } from '../persistence/topic-filter.js';
import type { DeliverFn, QueuedDelivery } from './flow-control.js';
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
  duplicates: Record<string, number>;
}

interface LiveDelivery extends QueuedDelivery {
  brokerId?: string | null;
  brokerCounter?: number;
  clientId?: string;
}

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

/** Does `filter`, just granted, overlap one of `filters` (another subscription of the client)? */
export function overlapsAny(filters: Iterable<string>, filter: string): boolean {
  if (isSharedFilter(filter)) return false;
  for (const other of filters) {
    if (other !== filter && !isSharedFilter(other) && filtersOverlap(other, filter)) return true;
  }
  return false;
}

/**
 * The client's deliver0/deliverQoS, completing the first copy of each live message while
 * `overlapping()` says the client's subscriptions overlap.
 */
export function mergingDelivery(
  client: SubscriberView,
  overlapping: () => boolean,
  deliver0: DeliverFn,
  deliverQoS: DeliverFn,
): { deliver0: DeliverFn; deliverQoS: DeliverFn } {
  const merged = (packet: LiveDelivery, done: (err?: unknown) => void, fallback: DeliverFn): void => {
    const brokerId = packet.brokerId;
    // Retained messages sent for a new subscription carry no broker id and that subscription's identifier.
    if (!overlapping() || !brokerId || (client.duplicates[brokerId] ?? 0) >= (packet.brokerCounter ?? 0)) return fallback(packet, done);
    let qos = -1;
    const ids: number[] = [];
    for (const filter in client.subscriptions) {
      if (isSharedFilter(filter)) continue; // a shared subscription delivers its own copy
      const sub = client.subscriptions[filter]!;
      if (sub.nl && packet.clientId === client.id) continue;
      if (!topicMatches(filter, packet.topic)) continue;
      if (sub.qos > qos) qos = sub.qos;
      if (sub.si !== undefined) ids.push(sub.si);
    }
    if (qos < 0) return fallback(packet, done);
    const { subscriptionIdentifier: _one, ...rest } = packet.properties ?? {};
    const properties = ids.length === 0 ? rest : { ...rest, subscriptionIdentifier: ids.length === 1 ? ids[0] : ids };
    const out: LiveDelivery = { ...packet, qos: Math.min(packet.qos, qos), properties };
    (out.qos > 0 ? deliverQoS : deliver0)(out, done);
  };
  return {
    deliver0: (packet, done) => merged(packet, done, deliver0),
    deliverQoS: (packet, done) => merged(packet, done, deliverQoS),
  };
}
