// What the broker holds, for its operators (REST /api/broker/clients, /sessions, /retained):
// the live clients (from aedes' client registry, indexed here by client id and by username as
// they connect and leave, so a page is a binary search and the page itself), one client's
// subscriptions, disconnecting one; the stored sessions and retained messages, read from their
// LMDB databases a page at a time (never a whole table), deleting one. Read-only handles of the
// persistence's databases; every change goes through the persistence or aedes.
import type { Aedes, Client } from 'aedes';
import type { Database, Key } from 'lmdb';
import type { BrokerContext } from './broker-context.js';
import { stateOf } from './client-state.js';
import { DATABASES, type SessionInfo } from './persistence/index.js';
import { retainedKey, retainedPrefixRange } from './persistence/keys.js';
import { literalPrefix, topicMatches } from './persistence/topic-filter.js';
import { SortedIds } from './sorted-ids.js';

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

export interface StoredSession {
  clientId: string;
  /** The user id it belongs to ('' anonymous), when known. */
  owner?: string;
  connected: boolean;
  subscriptions: number;
  queued: number;
  inflight: number;
  /** Epoch ms; null while connected. */
  expiresAt: number | null;
  expirySeconds: number;
}

export interface RetainedMessage {
  topic: string;
  qos: number;
  bytes: number;
  /** UTF-8 text when the payload is text, else base64; at most PREVIEW_BYTES of it. */
  payload: string;
  encoding: 'utf8' | 'base64';
  truncated: boolean;
}

export interface Page<T> {
  items: T[];
  /** Where the next page starts (a client id, a session's client id, a topic); absent at the end. */
  next?: string;
}

export interface BrokerAdmin {
  clients(q: { after?: string; limit: number; prefix?: string; username?: string }): Page<LiveClient>;
  client(clientId: string): LiveClientDetail | undefined;
  /** Closes the connection (MQTT 5: DISCONNECT 0x98 administrative action first); its will is published. False: not connected. */
  disconnect(clientId: string): Promise<boolean>;
  /** Whether stored state (sessions, retained messages) exists: the LMDB persistence is on. */
  stored(): boolean;
  sessions(q: { after?: string; limit: number; prefix?: string; connected?: boolean }): Page<StoredSession>;
  /** 'connected': its client is online (disconnect it first). Resolves once the removal is on disk. */
  deleteSession(clientId: string): Promise<'deleted' | 'connected' | 'missing'>;
  retained(q: { filter: string; after?: string; limit: number }): Page<RetainedMessage>;
  /** Resolves once the removal is on disk (pages read committed state: the next one no longer lists it). */
  deleteRetained(topic: string): Promise<boolean>;
  /** Follows aedes' client events (called once aedes exists). */
  watch(aedes: Aedes): void;
}

/** What aedes has and its typings leave out: the registry of live clients, a client's subscriptions. */
type Registry = Aedes & { clients: Record<string, Client | undefined> };
type Subscriptions = Record<string, { qos?: number } | undefined>;
const subscriptionsOf = (client: Client): Subscriptions => (client as Client & { subscriptions?: Subscriptions }).subscriptions ?? {};

const PREVIEW_BYTES = 4096;
/** Stored entries one request reads at most: a page with few matches among many stops early, with a cursor to go on. */
const SCAN_BUDGET = 2000;
const decoder = new TextDecoder('utf-8', { fatal: true });

function preview(payload: unknown): Pick<RetainedMessage, 'bytes' | 'payload' | 'encoding' | 'truncated'> {
  const body = payload === undefined || payload === null ? Buffer.alloc(0) : typeof payload === 'string' ? Buffer.from(payload) : Buffer.from(payload as Uint8Array);
  const cut = body.subarray(0, PREVIEW_BYTES);
  const truncated = body.length > PREVIEW_BYTES;
  try {
    const text = decoder.decode(cut);
    if (!/[\u0000-\u0008\u000e-\u001f]/.test(text)) return { bytes: body.length, payload: text, encoding: 'utf8', truncated };
  } catch {
    // binary (or cut inside a character): base64 below
  }
  return { bytes: body.length, payload: cut.toString('base64'), encoding: 'base64', truncated };
}

