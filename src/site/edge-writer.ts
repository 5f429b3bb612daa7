// How an edge writes identity changes: the site's records are read-only here (administered once,
// at the centrals); what an edge keeps of its own is written to its store only — the session
// tokens it issues to people signing in here, and its break-glass administrator. A change that
// would touch a record of the site is refused with 423 before anything is written.
import { AsyncLocalStorage } from 'node:async_hooks';
import type { Database } from 'lmdb';
import { LockedError } from '../errors/errors.js';
import type { IndexKey, Store } from '../store/index.js';
import { captureChanges } from './capture.js';
import { classifyChanges, siteWriter, type SiteIdentityWriter } from './central-writer.js';
import type { SiteReplica } from './replica.js';

export function createEdgeWriter(deps: { store: Store; replica: SiteReplica; docs: () => Database<Record<string, unknown>, IndexKey>; centrals: string[] }): SiteIdentityWriter {
  const { store, replica } = deps;
  const scope = new AsyncLocalStorage<'local'>();
  const where = deps.centrals.length ? ` (${deps.centrals.join(', ')})` : '';

  async function write<T>(fn: (docs: Database<Record<string, unknown>, IndexKey>) => T): Promise<T> {
    const inLocalScope = scope.getStore() === 'local';
    const { result, changes } = await captureChanges(store, deps.docs(), fn);
    const { site, local } = classifyChanges(changes, replica, 'local');
    // New users and roles are the site's to create; new tokens are this edge's own sessions.
    const refused = site.length > 0 || (!inLocalScope && local.some((c) => c.kind !== 'token' && !replica.current(c.kind, c.id)));
    if (refused) throw new LockedError(`users, roles and permissions are administered at the site's central gateways${where}; they are read-only on this edge`);
    if (local.length) await replica.applyLocal(local);
    return result;
  }

  return siteWriter(write, scope, replica);
}
