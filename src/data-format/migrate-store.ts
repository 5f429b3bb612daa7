// An older store brought to this build's data format in one transaction (docs/design.md §16):
// every step and the new format number commit together, or nothing does (a crash, a full disk).
import { DATA_FORMAT_VERSION, FORMAT_KEY, FORMAT_WRITTEN_BY_KEY, type Store } from '../store/index.js';
import { stepsFrom } from './migrations.js';

export interface MigrationReport {
  from: number;
  to: number;
  /** What each step did, named by its target format: counts for the log. */
  steps: { to: number; what: string; counts: Record<string, number> }[];
  ms: number;
}

/**
 * Migrates a store opened with `acceptOlderFormat` (store.openedFormat() older than this build's)
 * and records `writtenBy` as the format's writer. Nothing else may use the store before.
 */
export async function migrateStore(store: Store, writtenBy: string): Promise<MigrationReport> {
  const started = performance.now();
  const from = store.openedFormat();
  const steps = stepsFrom(from).map((step) => ({ step, run: step.prepare(store) }));
  const done = await store.transaction(() => {
    const results = steps.map(({ step, run }) => ({ to: step.to, what: step.what, counts: run() }));
    void store.meta.put(FORMAT_KEY, DATA_FORMAT_VERSION);
    void store.meta.put(FORMAT_WRITTEN_BY_KEY, writtenBy);
    return results;
  });
  return { from, to: DATA_FORMAT_VERSION, steps: done, ms: Math.round(performance.now() - started) };
}
