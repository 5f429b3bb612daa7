// Acknowledged writes the commit journal holds and LMDB does not (the process ended between a
// frame and its compaction) go into LMDB with the journal's marker, in one transaction. At every
// start: when the storage policy opens (storage-policy.ts), and before that, when a data-format
// upgrade copies and migrates the store (maintenance/data-upgrade.ts): a frame holds records in the
// format of the release that wrote it, so it must reach the store before the copy and the
// migration, never after them.
import type { Database, DatabaseOptions, Key } from 'lmdb';
import type { Logger } from '../log/index.js';
import type { Store } from '../store/index.js';
import { openCommitJournal, type CommitJournal, type JournalRecord } from './commit-journal.js';

/** The database holding the journal's marker: which generation LMDB already holds. */
export const MARKER_DB = 'storage-journal';
export const MARKER_KEY = 'marker';

export interface JournalMarker {
  epoch: number;
  /** Every frame of this generation and earlier is in LMDB. */
  generation: number;
}

type MarkedStore = Pick<Store, 'openDatabase'>;

/**
 * Replays the journal's last generation when the store's marker says LMDB lacks it (same epoch, a
 * later generation). Returns the marker as it is afterwards, undefined when the store has none
 * (a store no journal ever wrote to: nothing of the file can be its).
 */
export function replayCommitJournal(store: MarkedStore, file: CommitJournal, log?: Logger): JournalMarker | undefined {
  const markers = store.openDatabase<JournalMarker, string>(MARKER_DB);
  const marker = markers.get(MARKER_KEY);
  if (!marker) return undefined;
  const last = file.readLast();
  if (!last || last.epoch !== marker.epoch || last.generation <= marker.generation) return marker;
  const dbs = new Map<string, Database>();
  const db = (r: JournalRecord) => {
    let d = dbs.get(r.table);
    if (!d) dbs.set(r.table, (d = store.openDatabase(r.table, r.options as DatabaseOptions)));
    return d;
  };
  const replayed = { epoch: marker.epoch, generation: last.generation };
  markers.transactionSync(() => {
    for (const r of last.records) {
      if (r.removed) db(r).removeSync(r.key as Key);
      else db(r).putSync(r.key as Key, r.value);
    }
    markers.putSync(MARKER_KEY, replayed);
  });
  log?.info('storage: the commit journal was replayed into the store', { frames: last.frames, writes: last.records.length });
  return replayed;
}

/** Replays the journal in the store's directory, if there is one, and closes it again (the data-format upgrade). */
export function replayCommitJournalIn(store: MarkedStore & Pick<Store, 'dir'>, log?: Logger): void {
  const file = openCommitJournal({ dir: store.dir });
  try {
    replayCommitJournal(store, file, log);
  } finally {
    file.close();
  }
}
