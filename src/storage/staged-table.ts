// One LMDB database written through the storage policy. A put or remove is staged in memory and
// answers at once; reads see staged writes first. The commit scheduler writes a staged write when
// its class says so (held: after the hold, unless a remove cancelled it first; prompt: in the next
// group commit; background: within the background interval, or with any earlier commit).
//
// Writes of one owner (a session's queue, a bridge's queue) reach the disk in the order they were
// first staged: a commit that takes one of them takes every earlier staged write of that owner,
// so after a crash the disk never holds a message without the ones queued before it.
//
// "The disk" is LMDB and the commit journal (commit-journal.ts): a write made durable in the
// journal stays here (journaled: reads still see it, LMDB does not have it yet) until a compaction
// writes it to LMDB. A write that replaces a journaled one must be in that compaction too
// (overJournal): the compaction makes the journal's frames redundant, the older value with them.
import { compareKeys, type Database, type Key, type RangeOptions } from 'lmdb';
import type { WriteLedger, WriteTag } from './write-ledger.js';

export const REMOVED: unique symbol = Symbol('removed');

/**
 * held: a copy a connected recipient is expected to acknowledge (a persistent subscriber online,
 * a bridge whose upstream is up): written only if it is still needed after the hold.
 * prompt: must be durable soon (a recipient away, an acknowledgement waiting for it): the next
 * group commit. background: bookkeeping whose loss in a power cut costs little (retained QoS 0
 * updates, session times, the audit trail): within the background interval.
 */
export type WriteClass = 'held' | 'prompt' | 'background';

export interface WriteHow {
  class: WriteClass;
  /** Writes of one owner reach the disk in the order they were staged (see the header). */
  owner?: string;
  /** Who waits for this write (WriteLedger). */
  tag?: WriteTag;
  /**
   * The key was never on disk (a queue's next sequence number): a removal before the commit
   * cancels both without reading the database to make sure.
   */
  fresh?: boolean;
}

export interface RemoveHow extends Partial<WriteHow> {
  /**
   * The recipient acknowledged the copy this removes: whoever waited for the copy to be safe is
   * satisfied now. Otherwise (a newer state replaces an older one) they wait for the removal.
   */
  delivered?: boolean;
}

export interface StagedWrite<V = unknown> {
  readonly table: StagedTable<V>;
  readonly id: string;
  key: Key;
  value: V | typeof REMOVED;
  cls: WriteClass;
  dueAt: number;
  readonly owner: string | undefined;
  tags: WriteTag[] | undefined;
  /**
   * staged: in memory only; journaling: in a journal frame being written; journaled: durable in
   * the journal, not in LMDB yet; committing: in an LMDB commit under way; done: left the table.
   */
  state: 'staged' | 'journaling' | 'journaled' | 'committing' | 'done';
  /** It replaces a journaled write (or one being journaled): the next compaction must write it. */
  overJournal: boolean;
  /**
   * Whether the key may be on disk: true once an earlier write of this id was committed (or is
   * being committed), false for a fresh key, 'unknown' until looked up.
   */
  mayBeOnDisk: boolean | 'unknown';
}

/** What a table needs from the policy that owns it. */
export interface TableHost {
  readonly ledger: WriteLedger;
  now(): number;
  /** ms from staging to due, per class (Infinity: only with another commit or at the background deadline). */
  delayOf(cls: WriteClass): number;
  /** A write was staged or became due earlier: schedule it. */
  schedule(write: StagedWrite): void;
  /** False (the write is counted as failed, not tried) while the store cannot write. */
  tryWrite(): boolean;
  /** Throws while the store is closed (a restore swaps it). */
  assertOpen(): void;
  /** A staged write was cancelled before it reached the disk (counted). */
  cancelled(): void;
}

/** The options of a database that change how its keys and values are stored (the journal records them). */
export interface TableEncoding {
  keyEncoding?: string;
  encoding?: string;
}

/** Whether a write is durable in the journal (or about to be) but not in LMDB. */
const inJournal = <V>(w: StagedWrite<V>): boolean => w.state === 'journaling' || w.state === 'journaled';

const URGENCY: Record<WriteClass, number> = { prompt: 0, held: 1, background: 2 };

/**
 * Whether the key may be in LMDB once `prev` (the write a new one replaces) is through: an LMDB
 * commit puts it there; the journal does not (LMDB holds what it held before `prev`).
 */
