// Single sign-on through an LDAP directory (docs/design.md §8), with ldapts. A password login of a
// username that is not a local user (or is an `ldap` user) comes here from
// auth.checkPassword: the user is searched with the service bind, its password checked by a
// bind as the found DN, and the local `ldap` user created or updated with the shared roles the
// directory gives it (mode GROUP: group membership → roles' ldapGroupDn; mode ATTRIBUTE: an
// attribute of the user entry lists role names). One connection per login, closed after it.
import { readFile } from 'node:fs/promises';
import { isIP } from 'node:net';
import type { ConnectionOptions } from 'node:tls';
import type { GatewayConfig } from '../config/index.js';
import { ConflictError, PolicyViolationError } from '../errors/errors.js';
import type { Logger } from '../log/index.js';
import type { RoleService } from '../roles/role-service.js';
import type { RoleRecord, UserRecord } from '../store/index.js';
import type { UserService } from '../users/user-service.js';
import { fillFilter, normalizeDn } from './dn.js';
import { ldapts } from './ldapts.js';

export interface LdapServiceDeps {
  /** Read at call time. */
  config: GatewayConfig['ldap'];
  users: UserService;
  roles: RoleService;
  log: Logger;
}

/** What the directory says about a username and password. */
export type DirectoryAnswer =
  | { ok: true; dn: string; groupDns: string[]; roleNames: string[] }
  | { ok: false; reason: 'not found' | 'ambiguous' | 'wrong password' };

/** The directory could not be asked (unreachable, timeout, service bind refused, bad config). */
export class DirectoryUnavailableError extends Error {
  constructor(
    message: string,
    override readonly cause?: unknown,
  ) {
    super(message);
    this.name = 'DirectoryUnavailableError';
  }
}

/** An error as it may be logged: never a password (ldapts errors carry none, but be explicit). */
function describe(err: unknown): Record<string, unknown> {
  const e = err as { name?: string; message?: string; code?: unknown };
  return { name: e?.name, message: e?.message, ...(e?.code !== undefined ? { code: e.code } : {}) };
}

/** Attribute values of an ldapts entry, by case-insensitive attribute name. */
function valuesOf(entry: Record<string, unknown>, attribute: string): string[] {
  const wanted = attribute.toLowerCase();
  const key = Object.keys(entry).find((k) => k.toLowerCase() === wanted);
  const raw = key === undefined ? undefined : entry[key];
  const list = Array.isArray(raw) ? raw : raw === undefined ? [] : [raw];
  return list.map((v) => (Buffer.isBuffer(v) ? v.toString('utf8') : String(v)));
}

/** Whether the directory URL names this host (passwords in clear never leave it). */
function isLoopback(hostname: string): boolean {
  return hostname === 'localhost' || hostname === '::1' || /^127(\.\d{1,3}){3}$/.test(hostname);
}

