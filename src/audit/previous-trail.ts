// The trail of the store a restore replaced (`<data>/db.before-restore`), read so that a restore
// never erases history: the restored store brings the archive's trail, and the events since the
// backup are taken over from the store it replaced (docs/security.md "Audit trail").
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { open } from 'lmdb';
import { STORE_FILE, type IndexKey } from '../store/index.js';
import { keyOf, type AuditRecord } from './audit-records.js';

const CHUNK = 500;

/** Newest first, a chunk at a time (each chunk in its own read transaction); closes the store at the end. */
export function* readPreviousTrail(storeDir: string): Generator<AuditRecord> {
  const file = join(storeDir, STORE_FILE);
  if (!existsSync(file)) return;
  const root = open({ path: file, readOnly: true, maxDbs: 256 });
  try {
    // Named databases are keys of the main database; a store from before the trail has none.
    if ([...root.getKeys({ start: 'audit', end: 'audit\u0000' })].length === 0) return;
    const db = root.openDB<AuditRecord, IndexKey>({ name: 'audit', keyEncoding: 'ordered-binary' });
    let start: IndexKey | undefined;
    for (;;) {
      const chunk = [...db.getRange({ ...(start ? { start } : {}), reverse: true, limit: CHUNK + (start ? 1 : 0) })].map((e) => e.value);
      if (start) chunk.shift();
      if (chunk.length === 0) return;
      for (const r of chunk) yield r;
      start = keyOf(chunk[chunk.length - 1]!);
    }
  } finally {
    void root.close();
  }
}
