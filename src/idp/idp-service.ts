// Single sign-on through an OpenID Connect identity provider (docs/design.md §8): the authorization
// code flow with state, nonce and PKCE (S256), done by openid-client. The gateway is the
// relying party; the browser only ever carries the authorization request, the callback and,
// at the end, the gateway's own session token in the URL fragment of the admin UI.
import { timingSafeEqual } from 'node:crypto';
import type * as Oidc from 'openid-client';
import type { GatewayConfig } from '../config/index.js';
import { ConflictError, NotImplementedError, PolicyViolationError } from '../errors/errors.js';
import type { Logger } from '../log/index.js';
import type { RoleService } from '../roles/role-service.js';
import type { TokenService } from '../auth/token-service.js';
import type { UserService } from '../users/user-service.js';
import type { RoleRecord, UserRecord } from '../store/index.js';
import { createPendingLogins, type PendingLogins } from './pending-logins.js';

// openid-client (and jose, oauth4webapi) is loaded by the first single sign-on.
const loadOidc = () => import('openid-client');

export const IDP_REDIRECT_PATH = '/api/idp/redirect';
export const IDP_LOGIN_PATH = '/api/idp/login';
/** How long a started login may take at the identity provider. */
export const PENDING_LOGIN_TTL_MS = 10 * 60_000;
export const MAX_PENDING_LOGINS = 10_000;
/** Seconds for each request to the identity provider (discovery, token, userinfo, JWKS). */
const IDP_REQUEST_TIMEOUT_SECONDS = 10;
/** The longest username the API describes (openapi.yaml Username). */
const MAX_USERNAME_LENGTH = 128;

/** What the HTTP layer knows about the browser's request. */
export interface IdpRequestContext {
  /** `<protocol>://<host>` of the request as the browser sent it (honours trust proxy). */
  origin: string;
  /**
   * The gateway's HTTPS origin under the name the browser used: `origin` itself for a request
   * that came over TLS, else `https://<hostname>:<HTTPS port>`. Default base of the redirect URI.
   */
  secureOrigin: string;
  /** The Referer header of GET /api/idp/login. */
  referer?: string | undefined;
  /**
   * The state cookie the browser sent to GET /api/idp/redirect: the callback must come from
   * the browser that started the login (no login CSRF: an attacker's callback URL opened by a
   * victim does not sign the victim in to the attacker's account).
   */
  stateCookie?: string | undefined;
}

/** Answer of beginLogin: where to send the browser and, when a login started, its state. */
export interface LoginStart {
  location: string;
  /** Bind to the browser (the route sets it as a cookie); absent when the start failed. */
  state?: string;
  /** The callback is https: the state cookie must be Secure. */
  secureCallback?: boolean;
}

export interface IdpServiceDeps {
  /** Read at call time: `idp` and `auth.tokenLifetimeHours`. */
  config: Pick<GatewayConfig, 'idp' | 'auth'>;
  users: UserService;
  roles: RoleService;
  tokens: TokenService;
  log: Logger;
  pendingLoginTtlMs?: number;
  maxPendingLogins?: number;
  now?: () => number;
}