function onDiskAfter<V>(prev: StagedWrite<V>): boolean | 'unknown' {
  return inJournal(prev) ? prev.mayBeOnDisk : true;
}

/** A write replacing `prev` must reach LMDB in the compaction that retires `prev`'s journal frame. */
function replacesJournaled<V>(prev: StagedWrite<V>): boolean {
  return inJournal(prev) || (prev.state === 'staged' && prev.overJournal);
}

export class StagedTable<V> {
  readonly #staged = new Map<string, StagedWrite<V>>();
  /** Per owner, its writes not durable yet (staged, or in a commit under way), in staging order. */
  readonly #owners = new Map<string, Map<string, StagedWrite<V>>>();
  /**
   * Per owner, its journaled writes (durable, not in LMDB yet): kept apart so that the owner-order
   * rule looks only at what is not durable yet (a long queue journaled write by write would make
   * every commit walk all of it).
   */
  readonly #journaledOwners = new Map<string, Map<string, StagedWrite<V>>>();
  /** Told of every write lost to a failed commit (its owner's counts are then wrong otherwise). */
  onLost: ((write: StagedWrite<V>) => void) | undefined;

  constructor(
    readonly name: string,
    /** The database, for reads of what is committed (replaced after a restore). */
    public db: Database<V, Key>,
    private readonly host: TableHost,
    /** Keys are raw bytes (keyEncoding 'binary'): ordered byte by byte. */
    private readonly binaryKeys = false,
    /** How the database stores keys and values (a journal record says so, for its replay). */
    readonly encoding: TableEncoding = {},
  ) {}

  /** Stages a put; false when the store cannot write (counted as a failed write, nothing staged). */
  put(id: string, key: Key, value: V, how: WriteHow): boolean {
    this.host.assertOpen();
    if (!this.host.tryWrite()) return false;
    const prev = this.#staged.get(id);
    if (prev && prev.state === 'staged') {
      // The newer value is what reaches the disk; it owes what the older one owed.
      prev.key = key;
      prev.value = value;
      this.#addTag(prev, how.tag);
      this.#hasten(prev, how.class);
      return true;
    }
    this.#stage(id, key, value, how, prev !== undefined ? onDiskAfter(prev) : how.fresh ? false : 'unknown', prev !== undefined && replacesJournaled(prev));
    return true;
  }

  /**
   * Stages a removal. A staged put that never reached the disk (and whose key was not there
   * before) is cancelled instead: neither is written.
   */
  remove(id: string, key: Key, how: RemoveHow = {}): void {
    this.host.assertOpen();
    if (!this.host.tryWrite()) return;
    const cls = how.class ?? 'prompt';
    const prev = this.#staged.get(id);
    if (prev && prev.state === 'staged') {
      if (prev.value === REMOVED) {
        this.#addTag(prev, how.tag);
        this.#hasten(prev, cls);
        return;
      }
      if (prev.mayBeOnDisk === false || (prev.mayBeOnDisk === 'unknown' && !this.db.doesExist(key))) {
        this.#forget(prev);
        prev.state = 'done';
        this.#settle(prev);
        this.host.cancelled();
        return;
      }
      if (how.delivered) this.#settle(prev);
      prev.key = key;
      prev.value = REMOVED;
      this.#addTag(prev, how.tag);
      // A new write: due as its own class says, from now.
      prev.cls = cls;
      prev.dueAt = this.host.now() + this.host.delayOf(cls);
      this.host.schedule(prev as unknown as StagedWrite);
      return;
    }
    // Nothing staged or committing and nothing on disk: nothing to remove.
    if (!prev && !this.db.doesExist(key)) return;
    this.#stage(id, key, REMOVED, { class: cls, owner: how.owner, tag: how.tag }, prev ? onDiskAfter(prev) : true, prev !== undefined && replacesJournaled(prev));
  }

  /** The value of `id`: a staged write first, else the database. */
  get(id: string, key: Key): V | undefined {
    const write = this.#staged.get(id);
    if (write !== undefined) return write.value === REMOVED ? undefined : write.value;
    return this.db.get(key);
  }

  /** The staged (or committing) write of `id`, if any. */
  staged(id: string): StagedWrite<V> | undefined {
    return this.#staged.get(id);
  }

  /** Every staged write (bounded by the hold and the commit interval). */
  stagedWrites(): IterableIterator<StagedWrite<V>> {
    return this.#staged.values();
  }

