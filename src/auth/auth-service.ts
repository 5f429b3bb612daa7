import { timingSafeEqual } from 'node:crypto';
import type { GatewayConfig } from '../config/index.js';
import { BadRequestError, ForbiddenError, UnauthorizedError } from '../errors/errors.js';
import type { Logger } from '../log/index.js';
import type { PermissionEngine } from '../permissions/permission-engine.js';
import type { PermissionRecord, TokenRecord, UserRecord } from '../store/index.js';
import type { UserService } from '../users/user-service.js';
import type { MfaChallenges } from '../mfa/mfa-challenges.js';
import type { LoginThrottle } from './login-throttle.js';
import type { PasswordHasher } from './passwords.js';
import { looksLikeToken, tokenFingerprint, type TokenService } from './token-service.js';
import type { AccessEvents } from './access-events.js';
import { createPasswordCheck } from './password-check.js';
import type { LdapService } from '../ldap/index.js';

/** Who is calling, once a credential checked out. */
export interface Principal {
  userId: string;
  username: string;
  method: 'token' | 'basic';
  /** Set for token credentials. */
  token?: TokenRecord;
}

export interface LoginInput {
  username: string;
  password: string;
  expireTimeInHours?: number;
  label?: string;
}

/** Answer of POST /api/login: a token, or (MFA enrolled) `needsMfa: true` and a challenge `secret`. */
export interface LoginResult {
  token?: string;
  expiresAt?: string;
  permissions?: PermissionRecord[];
  needsMfa: boolean;
  secret?: string;
  enforceMFAEnrollment: boolean;
}

/** A secret that checked out: the user and how. */
export interface SecretCheck {
  user: UserRecord;
  method: 'token' | 'password';
  tokenFingerprint?: string;
}

