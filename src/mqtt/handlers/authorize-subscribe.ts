// aedes `authorizeSubscribe` hook: a filter is granted only when one read permission covers it
// whole (access.coversFilter), so every topic it can match is readable (which lets
// authorize-forward.ts skip per-message checks). Refused: 0x80 in the SUBACK (MQTT 5: 0x87),
// and the client stays connected. A shared subscription is decided on its filter without
// `$share/<group>/` (mqtt5/shared-subscriptions.ts). Also called for each subscription aedes
// restores at reconnect.
import type { Client } from 'aedes';
import { storeCannotWrite, type BrokerContext } from '../broker-context.js';
import { stateOf } from '../client-state.js';
import { OverlappingSubscriptions } from '../mqtt5/overlapping-subscriptions.js';
import { filterAsWritten, filterToAuthorize, isSharedFilter } from '../mqtt5/shared-subscriptions.js';

export type AuthorizeSubscribeHook = (client: Client, sub: { topic: string; qos: number }, callback: (error: Error | null, subscription?: any) => void) => void;

export function createAuthorizeSubscribe(ctx: BrokerContext): AuthorizeSubscribeHook {
  return (client, sub, callback) => {
    const st = stateOf(client);
    const shared = isSharedFilter(sub.topic);
    let ok = false;
    if (st && !st.revoked && st.principal !== null) {
      try {
        ok = ctx.access.coversFilter(st.principal, shared ? filterToAuthorize(sub.topic) : sub.topic);
      } catch (err) {
        ctx.log.error('mqtt subscribe decision failed', { clientId: client.id, filter: filterAsWritten(sub.topic), error: (err as Error).message });
      }
    }
    // A persistent session's subscription is stored (aedes skips the store for clean sessions):
    // while the store cannot write, the SUBACK says 0x80 instead of promising a stored one.
    const unstorable = ok && !client.clean && storeCannotWrite(ctx);
    if (unstorable) ok = false;
    if (!ok) {
      ctx.counters.subscriptionsRefused++;
      ctx.log.info('mqtt subscription refused', { clientId: client.id, username: st?.principal?.username, filter: filterAsWritten(sub.topic), ...(unstorable ? { reason: 'the store cannot write' } : {}) });
    } else {
      if (shared) ctx.shared?.expect(client as never, sub.topic);
      // Before aedes takes the client's delivery functions for this subscription (restored ones
      // too): the order keeping innermost (an MQTT 5 client's is there since pre-connect, under its
      // flow control), the merge outermost.
      // An MQTT 3.1.1 client's order is kept by the merge's wrapper itself (no wrapper under it).
      st!.overlap ??= new OverlappingSubscriptions(client as never, st!.mqtt5 === undefined);
      st!.overlap.subscriptionGranted(sub.topic);
    }
    // null: Aedes answers 0x80 for this filter in the SUBACK and keeps the client connected.
    callback(null, ok ? sub : null);
  };
}