export function createBrokerAdmin(ctx: BrokerContext): BrokerAdmin {
  const all = new SortedIds();
  const byUser = new Map<string, SortedIds>();
  const since = new WeakMap<Client, number>();
  let aedesRef: Registry | undefined;
  let dbs: { sessions: Database<{ clientId: string }, Key>; retained: Database<{ topic: string; qos?: number; payload?: unknown }, Key> } | undefined;

  const usernameOf = (client: Client) => stateOf(client)?.principal?.username;
  const live = (clientId: string): Client | undefined => {
    const c = aedesRef?.clients[clientId];
    return c && !c.closed ? c : undefined;
  };

  /** Read-only handles of the persistence's databases, (re)opened on first use after a store (re)open. */
  function databases() {
    const store = ctx.options.store;
    if (!ctx.persistence || !store || !store.isOpen()) return undefined;
    dbs ??= {
      sessions: store.openDatabase(DATABASES.sessions, { keyEncoding: 'ordered-binary' }),
      retained: store.openDatabase(DATABASES.retained, { keyEncoding: 'binary' }),
    };
    return dbs;
  }
  ctx.options.store?.onReopen(() => (dbs = undefined));

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

  function storedSession(clientId: string, info: SessionInfo): StoredSession {
    return {
      clientId,
      ...(info.owner !== undefined ? { owner: info.owner } : {}),
      connected: live(clientId) !== undefined,
      subscriptions: info.subscriptions.length,
      queued: info.queued,
      inflight: info.inflight,
      expiresAt: info.expiresAt,
      expirySeconds: info.expirySeconds,
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

    stored: () => databases() !== undefined,

    sessions(q) {
      const db = databases();
      const persistence = ctx.persistence;
      if (!db || !persistence) return { items: [] };
      const prefix = q.prefix ?? '';
      const items: StoredSession[] = [];
      let last: string | undefined;
      let scanned = 0;
      const start = q.after !== undefined && q.after >= prefix ? q.after : prefix;
      for (const { key, value } of db.sessions.getRange({ start, limit: SCAN_BUDGET })) {
        scanned++;
        if (q.after !== undefined && key === q.after) continue;
        // Keys are the client ids (long ones cut and hashed, keeping their start): past the prefix, past the end.
        if (!String(key).startsWith(prefix)) return { items };
        last = String(key);
        const info = persistence.sessionInfo(value.clientId);
        if (!info) continue; // removed since the last commit
        const session = storedSession(value.clientId, info);
        if (q.connected !== undefined && session.connected !== q.connected) continue;
        items.push(session);
        if (items.length === q.limit) break;
      }
      // A full page, or the budget spent: the caller goes on from the last key read.
      return (items.length === q.limit || scanned === SCAN_BUDGET) && last !== undefined ? { items, next: last } : { items };
    },

    async deleteSession(clientId) {
      if (live(clientId)) return 'connected';
      const persistence = ctx.persistence;
      if (!persistence?.deleteSession(clientId)) return 'missing';
      ctx.log.audit('mqtt session deleted', { clientId });
      await persistence.whenDurable();
      return 'deleted';
    },

    retained(q) {
      const db = databases();
      if (!db) return { items: [] };
      const range = retainedPrefixRange(literalPrefix(q.filter));
      const after = q.after !== undefined ? Buffer.concat([retainedKey(q.after), Buffer.of(0)]) : undefined;
      const start = after && Buffer.compare(after, range.start) > 0 ? after : range.start;
      const items: RetainedMessage[] = [];
      let last: string | undefined;
      let scanned = 0;
      for (const { value } of db.retained.getRange({ start, ...(range.end ? { end: range.end } : {}), limit: SCAN_BUDGET })) {
        scanned++;
        last = value.topic;
        if (!topicMatches(q.filter, value.topic)) continue;
        items.push({ topic: value.topic, qos: value.qos ?? 0, ...preview(value.payload) });
        if (items.length === q.limit) break;
      }
      return (items.length === q.limit || scanned === SCAN_BUDGET) && last !== undefined ? { items, next: last } : { items };
    },

    async deleteRetained(topic) {
      const db = databases();
      const persistence = ctx.persistence;
      if (!db || !persistence || db.retained.get(retainedKey(topic)) === undefined) return false;
      // An empty retained payload removes it, as a client's empty retained publish would (nothing is sent).
      await persistence.storeRetained({ topic, payload: Buffer.alloc(0) });
      ctx.log.audit('mqtt retained message cleared', { topic });
      await persistence.whenDurable();
      return true;
    },
  };
}
