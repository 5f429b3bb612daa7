// Client self-registration (docs/design.md §9): a time-limited window in which devices ask for an
// account, over REST (password and/or CSR) or by an MQTT CONNECT with an unknown username, and
// an authorised user confirms each request. State lives in memory: a restart relocks the
// registry and forgets every request (fail closed; devices simply register again).

import { X509Certificate, createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { CertificateAuthority } from '../certs/index.js';
import { csrSubject, decodeBase64Pem, encodeBase64Pem } from '../certs/index.js';
import type { GatewayConfig } from '../config/index.js';
import { BadRequestError, ConflictError, LockedError, NotFoundError, ServiceUnavailableError } from '../errors/errors.js';
import type { Logger } from '../log/index.js';
import type { MqttCredentials } from '../mqtt/mqtt-access.js';
import type { PasswordHasher } from '../auth/passwords.js';
import type { Actor } from '../permissions/grant-guard.js';
import { checkPasswordPolicy, checkUsernamePolicy } from '../auth/policy.js';
import { checkPermissionInputs, type PermissionInput, type RoleService } from '../roles/role-service.js';
import type { GrantType } from '../store/index.js';
import type { UserService } from '../users/user-service.js';

export type CredentialType = 'password' | 'certificate';

export interface RegistrationInput {
  username: string;
  password?: string;
  /** Base64 encoded PEM certificate signing request (plain PEM is tolerated too). */
  csr?: string;
  /** Role names. */
  roles?: string[];
  permissions?: PermissionInput[];
  context: string;
}

export interface ConfirmInput {
  username: string;
  mqttPublishPrefix?: string;
  grantTypes?: GrantType[];
  initialPermissions?: PermissionInput[];
  /** Role ids. */
  roles?: string[];
}

export type RegisterOutcome = { status: 'pending' } | { status: 'granted'; certificate?: string };

export interface RegistryStatus {
  status: 'open' | 'locked';
  unlockedUntil: number;
}

export interface PendingRegistrationView {
  timestamp: string;
  username: string;
  credentialType: CredentialType;
  roles: string[];
  context: string;
  permissions: PermissionInput[];
  granted: boolean;
  /** Requests with a CSR: its subject (an addition to the contract's fields). */
  csrSubject?: string;
}

interface Entry {
  username: string;
  credentialType: CredentialType;
  /** HMAC-SHA256 of the password under a per-process key: cheap constant-time comparison of polls. */
  passwordMac?: Buffer;
  /** scrypt hash (the service's hasher) the user is created with; dropped once granted. */
  passwordHash?: string;
  /** SHA-256 of the CSR's DER: a repeated request must carry the same CSR. */
  csrDigest?: Buffer;
  csrPem?: string;
  /** The CSR's subject as text, shown to the operator (GET /api/client-registry). */
  csrSubject?: string;
  roleNames: string[];
  permissions: PermissionInput[];
  context: string;
  /** The device asked over REST, so it polls there for the outcome. */
  viaHttp: boolean;
  granted: boolean;
  confirming: boolean;
  updatedAt: number;
  /** Base64 PEM handed to the device on its next poll (CSR requests). */
  certificate?: string;
}

interface Credentials {
  passwordMac?: Buffer;
  csrDigest?: Buffer;
  csrPem?: string;
}

/** Longest delay setTimeout takes; longer windows re-arm the timer. */
const MAX_TIMER_MS = 2 ** 31 - 1;
const MQTT_CONTEXT = 'mqtt connect';
/** The contract's bounds on usernames and passwords (the OpenAPI schemas check REST input). */
const USERNAME_MAX = 128;
const PASSWORD_MIN = 5;
const PASSWORD_MAX = 1024;

export interface RegistryServiceDeps {
  users: UserService;
  roles: RoleService;
  hasher: PasswordHasher;
  /** The gateway CA; undefined until the pki part has started. */
  ca: () => CertificateAuthority | undefined;
  config: GatewayConfig['registry'];
  policy: GatewayConfig['policy'];
  log: Logger;
  /** Called with the username of a confirmed request (wiring: forget its failed-login count). */
  onGranted?: (username: string) => void;
  now?: () => number;
}

/** X509Certificate dates ("Mar  1 12:00:00 2030 GMT") as ISO 8601; '' if unreadable. */
function isoOrEmpty(date: string): string {
  const t = Date.parse(date);
  return Number.isNaN(t) ? '' : new Date(t).toISOString();
}

export function createRegistryService(deps: RegistryServiceDeps) {
  const { users, roles, hasher, config, policy, log } = deps;
  const now = deps.now ?? (() => Date.now());
  const macKey = randomBytes(32);
  const entries = new Map<string, Entry>();
  let unlockedUntil = 0;
  let timer: NodeJS.Timeout | undefined;

  // ------------------------------------------------------------------ lock state

  function clearTimer(): void {
    if (timer) clearTimeout(timer);
    timer = undefined;
  }

  function relock(reason: 'expired' | 'locked', by?: string): void {
    clearTimer();
    const wasOpen = unlockedUntil !== 0;
    unlockedUntil = 0;
    if (reason === 'expired') {
      if (wasOpen) log.audit('registry relocked', { reason, pending: entries.size });
      return;
    }
    const flushed = entries.size;
    entries.clear();
    log.audit('registry locked', { by, flushed });
  }

  function arm(): void {
    clearTimer();
    const left = unlockedUntil - now();
    if (left <= 0) return relock('expired');
    timer = setTimeout(() => (now() >= unlockedUntil ? relock('expired') : arm()), Math.min(left, MAX_TIMER_MS));
    timer.unref();
  }

  /** Also checked lazily, so a late or suspended timer never keeps the registry open. */
  function isOpen(): boolean {
    if (unlockedUntil !== 0 && now() >= unlockedUntil) relock('expired');
    return unlockedUntil !== 0;
  }

  function ensureOpen(): void {
    if (!isOpen()) throw new LockedError('the client registry is locked: registration is not open');
  }

  // ------------------------------------------------------------------ credentials

  function authority(): CertificateAuthority {
    const ca = deps.ca();
    if (!ca) throw new ServiceUnavailableError('the certificate authority is not loaded yet');
    return ca;
  }

  const mac = (password: string) => createHmac('sha256', macKey).update(password, 'utf8').digest();

  function sameSecret(a: Buffer | undefined, b: Buffer | undefined): boolean {
    if (a === undefined || b === undefined) return a === b;
    return a.length === b.length && timingSafeEqual(a, b);
  }

  function sameCredentials(entry: Entry, creds: Credentials): boolean {
    // Both compared, no short cut: the time taken does not tell which one differed.
    const password = sameSecret(entry.passwordMac, creds.passwordMac);
    const csr = sameSecret(entry.csrDigest, creds.csrDigest);
    return password && csr;
  }

  function csrCredentials(csr: string): { csrPem: string; csrDigest: Buffer } {
    const csrPem = decodeBase64Pem(csr);
    const match = /^-----BEGIN (NEW )?CERTIFICATE REQUEST-----\r?\n([\s\S]*?)\r?\n-----END (NEW )?CERTIFICATE REQUEST-----\s*$/.exec(csrPem);
    if (!match || !/^[A-Za-z0-9+/=\s]+$/.test(match[2]!)) throw new BadRequestError('invalid CSR: expected one PEM certificate signing request');
    const der = Buffer.from(match[2]!.replace(/\s+/g, ''), 'base64');
    if (der.length === 0) throw new BadRequestError('invalid CSR: empty');
    return { csrPem, csrDigest: createHash('sha256').update(der).digest() };
  }

  function credentialsOf(input: { password?: string; csr?: string }): Credentials {
    const creds: Credentials = {};
    if (input.password !== undefined) creds.passwordMac = mac(input.password);
    if (input.csr !== undefined) Object.assign(creds, csrCredentials(input.csr));
    return creds;
  }

  // ------------------------------------------------------------------ requests

  function roleIdsOf(names: string[], missing: (message: string) => Error): string[] {
    return names.map((name) => {
      const role = roles.list({ name })[0];
      if (!role) throw missing(`role "${name}" does not exist`);
      if (!role.isShared) throw new BadRequestError(`role "${name}" is not shared and cannot be assigned`);
      return role.id;
    });
  }

  function ensureRoom(): void {
    if (entries.size >= config.maxPendingRequests) {
      throw new ServiceUnavailableError(`too many registration requests (at most ${config.maxPendingRequests}); try again later`);
    }
  }

  /** The answer to a repeated request of a username that is already pending. */
  function poll(entry: Entry, creds: Credentials, via: 'http' | 'mqtt'): RegisterOutcome {
    if (!sameCredentials(entry, creds)) {
      log.audit('registration refused', { username: entry.username, via, reason: 'another request with other credentials is pending' });
      throw new ConflictError(`a registration request with other credentials is pending for "${entry.username}"`);
    }
    entry.updatedAt = now();
    if (via === 'http') entry.viaHttp = true;
    if (!entry.granted) return { status: 'pending' };
    // Handed out once: the granted request is done.
    entries.delete(entry.username);
    log.audit('registration delivered', { username: entry.username, certificate: entry.certificate !== undefined });
    return entry.certificate !== undefined ? { status: 'granted', certificate: entry.certificate } : { status: 'granted' };
  }

  function refuseExistingUser(username: string, via: 'http' | 'mqtt'): void {
    if (!users.findByUsername(username)) return;
    log.audit('registration refused', { username, via, reason: 'user exists' });
    throw new ConflictError(`user "${username}" already exists`);
  }

  async function register(input: RegistrationInput): Promise<RegisterOutcome> {
    ensureOpen();
    const { username } = input;
    checkUsernamePolicy(policy.username, username);
    if (input.password !== undefined) checkPasswordPolicy(policy.password, input.password);
    if (input.password === undefined && input.csr === undefined) throw new BadRequestError('either password or csr is required');
    const creds = credentialsOf(input);

    const pending = entries.get(username);
    if (pending) return poll(pending, creds, 'http');
    refuseExistingUser(username, 'http');
    ensureRoom();

    const roleNames = [...new Set(input.roles ?? [])];
    roleIdsOf(roleNames, (m) => new BadRequestError(m));
    const permissions = input.permissions ?? [];
    checkPermissionInputs(permissions, 'permissions');
    if (creds.csrPem !== undefined) {
      // Checks structure, key, proof of possession and CN = username; the certificate itself
      // is issued only on confirm.
      authority().signCsr(creds.csrPem, { expectedCommonName: username, validityDays: 1 });
    }
    const passwordHash = input.password !== undefined ? await hasher.hash(input.password) : undefined;

    // The hash took a while: the state may have changed meanwhile.
    ensureOpen();
    const raced = entries.get(username);
    if (raced) return poll(raced, creds, 'http');
    refuseExistingUser(username, 'http');
    ensureRoom();
    const entry: Entry = {
      username,
      credentialType: creds.csrDigest ? 'certificate' : 'password',
      ...(creds.passwordMac ? { passwordMac: creds.passwordMac } : {}),
      ...(passwordHash !== undefined ? { passwordHash } : {}),
      ...(creds.csrDigest ? { csrDigest: creds.csrDigest, csrPem: creds.csrPem!, csrSubject: csrSubject(creds.csrPem!) } : {}),
      roleNames,
      permissions: permissions.map((p) => ({ resource: p.resource, operation: p.operation, context: p.context })),
      context: input.context,
      viaHttp: true,
      granted: false,
      confirming: false,
      updatedAt: now(),
    };
    entries.set(username, entry);
    log.audit('registration requested', {
      username,
      via: 'http',
      credentialType: entry.credentialType,
      roles: roleNames,
      permissions: entry.permissions.length,
    });
    return { status: 'pending' };
  }

  /**
   * An MQTT CONNECT with an unknown username: recorded as a password request while the
   * registry is open. Never throws; the broker refuses the CONNECT as for any unknown user.
   */
  async function recordMqttConnect(credentials: MqttCredentials): Promise<void> {
    try {
      const { username } = credentials;
      if (!username || credentials.password === undefined || !isOpen()) return;
      const password = credentials.password.toString('utf8');
      const length = [...username].length;
      if (length < 3 || length > USERNAME_MAX || password.length < PASSWORD_MIN || password.length > PASSWORD_MAX) return;
      checkUsernamePolicy(policy.username, username);
      checkPasswordPolicy(policy.password, password);
      const creds: Credentials = { passwordMac: mac(password) };
      const pending = entries.get(username);
      if (pending) {
        if (sameCredentials(pending, creds)) pending.updatedAt = now();
        return;
      }
      if (users.findByUsername(username) || entries.size >= config.maxPendingRequests) return;
      const passwordHash = await hasher.hash(password);
      if (!isOpen() || entries.has(username) || users.findByUsername(username) || entries.size >= config.maxPendingRequests) return;
      entries.set(username, {
        username,
        credentialType: 'password',
        passwordMac: creds.passwordMac!,
        passwordHash,
        roleNames: [],
        permissions: [],
        context: MQTT_CONTEXT,
        viaHttp: false,
        granted: false,
        confirming: false,
        updatedAt: now(),
      });
      log.audit('registration requested', { username, via: 'mqtt', credentialType: 'password', roles: [], permissions: 0 });
    } catch (err) {
      // A policy breach or a malformed name: simply not recorded.
      log.debug('mqtt connect not recorded as a registration request', { reason: (err as Error).message });
    }
  }

  async function confirm(input: ConfirmInput, actor: Actor) {
    const by = actor.username;
    const entry = entries.get(input.username);
    if (!entry) throw new NotFoundError(`no pending registration request for "${input.username}"`);
    if (entry.granted || entry.confirming) throw new ConflictError(`the registration request of "${input.username}" is already confirmed`);
    const roleIds = input.roles ?? roleIdsOf(entry.roleNames, (m) => new BadRequestError(`requested ${m} (any more)`));
    let certificatePem: string | undefined;
    let certificate: { fingerprint: string; createdAt: string; expiresAt: string } | undefined;
    if (entry.csrPem !== undefined) {
      certificatePem = authority().signCsr(entry.csrPem, { expectedCommonName: entry.username, validityDays: config.certificateValidityDays });
      const x509 = new X509Certificate(certificatePem);
      certificate = {
        fingerprint: x509.fingerprint256.replace(/:/g, '').toLowerCase(),
        createdAt: new Date(now()).toISOString(),
        expiresAt: isoOrEmpty(x509.validTo),
      };
    }
    const grantTypes: GrantType[] =
      input.grantTypes ??
      [
        ...(entry.passwordHash !== undefined ? [{ method: 'password' as const }] : []),
        ...(certificate ? [{ method: 'certificate' as const }] : []),
      ].map((g, _i, all) => ({ ...g, isRequired: all.length === 1 }));

    entry.confirming = true;
    let user;
    try {
      user = await users.create(
        {
          username: entry.username,
          identityProvider: 'local',
          grantTypes,
          roles: roleIds,
          initialPermissions: input.initialPermissions ?? entry.permissions,
          ...(input.mqttPublishPrefix !== undefined ? { mqttPublishPrefix: input.mqttPublishPrefix } : {}),
          ...(certificate ? { certificates: [certificate] } : {}),
        },
        // The confirmer grants what the device asked for unless it names otherwise: either way
        // only what the confirmer holds itself (the user service refuses the rest, 403).
        { actor, ...(entry.passwordHash !== undefined ? { passwordHash: entry.passwordHash } : {}) },
      );
    } finally {
      entry.confirming = false;
    }
    deps.onGranted?.(entry.username);
    log.audit('registration confirmed', {
      username: entry.username,
      userId: user.id,
      by,
      credentialType: entry.credentialType,
      ...(certificate ? { certificateFingerprint: certificate.fingerprint } : {}),
    });
    // The request may have been dropped (lock, delete) while the user was written.
    if (entries.get(entry.username) === entry) {
      if (entry.viaHttp) {
        entry.granted = true;
        entry.updatedAt = now();
        delete entry.passwordHash;
        delete entry.csrPem;
        if (certificatePem !== undefined) entry.certificate = encodeBase64Pem(certificatePem);
      } else {
        // Recorded from an MQTT CONNECT: the device learns the outcome by connecting.
        entries.delete(entry.username);
      }
    }
    return user;
  }

  return {
    register,
    recordMqttConnect,
    confirm,

    status(): RegistryStatus {
      return isOpen() ? { status: 'open', unlockedUntil } : { status: 'locked', unlockedUntil: 0 };
    },

    open(duration: number | undefined, by: string): void {
      const ms = duration ?? config.defaultDurationMs;
      if (!Number.isInteger(ms) || ms < 1) throw new BadRequestError('duration must be a positive integer of milliseconds');
      if (ms > config.maxDurationMs) throw new BadRequestError(`duration must not exceed ${config.maxDurationMs} ms (registry.maxDurationMs)`);
      unlockedUntil = now() + ms;
      arm();
      log.audit('registry opened', { by, durationMs: ms, unlockedUntil });
    },

    lock(by: string): void {
      relock('locked', by);
    },

    list(): PendingRegistrationView[] {
      return [...entries.values()]
        .sort((a, b) => (a.username < b.username ? -1 : a.username > b.username ? 1 : 0))
        .map((e) => ({
          timestamp: new Date(e.updatedAt).toISOString(),
          username: e.username,
          credentialType: e.credentialType,
          roles: [...e.roleNames],
          context: e.context,
          permissions: e.permissions.map((p) => ({ ...p })),
          granted: e.granted,
          ...(e.csrSubject !== undefined ? { csrSubject: e.csrSubject } : {}),
        }));
    },

    /** Idempotent. */
    drop(username: string, by: string): void {
      if (entries.delete(username)) log.audit('registration dropped', { username, by });
    },

    stop(): void {
      clearTimer();
    },
  };
}
export type RegistryService = ReturnType<typeof createRegistryService>;
