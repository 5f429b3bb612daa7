// Password checks of every login path (REST login and Basic, MQTT, OPC UA, a cluster's hooks):
// the brute-force throttle around each, the local scrypt hash or an LDAP bind, and the cache of
// passwords verified moments ago, which also lets a reconnecting device be answered at once.
import type { GatewayConfig } from '../config/index.js';
import { UnauthorizedError } from '../errors/errors.js';
import type { LdapService } from '../ldap/index.js';
import type { Logger } from '../log/index.js';
import type { UserRecord } from '../store/index.js';
import type { UserService } from '../users/user-service.js';
import type { AccessEvents } from './access-events.js';
import type { Attempt } from './attempt-limiter.js';
import type { LoginThrottle } from './login-throttle.js';
import type { PasswordHasher } from './passwords.js';
import { createVerifiedPasswordCache } from './verified-password-cache.js';

/** One message for every failed login, so an answer never tells whether a username exists. */
const LOGIN_FAILED = 'invalid username or password';

export function createPasswordCheck(deps: {
  users: UserService;
  hasher: PasswordHasher;
  throttle: LoginThrottle;
  events: AccessEvents;
  config: GatewayConfig['auth'];
  log: Logger;
  /** LDAP single sign-on (docs/design.md §8): usernames not found locally, and `ldap` users. */
  ldap?: Pick<LdapService, 'enabled' | 'login'>;
  /** Whether the user may sign in now (a site's edge cut off past `denyAfter`, src/site). */
  admits?: (userId: string) => boolean;
}) {
  const { users, hasher, throttle, config, log } = deps;
  /** For /metrics: password checks by outcome (every path: REST, Basic, MQTT, OPC UA, LDAP). */
  const loginCounts = { succeeded: 0, failed: 0 };
  const verified = createVerifiedPasswordCache({ ttlMs: config.verifiedPasswordCacheSeconds * 1000, maxEntries: 10_000 });
  deps.events.on((change) => {
    if (change.kind !== 'permissions') verified.forget(change.userId);
  });

  /** Users without grant types may use any method. */
  const passwordAllowed = (user: UserRecord) => user.grantTypes.length === 0 || user.grantTypes.some((g) => g.method === 'password');

  /**
   * Checks a username and password with brute-force limits; throws 401 or 429. The attempt is
   * reserved before anything expensive runs, and an unknown username (or one without a
   * password) costs one scrypt of the current parameters like a wrong password does, so
   * neither the answer nor its time tells whether the username exists.
   */
  async function checkPassword(username: string, password: string, via: string, source?: string): Promise<UserRecord> {
    const attempt = await throttle.begin(username, source);
    try {
      const user = users.findByUsernameForAuth(username);
      if (user?.identityProvider === 'ldap' || (!user && deps.ldap?.enabled())) {
        const synced = await checkDirectoryPassword(username, password, via, user);
        if (!synced) return refuse(attempt, username, via, source, 'ldap');
        attempt.succeeded();
        loginCounts.succeeded++;
        return synced;
      }
      const allowed = !!user && passwordAllowed(user);
      const hash = allowed ? user.passwordHash : undefined;
      const cached = allowed && hash !== undefined && verified.has(user.id, hash, password);
      // The same password being checked against the same hash right now (devices of one user
      // reconnecting at once): its derivation answers this one too when it says yes. A no is
      // not taken over: a wrong password costs its own derivation, as it always did.
      const shared = !cached && allowed && hash !== undefined ? verified.underWay(user.id, hash, password) : undefined;
      const sharedYes = shared !== undefined && (await shared.catch(() => false));
      let ok = cached || sharedYes;
      if (!ok) {
        // verify(undefined) derives a dummy hash: the same cost as a wrong password.
        const outcome = hasher.verify(hash, password);
        if (allowed && hash !== undefined) verified.track(user.id, hash, password, outcome);
        ok = (await outcome) && allowed;
      }
      if (!ok || !user || (deps.admits && !deps.admits(user.id))) return refuse(attempt, username, via, source);
      attempt.succeeded();
      loginCounts.succeeded++;
      // A cache hit renewed its entry itself; a shared derivation's owner remembers it.
      if (!cached && !sharedYes) {
        verified.remember(user.id, hash, password);
        if (hash !== undefined && hasher.needsRehash?.(hash)) upgradeHash(user, hash, password);
      }
      return user;
    } finally {
      // Thrown before an outcome (a directory that is down, a store error): not a failed guess.
      attempt.release();
    }
  }

  /**
   * checkPassword's answer without waiting, for a local password verified moments ago (the
   * cache) when no limit makes the attempt wait: the user, counted as a success. Undefined:
   * ask checkPassword (nothing was counted). 429 as checkPassword.
   */
  function checkPasswordAtOnce(username: string, password: string, source?: string): UserRecord | undefined {
    const attempt = throttle.tryBegin(username, source);
    if (!attempt) return undefined;
    try {
      const user = users.findByUsernameForAuth(username);
      if (!user || user.identityProvider === 'ldap' || !passwordAllowed(user) || !verified.has(user.id, user.passwordHash, password)) return undefined;
      if (deps.admits && !deps.admits(user.id)) return undefined;
      attempt.succeeded();
      loginCounts.succeeded++;
      return user;
    } finally {
      attempt.release(); // after succeeded(): nothing
    }
  }

  /** Users whose hash is being re-derived at the current cost (one derivation each at a time). */
  const upgrading = new Set<string>();

  /**
   * A password verified against a hash of another cost (auth.passwordHashCost changed) is stored
   * again at the current one, after the answer: a cost lowered for a fleet's CPU (or raised)
   * reaches every existing password at its next login, not only at its next change.
   */
  function upgradeHash(user: UserRecord, verifiedHash: string, password: string): void {
    if (upgrading.has(user.id)) return;
    upgrading.add(user.id);
    users
      .rehashPassword(user.id, verifiedHash, password)
      .then((passwordHash) => {
        if (passwordHash === undefined) return;
        // The next connect is answered from the cache, not by a derivation at the new cost.
        verified.remember(user.id, passwordHash, password);
        log.info('password hash upgraded to the configured cost', { userId: user.id, username: user.username });
      })
      .catch((err: Error) => log.warn('password hash upgrade failed', { userId: user.id, username: user.username, error: err.message }))
      .finally(() => upgrading.delete(user.id));
  }

  function refuse(attempt: Attempt, username: string, via: string, source: string | undefined, identityProvider?: 'ldap'): never {
    attempt.failed();
    loginCounts.failed++;
    log.audit('login failed', { username, via, ...(source ? { source } : {}), ...(identityProvider ? { identityProvider } : {}) });
    throw new UnauthorizedError(LOGIN_FAILED);
  }

  /**
   * An LDAP bind instead of the local hash, for `ldap` users and (LDAP enabled) unknown
   * usernames; never for `local` users. Not cached: a cached check could not notice a
   * password changed in the directory. Same throttle and same answer as a local failure.
   */
  async function checkDirectoryPassword(username: string, password: string, via: string, user: UserRecord | undefined): Promise<UserRecord | undefined> {
    if ((!user || passwordAllowed(user)) && deps.ldap?.enabled()) return deps.ldap.login(username, password, via);
    await hasher.verify(undefined, password); // as long as an unknown username takes
    return undefined;
  }

  return {
    checkPassword,
    checkPasswordAtOnce,
    /** For /metrics: password checks by outcome. */
    loginCounts: () => ({ ...loginCounts }),
  };
}
