// The broker's stored state for its operators (src/mqtt/broker-admin.ts): persistent sessions and
// retained messages read from the persistence's tables a range at a time (at most SCAN_BUDGET
// entries a request: never a whole table), what the storage policy has staged included, so a
// page shows a retained message at once, not when it reaches the disk; deleted through the
// persistence, answering once the deletion is on disk.
import type { BrokerContext } from './broker-context.js';
import type { SessionInfo } from './persistence/index.js';
import { retainedKey, retainedPrefixRange } from './persistence/keys.js';
import { literalPrefix, topicMatches } from './persistence/topic-filter.js';

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

export interface StoredState {
  /** Whether stored state exists: the LMDB persistence is on. */
  stored(): boolean;
  sessions(q: { after?: string; limit: number; prefix?: string; connected?: boolean }): Page<StoredSession>;
  /** 'connected': its client is online (disconnect it first). Resolves once the removal is on disk. */
  deleteSession(clientId: string): Promise<'deleted' | 'connected' | 'missing'>;
  retained(q: { filter: string; after?: string; limit: number }): Page<RetainedMessage>;
  /** Resolves once the removal is on disk (the next page no longer lists it). */
  deleteRetained(topic: string): Promise<boolean>;
}

/** `isLive`: whether a client id is connected now (from the live clients' index). */
export function createStoredState(ctx: BrokerContext, isLive: (clientId: string) => boolean): StoredState {
  /** The persistence's tables (the storage policy keeps them current across a restore). */
  function databases() {
    const store = ctx.options.store;
    if (!ctx.persistence || !store || !store.isOpen()) return undefined;
    return ctx.persistence.storedTables();
  }

  function storedSession(clientId: string, info: SessionInfo): StoredSession {
    return {
      clientId,
      ...(info.owner !== undefined ? { owner: info.owner } : {}),
      connected: isLive(clientId),
      subscriptions: info.subscriptions.length,
      queued: info.queued,
      inflight: info.inflight,
      expiresAt: info.expiresAt,
      expirySeconds: info.expirySeconds,
    };
  }

  return {
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
      for (const { key, value } of db.sessions.range({ start, limit: SCAN_BUDGET })) {
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
      if (isLive(clientId)) return 'connected';
      const persistence = ctx.persistence;
      if (!persistence?.deleteSession(clientId)) return 'missing';
      ctx.log.audit('mqtt session deleted', { clientId });
      await persistence.flush();
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
      for (const { value } of db.retained.range({ start, ...(range.end ? { end: range.end } : {}), limit: SCAN_BUDGET })) {
        scanned++;
        last = value.topic;
        if (!topicMatches(q.filter, value.topic)) continue;
        items.push({ topic: value.topic, qos: typeof value.qos === 'number' ? value.qos : 0, ...preview(value.payload) });
        if (items.length === q.limit) break;
      }
      return (items.length === q.limit || scanned === SCAN_BUDGET) && last !== undefined ? { items, next: last } : { items };
    },

    async deleteRetained(topic) {
      const db = databases();
      const persistence = ctx.persistence;
      const key = retainedKey(topic);
      if (!db || !persistence || db.retained.get(key.toString(), key) === undefined) return false;
      // An empty retained payload removes it, as a client's empty retained publish would (nothing is sent).
      await persistence.storeRetained({ topic, payload: Buffer.alloc(0) });
      ctx.log.audit('mqtt retained message cleared', { topic });
      await persistence.flush();
      return true;
    },
  };
}
