// The values an edge node keeps while its host cannot get them live (docs/sparkplug.md "History"):
// one table of the storage policy (`sparkplug-history`, key [resource id, seq], value
// [device id, metric name, acquisition time, value as JSON, quality]) in the gateway's LMDB
// environment, so backups carry it and a restore brings it back. The resource id is the owner:
// a node's values reach the disk in the order they were kept.
//
// - Memory first: a value is staged and reaches the flash with the background commits
//   (history.durability 'background', the default: a kill -9 or a power cut loses at most
//   storage.backgroundCommitMs of them, in few commits) or the next group commit ('prompt': at
//   most storage.commitIntervalMs, about 7 times the bytes written per value; docs/sparkplug.md).
//   One that is delivered before its commit is never written: a short outage writes nothing.
// - Delivered values leave it (history-replay.ts says when a value counts as delivered).
// - Bounded by maxValues and maxAgeSeconds: beyond a bound the oldest go first, counted by reason
//   and said once in the log per episode (until the history is empty again).
// - Memory stays small whatever the backlog: a count and the next seq; values are read back in
//   slices. One object per resource id for the life of the process (the registry in index.ts),
//   so a resource restarted by a change of its definition finds its counts as they are.
import type { Logger } from '../log/index.js';
import type { Store } from '../store/index.js';
import { REMOVED, type StagedTable, type StagedWrite } from '../storage/index.js';

export const HISTORY_DATABASE = 'sparkplug-history';

/** A metric's quality when it was kept: GOOD, BAD, or GOOD again after BAD (the host is told so once). */
export type KeptQuality = 0 | 1 | 2;
export const KEPT_QUALITY = { GOOD: 0, BAD: 1, RECOVERED: 2 } as const;

/** A value as JSON (64-bit integers beyond 2^53 as decimal text), as metric-values.ts's jsonOf gives it. */
export type KeptJson = string | number | boolean | null;

/** A kept value as stored: [device id, metric name, acquisition time (epoch ms), value, quality]. */
export type StoredValue = [string, string, number, KeptJson, KeptQuality];

export interface KeptValue {
  seq: number;
  deviceId: string;
  metric: string;
  timestamp: number;
  value: KeptJson;
  quality: KeptQuality;
}

export type HistoryDropReason = 'maxValues' | 'maxAge' | 'notInDefinition' | 'storeFailure';
export const HISTORY_DROP_REASONS: readonly HistoryDropReason[] = ['maxValues', 'maxAge', 'notInDefinition', 'storeFailure'];

export interface HistoryLimits {
  maxValues: number;
  /** 0: no age limit. */
  maxAgeSeconds: number;
  /** The storage class of a kept value: prompt (within storage.commitIntervalMs on flash) or background (storage.backgroundCommitMs). */
  durability: 'prompt' | 'background';
}

export interface HistoryFigures {
  /** Values kept now (on flash or staged). */
  values: number;
  /** Of those, staged in memory: not on flash yet. */
  staged: number;
  /** Age of the oldest kept value (0 when empty). */
  oldestAgeSeconds: number;
  /** Values delivered as historical metrics since the process started. */
  published: number;
  dropped: Record<HistoryDropReason, number>;
}

/** Where the histories live: their table of the storage policy and the store's health. */
export interface HistoryStorage {
  table: StagedTable<StoredValue>;
  store: Pick<Store, 'isOpen' | 'writeHealth'>;
}

const MAX_SEQ = Number.MAX_SAFE_INTEGER;
/** The age bound is checked at most this often while values are kept (reading the oldest costs a lookup). */
const AGE_CHECK_MS = 1000;
/** Oldest values dropped per read when a bound is exceeded. */
const DROP_BATCH = 256;

export class NodeHistory {
  private count = 0;
  private nextSeq = 0;
  private lastAgeCheck = 0;
  /** Reasons already said in the log in this episode. */
  private readonly said = new Set<HistoryDropReason>();
  readonly dropped: Record<HistoryDropReason, number> = Object.fromEntries(HISTORY_DROP_REASONS.map((r) => [r, 0])) as Record<HistoryDropReason, number>;
  published = 0;

  constructor(
    private readonly storage: HistoryStorage,
    readonly id: string,
    public limits: HistoryLimits,
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
  ) {
    this.reload();
  }

  /** Reads the count and the next seq from the store (at start, and after a restore swapped it: nothing is staged then). */
  reload(): void {
    this.count = 0;
    this.nextSeq = 0;
    this.said.clear();
    if (!this.storage.store.isOpen()) return;
    const { db } = this.storage.table;
    // Keys only: no value is decoded, whatever the backlog.
    for (const _ of db.getKeys({ start: [this.id, 0], end: [this.id, MAX_SEQ] })) this.count++;
    for (const key of db.getKeys({ start: [this.id, MAX_SEQ], end: [this.id, -1], reverse: true, limit: 1 })) this.nextSeq = (key as [string, number])[1] + 1;
  }

  get size(): number {
    return this.count;
  }

  /** The seq the next kept value will have (a mark for retract). */
  get mark(): number {
    return this.nextSeq;
  }

  /** Takes back the values kept from `mark` on (the host turned out not to be away): neither published nor dropped. */
  retract(mark: number): void {
    for (let batch = this.read(mark, DROP_BATCH); batch.length; batch = this.read(mark, DROP_BATCH)) this.remove(batch);
  }

