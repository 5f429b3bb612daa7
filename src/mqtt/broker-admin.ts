// What the broker holds, for its operators (REST /api/broker/clients, /sessions, /retained):
// the live clients (from aedes' client registry, indexed here by client id and by username as
// they connect and leave, so a page is a binary search and the page itself), one client's
// subscriptions, disconnecting one; and the stored sessions and retained messages
// (stored-state.ts).
import type { Aedes, Client } from 'aedes';
import type { BrokerContext } from './broker-context.js';
import { stateOf } from './client-state.js';
import type { SessionInfo } from './persistence/index.js';
import { SortedIds } from './sorted-ids.js';
import { createStoredState, type Page, type StoredState } from './stored-state.js';

export type { Page, RetainedMessage, StoredSession } from './stored-state.js';

export interface LiveClient {
  clientId: string;
  /** The gatewayd user it signed in as (absent: anonymous). */
  username?: string;
  address: string;
  transport: string;
  /** 3 (MQTT 3.1), 4 (3.1.1) or 5. */
  protocolVersion: number;
  clean: boolean;
  connectedSince: number;
  subscriptions: number;
  /** Of its stored session (persistent clients): waiting, and sent but not acknowledged. */
  queued: number;
  inflight: number;
  /** Bytes written to its socket and not sent yet. */
  bufferedBytes: number;
}

export interface LiveClientDetail extends LiveClient {
  subscriptionList: { topic: string; qos: number }[];
  keepaliveSeconds: number;
}

export interface BrokerAdmin extends StoredState {
  clients(q: { after?: string; limit: number; prefix?: string; username?: string }): Page<LiveClient>;
  client(clientId: string): LiveClientDetail | undefined;
  /** Closes the connection (MQTT 5: DISCONNECT 0x98 administrative action first); its will is published. False: not connected. */
  disconnect(clientId: string): Promise<boolean>;
  /** Follows aedes' client events (called once aedes exists). */
  watch(aedes: Aedes): void;
}

/** What aedes has and its typings leave out: the registry of live clients, a client's subscriptions. */
type Registry = Aedes & { clients: Record<string, Client | undefined> };
type Subscriptions = Record<string, { qos?: number } | undefined>;
const subscriptionsOf = (client: Client): Subscriptions => (client as Client & { subscriptions?: Subscriptions }).subscriptions ?? {};

export function createBrokerAdmin(ctx: BrokerContext): BrokerAdmin {
  const all = new SortedIds();
  const byUser = new Map<string, SortedIds>();
  const since = new WeakMap<Client, number>();
  let aedesRef: Registry | undefined;

  const usernameOf = (client: Client) => stateOf(client)?.principal?.username;
  const live = (clientId: string): Client | undefined => {
    const c = aedesRef?.clients[clientId];
    return c && !c.closed ? c : undefined;
  };

  const stored = createStoredState(ctx, (clientId) => live(clientId) !== undefined);

  function view(client: Client): LiveClient {
    const st = stateOf(client);
    const info: SessionInfo | undefined = client.clean ? undefined : ctx.persistence?.sessionInfo(client.id);
    const username = usernameOf(client);
    return {
      clientId: client.id,
      ...(username !== undefined ? { username } : {}),
      address: st?.remote ?? '',
      transport: st?.transport ?? '',
      protocolVersion: client.version ?? 4,
      clean: client.clean,
      connectedSince: since.get(client) ?? 0,
      subscriptions: Object.keys(subscriptionsOf(client)).length,
      queued: info?.queued ?? 0,
      inflight: info?.inflight ?? 0,
      bufferedBytes: (client.conn as { writableLength?: number } | undefined)?.writableLength ?? 0,
    };
  }

  return {
    watch(aedes) {
      const registry = aedes as Registry;
      aedesRef = registry;
      aedes.on('client', (client) => {
        since.set(client, Date.now());
        all.add(client.id);
        const username = usernameOf(client);
        if (username === undefined) return;
        let ids = byUser.get(username);
        if (!ids) byUser.set(username, (ids = new SortedIds()));
        ids.add(client.id);
      });
      aedes.on('clientDisconnect', (client) => {
        const now = registry.clients[client.id];
        if (!now) all.delete(client.id);
        const username = usernameOf(client);
        if (username === undefined || (now && usernameOf(now) === username)) return;
        const ids = byUser.get(username);
        ids?.delete(client.id);
        if (ids?.size === 0) byUser.delete(username);
      });
    },

    clients(q) {
      const index = q.username !== undefined ? byUser.get(q.username) : all;
      if (!index) return { items: [] };
      const ids = index.page(q.after, q.prefix ?? '', q.limit + 1);
      const items = ids
        .slice(0, q.limit)
        .map(live)
        .filter((c): c is Client => c !== undefined)
        .map(view);
      return ids.length > q.limit ? { items, next: ids[q.limit - 1] } : { items };
    },

    client(clientId) {
      const c = live(clientId);
      if (!c) return undefined;
      const subs = Object.entries(subscriptionsOf(c)).map(([topic, s]) => ({ topic, qos: s?.qos ?? 0 }));
      subs.sort((a, b) => (a.topic < b.topic ? -1 : a.topic > b.topic ? 1 : 0));
      return { ...view(c), subscriptionList: subs, keepaliveSeconds: (c as unknown as { keepalive?: number }).keepalive ?? 0 };
    },

    async disconnect(clientId) {
      const c = live(clientId);
      if (!c) return false;
      ctx.log.audit('mqtt client disconnected', { clientId, username: usernameOf(c), reason: 'administrative action' });
      await new Promise<void>((resolve) => c.disconnect({ reasonCode: 0x98 }, () => resolve()));
      return true;
    },

    ...stored,
  };
}
