import { randomInt } from 'node:crypto';
import { join } from 'node:path';
import type { GatewayConfig } from '../config/index.js';
import { ConfigError } from '../config/index.js';
import { AppError } from '../errors/errors.js';
import type { Logger } from '../log/index.js';
import { permissionKey, type PermissionInput, type RoleService } from '../roles/role-service.js';
import { ADMIN_ROLE_ID_KEY } from '../permissions/grant-guard.js';
import type { Store } from '../store/index.js';
import { writeFileAtomic } from '../store/write-file-atomic.js';
import type { UserService } from '../users/user-service.js';
import { checkPasswordPolicy } from './policy.js';

export const INITIAL_ADMIN_PASSWORD_FILE = 'initial-admin-password';
export const ADMIN_ROLE_NAME = 'admin';

/**
 * What the administrator role holds: everything the daemon guards. `#` does not match
 * `$`-topics and `/api/#` not /metrics, so these are granted by name.
 */
export const ADMIN_PERMISSIONS: PermissionInput[] = [
  { resource: '/api/#', operation: 'readWrite', context: 'http' },
  { resource: '#', operation: 'readWrite', context: 'mqtt' },
  { resource: '$SYS/#', operation: 'read', context: 'mqtt' },
  { resource: '/metrics', operation: 'read', context: 'http' },
];

const alphabets = {
  lower: 'abcdefghijkmnopqrstuvwxyz',
  upper: 'ABCDEFGHJKLMNPQRSTUVWXYZ',
  numeric: '23456789',
  symbol: '-_.!@#%+=',
};

/** A random password that satisfies the policy (at least 20 characters, every class present). */
export function generatePassword(policy: GatewayConfig['policy']['password']): string {
  const chars: string[] = [];
  const pick = (set: string) => set[randomInt(set.length)]!;
  for (const cls of ['lower', 'upper', 'numeric', 'symbol'] as const) {
    for (let i = 0; i < Math.max(policy[cls], 2); i++) chars.push(pick(alphabets[cls]));
  }
  const all = alphabets.lower + alphabets.upper + alphabets.numeric;
  while (chars.length < Math.max(policy.min, 20)) chars.push(pick(all));
  for (let i = chars.length - 1; i > 0; i--) {
    const j = randomInt(i + 1);
    [chars[i], chars[j]] = [chars[j]!, chars[i]!];
  }
  return chars.join('');
}

/** auth.adminPassword, checked against the password policy (a ConfigError naming the key); '' when unset. */
export function givenAdminPassword(config: GatewayConfig): string {
  const given = config.auth.adminPassword;
  if (given) {
    try {
      checkPasswordPolicy(config.policy.password, given);
    } catch (err) {
      throw new ConfigError('auth.adminPassword', err instanceof AppError ? err.message : String(err));
    }
  }
  return given;
}

/** A random first password, in <data>/initial-admin-password (0600): the log names the file only. */
export function writeInitialPassword(config: GatewayConfig, log: Logger, password: string, username = 'admin'): void {
  const file = join(config.dataDir, INITIAL_ADMIN_PASSWORD_FILE);
  writeFileAtomic(file, password + '\n', 0o600);
  log.info('initial admin password written', { file, ...(username !== 'admin' ? { username } : {}) });
}

/**
 * First start: role `admin` (http /api/# and mqtt # readWrite) and user `admin`. The password
 * is GATEWAYD_ADMIN_PASSWORD (auth.adminPassword) when set, else random and written to
 * <data>/initial-admin-password (0600) — named in the log, never printed.
 */
export async function bootstrapAdmin(deps: {
  store: Store;
  users: UserService;
  roles: RoleService;
  config: GatewayConfig;
  log: Logger;
}): Promise<void> {
  const { store, users, roles, config, log } = deps;
  if (store.meta.get('bootstrapped')) {
    await migrateAdminRole({ store, roles });
    return;
  }
  const given = givenAdminPassword(config);
  const password = given || generatePassword(config.policy.password);
  const existing = roles.list({ name: ADMIN_ROLE_NAME })[0];
  const role =
    existing ??
    (await roles.create({
      name: ADMIN_ROLE_NAME,
      isShared: true,
      permissions: ADMIN_PERMISSIONS,
    }));
  if (!users.findByUsername('admin')) {
    if (!given) writeInitialPassword(config, log, password);
    await users.create({ username: 'admin', password, identityProvider: 'local', roles: [role.id] }, { systemUser: true });
  }
  await store.meta.put(ADMIN_ROLE_ID_KEY, role.id);
  await store.meta.put('bootstrapped', true);
}

/**
 * Stores bootstrapped before grants were checked (and their backups) know the administrator
 * role only by its name: record its id, which a later rename cannot move to another role.
 */
export async function rememberAdminRole(store: Store): Promise<void> {
  if (store.meta.get(ADMIN_ROLE_ID_KEY)) return;
  const id = store.roleNames.get(ADMIN_ROLE_NAME) as string | undefined;
  if (id) await store.meta.put(ADMIN_ROLE_ID_KEY, id);
}

/**
 * Brings the administrator role of an older store (or a restored backup) up to what it holds
 * today: its id recorded, and every permission of ADMIN_PERMISSIONS it lacks added.
 */
export async function migrateAdminRole(deps: { store: Store; roles: RoleService }): Promise<void> {
  const { store, roles } = deps;
  await rememberAdminRole(store);
  const id = store.meta.get(ADMIN_ROLE_ID_KEY) as string | undefined;
  const role = id ? store.roles.get(id) : undefined;
  if (!role) return;
  const held = new Set(role.permissions.map(permissionKey));
  for (const p of ADMIN_PERMISSIONS) if (!held.has(permissionKey(p))) await roles.addPermission(role.id, p);
}