  /** Keeps one value (the next in order); when the store cannot take it, it is counted as dropped. */
  keep(deviceId: string, metric: string, timestamp: number, value: KeptJson, quality: KeptQuality): void {
    const { table, store } = this.storage;
    if (!store.isOpen() || !store.writeHealth().writable) return this.drop(1, 'storeFailure');
    const seq = this.nextSeq++;
    const stored: StoredValue = [deviceId, metric, timestamp, value, quality];
    if (!table.put(this.writeId(seq), [this.id, seq], stored, { class: this.limits.durability, owner: this.id })) return this.drop(1, 'storeFailure');
    this.count++;
    this.enforceLimits();
  }

  /** Up to `limit` kept values from `fromSeq` on, in order (staged ones included). */
  read(fromSeq: number, limit: number): KeptValue[] {
    if (!this.storage.store.isOpen()) return [];
    const out: KeptValue[] = [];
    for (const { key, value } of this.storage.table.range({ start: [this.id, fromSeq], end: [this.id, MAX_SEQ], limit })) {
      const [deviceId, metric, timestamp, v, quality] = value;
      out.push({ seq: (key as [string, number])[1], deviceId, metric, timestamp, value: v, quality });
    }
    return out;
  }

  /** Values delivered to the host: they leave the history (a value not on flash yet is never written). */
  delivered(values: readonly KeptValue[]): void {
    this.remove(values);
    this.published += values.length;
  }

  /** Values that will never be delivered (their metric left the definition, or they are too old). */
  discard(values: readonly KeptValue[], reason: HistoryDropReason): void {
    if (values.length === 0) return;
    this.remove(values);
    this.drop(values.length, reason);
  }

  /** Removes every kept value (the resource left the service files). */
  clear(): void {
    if (this.storage.store.isOpen()) {
      this.storage.table.removeOwnedBy(this.id, [this.id, 0], [this.id, MAX_SEQ], (key) => this.writeId((key as [string, number])[1]), { class: 'prompt', delivered: true });
    }
    this.count = 0;
    this.said.clear();
  }

  /** A staged write of this history was lost to a failed commit. */
  lost(write: StagedWrite<StoredValue>): void {
    if (write.value === REMOVED) return; // a removal: the value comes back after a restart (sent twice, never lost)
    this.count = Math.max(0, this.count - 1);
    this.drop(1, 'storeFailure');
  }

  figures(): HistoryFigures {
    let staged = 0;
    // Staged or being committed: not on flash yet either way.
    for (const w of this.storage.table.stagedOf(this.id)) if (w.value !== REMOVED) staged++;
    const oldest = this.count > 0 ? this.read(0, 1)[0] : undefined;
    return {
      values: this.count,
      staged,
      oldestAgeSeconds: oldest ? Math.max(0, (this.now() - oldest.timestamp) / 1000) : 0,
      published: this.published,
      dropped: { ...this.dropped },
    };
  }

  private remove(values: readonly KeptValue[]): void {
    if (this.storage.store.isOpen()) {
      for (const v of values) this.storage.table.remove(this.writeId(v.seq), [this.id, v.seq], { class: 'prompt', owner: this.id, delivered: true });
    }
    this.count = Math.max(0, this.count - values.length);
    if (this.count === 0) this.said.clear();
  }

  private enforceLimits(): void {
    const { maxValues, maxAgeSeconds } = this.limits;
    const now = this.now();
    if (maxAgeSeconds > 0 && now - this.lastAgeCheck >= AGE_CHECK_MS) {
      this.lastAgeCheck = now;
      this.dropOlderThan(now - maxAgeSeconds * 1000);
    }
    while (this.count > maxValues) {
      const oldest = this.read(0, Math.min(DROP_BATCH, this.count - maxValues));
      if (oldest.length === 0) break;
      this.discard(oldest, 'maxValues');
    }
  }

  /** Drops the values kept before `limit` (epoch ms), oldest first. */
  dropOlderThan(limit: number): void {
    for (;;) {
      const batch = this.read(0, DROP_BATCH);
      // Kept in order of acquisition: the old ones are a prefix.
      let n = 0;
      while (n < batch.length && batch[n]!.timestamp < limit) n++;
      this.discard(batch.slice(0, n), 'maxAge');
      if (n < DROP_BATCH) return;
    }
  }

  private drop(n: number, reason: HistoryDropReason): void {
    this.dropped[reason] += n;
    if (this.said.has(reason)) return;
    this.said.add(reason);
    const why: Record<HistoryDropReason, string> = {
      maxValues: `history.maxValues (${this.limits.maxValues}) reached: the oldest values are dropped`,
      maxAge: `values older than history.maxAgeSeconds (${this.limits.maxAgeSeconds}) are dropped`,
      notInDefinition: 'kept values of metrics that are no longer in the definition (or no longer fit their datatype) are dropped',
      storeFailure: 'the store cannot write: values are not kept',
    };
    this.log.warn(`sparkplug history: ${why[reason]}`, { id: this.id, reason, count: n });
  }

  /** The write's id in the shared table: unique over every edge node's history. */
  private writeId(seq: number): string {
    return `${this.id}\u0000${seq}`;
  }
}
