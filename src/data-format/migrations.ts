// What each data format brings, and the step that brings an older store to it (docs/design.md §16).
// A step runs inside the one transaction of a migration (src/data-format/migrate-store.ts): its
// writes are synchronous, and it must be idempotent — a step run on a store it already changed
// changes nothing more — so a migration cut by a crash (nothing committed) or repeated is safe.
import { addMissingAuditIndexKeys, openAuditDatabases } from '../audit/audit-reindex.js';
import { DATA_FORMAT_VERSION, OLDEST_DATA_FORMAT, type Store } from '../store/index.js';

export interface MigrationStep {
  /** The format this step makes (from the one before it). */
  to: number;
  /** What changes, for the log and CHANGELOG.md. */
  what: string;
  /** Opens what the step needs, before the transaction (opening a named database writes it when it is new). */
  prepare(store: Store): () => Record<string, number>;
}

export const MIGRATIONS: readonly MigrationStep[] = [
  {
    to: 2,
    what: 'the audit trail indexes every record by category and endpoint (records of releases before 0.5.0 lacked them)',
    prepare: (store) => {
      const dbs = openAuditDatabases(store);
      return () => ({ ...addMissingAuditIndexKeys(dbs) });
    },
  },
];

/** The steps from `from` to this build's format, in order; throws when the list has a gap (a build error). */
export function stepsFrom(from: number): MigrationStep[] {
  const steps: MigrationStep[] = [];
  for (let to = Math.max(from, OLDEST_DATA_FORMAT) + 1; to <= DATA_FORMAT_VERSION; to++) {
    const step = MIGRATIONS.find((m) => m.to === to);
    if (!step) throw new Error(`no migration to data format ${to}`);
    steps.push(step);
  }
  return steps;
}
