// The audit trail's two named databases in the store's LMDB environment (so backups carry it):
// `audit` holds the records by [time, seq, run]; `audit-index` holds one key per record and
// filter combination ([tag, values..., time, seq, run], see audit-records.ts). Writes go through
// the storage policy in the background class (docs/footprint.md "Flash"): a record and its index
// keys are staged together and reach the flash in one group commit within
// storage.backgroundCommitMs, so a burst of events is one write, not one per event; queries see
// staged records at once. A query reads one index range in reverse time order, a page at a time.
// Bounded by count and by age; pruning removes the oldest records a batch at a time, never with
// a scan of the whole trail.
import type { Key } from 'lmdb';
import { prefixRange, type IndexKey } from '../store/index.js';
import type { StagedTable, StoragePolicy, WriteHow } from '../storage/index.js';
import { categoryOf, indexAnswers, indexKeysOf, indexPrefix, keyOf, matches, outcomeOf, type AuditFilter, type AuditKey, type AuditRecord } from './audit-records.js';

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
  /** Set when more records may match (a page that read MAX_SCAN entries ends early: fewer records, and a next key). */
  next?: AuditKey;
}

/**
 * Index entries one page reads at most. A filter no single index answers (an endpoint and an
 * outcome, a category and a user) reads the most selective one and checks the rest on each
 * record: a page costs at most this many reads, whatever the trail's size.
 */
export const MAX_SCAN = 5000;

/** How many oldest records one pruning step removes at most. */
const PRUNE_BATCH = 500;
/** Distinct action names listed at most. */
const MAX_ACTIONS = 500;
/** A string element sorts after every number: the end of a time range within a prefix. */
const AFTER_NUMBERS = '\uffff';

export interface AuditStore {
  /** Opens the databases (the storage policy reopens them after a restore). */
  open(): void;
  /** Stages the writes; false if the store refused them. */
  append(record: AuditRecord): boolean;
  query(q: AuditQuery): AuditPage;
  /** Distinct action names present, in name order. */
  actions(): string[];
  count(): number;
  /** Removes records beyond the count or older than the age limit, a batch at a time; the number removed. */
  prune(now: number): number;
  /** Writes records of another trail that this one lacks (same key); the number written. */
  merge(records: Iterable<AuditRecord>, now: number): Promise<number>;
}

/** The trail's databases in the store's environment (backups carry them). */
export const AUDIT_DATABASE = 'audit';
export const AUDIT_INDEX_DATABASE = 'audit-index';

/** Audit events are bookkeeping a power cut may cost (the log line is written at once). */
const BACKGROUND: WriteHow = { class: 'background' };
/** A key's id among the staged writes (keys hold strings and numbers). */
const idOf = (key: Key) => JSON.stringify(key);

