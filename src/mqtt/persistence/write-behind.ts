// lmdb-js commits asynchronous writes in batches (one transaction per event turn) and reads see
// only committed data. The persistence answers aedes at once, before the commit (aedes drops a
// message whose delivery is delayed behind a newer one: see docs/mqtt-broker.md "Broker state on disk"), so
// writes not yet committed are kept here and reads look here first.
import type { Database, Key } from 'lmdb';
import type { Store } from '../../store/index.js';

export const REMOVED: unique symbol = Symbol('removed');

export interface PendingWrite<V> {
  key: Key;
  value: V | typeof REMOVED;
}

/** Counts the writes of one persistence and tells when they are on disk. */
export class WriteLog {
  /** Writes issued so far. */
  issued = 0;
  /** Writes whose commit failed. */
  failures = 0;
  private durableUpTo = 0;
  private batch: { commit: Promise<unknown>; settled: (() => void)[] } | undefined;
  private flushing: { upTo: number; done: Promise<void> } | undefined;
  private readonly failureWaiters = new Set<() => void>();

  constructor(
    private readonly store: Pick<Store, 'flushed' | 'isOpen' | 'writeHealth'>,
    private readonly onError: (error: unknown) => void,
  ) {}

  /**
   * False while the store cannot write (disk full, read-only): a write is then counted as failed
   * without being tried. Each failed commit is a risk of its own: lmdb-js corrupted its heap after
   * a few failed commits on a full disk (test/storage-faults.test.ts).
   */
  tryWrite(): boolean {
    if (this.store.writeHealth().writable) return true;
    this.failures++;
    return false;
  }

  /** Throws while the store is closed (a restore swaps it): lmdb-js would crash the process on that write. */
  assertOpen(): void {
    if (!this.store.isOpen()) throw new Error('the store is closed (a restore is replacing it)');
  }

  /**
   * Counts a write and calls `settled` once its commit is done (or failed). lmdb-js returns one
   * promise per commit batch, so the writes of a batch share one callback: no closure per write.
   */
  track(commit: Promise<unknown>, settled: () => void): void {
    this.issued++;
    if (commit !== this.batch?.commit) {
      const batch = { commit, settled: [] as (() => void)[] };
      this.batch = batch;
      const settle = () => {
        if (this.batch === batch) this.batch = undefined;
        for (const done of batch.settled) done();
      };
      commit.then(settle, (error: unknown) => {
        this.failures += batch.settled.length;
        this.onError(error);
        settle();
        // lmdb-js may never resolve its flush promise after a failed commit (a full disk):
        // whoever waits for durability (a held PUBACK) must not wait forever.
        for (const wake of [...this.failureWaiters]) wake();
      });
    }
    this.batch!.settled.push(settled);
  }

  /**
   * Resolves once every write issued after `mark` (a former `issued`) is flushed to disk; at
   * once when there was none. Without a mark: every write issued so far.
   */
  whenDurable(mark = -1): Promise<void> {
    const upTo = this.issued;
    if (upTo === mark || upTo <= this.durableUpTo) return Promise.resolve();
    if (this.flushing && this.flushing.upTo >= upTo) return this.flushing.done;
    // store.flushed() covers every write issued before it is called.
    let wake!: () => void;
    const failed = new Promise<'failed'>((resolve) => (wake = () => resolve('failed')));
    this.failureWaiters.add(wake);
    const done = Promise.race([this.store.flushed(), failed]).then((outcome) => {
      this.failureWaiters.delete(wake);
      if (outcome !== 'failed' && this.durableUpTo < upTo) this.durableUpTo = upTo;
      if (this.flushing?.done === done) this.flushing = undefined;
    });
    this.flushing = { upTo, done };
    return done;
  }
}

/** One LMDB database written behind: puts and removes apply to reads at once, commit later. */
export class WriteBehind<V> {
  private readonly pending = new Map<string, PendingWrite<V>>();

  constructor(
    readonly db: Database<V, Key>,
    private readonly log: WriteLog,
  ) {}

  /** `id` names `key` uniquely as a string (the map key of the pending writes). */
  put(id: string, key: Key, value: V): void {
    this.log.assertOpen();
    if (!this.log.tryWrite()) return;
    this.issue(id, { key, value }, this.db.put(key, value));
  }

  remove(id: string, key: Key): void {
    this.log.assertOpen();
    if (!this.log.tryWrite()) return;
    this.issue(id, { key, value: REMOVED }, this.db.remove(key));
  }

  get(id: string, key: Key): V | undefined {
    const write = this.pending.get(id);
    if (write !== undefined) return write.value === REMOVED ? undefined : write.value;
    return this.db.get(key);
  }

  /** The write of `id` that is not committed yet, if any. */
  pendingWrite(id: string): PendingWrite<V> | undefined {
    return this.pending.get(id);
  }

  /** Writes not committed yet (few: those of the last commit batch or two). */
  pendingWrites(): IterableIterator<PendingWrite<V>> {
    return this.pending.values();
  }

  /** Removes every key of `start`..`end` (exclusive), on disk or pending, whose first part is `owner`. */
  removeOwnedBy(owner: string, start: Key, end: Key, id: (key: Key) => string): void {
    const keys = new Map<string, Key>();
    for (const key of this.db.getKeys({ start, end })) keys.set(id(key), key);
    for (const write of this.pending.values()) {
      if (write.value !== REMOVED && Array.isArray(write.key) && write.key[0] === owner) keys.set(id(write.key), write.key);
    }
    for (const [keyId, key] of keys) this.remove(keyId, key);
  }

  private issue(id: string, write: PendingWrite<V>, commit: Promise<unknown>): void {
    this.pending.set(id, write);
    this.log.track(commit, () => {
      if (this.pending.get(id) === write) this.pending.delete(id);
    });
  }
}
