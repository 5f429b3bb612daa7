// Session bookkeeping: which clients are live, whose they are, and who owns each persistent
// session, so that one user cannot take over another user's client id (live, or persistent with
// the LMDB persistence even across restarts), and live access changes reach a user's clients in
// O(clients of that user).
import type { Client } from 'aedes';
import type { BrokerContext } from './broker-context.js';
import { stateOf, type GatewayClient } from './client-state.js';
import type { MqttPrincipal } from './mqtt-access.js';
import { keepQueueOfResumedSession } from './mqtt5/session-resume.js';
import { markSessionPresent } from './session-present.js';

/** Persistent-session owners remembered (clientId → userId), oldest dropped beyond this. */
const SESSION_OWNER_LIMIT = 100_000;

export class SessionRegistry {
  /** userId → its live (authenticated) clients. */
  private readonly byUser = new Map<string, Set<GatewayClient>>();
  /** clientId → registered (live) client, from the Aedes 'client'/'clientDisconnect' events. */
  private readonly liveClients = new Map<string, GatewayClient>();
  /** clientId → owner (userId, '' for anonymous) of a persistent (clean=false) session. */
  private readonly sessionOwners = new Map<string, string>();

  constructor(private readonly ctx: BrokerContext) {}

  /** May `owner` use this client id (no other user's live connection or persistent session)? */
  ownerAllows(client: Client, owner: string): boolean {
    // Remembered since this start, else as stored with the session (earlier runs).
    const sessionOwner = this.sessionOwners.get(client.id) ?? this.ctx.persistence?.sessionOwner(client.id);
    if (sessionOwner !== undefined && sessionOwner !== owner) return false;
    const live = this.liveClients.get(client.id);
    if (live && live !== client && !live.closed) {
      const st = live.gatewayd;
      const liveOwner = st?.principal?.userId ?? '';
      if (liveOwner !== owner) return false;
    }
    return true;
  }

  /** An authenticated client was admitted: indexed under its user, its session recorded. */
  admitUser(client: Client, principal: MqttPrincipal): void {
    let set = this.byUser.get(principal.userId);
    if (!set) this.byUser.set(principal.userId, (set = new Set()));
    set.add(client as GatewayClient);
    this.recordSession(client, principal.userId);
  }

  /** An accepted CONNECT: records the session's owner and whether the CONNACK says sessionPresent. */
  recordSession(client: Client, owner: string): void {
    const st = stateOf(client);
    // Decided once the client is admitted and before aedes reads the session (authenticate is the
    // first step of its connect sequence); session-present.ts puts the flag into the CONNACK.
    if (st?.resumeRequested && this.ctx.persistence?.resumeSession(client.id)) markSessionPresent(st);
    keepQueueOfResumedSession(client, st?.resumeRequested === true);
    if (client.clean) {
      this.sessionOwners.delete(client.id);
      return;
    }
    this.sessionOwners.delete(client.id); // re-insert: most recent last
    this.sessionOwners.set(client.id, owner);
    // Bounded: a client cycling through random ids with clean=false must not grow it forever.
    // The oldest records go first; their sessions lose only the cross-user protection.
    if (this.sessionOwners.size > SESSION_OWNER_LIMIT) this.sessionOwners.delete(this.sessionOwners.keys().next().value!);
  }

  /** aedes registered the client (its 'client' event). */
  registered(client: Client): void {
    this.liveClients.set(client.id, client as GatewayClient);
    // The session's owner is stored with it (the persistence created it in its own 'client'
    // listener, registered first), so that after a restart another user still cannot take it.
    const persistence = this.ctx.persistence;
    if (persistence && !client.clean) {
      const st = stateOf(client);
      if (st && !st.revoked && (st.principal || st.anonymous)) persistence.setSessionOwner(client.id, st.principal?.userId ?? '');
    }
  }

  /** aedes unregistered the client (its 'clientDisconnect' event). */
  unregistered(client: Client): void {
    if (this.liveClients.get(client.id) === client) this.liveClients.delete(client.id);
  }

  /** The connection closed, or its session is being ended: out of the indexes. */
  forget(client: GatewayClient): void {
    if (client.id && this.liveClients.get(client.id) === client) this.liveClients.delete(client.id);
    const userId = client.gatewayd?.principal?.userId;
    if (userId === undefined) return;
    const set = this.byUser.get(userId);
    if (set && set.delete(client) && set.size === 0) this.byUser.delete(userId);
  }

  /** The live clients of a user (the set itself: copy it before closing clients). */
  clientsOf(userId: string): ReadonlySet<GatewayClient> | undefined {
    return this.byUser.get(userId);
  }

  /** The user was deleted: its persistent sessions no longer keep its client ids. */
  releaseSessionsOf(userId: string): void {
    for (const [clientId, owner] of this.sessionOwners) if (owner === userId) this.sessionOwners.delete(clientId);
    this.ctx.persistence?.releaseSessionsOf(userId);
  }

  clear(): void {
    this.byUser.clear();
    this.liveClients.clear();
  }
}