export function createAuditStore(deps: { storage: StoragePolicy; limits: AuditLimits }): AuditStore {
  const { storage, limits } = deps;
  let records!: StagedTable<AuditRecord>;
  let index!: StagedTable<number>;

  function open(): void {
    records = storage.table<AuditRecord>(AUDIT_DATABASE, { keyEncoding: 'ordered-binary' });
    index = storage.table<number>(AUDIT_INDEX_DATABASE, { keyEncoding: 'ordered-binary' });
  }

  function write(record: AuditRecord): boolean {
    const key = keyOf(record);
    // Staged together: they reach the disk in the same group commit.
    if (!records.put(idOf(key), key, record, BACKGROUND)) return false;
    for (const k of indexKeysOf(record)) index.put(idOf(k), k, 1, BACKGROUND);
    return true;
  }

  function remove(record: AuditRecord): void {
    const key = keyOf(record);
    records.remove(idOf(key), key, BACKGROUND);
    for (const k of indexKeysOf(record)) index.remove(idOf(k), k, BACKGROUND);
  }

  const count = () => {
    const staged = records.stagedCounts();
    return (records.db.getStats() as { entryCount: number }).entryCount + staged.puts - staged.removes;
  };

  function query(q: AuditQuery): AuditPage {
    // An action has one outcome and one category: asking for another finds nothing.
    if (q.action !== undefined && q.outcome !== undefined && outcomeOf(q.action) !== q.outcome) return { records: [] };
    if (q.action !== undefined && q.category !== undefined && categoryOf(q.action) !== q.category) return { records: [] };
    const prefix = indexPrefix(q);
    const source = prefix ? index : records;
    const base = prefix ?? [];
    const start: IndexKey = q.after ? [...base, ...q.after] : [...base, q.to ?? Number.MAX_SAFE_INTEGER, AFTER_NUMBERS];
    const end: IndexKey = [...base, q.from ?? 0];
    const found: AuditRecord[] = [];
    let next: AuditKey | undefined;
    let scanned = 0;
    let checked: AuditKey | undefined;
    // An index that answers the filter: one more than the page tells whether another page
    // follows (the cursor key itself is skipped). Otherwise up to MAX_SCAN entries are checked.
    const answered = indexAnswers(prefix, q);
    const limit = answered ? q.limit + 2 : MAX_SCAN + 2;
    for (const { key: entryKey } of (source as StagedTable<unknown>).range({ start, end, reverse: true, limit })) {
      const key = entryKey as IndexKey;
      const k = key.slice(base.length) as AuditKey;
      if (q.after && k[0] === q.after[0] && k[1] === q.after[1] && k[2] === q.after[2]) continue;
      if (q.to !== undefined && k[0] > q.to) continue;
      if (found.length === q.limit) {
        next = keyOf(found[found.length - 1]!);
        break;
      }
      if (scanned++ === MAX_SCAN) {
        // Enough read for one page: the next one goes on after the last entry checked.
        next = checked;
        break;
      }
      checked = [k[0], k[1], k[2]];
      const recordKey = prefix ? k : key;
      const record = records.get(idOf(recordKey), recordKey);
      // An index key whose record a pruning batch removed a moment ago: not an event any more.
      if (record && (answered || matches(record, q))) found.push(record);
    }
    return next ? { records: found, next } : { records: found };
  }

  function actions(): string[] {
    const names: string[] = [];
    let start: IndexKey = ['a'];
    const end = prefixRange('a').end;
    while (names.length < MAX_ACTIONS) {
      const [entry] = [...index.range({ start, end, limit: 1 })];
      const first = entry?.key as IndexKey | undefined;
      if (!first || typeof first[1] !== 'string') break;
      names.push(first[1]);
      // Jump past every key of this action: its times are numbers, which sort before any string.
      start = ['a', first[1], AFTER_NUMBERS];
    }
    return names;
  }

  function prune(now: number): number {
    let removed = 0;
    const cutoff = now - limits.maxAgeMs;
    // Each step reads the trail as staged, so it sees the previous step's removals.
    for (;;) {
      const overflow = Math.max(0, count() - limits.maxEntries);
      const batch: AuditRecord[] = [];
      for (const { value } of records.range({ limit: PRUNE_BATCH })) {
        if (batch.length >= overflow && value.time >= cutoff) break;
        batch.push(value);
      }
      if (batch.length === 0) return removed;
      for (const r of batch) remove(r);
      removed += batch.length;
    }
  }

  async function merge(incoming: Iterable<AuditRecord>, now: number): Promise<number> {
    const cutoff = now - limits.maxAgeMs;
    let written = 0;
    for (const r of incoming) {
      if (r.time < cutoff || written >= limits.maxEntries) break;
      const key = keyOf(r);
      if (records.get(idOf(key), key) !== undefined) continue;
      if (!write(r)) break;
      written++;
      // A batch at a time, so a large trail does not hold the event loop.
      if (written % PRUNE_BATCH === 0) await new Promise((resolve) => setImmediate(resolve));
    }
    return written;
  }

  return { open, append: write, query, actions, count, prune, merge };
}
