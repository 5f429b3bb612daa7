// How a central writes identity changes (docs/design.md §17): the services' function runs as a
// dry run against the replica, which under the site's lock in PostgreSQL is checked to be the
// site's latest revision (else it catches up and the dry run is made again), so the services'
// checks decide on exactly what the site holds; the records it changed become the next revision
// in the same PostgreSQL transaction; once committed, the replica applies that row like any
// other. When PostgreSQL cannot be written, changes of the
// site answer 503 with Retry-After, and only this gateway's own records (session tokens issued
// meanwhile) can change.
import { AsyncLocalStorage } from 'node:async_hooks';
import type { Database } from 'lmdb';
import { ConflictError } from '../errors/errors.js';
import type { IdentityWriter } from '../store/identity-writer.js';
import type { IndexKey, Store } from '../store/index.js';
import { captureChanges } from './capture.js';
import type { CentralSync } from './central-sync.js';
import type { PgAuthority } from './pg-authority.js';
import { AuthorityUnavailableError } from './pg-connection.js';
import { ReplicaRefusal, type SiteReplica } from './replica.js';
import { canonicalJson, type LogRow, type RecordChange } from './site-records.js';

/** The edges' break-glass administrator and its role: never a record of the site. */
export const BREAK_GLASS_NAME = 'local-admin';

/** What a site's writer offers besides the services' transactions: its other documents. */
export interface SiteIdentityWriter extends IdentityWriter {
  /** A transaction that also writes the site's edge and join-token documents. */
  transactionWithDocs<T>(fn: (docs: Database<Record<string, unknown>, IndexKey>) => T): Promise<T>;
}

/** Splits captured changes into the site's and this gateway's own; drops writes that change nothing. */
export function classifyChanges(changes: RecordChange[], replica: SiteReplica, newRecordsAre: 'site' | 'local'): { site: RecordChange[]; local: RecordChange[] } {
  const site: RecordChange[] = [];
  const local: RecordChange[] = [];
  for (const c of changes) {
    const prev = replica.current(c.kind, c.id);
    if (!prev && !c.doc) continue;
    if (prev && c.doc && canonicalJson(prev) === canonicalJson(c.doc)) continue;
    if (replica.isSiteRecord(c.kind, c.id)) site.push(c);
    else if (prev) local.push(c);
    else (newRecordsAre === 'site' ? site : local).push(c);
  }
  return { site, local };
}

/** The writer of a site's gateway, from how it writes a change. */
export function siteWriter(write: <T>(fn: (docs: Database<Record<string, unknown>, IndexKey>) => T) => Promise<T>, scope: AsyncLocalStorage<'local'>, replica: SiteReplica): SiteIdentityWriter {
  return {
    transaction: (fn) => write(() => fn()),
    transactionWithDocs: (fn) => write(fn),
    local: (body) => scope.run('local', body),
    isSiteRecord: (kind, id) => replica.isSiteRecord(kind, id),
  };
}

function refuseReservedNames(changes: RecordChange[]): void {
  for (const c of changes) {
    if (!c.doc) continue;
    if ((c.kind === 'user' && c.doc.username === BREAK_GLASS_NAME) || (c.kind === 'role' && c.doc.name === BREAK_GLASS_NAME)) {
      throw new ConflictError(`"${BREAK_GLASS_NAME}" is reserved for the break-glass administrator of each edge gateway`);
    }
  }
}

export function createCentralWriter(deps: { store: Store; replica: SiteReplica; authority: PgAuthority; sync: CentralSync; docs: () => Database<Record<string, unknown>, IndexKey> }): SiteIdentityWriter {
  const { store, replica, authority, sync } = deps;
  const scope = new AsyncLocalStorage<'local'>();

  async function write<T>(fn: (docs: Database<Record<string, unknown>, IndexKey>) => T): Promise<T> {
    const newRecordsAre = scope.getStore() === 'local' ? 'local' : 'site';
    const localOnly = async (): Promise<T> => {
      const { result, changes } = await captureChanges(store, deps.docs(), fn);
      const { site, local } = classifyChanges(changes, replica, newRecordsAre);
      if (site.length) throw new AuthorityUnavailableError('the site\'s authority (PostgreSQL) cannot be written now; the change waits: try again shortly');
      if (local.length) await replica.applyLocal(local);
      return result;
    };
    if (newRecordsAre === 'local') return localOnly();
    try {
      return await sync.exclusive(async () => {
        // The dry run first, outside the site's lock: when no other central wrote meanwhile
        // (the common case), it is what the change does, and the lock is held only for
        // PostgreSQL's part. Otherwise the replica catches up and the dry run is made again.
        const at = replica.state();
        // Speculative: a refusal here may come from a replica a change behind, so it is decided
        // again under the lock (where the same function throws again if it must).
        let captured = await captureChanges(store, deps.docs(), fn).catch(() => undefined);
        let committed: { row: LogRow; epoch: string } | undefined;
        let local: RecordChange[] = [];
        const result = await authority.withWriteLock(async (session) => {
          const head = await session.head();
          if (!captured || !at || at.epoch !== head.epoch || at.rev !== head.rev || at.digest !== head.digest) {
            await sync.catchUp(session);
            captured = await captureChanges(store, deps.docs(), fn);
          }
          const parts = classifyChanges(captured.changes, replica, 'site');
          local = parts.local;
          if (parts.site.length) {
            refuseReservedNames(parts.site);
            committed = { row: await session.append(parts.site, await session.head()), epoch: session.epoch };
          }
          return captured.result;
        });
        sync.noteContact();
        if (committed) {
          try {
            await replica.applyRow(committed.row, committed.epoch, { local });
          } catch (err) {
            // Committed at the site: the follower brings the replica there from PostgreSQL.
            if (!(err instanceof ReplicaRefusal)) throw err;
            sync.poke();
            if (local.length) await replica.applyLocal(local);
          }
        } else if (local.length) await replica.applyLocal(local);
        return result;
      });
    } catch (err) {
      if (err instanceof AuthorityUnavailableError) return localOnly();
      throw err;
    }
  }

  return siteWriter(write, scope, replica);
}
