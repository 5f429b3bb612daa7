// A digest of every record of every database of a gateway's store: what a refused request must
// leave unchanged (the REST and backup fuzz passes). `except` leaves records out that change on
// purpose (the maintenance status records a refused restore).
import { createHash } from 'node:crypto';
import type { TestGateway } from './harness.js';

export function storeDigest(gw: Pick<TestGateway, 'services'>, except: (db: string, key: unknown) => boolean = () => false): string {
  const hash = createHash('sha256');
  const store = gw.services.store as unknown as Record<string, { getRange?: () => Iterable<{ key: unknown; value: unknown }> }>;
  for (const name of Object.keys(store).sort()) {
    const db = store[name];
    if (!db || typeof db.getRange !== 'function') continue;
    hash.update(name);
    for (const { key, value } of db.getRange()) {
      if (except(name, key)) continue;
      hash.update(JSON.stringify([key, value]) ?? '');
    }
  }
  return hash.digest('hex');
}

/** Every record as text, by database and key: to name what changed when a digest did. */
export function storeRecords(gw: Pick<TestGateway, 'services'>): Map<string, string> {
  const out = new Map<string, string>();
  const store = gw.services.store as unknown as Record<string, { getRange?: () => Iterable<{ key: unknown; value: unknown }> }>;
  for (const name of Object.keys(store).sort()) {
    const db = store[name];
    if (!db || typeof db.getRange !== 'function') continue;
    for (const { key, value } of db.getRange()) out.set(`${name} ${JSON.stringify(key)}`, JSON.stringify(value) ?? '');
  }
  return out;
}

/** The records that differ between two storeRecords() views. */
export function changedRecords(before: Map<string, string>, after: Map<string, string>): string[] {
  const keys = new Set([...before.keys(), ...after.keys()]);
  return [...keys].filter((k) => before.get(k) !== after.get(k));
}
