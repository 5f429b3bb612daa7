// An edge's break-glass administrator (docs/scaling-out.md "On an edge"): `local-admin`, with a role
// of its own holding what the site's `admin` role holds, kept on this edge only (never a record
// of the site, and the site refuses the name). It signs in whatever the link does — with
// `offline: denyAfter` too, when the site's users are refused. Its password comes as the first
// admin's does: auth.adminPassword, else a random one in <data>/initial-admin-password.
import { ADMIN_PERMISSIONS, generatePassword, givenAdminPassword, writeInitialPassword } from '../auth/bootstrap-admin.js';
import type { GatewayConfig } from '../config/index.js';
import type { Logger } from '../log/index.js';
import type { RoleService } from '../roles/role-service.js';
import type { IdentityWriter } from '../store/identity-writer.js';
import type { UserService } from '../users/user-service.js';
import { BREAK_GLASS_NAME } from './central-writer.js';

export async function bootstrapBreakGlass(deps: { users: UserService; roles: RoleService; identity: IdentityWriter; config: GatewayConfig; log: Logger }): Promise<void> {
  const { users, roles, identity, config, log } = deps;
  if (users.findByUsername(BREAK_GLASS_NAME) && roles.list({ name: BREAK_GLASS_NAME })[0]) return;
  const given = givenAdminPassword(config);
  await identity.local(async () => {
    const role = roles.list({ name: BREAK_GLASS_NAME })[0] ?? (await roles.create({ name: BREAK_GLASS_NAME, isShared: true, permissions: ADMIN_PERMISSIONS }));
    if (users.findByUsername(BREAK_GLASS_NAME)) return;
    const password = given || generatePassword(config.policy.password);
    if (!given) writeInitialPassword(config, log, password, BREAK_GLASS_NAME);
    await users.create({ username: BREAK_GLASS_NAME, password, identityProvider: 'local', roles: [role.id] }, { systemUser: true });
  });
}
