// The audit trail's part of the data format 2 migration (src/data-format/migrations.ts): releases
// before 1.0.0 wrote index keys by action, outcome and user only until the category and endpoint
// filters came (0.5.0), so `GET /api/audit?category=` missed every older record. Each record
// gets the index keys of today that it lacks: nothing is removed, a key present is not written
// again, so running it twice changes nothing.
import type { IndexKey, Store } from '../store/index.js';
import { indexKeysOf, type AuditRecord } from './audit-records.js';
import { AUDIT_DATABASE, AUDIT_INDEX_DATABASE } from './audit-store.js';

export interface AuditReindexCounts {
  /** Records read. */
  auditRecords: number;
  /** Index keys added. */
  auditIndexKeysAdded: number;
}

/** Opens the trail's databases (before the migration's transaction: an open is not a write of it). */
export function openAuditDatabases(store: Pick<Store, 'openDatabase'>) {
  return {
    records: store.openDatabase<AuditRecord, IndexKey>(AUDIT_DATABASE, { keyEncoding: 'ordered-binary' }),
    index: store.openDatabase<number, IndexKey>(AUDIT_INDEX_DATABASE, { keyEncoding: 'ordered-binary' }),
  };
}

/** Inside a write transaction: adds the index keys each record lacks. */
export function addMissingAuditIndexKeys(dbs: ReturnType<typeof openAuditDatabases>): AuditReindexCounts {
  let auditRecords = 0;
  let auditIndexKeysAdded = 0;
  for (const { value } of dbs.records.getRange()) {
    auditRecords++;
    for (const key of indexKeysOf(value)) {
      if (dbs.index.doesExist(key)) continue;
      void dbs.index.put(key, 1);
      auditIndexKeysAdded++;
    }
  }
  return { auditRecords, auditIndexKeysAdded };
}