export function createLdapService(deps: LdapServiceDeps) {
  const { config, users, roles, log } = deps;
  let warnedCleartext = false;

  /**
   * Asks the directory. Resolves with the answer; throws DirectoryUnavailableError when it
   * cannot be asked. The whole exchange is bounded by `timeoutMs`.
   */
  async function ask(username: string, password: string): Promise<DirectoryAnswer> {
    const cfg = config;
    const url = new URL(cfg.url);
    const host = url.hostname.replace(/^\[|\]$/g, '');
    const startTls = cfg.startTls && url.protocol === 'ldap:';
    if (url.protocol === 'ldap:' && !startTls && !isLoopback(host) && !warnedCleartext) {
      warnedCleartext = true;
      log.warn('ldap passwords are sent unencrypted: use an ldaps:// url or ldap.startTls', { url: cfg.url });
    }
    let tlsOptions: ConnectionOptions;
    try {
      tlsOptions = { minVersion: 'TLSv1.2', ...(cfg.tlsCaFile ? { ca: [await readFile(cfg.tlsCaFile)] } : {}) };
    } catch (err) {
      throw new DirectoryUnavailableError('ldap.tlsCaFile cannot be read', err);
    }
    // ldapts goes TLS from the first byte whenever tlsOptions are given: only for ldaps://.
    const { Client } = ldapts();
    const client = new Client({ url: cfg.url, timeout: cfg.timeoutMs, connectTimeout: cfg.timeoutMs, ...(url.protocol === 'ldaps:' ? { tlsOptions } : {}) });
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new DirectoryUnavailableError(`no answer from the directory within ${cfg.timeoutMs} ms`)), cfg.timeoutMs);
    });
    // Seconds the server may spend on one search (at least 1; 0 would mean unlimited).
    const timeLimit = Math.max(1, Math.ceil(cfg.timeoutMs / 1000));
    let stage = startTls ? 'starttls' : 'service bind';
    const exchange = async (): Promise<DirectoryAnswer> => {
      // Before any bind: neither the service password nor the user's crosses in clear.
      if (startTls) {
        await client.startTLS({ ...tlsOptions, host, ...(isIP(host) ? {} : { servername: host }) });
        stage = 'service bind';
      }
      if (cfg.bindDn) await client.bind(cfg.bindDn, cfg.bindPassword);
      stage = 'user search';
      const { searchEntries } = await client.search(cfg.userSearchBase, {
        scope: 'sub',
        filter: fillFilter(cfg.userSearchFilter, { username }),
        attributes: cfg.mode === 'ATTRIBUTE' ? [cfg.roleAttribute] : ['1.1'],
        sizeLimit: 2,
        timeLimit,
      });
      if (searchEntries.length === 0) return { ok: false, reason: 'not found' };
      if (searchEntries.length > 1) return { ok: false, reason: 'ambiguous' };
      const entry = searchEntries[0]!;
      stage = 'user bind';
      try {
        await client.bind(entry.dn, password);
      } catch (err) {
        // The directory answered: the password (or the account) is refused.
        if (err instanceof ldapts().ResultCodeError) {
          if (!(err instanceof ldapts().InvalidCredentialsError)) log.info('ldap user bind refused', { username, error: describe(err) });
          return { ok: false, reason: 'wrong password' };
        }
        throw err;
      }
      if (cfg.mode === 'ATTRIBUTE') {
        return { ok: true, dn: entry.dn, groupDns: [], roleNames: valuesOf(entry, cfg.roleAttribute).map((v) => v.trim()).filter(Boolean) };
      }
      // Groups are read with the service account again (without one: as the user).
      stage = 'group search';
      if (cfg.bindDn) await client.bind(cfg.bindDn, cfg.bindPassword);
      const groups = await client.search(cfg.groupSearchBase || cfg.userSearchBase, {
        scope: 'sub',
        filter: fillFilter(cfg.groupSearchFilter, { dn: entry.dn, username }),
        attributes: ['1.1'],
        timeLimit,
      });
      return { ok: true, dn: entry.dn, groupDns: groups.searchEntries.map((g) => g.dn), roleNames: [] };
    };
    try {
      return await Promise.race([exchange(), deadline]);
    } catch (err) {
      if (err instanceof DirectoryUnavailableError) throw err;
      throw new DirectoryUnavailableError(`directory ${stage} failed`, err);
    } finally {
      clearTimeout(timer);
      // unbind sends an UnbindRequest and destroys the socket; never wait on a dead server.
      await Promise.race([client.unbind().catch(() => {}), new Promise((r) => setTimeout(r, 200).unref())]);
    }
  }

  /** Shared roles the directory answer maps to. */
  function rolesFor(answer: Extract<DirectoryAnswer, { ok: true }>): RoleRecord[] {
    const shared = roles.list({}).filter((r) => r.isShared);
    if (config.mode === 'ATTRIBUTE') {
      const names = new Set(answer.roleNames);
      return shared.filter((r) => names.has(r.name));
    }
    const groups = new Set(answer.groupDns.map(normalizeDn));
    return shared.filter((r) => !!r.ldapGroupDn && groups.has(normalizeDn(r.ldapGroupDn)));
  }

  return {
    enabled: () => config.enabled,
    ask,

    /**
     * Authenticates a username and password against the directory and synchronises the local
     * `ldap` user. Resolves with the user, or undefined for any failure (audited with its
     * reason, never with the password; the directory's unavailability also logged at warn).
     * The caller answers every failure alike.
     */
    async login(username: string, password: string, via: string): Promise<UserRecord | undefined> {
      const failed = (reason: string, extra: Record<string, unknown> = {}) => {
        log.audit('ldap login failed', { username, via, reason, ...extra });
        return undefined;
      };
      if (!config.enabled) return failed('ldap disabled');
      // An empty password would be an unauthenticated bind, which many directories accept.
      if (password === '') return failed('empty password');
      if (username === '') return failed('empty username');
      let answer: DirectoryAnswer;
      try {
        answer = await ask(username, password);
      } catch (err) {
        const cause = err instanceof DirectoryUnavailableError ? err.cause : undefined;
        log.warn('ldap directory unavailable', { url: config.url, error: describe(err), ...(cause ? { cause: describe(cause) } : {}) });
        return failed('directory unavailable');
      }
      if (!answer.ok) return failed(answer.reason);
      const granted = rolesFor(answer);
      try {
        const { user, created, changed } = await users.syncExternalUser({ username, identityProvider: 'ldap', roleIds: granted.map((r) => r.id) });
        log.audit('ldap login', {
          userId: user.id,
          username,
          via,
          dn: answer.dn,
          mode: config.mode,
          roles: granted.map((r) => r.name),
          created,
          rolesChanged: changed && !created,
        });
        return user;
      } catch (err) {
        if (err instanceof PolicyViolationError) return failed('username policy', { dn: answer.dn });
        if (err instanceof ConflictError) return failed('conflict', { dn: answer.dn, detail: err.message });
        throw err;
      }
    },
  };
}
export type LdapService = ReturnType<typeof createLdapService>;
