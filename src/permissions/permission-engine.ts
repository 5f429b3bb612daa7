import type { PermissionRecord, Store, UserRecord } from '../store/index.js';
import type { AccessEvents } from '../auth/access-events.js';
import { PermissionSet, type AccessOperation, type PermissionContext } from './permission-set.js';

/**
 * The path an HTTP request is routed by: without query string and without trailing slashes.
 * Express (non-strict routing) serves `/api/roles/x/` with the handler of `/api/roles/x`, so the
 * check must see `/api/roles/x` too: checked as is, `/api/roles/+/+` would match the extra empty
 * level and grant what only `/api/roles/+` should.
 */
export function canonicalHttpPath(path: string): string {
  const q = path.indexOf('?');
  let end = q === -1 ? path.length : q;
  while (end > 1 && path.charCodeAt(end - 1) === 47 /* / */) end--;
  return end === path.length ? path : path.slice(0, end);
}

/**
 * The one permission engine that REST and MQTT ask. A user's effective permissions (its
 * shared roles plus its private role) are compiled into an indexed PermissionSet once and
 * cached; a committed change to a user or a role drops the affected users' entries, so the
 * very next request or MQTT packet sees the change.
 */
export function createPermissionEngine(deps: { store: Store; events: AccessEvents; maxCachedUsers?: number }) {
  const { store, events } = deps;
  const maxCached = deps.maxCachedUsers ?? 10_000;
  const cache = new Map<string, PermissionSet>();
  const empty = new PermissionSet([]);
  /** For /metrics: decisions asked of the engine and how many were denials. */
  const counts = { decisions: 0, denials: 0 };

  events.on((change) => {
    cache.delete(change.userId);
  });
  // A restore replaces every record.
  store.onReopen(() => cache.clear());

  function roleIdsOf(user: UserRecord): string[] {
    return user.privateRoleId ? [...user.roleIds, user.privateRoleId] : user.roleIds;
  }

  function grantsOf(userId: string): PermissionRecord[] {
    const user = store.users.get(userId);
    if (!user) return [];
    const out: PermissionRecord[] = [];
    for (const roleId of roleIdsOf(user)) {
      const role = store.roles.get(roleId);
      // A loop, not push(...spread): spreading ~125k+ arguments overflows the stack.
      if (role) for (const p of role.permissions) out.push(p);
    }
    return out;
  }

  function setOf(userId: string): PermissionSet {
    let set = cache.get(userId);
    if (set) {
      // Refresh recency so the bound evicts the least recently used.
      cache.delete(userId);
      cache.set(userId, set);
      return set;
    }
    const grants = grantsOf(userId);
    set = grants.length ? new PermissionSet(grants) : empty;
    cache.set(userId, set);
    if (cache.size > maxCached) cache.delete(cache.keys().next().value as string);
    return set;
  }

  return {
    /** The caller's effective permissions, as stored (with ids). */
    grantsOf,
    setOf,
    allows(userId: string, context: PermissionContext, operation: AccessOperation, resource: string): boolean {
      const ok = setOf(userId).allows(context, operation, context === 'http' ? canonicalHttpPath(resource) : resource);
      counts.decisions++;
      if (!ok) counts.denials++;
      return ok;
    },
    coversFilter(userId: string, context: PermissionContext, operation: AccessOperation, filter: string): boolean {
      const ok = setOf(userId).coversFilter(context, operation, filter);
      counts.decisions++;
      if (!ok) counts.denials++;
      return ok;
    },
    decisionCounts: () => ({ ...counts }),
    /** Users holding a role (for invalidation and role pages). */
    membersOf(roleId: string): string[] {
      return [...store.roleMembers.getKeys({ start: [roleId], end: [roleId, '\uffff\uffff'] })].map((k) => String(k[1]));
    },
    notifyUsers(userIds: Iterable<string>): void {
      for (const userId of userIds) events.emit({ userId, kind: 'permissions' });
    },
    cachedUsers: () => cache.size,
  };
}
export type PermissionEngine = ReturnType<typeof createPermissionEngine>;