  /** The writes of one owner LMDB does not hold yet (the latest of each id): journaled ones first, then the others in the order they were first staged. */
  *stagedOf(owner: string): IterableIterator<StagedWrite<V>> {
    const journaled = this.#journaledOwners.get(owner);
    if (journaled) for (const w of journaled.values()) if (this.#staged.get(w.id) === w) yield w;
    const writes = this.#owners.get(owner);
    if (writes) yield* writes.values();
  }

  /** Someone waits for `write` (a lazy write of a tag they wait for): it is prompt now, if still staged. */
  awaited(write: StagedWrite<V>): void {
    if (write.state === 'staged' && this.#staged.get(write.id) === write) this.#hasten(write, 'prompt');
  }

  /** Makes the held writes of an owner due now (its client left, its link went down). */
  promote(owner: string): void {
    const writes = this.#owners.get(owner);
    if (!writes) return;
    for (const w of writes.values()) if (w.state === 'staged' && w.cls === 'held') this.#hasten(w, 'prompt');
  }

  /** Removes every key of `start`..`end` (exclusive), on disk or staged, whose first part is `owner`. */
  removeOwnedBy(owner: string, start: Key, end: Key, idOf: (key: Key) => string, how: RemoveHow = {}): void {
    const keys = new Map<string, Key>();
    for (const key of this.db.getKeys({ start, end })) keys.set(idOf(key), key);
    for (const write of this.#staged.values()) {
      if (write.value !== REMOVED && Array.isArray(write.key) && write.key[0] === owner) keys.set(idOf(write.key), write.key);
    }
    for (const [keyId, key] of keys) this.remove(keyId, key, { ...how, owner: how.owner ?? owner });
  }

  /**
   * What a range read would find once the staged writes are committed: the committed entries
   * merged with the staged ones, in key order (at most `limit`). Costs a sort of the staged
   * writes inside the range, so it suits pages an operator asks for, not the message path.
   */
  *range(options: Pick<RangeOptions, 'start' | 'end' | 'limit' | 'reverse'>): Generator<{ key: Key; value: V }> {
    const { start, end, limit = Infinity, reverse = false } = options;
    const order = this.#compare;
    // In reverse, lmdb reads from `start` (the high end) down to `end` (exclusive): the same merge, mirrored.
    const cmp = reverse ? (a: Key, b: Key) => order(b, a) : order;
    const inRange = (k: Key) => (start === undefined || cmp(k, start) >= 0) && (end === undefined || cmp(k, end) < 0);
    const staged = [...this.#staged.values()].filter((w) => inRange(w.key)).sort((a, b) => cmp(a.key, b.key));
    let i = 0;
    let given = 0;
    // A merge of two sorted sequences; on equal keys the staged write (a newer value, or a removal) wins.
    const take = function* (w: StagedWrite<V>): Generator<{ key: Key; value: V }> {
      if (w.value === REMOVED) return;
      given++;
      yield { key: w.key, value: w.value };
    };
    // A staged removal can hide a committed entry: read that many more from the disk at most.
    const diskLimit = limit === Infinity ? undefined : limit + staged.length;
    for (const entry of this.db.getRange({ start, end, reverse, ...(diskLimit !== undefined ? { limit: diskLimit } : {}) })) {
      if (given >= limit) return;
      const key = Buffer.isBuffer(entry.key) ? Buffer.from(entry.key) : entry.key; // lmdb-js may reuse the key buffer
      for (; i < staged.length && given < limit && cmp(staged[i]!.key, key) < 0; i++) yield* take(staged[i]!);
      if (given >= limit) return;
      if (i < staged.length && cmp(staged[i]!.key, key) === 0) {
        yield* take(staged[i++]!);
        continue;
      }
      given++;
      yield { key, value: entry.value };
    }
    for (; i < staged.length && given < limit; i++) yield* take(staged[i]!);
  }

  /** Key order of this table's encoding: byte order for binary keys, lmdb's ordered-binary otherwise. */
  get #compare(): (a: Key, b: Key) => number {
    return this.binaryKeys ? (a, b) => Buffer.compare(a as Buffer, b as Buffer) : compareKeys;
  }

  /** Staged puts and removals (O(staged): for counts an operator asks for). */
  stagedCounts(): { puts: number; removes: number } {
    let puts = 0;
    let removes = 0;
    for (const w of this.#staged.values()) {
      if (w.value === REMOVED) removes++;
      else puts++;
    }
    return { puts, removes };
  }

  /** Writes staged so far (for stats). */
  get size(): number {
    return this.#staged.size;
  }

  // ------------------------------------------------------------------ for the commit scheduler

  /** Earlier staged writes of the owner of `write`, and it, in staging order (the order to keep on disk). */
  *ownerPrefix(owner: string): IterableIterator<StagedWrite<V>> {
    const writes = this.#owners.get(owner);
    if (writes) yield* writes.values();
  }

  /**
   * `write` is durable in the journal: whoever waited for it is answered; it stays (reads see it)
   * until a compaction writes it to LMDB.
   */
  journaled(write: StagedWrite<V>): void {
    write.state = 'journaled';
    this.#settle(write);
    if (write.owner === undefined) return;
    const writes = this.#owners.get(write.owner);
    if (writes?.get(write.id) === write) {
      writes.delete(write.id);
      if (writes.size === 0) this.#owners.delete(write.owner);
    }
    let journaled = this.#journaledOwners.get(write.owner);
    if (!journaled) this.#journaledOwners.set(write.owner, (journaled = new Map()));
    journaled.set(write.id, write);
  }

  /** Whether `write` is still the latest write of its id (a journaled one may have been replaced since). */
  current(write: StagedWrite<V>): boolean {
    return this.#staged.get(write.id) === write;
  }

  /** The commit of `write` ended (written, or failed: `lost`): it leaves the table unless a newer write replaced it. */
  finished(write: StagedWrite<V>, lost = false): void {
    write.state = 'done';
    this.#dropJournaled(write);
    if (this.#staged.get(write.id) === write) this.#forget(write);
    this.#settle(write);
    if (lost) this.onLost?.(write);
  }

  /** Drops every staged write (a restore replaced the store); the ledger is settled by the policy. */
  discardAll(): void {
    for (const w of this.#staged.values()) w.state = 'done';
    this.#staged.clear();
    this.#owners.clear();
    this.#journaledOwners.clear();
  }

  // ------------------------------------------------------------------ internals

  #stage(id: string, key: Key, value: V | typeof REMOVED, how: WriteHow, mayBeOnDisk: boolean | 'unknown', overJournal = false): void {
    const write: StagedWrite<V> = {
      table: this,
      id,
      key,
      value,
      cls: how.class,
      dueAt: this.host.now() + this.host.delayOf(how.class),
      owner: how.owner,
      tags: undefined,
      state: 'staged',
      mayBeOnDisk,
      overJournal,
    };
    this.#addTag(write, how.tag);
    this.#staged.set(id, write);
    if (how.owner !== undefined) {
      let writes = this.#owners.get(how.owner);
      if (!writes) this.#owners.set(how.owner, (writes = new Map()));
      // Replacing a committing write of the same id keeps its place in the order.
      writes.set(id, write);
    }
    this.host.schedule(write as unknown as StagedWrite);
  }

  /** A write that must reach the disk sooner than its class said (the earlier due time wins). */
  #hasten(write: StagedWrite<V>, cls: WriteClass): void {
    const dueAt = this.host.now() + this.host.delayOf(cls);
    if (URGENCY[cls] < URGENCY[write.cls]) write.cls = cls;
    if (dueAt < write.dueAt) {
      write.dueAt = dueAt;
      this.host.schedule(write as unknown as StagedWrite);
    }
  }

  #addTag(write: StagedWrite<V>, tag: WriteTag | undefined): void {
    if (tag === undefined) return;
    (write.tags ??= []).push(tag);
    // A background write someone may wait for: prompt once they do (WriteLedger).
    this.host.ledger.opened(tag, write.cls === 'background' ? write : undefined);
  }

  #settle(write: StagedWrite<V>): void {
    const tags = write.tags;
    if (!tags) return;
    write.tags = undefined;
    for (const tag of tags) this.host.ledger.settled(tag);
  }

  #forget(write: StagedWrite<V>): void {
    this.#staged.delete(write.id);
    if (write.owner === undefined) return;
    const writes = this.#owners.get(write.owner);
    if (writes?.get(write.id) !== write) return;
    writes.delete(write.id);
    if (writes.size === 0) this.#owners.delete(write.owner);
  }

  /** A journaled write left (compacted, or replaced and its compaction done): off its owner's journaled list. */
  #dropJournaled(write: StagedWrite<V>): void {
    if (write.owner === undefined) return;
    const journaled = this.#journaledOwners.get(write.owner);
    if (journaled?.get(write.id) !== write) return;
    journaled.delete(write.id);
    if (journaled.size === 0) this.#journaledOwners.delete(write.owner);
  }
}
