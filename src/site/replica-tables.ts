// The tables of a site's replica in the store (src/site/replica.ts): the site's records (users,
// roles and tokens in the store's own tables, edges and join tokens in `site-docs`), the hash of
// each site record (`site-records`: which records are the site's, and the digest's terms), and
// on centrals the rows applied (`site-log`, served to edges). Applying a change writes every
// previous version out and every new one in, with the indexes they feed, in the caller's
// transaction.
import type { Database } from 'lmdb';
import { prefixRange, type IndexKey, type RoleRecord, type Store, type TokenRecord, type UserRecord } from '../store/index.js';
import { putRoleIndexed, putTokenIndexed, putUserIndexed, removeRoleIndexed, removeTokenIndexed, removeUserIndexed } from '../store/identity-indexes.js';
import type { AppliedChange } from './change-events.js';
import { canonicalJson, moveDigest, plainDoc, recordHash, type RecordChange, type SiteKind } from './site-records.js';

export function createReplicaTables(store: Store) {
  let records!: Database<string, IndexKey>;
  let docs!: Database<Record<string, unknown>, IndexKey>;
  let rows!: Database<string, number>;
  const open = () => {
    records = store.openDatabase<string, IndexKey>('site-records', { keyEncoding: 'ordered-binary' });
    docs = store.openDatabase<Record<string, unknown>, IndexKey>('site-docs', { keyEncoding: 'ordered-binary' });
    rows = store.openDatabase<string, number>('site-log', { keyEncoding: 'ordered-binary' });
  };
  open();
  // A restore brings its own replica (older, maybe of another epoch): the follower catches up.
  store.onReopen(open);
  function current(kind: SiteKind, id: string): Record<string, unknown> | undefined {
    switch (kind) {
      case 'user':
        return store.users.get(id) as unknown as Record<string, unknown> | undefined;
      case 'role':
        return store.roles.get(id) as unknown as Record<string, unknown> | undefined;
      case 'token':
        return store.tokens.get(id) as unknown as Record<string, unknown> | undefined;
      default:
        return docs.get([kind, id]);
    }
  }

  /** Removes a record and every index it fed. */
  function remove(kind: SiteKind, id: string, prev: Record<string, unknown>): void {
    if (kind === 'user') removeUserIndexed(store, prev as unknown as UserRecord);
    else if (kind === 'role') removeRoleIndexed(store, prev as unknown as RoleRecord);
    else if (kind === 'token') removeTokenIndexed(store, (prev as unknown as TokenRecord).userId, id);
    else docs.remove([kind, id]);
  }

  /** Writes a record and every index it feeds (its previous version removed before). */
  function put(kind: SiteKind, id: string, next: Record<string, unknown>): void {
    if (kind === 'user') putUserIndexed(store, next as unknown as UserRecord);
    else if (kind === 'role') putRoleIndexed(store, next as unknown as RoleRecord);
    else if (kind === 'token') putTokenIndexed(store, next as unknown as TokenRecord);
    else docs.put([kind, id], next);
  }

  const membersOf = (roleId: string): string[] => [...store.roleMembers.getKeys(prefixRange(roleId))].map((k) => String(k[1]));

  /**
   * Applies changes to the records inside the caller's transaction. `site`: they are the site's
   * (their hashes move the digest); otherwise records of this gateway only. Returns what each
   * change did, and the digest after.
   */
  function applyInTxn(changes: RecordChange[], site: boolean, digest: string): { applied: AppliedChange[]; digest: string; before: Map<string, string[]>; after: Map<string, string[]> } {
    const applied: AppliedChange[] = [];
    const before = new Map<string, string[]>();
    for (const c of changes) if (c.kind === 'role') before.set(c.id, membersOf(c.id));
    const removed: string[] = [];
    const added: string[] = [];
    // Every previous version out first, then every new one in: a change that moves a unique
    // key (a username, a role name) from one record to another keeps the index right whatever
    // the order of its records.
    const prevs = changes.map((c) => current(c.kind, c.id));
    changes.forEach((c, i) => {
      const prev = prevs[i];
      if (prev) remove(c.kind, c.id, prev);
    });
    changes.forEach((c, i) => {
      const next = c.doc ? plainDoc(c.doc) : null;
      if (next) put(c.kind, c.id, next);
      if (site) {
        const old = records.get([c.kind, c.id]);
        if (old) removed.push(old);
        if (next) {
          const hash = recordHash(c.kind, c.id, canonicalJson(next));
          records.put([c.kind, c.id], hash);
          added.push(hash);
        } else records.remove([c.kind, c.id]);
      }
      applied.push({ kind: c.kind, id: c.id, prev: prevs[i], next });
    });
    const after = new Map<string, string[]>();
    for (const c of changes) if (c.kind === 'role') after.set(c.id, membersOf(c.id));
    return { applied, digest: site ? moveDigest(digest, removed, added) : digest, before, after };
  }

  return {
    records: () => records,
    docs: () => docs,
    rows: () => rows,
    current,
    applyInTxn,
  };
}
export type ReplicaTables = ReturnType<typeof createReplicaTables>;
