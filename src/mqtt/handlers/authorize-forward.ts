// aedes `authorizeForward` hook: may this message be delivered to this client?
//
// While a user's permissions are unchanged since connect, every live subscription was granted
// because one read permission covers its whole filter, so deliveries need no per-message check
// (fast path, ClientState.subscriptionsTrusted). The replay of the offline queue at connect,
// `$` topics, and every delivery after a 'permissions' change of the user are checked with the
// permission engine (through the client's decision cache).
import type { Client } from 'aedes';
import { allows, type BrokerContext } from '../broker-context.js';
import type { GatewayClient } from '../client-state.js';

export type AuthorizeForwardHook = <P extends { topic: string }>(client: Client, packet: P) => P | null;

export function createAuthorizeForward(ctx: BrokerContext): AuthorizeForwardHook {
  const counters = ctx.counters;
  return <P extends { topic: string }>(client: Client, packet: P): P | null => {
    const st = (client as GatewayClient).gatewayd;
    if (st === undefined || st.principal === null || st.revoked) return null;
    // Fast path only once the session is established: while connecting, Aedes replays the
    // offline queue, whose messages may have been queued for subscriptions that are no longer granted.
    const topic = packet.topic;
    // `$` topics are checked per message: aedes delivers them to `#` subscriptions too, which
    // MQTT (§4.7.2) and the permission engine do not count as covering them.
    if (st.subscriptionsTrusted && client.connected && topic.charCodeAt(0) !== 36) {
      counters.messagesSent++;
      return packet;
    }
    let ok = st.readCache.lookup(topic);
    if (ok === undefined) {
      ok = allows(ctx, st.principal, 'read', topic);
      st.readCache.store(topic, ok);
    }
    if (!ok) {
      counters.forwardsRefused++;
      return null;
    }
    counters.messagesSent++;
    return packet;
  };
}
