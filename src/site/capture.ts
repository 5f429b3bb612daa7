// What an identity change writes, learned before it is written: the services' function runs in
// a store transaction that is rolled back (store.dryRun), with the record tables watched. The
// records it put or removed are the change; the indexes it wrote are derived from them and are
// written again by whoever applies the change (src/store/identity-indexes.ts).
import type { Database, Key } from 'lmdb';
import type { IndexKey, Store } from '../store/index.js';
import type { RecordChange, SiteKind } from './site-records.js';

type Table = 'users' | 'roles' | 'tokens';
const TABLES: Record<Table, SiteKind> = { users: 'user', roles: 'role', tokens: 'token' };

export interface Captured<T> {
  result: T;
  /** In the order first touched; the last write of a record wins. */
  changes: RecordChange[];
}

function watched<K extends Key, V>(db: Database<V, K>, record: (key: K, doc: V | null) => void): Database<V, K> {
  return new Proxy(db, {
    get(target, prop) {
      if (prop === 'put') return (key: K, value: V, ...rest: unknown[]) => (record(key, value), (target.put as (...a: unknown[]) => unknown)(key, value, ...rest));
      if (prop === 'remove') return (key: K, ...rest: unknown[]) => (record(key, null), (target.remove as (...a: unknown[]) => unknown)(key, ...rest));
      if (prop === 'putSync' || prop === 'removeSync') throw new Error(`${String(prop)} inside an identity transaction`);
      const value = Reflect.get(target, prop, target) as unknown;
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}

/**
 * Runs `fn` as a dry run and answers its result with the records it changed. `docs`: the table
 * of the site's other documents (edges, join tokens), keyed [kind, id].
 */
export async function captureChanges<T>(store: Store, docs: Database<Record<string, unknown>, IndexKey>, fn: (docs: Database<Record<string, unknown>, IndexKey>) => T): Promise<Captured<T>> {
  const changes = new Map<string, RecordChange>();
  const note = (kind: SiteKind, id: string, doc: unknown) => {
    const key = `${kind}\0${id}`;
    changes.delete(key); // re-inserted: the order is the last write's
    changes.set(key, { kind, id, doc: doc === null ? null : (doc as Record<string, unknown>) });
  };
  const result = await store.dryRun(() => {
    const saved = { users: store.users, roles: store.roles, tokens: store.tokens };
    // Only for the synchronous run of fn: no other code runs meanwhile.
    for (const table of Object.keys(TABLES) as Table[]) {
      (store as unknown as Record<Table, Database<unknown, string>>)[table] = watched(saved[table] as Database<unknown, string>, (key, doc) => note(TABLES[table], key, doc));
    }
    const watchedDocs = watched(docs, (key, doc) => note(key[0] as SiteKind, String(key[1]), doc));
    try {
      return fn(watchedDocs);
    } finally {
      Object.assign(store, saved);
    }
  });
  return { result, changes: [...changes.values()] };
}