export function createAuthService(deps: {
  users: UserService;
  tokens: TokenService;
  hasher: PasswordHasher;
  throttle: LoginThrottle;
  engine: PermissionEngine;
  events: AccessEvents;
  config: GatewayConfig['auth'];
  log: Logger;
  /** Challenges for the second login step of users enrolled in MFA. */
  mfaChallenges: MfaChallenges;
  /** LDAP single sign-on (docs/design.md §8): usernames not found locally, and `ldap` users. */
  ldap?: Pick<LdapService, 'enabled' | 'login'>;
  /** Whether the user may sign in now (a site's edge cut off past `denyAfter`, src/site). */
  admits?: (userId: string) => boolean;
}) {
  const { users, tokens, hasher, throttle, engine, config, log } = deps;
  const { checkPassword, checkPasswordAtOnce, loginCounts } = createPasswordCheck({ users, hasher, throttle, events: deps.events, config, log, ...(deps.ldap ? { ldap: deps.ldap } : {}), ...(deps.admits ? { admits: deps.admits } : {}) });
  const admits = deps.admits ?? (() => true);

  function lifetime(hours: number | undefined): number {
    if (hours === undefined) return config.tokenLifetimeHours;
    if (hours > config.maxTokenLifetimeHours) {
      throw new BadRequestError(`expireTimeInHours must not exceed ${config.maxTokenLifetimeHours}`);
    }
    return hours;
  }

  /** Issues the session token of a login that passed every factor it needs. */
  async function issueSession(user: UserRecord, options: { lifetimeHours: number; label?: string; via: 'password' | 'mfa' }) {
    const mustEnroll = user.enforceMFAEnrollment && !user.mfa.enrolled;
    const { token, record } = await tokens.issue(user.id, {
      lifetimeHours: options.lifetimeHours,
      scope: mustEnroll ? 'mfa-enrollment' : 'full',
      ...(options.label !== undefined ? { label: options.label } : {}),
    });
    log.audit('login', { userId: user.id, username: user.username, tokenFingerprint: record.fingerprint.slice(0, 12), scope: record.scope, via: options.via });
    return {
      token,
      expiresAt: record.expiresAt,
      permissions: engine.grantsOf(user.id),
      needsMfa: false,
      enforceMFAEnrollment: mustEnroll,
    };
  }

  /**
   * A username with a secret that is either a session token (one hash lookup, no scrypt) or
   * the password, for protocols that have only a username/password field (MQTT, OPC UA).
   * A password alone is refused (403) for users who need MFA; a token from the MFA login is
   * not. Unknown user or wrong secret: 401 as for every login.
   */
  async function authenticateSecret(username: string, secret: string, via: string, source?: string): Promise<SecretCheck> {
    return authenticateSecretAtOnce(username, secret, source) ?? passwordCheck(await checkPassword(username, secret, via, source));
  }

  /**
   * authenticateSecret's answer without waiting: a live session token, or a password verified
   * moments ago (checkPasswordAtOnce). Undefined: ask authenticateSecret. Throws as it does.
   */
  function authenticateSecretAtOnce(username: string, secret: string, source?: string): SecretCheck | undefined {
    if (looksLikeToken(secret)) {
      const record = tokens.verify(secret);
      const user = record ? users.find(record.userId) : undefined;
      if (record && user && user.username === username && admits(user.id)) {
        if (record.scope !== 'full') throw new ForbiddenError('MFA enrollment is required first');
        return { user, method: 'token', tokenFingerprint: record.fingerprint };
      }
    }
    const user = checkPasswordAtOnce(username, secret, source);
    return user && passwordCheck(user);
  }

  function passwordCheck(user: UserRecord): SecretCheck {
    if (user.enforceMFAEnrollment && !user.mfa.enrolled) throw new ForbiddenError('MFA enrollment is required first');
    // A password alone is not enough for a user enrolled in MFA: a token from the MFA login is.
    if (user.mfa.enrolled) throw new ForbiddenError('MFA is enabled for this user: use a session token from the MFA login');
    return { user, method: 'password' };
  }

  return {
    loginCounts,
    checkPassword,
    authenticateSecret,
    authenticateSecretAtOnce,
    issueSession,

    /**
     * Password login. A user enrolled in MFA gets no token yet: `needsMfa: true` and a
     * single-use `secret` for POST /api/mfa/login (whatever mfa.enabled says).
     */
    async login(input: LoginInput, source?: string): Promise<LoginResult> {
      const hours = lifetime(input.expireTimeInHours);
      const user = await checkPassword(input.username, input.password, 'login', source);
      if (user.mfa.enrolled) {
        const secret = deps.mfaChallenges.issue({
          userId: user.id,
          username: user.username,
          lifetimeHours: hours,
          ...(input.label !== undefined ? { label: input.label } : {}),
        });
        log.audit('login needs mfa', { userId: user.id, username: user.username });
        return { needsMfa: true, secret, enforceMFAEnrollment: false };
      }
      return issueSession(user, { lifetimeHours: hours, ...(input.label !== undefined ? { label: input.label } : {}), via: 'password' });
    },

    /** Revokes the token if it is live; unknown tokens are accepted silently (idempotent). */
    async logout(token: string): Promise<void> {
      const record = tokens.verify(token);
      if (!record) return;
      await tokens.revoke(record.userId, [record.fingerprint]);
      log.audit('logout', { userId: record.userId, tokenFingerprint: record.fingerprint.slice(0, 12) });
    },

    /**
     * Resolves an Authorization header (Bearer token or HTTP Basic). Missing, malformed,
     * unknown or expired credentials: 401.
     */
    async authenticate(header: string | undefined, source?: string): Promise<Principal> {
      if (!header) throw new UnauthorizedError('authentication required: send Authorization: Bearer <token> or Basic credentials');
      const space = header.indexOf(' ');
      const scheme = header.slice(0, space).toLowerCase();
      const value = header.slice(space + 1).trim();
      if (space > 0 && scheme === 'bearer') {
        const record = tokens.verify(value);
        if (!record) throw new UnauthorizedError('token is unknown or expired');
        // The lookup was by hash; comparing again in constant time costs nothing and keeps
        // the equality check itself free of timing differences.
        if (!timingSafeEqual(Buffer.from(record.fingerprint), Buffer.from(tokenFingerprint(value)))) {
          throw new UnauthorizedError('token is unknown or expired');
        }
        const user = users.find(record.userId);
        if (!user || !admits(user.id)) throw new UnauthorizedError('token is unknown or expired');
        return { userId: user.id, username: user.username, method: 'token', token: record };
      }
      if (space > 0 && scheme === 'basic') {
        const decoded = Buffer.from(value, 'base64').toString('utf8');
        const colon = decoded.indexOf(':');
        if (colon < 1) throw new UnauthorizedError('malformed Basic credentials');
        const user = await checkPassword(decoded.slice(0, colon), decoded.slice(colon + 1), 'basic', source);
        if (user.enforceMFAEnrollment && !user.mfa.enrolled) {
          throw new ForbiddenError('MFA enrollment is required: log in with POST /api/login and enroll');
        }
        // A password alone is not enough for a user enrolled in MFA.
        if (user.mfa.enrolled) throw new ForbiddenError('MFA is enabled for this user: log in with POST /api/login and POST /api/mfa/login and use the token');
        return { userId: user.id, username: user.username, method: 'basic' };
      }
      throw new UnauthorizedError('unsupported Authorization scheme: use Bearer or Basic');
    },

    session(principal: Principal) {
      const user = users.getOrThrow(principal.userId);
      return {
        username: user.username,
        // Basic credentials have no expiry: the field is left out.
        ...(principal.token ? { expiresAt: principal.token.expiresAt } : {}),
        permissions: engine.grantsOf(user.id),
        mfa: { enabled: user.mfa.enrolled, enforced: user.enforceMFAEnrollment },
      };
    },
  };
}
export type AuthService = ReturnType<typeof createAuthService>;
