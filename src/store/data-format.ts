// The data directory's format version (docs/design.md §16): one number, kept in the store's
// `meta` database under the key older releases already read as the store schema version, so a
// release before 1.0.0 refuses a newer store by its own check. No native module here: the
// entry's `--version` and the refusal message read these without loading LMDB.

/**
 * The format this build writes and reads. Bumped when what the store holds changes so that an
 * older release must not open it; each bump comes with a migration (src/data-format/migrations.ts).
 * 1: every release before 1.0.0. 2: 1.0.0 (the audit trail's index complete for every record).
 */
export const DATA_FORMAT_VERSION = 2;
/** The oldest format this build migrates. */
export const OLDEST_DATA_FORMAT = 1;
/** meta key of the format version (the name the store schema version had before 1.0.0). */
export const FORMAT_KEY = 'schemaVersion';
/** meta key of the gatewayd version that created the store or migrated it to its format (absent before 1.0.0). */
export const FORMAT_WRITTEN_BY_KEY = 'formatWrittenBy';

/** The store holds a format this build does not open as it is: newer (refused) or older (migrate first). */
export class DataFormatError extends Error {
  readonly found: number;
  constructor(found: number, message: string) {
    super(message);
    this.name = 'DataFormatError';
    this.found = found;
  }
}
