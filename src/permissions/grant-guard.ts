// No one grants more than they hold (docs/design.md §13, Kubernetes RBAC's escalation rule): every
// call that gives a subject rights asks this guard first. A permission is held when ONE of
// the actor's effective permissions has the same context, an operation that includes it and a
// resource filter that covers the granted one (filter subsumption, PermissionSet.coversFilter);
// a role is held when all its permissions are. The administrator role is the root of
// delegation and is not limited (it is meant to hold everything the daemon guards, including
// what lies outside its filters, such as `$`-topics).
import { ForbiddenError } from '../errors/errors.js';
import type { Logger } from '../log/index.js';
import type { PermissionRecord, Store } from '../store/index.js';
import type { PermissionEngine } from './permission-engine.js';
import type { AccessOperation, PermissionContext, PermissionOperation } from './permission-set.js';

/** A signed-in user on whose behalf a change is made. Internal callers (bootstrap, LDAP and SSO sync) pass none. */
export interface Actor {
  userId: string;
  username: string;
}

export interface GrantedPermission {
  context: PermissionContext;
  operation: PermissionOperation;
  resource: string;
}

/** meta key of the administrator role's id (set at bootstrap; older stores by its name). */
export const ADMIN_ROLE_ID_KEY = 'adminRoleId';

export interface GrantGuard {
  /** Throws 403 naming the first permission the actor does not hold (audited); nothing for no actor. */
  assertHolds(actor: Actor | undefined, grants: Iterable<GrantedPermission>, action: string): void;
  /** The same for every permission of each role. Unknown role ids are left to the caller (404/400). */
  assertHoldsRoles(actor: Actor | undefined, roleIds: Iterable<string>, action: string): void;
  /**
   * Refuses (403) to act on the credentials or existence of a user who holds a permission the
   * actor does not: a user administrator cannot take over the administrator. Acting on oneself
   * is always allowed.
   */
  assertNotStronger(actor: Actor | undefined, targetUserId: string, action: string): void;
  /** True when the actor holds the permission (or is an administrator). */
  holds(actor: Actor, grant: GrantedPermission): boolean;
  /** True for the daemon itself (no actor) and for holders of the administrator role: nothing is checked. */
  unlimited(actor: Actor | undefined): boolean;
  /**
   * Refuses (403, audited) to change or give the administrator role unless the actor holds it:
   * holding it is more than holding its permissions (the guard does not limit its holders), and
   * narrowing it would lock the administrator out. Other roles pass.
   */
  assertMayTouchRole(actor: Actor | undefined, roleId: string, action: string): void;
}

const operationsOf = (op: PermissionOperation): AccessOperation[] => (op === 'readWrite' ? ['read', 'write'] : [op]);

export function createGrantGuard(deps: { store: Store; engine: PermissionEngine; log: Logger }): GrantGuard {
  const { store, engine, log } = deps;

  function isAdministrator(userId: string): boolean {
    const adminRoleId = store.meta.get(ADMIN_ROLE_ID_KEY) as string | undefined;
    if (!adminRoleId) return false;
    return store.users.get(userId)?.roleIds.includes(adminRoleId) ?? false;
  }

  function holdsGrant(userId: string, grant: GrantedPermission): boolean {
    return operationsOf(grant.operation).every((op) => engine.coversFilter(userId, grant.context, op, grant.resource));
  }

  function refuse(actor: Actor, missing: GrantedPermission, action: string): never {
    const named = `${missing.context} ${missing.operation} ${missing.resource}`;
    log.audit('grant refused', { userId: actor.userId, username: actor.username, action, missing: named });
    throw new ForbiddenError(`${action}: you do not hold the permission ${named} yourself`);
  }

  const guard: GrantGuard = {
    unlimited: (actor) => !actor || isAdministrator(actor.userId),
    holds(actor, grant) {
      return isAdministrator(actor.userId) || holdsGrant(actor.userId, grant);
    },
    assertHolds(actor, grants, action) {
      if (!actor || isAdministrator(actor.userId)) return;
      for (const g of grants) if (!holdsGrant(actor.userId, g)) refuse(actor, g, action);
    },
    assertMayTouchRole(actor, roleId, action) {
      if (!actor || roleId !== store.meta.get(ADMIN_ROLE_ID_KEY) || isAdministrator(actor.userId)) return;
      log.audit('grant refused', { userId: actor.userId, username: actor.username, action, missing: 'administrator' });
      throw new ForbiddenError(`${action}: only an administrator may give or change the administrator role`);
    },
    assertHoldsRoles(actor, roleIds, action) {
      if (!actor || isAdministrator(actor.userId)) return;
      for (const roleId of roleIds) {
        const role = store.roles.get(roleId);
        // The permission it lacks first (the more useful answer), then the administrator rule.
        if (role) guard.assertHolds(actor, role.permissions, `${action} (role ${role.name})`);
        guard.assertMayTouchRole(actor, roleId, action);
      }
    },
    assertNotStronger(actor, targetUserId, action) {
      if (!actor || actor.userId === targetUserId || isAdministrator(actor.userId)) return;
      const target: PermissionRecord[] = engine.grantsOf(targetUserId);
      if (isAdministrator(targetUserId)) {
        log.audit('grant refused', { userId: actor.userId, username: actor.username, action, target: targetUserId, missing: 'administrator' });
        throw new ForbiddenError(`${action}: the user is an administrator and you are not`);
      }
      for (const g of target) {
        if (!holdsGrant(actor.userId, g)) {
          const named = `${g.context} ${g.operation} ${g.resource}`;
          log.audit('grant refused', { userId: actor.userId, username: actor.username, action, target: targetUserId, missing: named });
          throw new ForbiddenError(`${action}: the user holds ${named}, which you do not`);
        }
      }
    },
  };
  return guard;
}
