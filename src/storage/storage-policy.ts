// The storage policy (docs/design.md §15, docs/footprint.md "Flash"): one place decides when anything the
// daemon keeps in its LMDB environment touches the flash. Memory first: a write is staged and
// reaches the disk only when its class says it must (staged-table.ts), in group commits
// (commit-scheduler.ts): journal frames for what someone waits for (commit-journal.ts), LMDB
// commits for the rest and to compact the journal, as the wear budget allows (wear-budget.ts). An
// acknowledgement still means what it meant: whoever waits for a write (write-ledger.ts) is
// answered once it is durable, or once the recipient that needed it has it.
import { randomInt } from 'node:crypto';
import type { DatabaseOptions, Key } from 'lmdb';
import type { Logger } from '../log/index.js';
import type { Store } from '../store/index.js';
import { CommitScheduler, type CommitFigures, type CommitTimings, type JournalPort } from './commit-scheduler.js';
import { JOURNAL_BYTES, openCommitJournal, type CommitJournal, type JournalRecord } from './commit-journal.js';
import { MARKER_DB, MARKER_KEY, replayCommitJournal, type JournalMarker } from './journal-replay.js';
import { REMOVED, StagedTable, type StagedWrite, type TableHost, type WriteClass } from './staged-table.js';
import { WEAR_DEFAULTS } from './storage-defaults.js';
import { createWearBudget, type WearBudgetSpec, type WearBudgetState } from './wear-budget.js';
import { WriteLedger, type WriteTag } from './write-ledger.js';

export interface StoragePolicyStats extends CommitFigures {
  /** Writes staged in memory now (journaled ones included: LMDB does not have them yet). */
  stagedWrites: number;
  /** The wear budget now. */
  budget: WearBudgetState;
  /** The commit journal (null: durable commits are LMDB commits). */
  journal: { bytes: number; direct: boolean } | null;
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
  /** Commits everything staged now, held writes too, into LMDB; resolves once it is on disk. */
  flush(): Promise<void>;
  /** Flushes, then stops scheduling (before the store closes). */
  close(): Promise<void>;
  stats(): StoragePolicyStats;
}

export interface StoragePolicyDeps {
  store: Pick<Store, 'dir' | 'isOpen' | 'flushed' | 'noteWriteFailure' | 'writeHealth' | 'onWriteHealthChange' | 'openDatabase' | 'onReopen' | 'beforeSnapshot'>;
  timings: CommitTimings;
  /** The wear budget (storage.flash; default WEAR_DEFAULTS). burstBytes 0: every durable commit waits for the interval. */
  wear?: WearBudgetSpec;
  /** The process's write_bytes, for the budget (the daemon's: /proc/self/io); default: only journal frames are counted. */
  readWrittenBytes?: () => number | undefined;
  /** Durable commits as journal frames in the store's directory (the daemon); default: LMDB commits. */
  journal?: boolean;
  log?: Logger;
  now?: () => number;
}

export function createStoragePolicy(deps: StoragePolicyDeps): StoragePolicy {
  const { store, log } = deps;
  const now = deps.now ?? Date.now;
  const tables = new Map<string, { table: StagedTable<unknown>; options: DatabaseOptions }>();
  const stagedCount = () => {
    let n = 0;
    for (const { table } of tables.values()) n += table.size;
    return n;
  };
  let journal: { file: CommitJournal; port: JournalPort } | undefined;

  /** Opens the journal, replays what LMDB does not hold yet, and starts a new generation. */
  function startJournal(): void {
    let file: CommitJournal;
    try {
      file = openCommitJournal({ dir: store.dir });
    } catch (error) {
      // A read-only or full file system: durable commits are LMDB commits, as without a journal.
      log?.warn('storage: the commit journal cannot be created; acknowledgements wait for LMDB commits', { error });
      return;
    }
    const markers = store.openDatabase<JournalMarker, string>(MARKER_DB);
    let marker = replayCommitJournal(store, file, log);
    if (!marker) markers.putSync(MARKER_KEY, (marker = { epoch: randomInt(1, 2 ** 32 - 1), generation: 0 }));
    const { epoch, generation } = marker;
    file.begin(epoch, generation + 1);
    const port: JournalPort = {
      size: JOURNAL_BYTES,
      encode: (writes) => file.encode(writes.map(toRecord)),
      frameBytes: (payload) => file.frameBytes(payload),
      free: () => file.free(),
      append: (payload) => file.append(payload),
      frames: () => file.frames,
      markCompacted: () => markers.put(MARKER_KEY, { epoch, generation: file.generation }),
      compacted: () => file.begin(epoch, file.generation + 1),
    };
    journal = { file, port };
  }
  if (deps.journal) startJournal();
  // After the journal: its making on a first start (written in full once) is start-up, not the running gateway's wear.
  const budget = createWearBudget({ spec: deps.wear ?? WEAR_DEFAULTS, readWrittenBytes: deps.readWrittenBytes ?? (() => undefined), now, log });
  const scheduler = new CommitScheduler({ store, timings: deps.timings, now, stagedCount, budget, journal: () => journal?.port, writable: () => store.writeHealth().writable });
  store.onWriteHealthChange((health) => {
    if (health.writable) scheduler.writableAgain();
  });
  const ledger = new WriteLedger((lazy) => {
    for (const w of (lazy ?? []) as StagedWrite[]) w.table.awaited(w as never);
    scheduler.awaited();
  });

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
    // The journal went with the replaced store's directory: the restored one gets its own.
    if (journal) {
      journal.file.close();
      journal = undefined;
      startJournal();
    }
  });

  return {
    timings: deps.timings,
    table<V>(name: string, options: DatabaseOptions = {}) {
      const known = tables.get(name);
      if (known) return known.table as StagedTable<V>;
      const encoding = { keyEncoding: options.keyEncoding, encoding: options.encoding };
      const table = new StagedTable<V>(name, store.openDatabase<V, Key>(name, options), host, options.keyEncoding === 'binary', encoding);
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
      budget.stop();
      journal?.file.close();
      journal = undefined;
    },
    stats: () => ({
      ...scheduler.figures,
      stagedWrites: stagedCount(),
      budget: budget.state(),
      journal: journal ? { bytes: JOURNAL_BYTES, direct: journal.file.direct } : null,
    }),
  };
}

function toRecord(w: StagedWrite): JournalRecord {
  const removed = w.value === REMOVED;
  return { table: w.table.name, options: w.table.encoding, key: w.key, removed, value: removed ? undefined : w.value };
}
