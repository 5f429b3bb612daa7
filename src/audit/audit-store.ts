// The audit trail's two named databases in the store's LMDB environment (so backups carry it):
// `audit` holds the records by [time, seq, run]; `audit-index` holds one key per record and
// filter combination ([tag, values..., time, seq, run], see audit-records.ts). Writes are
// LMDB's batched asynchronous puts (a record and its index keys are issued together, so they
// commit in one batch); queries read one index range in reverse time order, a page at a time.
// Bounded by count and by age; pruning removes the oldest records a batch at a time, never with
// a scan of the whole trail.
import type { Database } from 'lmdb';
import { prefixRange, type IndexKey, type Store } from '../store/index.js';
import { indexKeysOf, indexPrefix, keyOf, outcomeOf, type AuditFilter, type AuditKey, type AuditRecord } from './audit-records.js';

export interface AuditLimits {
  maxEntries: number;
  maxAgeMs: number;
}

export interface AuditQuery extends AuditFilter {
  /** Epoch ms, inclusive. */
  from?: number;
  to?: number;
  limit: number;
  /** Continue below this key (the last one of the previous page). */
  after?: AuditKey;
}

export interface AuditPage {
  records: AuditRecord[];
  /** Set when more records match. */
  next?: AuditKey;
}

/** How many oldest records one pruning step removes at most. */
const PRUNE_BATCH = 500;
/** Distinct action names listed at most. */
const MAX_ACTIONS = 500;
/** A string element sorts after every number: the end of a time range within a prefix. */
const AFTER_NUMBERS = '\uffff';

export interface AuditStore {
  /** Opens (again, after a restore) the databases. */
  open(): void;
  /** Issues the writes; resolves when committed (false if the store refused them). */
  append(record: AuditRecord): Promise<boolean>;
  query(q: AuditQuery): AuditPage;
  /** Distinct action names present, in name order. */
  actions(): string[];
  count(): number;
  /** Removes records beyond the count or older than the age limit, a batch at a time; the number removed. */
  prune(now: number): Promise<number>;
  /** Writes records of another trail that this one lacks (same key); the number written. */
  merge(records: Iterable<AuditRecord>, now: number): Promise<number>;
}

export function createAuditStore(deps: { store: Store; limits: AuditLimits }): AuditStore {
  const { store, limits } = deps;
  let records!: Database<AuditRecord, IndexKey>;
  let index!: Database<number, IndexKey>;

  function open(): void {
    records = store.openDatabase<AuditRecord, IndexKey>('audit', { keyEncoding: 'ordered-binary' });
    index = store.openDatabase<number, IndexKey>('audit-index', { keyEncoding: 'ordered-binary' });
  }

  function write(record: AuditRecord): Promise<boolean> {
    const key = keyOf(record);
    // Issued in one turn: lmdb-js commits them in the same batch.
    const done = records.put(key, record);
    for (const k of indexKeysOf(record)) void index.put(k, 1);
    return done;
  }

  function remove(record: AuditRecord): Promise<boolean> {
    const done = records.remove(keyOf(record));
    for (const k of indexKeysOf(record)) void index.remove(k);
    return done;
  }

  const count = () => (records.getStats() as { entryCount: number }).entryCount;

  function query(q: AuditQuery): AuditPage {
    // An action has one outcome: asking for the other finds nothing.
    if (q.action !== undefined && q.outcome !== undefined && outcomeOf(q.action) !== q.outcome) return { records: [] };
    const prefix = indexPrefix(q);
    const source = prefix ? index : records;
    const base = prefix ?? [];
    const start: IndexKey = q.after ? [...base, ...q.after] : [...base, q.to ?? Number.MAX_SAFE_INTEGER, AFTER_NUMBERS];
    const end: IndexKey = [...base, q.from ?? 0];
    const found: AuditRecord[] = [];
    let next: AuditKey | undefined;
    // One more than the page tells whether another page follows; the cursor key itself is skipped.
    for (const key of source.getKeys({ start, end, reverse: true, limit: q.limit + 2 })) {
      const k = key.slice(base.length) as AuditKey;
      if (q.after && k[0] === q.after[0] && k[1] === q.after[1] && k[2] === q.after[2]) continue;
      if (q.to !== undefined && k[0] > q.to) continue;
      if (found.length === q.limit) {
        next = keyOf(found[found.length - 1]!);
        break;
      }
      const record = prefix ? records.get(k) : records.get(key);
      // An index key whose record a pruning batch removed a moment ago: not an event any more.
      if (record) found.push(record);
    }
    return next ? { records: found, next } : { records: found };
  }

  function actions(): string[] {
    const names: string[] = [];
    let start: IndexKey = ['a'];
    const end = prefixRange('a').end;
    while (names.length < MAX_ACTIONS) {
      const [first] = [...index.getKeys({ start, end, limit: 1 })];
      if (!first || typeof first[1] !== 'string') break;
      names.push(first[1]);
      // Jump past every key of this action: its times are numbers, which sort before any string.
      start = ['a', first[1], AFTER_NUMBERS];
    }
    return names;
  }

  async function prune(now: number): Promise<number> {
    let removed = 0;
    const cutoff = now - limits.maxAgeMs;
    // Each step reads committed state only after the previous step's removals committed.
    for (;;) {
      const overflow = Math.max(0, count() - limits.maxEntries);
      const batch: AuditRecord[] = [];
      for (const { value } of records.getRange({ limit: PRUNE_BATCH })) {
        if (batch.length >= overflow && value.time >= cutoff) break;
        batch.push(value);
      }
      if (batch.length === 0) return removed;
      let last: Promise<boolean> | undefined;
      for (const r of batch) last = remove(r);
      await last;
      removed += batch.length;
    }
  }

  async function merge(incoming: Iterable<AuditRecord>, now: number): Promise<number> {
    const cutoff = now - limits.maxAgeMs;
    let written = 0;
    let last: Promise<boolean> | undefined;
    for (const r of incoming) {
      if (r.time < cutoff || written >= limits.maxEntries) break;
      if (records.doesExist(keyOf(r))) continue;
      last = write(r);
      written++;
      // A batch at a time, so a large trail does not hold the event loop.
      if (written % PRUNE_BATCH === 0) await last;
    }
    await last;
    return written;
  }

  return { open, append: write, query, actions, count, prune, merge };
}
