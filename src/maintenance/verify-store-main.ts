// Child-process entry: opens an LMDB store file read-only and walks every database and
// every record, then prints one JSON line. It runs in its own process because the native
// LMDB code can crash the process (SIGSEGV) on a corrupt file; that must not take the
// daemon down. Usage: node verify-store-main.js <path/to/data.mdb>
import { open } from 'lmdb';

function report(result: Record<string, unknown>): void {
  process.stdout.write(JSON.stringify(result) + '\n');
}

function verify(file: string): Record<string, unknown> {
  const root = open({ path: file, readOnly: true, maxDbs: 256 });
  try {
    // Names of the named databases are the keys of the main database.
    const names = [...root.getKeys()];
    if (!names.every((n): n is string => typeof n === 'string')) return { ok: false, message: 'the main database holds keys that are not database names' };
    if (!names.includes('meta')) return { ok: false, message: 'the store has no meta database' };
    const schemaVersion = root.openDB({ name: 'meta' }).get('schemaVersion');
    let records = 0;
    for (const name of names) {
      // Raw keys and values: touches every page without depending on record encodings.
      const db = root.openDB({ name, keyEncoding: 'binary', encoding: 'binary' });
      for (const { value } of db.getRange()) {
        if (!Buffer.isBuffer(value)) return { ok: false, message: `database ${name} returned a non-binary value` };
        records++;
      }
    }
    return { ok: true, schemaVersion, databases: names.length, records };
  } finally {
    void root.close();
  }
}

const file = process.argv[2];
if (!file) {
  report({ ok: false, message: 'usage: verify-store-main.js <data.mdb>' });
  process.exitCode = 2;
} else {
  try {
    report(verify(file));
  } catch (err) {
    report({ ok: false, message: err instanceof Error ? err.message : String(err) });
  }
}
