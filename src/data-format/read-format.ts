// The data format of a store, read without writing to it (docs/design.md §16): LMDB opened
// read-only, its `meta` database read, closed again. A release refuses a newer format before it
// has opened the store for writing, so nothing of a newer release's data changes.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { open } from 'lmdb';
import { FORMAT_KEY, FORMAT_WRITTEN_BY_KEY, STORE_FILE } from '../store/index.js';

export interface FoundDataFormat {
  /** The stored format version (undefined: none yet; not a number: a store gatewayd did not make). */
  format: unknown;
  /** The gatewayd version that created the store or migrated it to its format (1.0.0 on). */
  writtenBy?: string;
}

/** The format of the store in `dbDir` (`<data>/db`), or undefined when there is no store yet. */
export function readDataFormat(dbDir: string): FoundDataFormat | undefined {
  const file = join(dbDir, STORE_FILE);
  if (!existsSync(file)) return undefined;
  const root = open({ path: file, readOnly: true, maxDbs: 32 });
  try {
    // Read-only, a database that is missing opens empty: a store without a format number reads as
    // undefined, which the store's opener treats as new (it writes its own).
    const meta = root.openDB<unknown, string>({ name: 'meta' });
    const writtenBy = meta.get(FORMAT_WRITTEN_BY_KEY);
    return { format: meta.get(FORMAT_KEY), ...(typeof writtenBy === 'string' ? { writtenBy } : {}) };
  } finally {
    void root.close();
  }
}