/** A failed login: logged with `reason`, reported to the browser with `message`. */
class IdpLoginFailure extends Error {
  constructor(
    readonly reason: string,
    message: string,
    readonly fields: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

const GENERIC_FAILURE = 'single sign-on failed; please try again or contact the administrator';

/** http is accepted only for an issuer on this host (tests, a provider on the gateway itself). */
export function isLoopbackHttp(url: URL): boolean {
  if (url.protocol !== 'http:') return false;
  const host = url.hostname.replace(/^\[|\]$/g, '');
  return host === 'localhost' || host === '::1' || /^127(\.\d{1,3}){3}$/.test(host);
}

/** A claim by name, or by a dotted path into nested objects (e.g. `realm_access.roles`). */
export function claimValue(claims: Record<string, unknown>, name: string): unknown {
  if (name in claims) return claims[name];
  let value: unknown = claims;
  for (const part of name.split('.')) {
    if (value === null || typeof value !== 'object' || Array.isArray(value)) return undefined;
    value = (value as Record<string, unknown>)[part];
  }
  return value;
}

/** Groups as the provider sent them: an array of strings, or one string. */
export function groupsOf(value: unknown): string[] {
  if (typeof value === 'string') return value ? [value] : [];
  if (Array.isArray(value)) return value.filter((g): g is string => typeof g === 'string' && g !== '');
  return [];
}

/** The comma separated `idpGroupIds` of a role as a list. */
export function roleGroupIds(role: Pick<RoleRecord, 'idpGroupIds'>): string[] {
  return (role.idpGroupIds ?? '')
    .split(',')
    .map((g) => g.trim())
    .filter(Boolean);
}

function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** `base` (any fragment dropped) with `params` as its URL fragment. */
function withFragment(base: string, params: Record<string, string>): string {
  const hash = base.indexOf('#');
  return `${hash < 0 ? base : base.slice(0, hash)}#${new URLSearchParams(params).toString()}`;
}

export function createIdpService(deps: IdpServiceDeps) {
  const { config, users, roles, tokens, log } = deps;
  const pending: PendingLogins = createPendingLogins({
    ttlMs: deps.pendingLoginTtlMs ?? PENDING_LOGIN_TTL_MS,
    maxEntries: deps.maxPendingLogins ?? MAX_PENDING_LOGINS,
    ...(deps.now ? { now: deps.now } : {}),
  });

  let discovered: { key: string; configuration: Promise<Oidc.Configuration> } | undefined;

  function assertEnabled(): void {
    if (!config.idp.enabled) throw new NotImplementedError('single sign-on through the identity provider is not enabled (config idp.enabled)');
  }

  /** The admin UI; a relative idp.adminUiUrl is on the callback's origin (by default the HTTPS one). */
  function adminUiUrl(ctx: IdpRequestContext): string {
    return new URL(config.idp.adminUiUrl || '/', redirectUriFor(ctx)).href;
  }

  function issuerUrl(): URL {
    const { issuer, clientId } = config.idp;
    if (!issuer || !clientId) throw new IdpLoginFailure('not configured', GENERIC_FAILURE, { detail: 'idp.issuer and idp.clientId must be set' });
    let url: URL;
    try {
      url = new URL(issuer);
    } catch {
      throw new IdpLoginFailure('not configured', GENERIC_FAILURE, { detail: 'idp.issuer is not a URL' });
    }
    if (url.protocol !== 'https:' && !isLoopbackHttp(url)) {
      throw new IdpLoginFailure('not configured', GENERIC_FAILURE, { detail: 'idp.issuer must be an https URL (http only on a loopback address)' });
    }
    return url;
  }

  /**
   * The provider's metadata, discovered once and cached; a failed discovery is not cached,
   * and a failure talking to the provider later drops the cache so the next login
   * re-discovers (a provider that moved or rotated its configuration).
   */
  function configuration(): Promise<Oidc.Configuration> {
    const url = issuerUrl();
    const { clientId, clientSecret } = config.idp;
    const key = JSON.stringify([url.href, clientId, clientSecret]);
    if (discovered?.key === key) return discovered.configuration;
    const promise = loadOidc().then((oidc) => {
      const execute: ((c: Oidc.Configuration) => void)[] = [oidc.enableNonRepudiationChecks];
      if (isLoopbackHttp(url)) execute.push(oidc.allowInsecureRequests);
      return oidc.discovery(
        url,
        clientId,
        clientSecret ? { client_secret: clientSecret } : undefined,
        clientSecret ? oidc.ClientSecretBasic(clientSecret) : oidc.None(),
        { execute, timeout: IDP_REQUEST_TIMEOUT_SECONDS },
      );
    });
    const entry = { key, configuration: promise };
    discovered = entry;
    promise.then(
      () => log.info('idp discovered', { issuer: url.href }),
      () => {
        if (discovered === entry) discovered = undefined;
      },
    );
    return promise;
  }

  function forgetDiscovery(): void {
    discovered = undefined;
  }

  /** The configured redirect URI; empty means the gateway's HTTPS origin + /api/idp/redirect. */
  function redirectUriFor(ctx: IdpRequestContext): string {
    return new URL(config.idp.redirectUri || IDP_REDIRECT_PATH, ctx.secureOrigin).href;
  }

  function scopes(): string {
    const list = config.idp.scopes.split(/\s+/).filter(Boolean);
    if (!list.includes('openid')) list.unshift('openid');
    return list.join(' ');
  }

  /**
   * Where a failed login start goes: the Referer when it is a page of this gateway or of the
   * admin UI (anything else would make the gateway an open redirector), else the admin UI.
   */
  function failureTarget(ctx: IdpRequestContext): string {
    if (ctx.referer) {
      try {
        const referer = new URL(ctx.referer);
        const allowed = new Set([new URL(ctx.origin).origin, ctx.secureOrigin, new URL(adminUiUrl(ctx)).origin]);
        if ((referer.protocol === 'http:' || referer.protocol === 'https:') && allowed.has(referer.origin)) return referer.href;
      } catch {
        // not a URL: ignored
      }
    }
    return adminUiUrl(ctx);
  }

  /** Audits a failure (never a token, code, state or secret) and answers the error Location. */
  function failed(err: unknown, target: string, stage: string): string {
    if (err instanceof IdpLoginFailure) {
      log.audit('idp login failed', { stage, reason: err.reason, ...err.fields });
      return withFragment(target, { error: err.message });
    }
    const e = err as { name?: string; message?: string; code?: string; error?: string; stack?: string };
    const error = { name: e?.name, message: e?.message, code: e?.code ?? e?.error };
    if (stage === 'user') {
      // Not the provider: the gateway itself failed to create the user or the session.
      log.error('idp login failed', { stage, error: { ...error, stack: e?.stack } });
      log.audit('idp login failed', { stage, reason: 'internal error', error });
    } else {
      log.audit('idp login failed', { stage, reason: 'identity provider error', error });
    }
    return withFragment(target, { error: GENERIC_FAILURE });
  }

  /** Shared roles whose idpGroupIds name one of the groups. */
  function rolesForGroups(groups: string[]): RoleRecord[] {
    const wanted = new Set(groups);
    return roles.list({}).filter((r) => r.isShared && roleGroupIds(r).some((g) => wanted.has(g)));
  }

  /** Creates the idp user or synchronises its roles; never takes over a local or LDAP user. */
  async function syncUser(username: string, roleIds: string[]): Promise<UserRecord> {
    const refuseOther = (user: UserRecord) =>
      new IdpLoginFailure(
        'username held by another identity provider',
        `the user "${username}" is not managed by the identity provider and cannot sign in through it`,
        { username, identityProvider: user.identityProvider },
      );
    let user = users.findByUsername(username);
    if (user && user.identityProvider !== 'idp') throw refuseOther(user);
    if (!user) {
      try {
        return await users.create({ username, identityProvider: 'idp', roles: roleIds, grantTypes: [] });
      } catch (err) {
        if (err instanceof PolicyViolationError) {
          throw new IdpLoginFailure('username policy', `the username "${username}" is not allowed by the gateway's username policy`, { username });
        }
        if (!(err instanceof ConflictError)) throw err;
        // Created concurrently (a second tab): synchronise the one that won.
        user = users.findByUsername(username);
        if (!user) throw err;
        if (user.identityProvider !== 'idp') throw refuseOther(user);
      }
    }
    const same = user.roleIds.length === roleIds.length && roleIds.every((r) => user!.roleIds.includes(r));
    return same ? user : users.update(user.id, { roles: roleIds });
  }

  return {
    enabled: () => config.idp.enabled,

    /** GET /api/idp/login: the Location of the provider's authorization endpoint, or of an error. */
    async beginLogin(ctx: IdpRequestContext): Promise<LoginStart> {
      const oidc = await loadOidc();
      assertEnabled();
      const redirectUri = redirectUriFor(ctx);
      // Started on the plain port, ending on HTTPS: the login moves there first, so the state
      // cookie is set (Secure) by the origin it must come back to.
      if (ctx.origin !== ctx.secureOrigin && new URL(redirectUri).origin === ctx.secureOrigin) return { location: ctx.secureOrigin + IDP_LOGIN_PATH };
      try {
        const configuration_ = await configuration();
        const codeVerifier = oidc.randomPKCECodeVerifier();
        const state = oidc.randomState();
        const nonce = oidc.randomNonce();
        const url = oidc.buildAuthorizationUrl(configuration_, {
          response_type: 'code',
          redirect_uri: redirectUri,
          scope: scopes(),
          state,
          nonce,
          code_challenge: await oidc.calculatePKCECodeChallenge(codeVerifier),
          code_challenge_method: 'S256',
        });
        pending.put(state, { nonce, codeVerifier, redirectUri });
        log.debug('idp login started', { redirectUri });
        return { location: url.href, state, secureCallback: redirectUri.startsWith('https:') };
      } catch (err) {
        if (!(err instanceof IdpLoginFailure)) forgetDiscovery();
        return { location: failed(err, failureTarget(ctx), 'login') };
      }
    },

    /**
     * GET /api/idp/redirect: checks state (single use), exchanges the code, validates the ID
     * token, maps groups to roles, creates or updates the user and answers the Location of the
     * admin UI with `#token=...&expiresAt=...`, or `#error=...`.
     */
    async completeLogin(ctx: IdpRequestContext, query: Record<string, unknown>): Promise<string> {
      const oidc = await loadOidc();
      assertEnabled();
      const target = adminUiUrl(ctx);
      let stage = 'state';
      try {
        const state = typeof query.state === 'string' ? query.state : '';
        const login = pending.take(state);
        if (!login) throw new IdpLoginFailure('unknown state', 'the login request is unknown, expired or already used; please sign in again');
        if (!ctx.stateCookie || !safeEqual(ctx.stateCookie, state)) {
          throw new IdpLoginFailure('state not bound to this browser', 'the login was not started in this browser; please sign in again');
        }
        stage = 'exchange';
        const configuration_ = await configuration();
        // The token request must repeat the redirect_uri of the authorization request exactly,
        // whatever host or proxy the callback came through.
        const callbackUrl = new URL(login.redirectUri);
        for (const [k, v] of Object.entries(query)) if (typeof v === 'string') callbackUrl.searchParams.set(k, v);
        let response: Awaited<ReturnType<typeof Oidc.authorizationCodeGrant>>;
        try {
          response = await oidc.authorizationCodeGrant(configuration_, callbackUrl, {
            expectedState: state,
            expectedNonce: login.nonce,
            pkceCodeVerifier: login.codeVerifier,
            idTokenExpected: true,
          });
        } catch (err) {
          // An error answer of the provider (invalid_grant...) or a token that failed the
          // checks says nothing about the cached metadata; anything else may.
          if (!(err instanceof oidc.ResponseBodyError) && !(err instanceof oidc.AuthorizationResponseError) && !(err instanceof oidc.ClientError)) forgetDiscovery();
          throw err;
        }
        const idToken = response.claims();
        if (!idToken) throw new IdpLoginFailure('no id token', GENERIC_FAILURE);
        const groupsClaim = config.idp.groupsClaim || 'groups';
        let claims: Record<string, unknown> = { ...idToken };
        // Providers put profile and group claims in the ID token or only in the UserInfo
        // response (code flow, OIDC Core 5.4): ask UserInfo when the ID token lacks them.
        const userinfoEndpoint = configuration_.serverMetadata().userinfo_endpoint;
        if ((typeof claims.preferred_username !== 'string' || claimValue(claims, groupsClaim) === undefined) && userinfoEndpoint && response.access_token) {
          stage = 'userinfo';
          const info = await oidc.fetchUserInfo(configuration_, response.access_token, idToken.sub);
          claims = { ...info, ...claims };
        }
        stage = 'user';
        const preferred = claims.preferred_username;
        const username = typeof preferred === 'string' && preferred.trim() ? preferred.trim() : idToken.sub;
        if (username.length > MAX_USERNAME_LENGTH) throw new IdpLoginFailure('username too long', `the username from the identity provider is longer than ${MAX_USERNAME_LENGTH} characters`, { subject: idToken.sub });
        const groups = groupsOf(claimValue(claims, groupsClaim));
        const mapped = rolesForGroups(groups);
        if (mapped.length === 0) {
          // Nobody without a mapped group gets an account; an existing one loses its roles.
          const existing = users.findByUsername(username);
          if (existing?.identityProvider === 'idp' && existing.roleIds.length) await users.update(existing.id, { roles: [] });
          throw new IdpLoginFailure('no mapped group', `no role of the gateway is mapped to the identity provider groups of "${username}"`, { username, groups: groups.slice(0, 50) });
        }
        const user = await syncUser(username, mapped.map((r) => r.id));
        const { token, record } = await tokens.issue(user.id, { lifetimeHours: config.auth.tokenLifetimeHours, label: 'idp' });
        log.audit('login', {
          userId: user.id,
          username: user.username,
          tokenFingerprint: record.fingerprint.slice(0, 12),
          scope: record.scope,
          via: 'idp',
          subject: idToken.sub,
          groups: groups.slice(0, 50),
          roles: mapped.map((r) => r.name),
        });
        return withFragment(target, { token, expiresAt: record.expiresAt });
      } catch (err) {
        return failed(err, target, stage);
      }
    },

    /** Started logins not yet completed (for tests and diagnostics). */
    pendingLogins: () => pending.size(),
  };
}
export type IdpService = ReturnType<typeof createIdpService>;
