// The storage policy (docs/design.md §15, docs/footprint.md "Flash"): one place decides when anything the
// daemon keeps in its LMDB environment touches the flash. Memory first: a write is staged and
// reaches the disk only when its class says it must (staged-table.ts), in group commits
// (commit-scheduler.ts). An acknowledgement still means what it meant: whoever waits for a write
// (write-ledger.ts) is answered once it is durable, or once the recipient that needed it has it.
import type { DatabaseOptions, Key } from 'lmdb';
import type { Logger } from '../log/index.js';
import type { Store } from '../store/index.js';
import { CommitScheduler, type CommitFigures, type CommitTimings } from './commit-scheduler.js';
import { StagedTable, type TableHost, type WriteClass } from './staged-table.js';
import { WriteLedger, type WriteTag } from './write-ledger.js';

export interface StoragePolicyStats extends CommitFigures {
  /** Writes staged in memory now. */
  stagedWrites: number;
}

export interface StoragePolicy {
  readonly timings: Readonly<CommitTimings>;
  /**
   * A named database of the store written through the policy. The same name gives the same
   * table. After a restore (store.reopen) its `db` is the restored one and nothing staged remains.
   */
  table<V>(name: string, options?: DatabaseOptions): StagedTable<V>;
  /** A tag of its own for writes the caller will wait for (whenSettled). */
  ticket(): WriteTag;
  /** Resolves once every write carrying `tag` is durable or no longer needed. */
  whenSettled(tag: WriteTag): Promise<void>;
  /** Whether writes carrying `tag` are still staged. */
  pending(tag: WriteTag): boolean;
  /** Commits everything staged now, held writes too; resolves once it is on disk. */
  flush(): Promise<void>;
  /** Flushes, then stops scheduling (before the store closes). */
  close(): Promise<void>;
  stats(): StoragePolicyStats;
}

export interface StoragePolicyDeps {
  store: Pick<Store, 'isOpen' | 'flushed' | 'noteWriteFailure' | 'writeHealth' | 'openDatabase' | 'onReopen' | 'beforeSnapshot'>;
  timings: CommitTimings;
  log?: Logger;
  now?: () => number;
}

export function createStoragePolicy(deps: StoragePolicyDeps): StoragePolicy {
  const { store } = deps;
  const now = deps.now ?? Date.now;
  const ledger = new WriteLedger();
  const tables = new Map<string, { table: StagedTable<unknown>; options: DatabaseOptions }>();
  const stagedCount = () => {
    let n = 0;
    for (const { table } of tables.values()) n += table.size;
    return n;
  };
  const scheduler = new CommitScheduler({ store, timings: deps.timings, now, stagedCount });

  const host: TableHost = {
    ledger,
    now,
    delayOf: (cls: WriteClass) => scheduler.delayOf(cls),
    schedule: (write) => scheduler.schedule(write),
    tryWrite: () => {
      if (store.writeHealth().writable) return true;
      // Each failed commit is a risk of its own (lmdb-js corrupted its heap after a few dozen in a
      // row on a full disk, test/storage-faults.test.ts): while the store cannot write, nothing is tried.
      scheduler.figures.failedWrites++;
      return false;
    },
    assertOpen: () => {
      if (!store.isOpen()) throw new Error('the store is closed (a restore is replacing it)');
    },
    cancelled: () => void scheduler.figures.cancelledWrites++,
  };

  // A restore is about to swap the store: what is staged belongs to the data it replaces and is
  // written there first (the audit trail takes the replaced store's newer events over).
  // A backup copies what is staged too (the last seconds of retained values, audit events, Sparkplug history).
  store.beforeSnapshot(() => scheduler.flushAll());
  // Anything staged since (the swap's own moments) belongs to the replaced data too.
  store.onReopen(() => {
    scheduler.discardAll();
    for (const entry of tables.values()) {
      entry.table.discardAll();
      entry.table.db = store.openDatabase(entry.table.name, entry.options);
    }
    ledger.settleAll();
  });

  return {
    timings: deps.timings,
    table<V>(name: string, options: DatabaseOptions = {}) {
      const known = tables.get(name);
      if (known) return known.table as StagedTable<V>;
      const table = new StagedTable<V>(name, store.openDatabase<V, Key>(name, options), host, options.keyEncoding === 'binary');
      tables.set(name, { table: table as StagedTable<unknown>, options });
      return table;
    },
    ticket: () => ledger.ticket(),
    whenSettled: (tag) => ledger.whenSettled(tag),
    pending: (tag) => ledger.pending(tag),
    flush: () => scheduler.flushAll(),
    close: async () => {
      await scheduler.flushAll();
      scheduler.stop();
    },
    stats: () => ({ ...scheduler.figures, stagedWrites: stagedCount() }),
  };
}
