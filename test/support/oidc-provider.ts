// A real OpenID provider (the oidc-provider package) for the single sign-on tests, in process
// on 127.0.0.1 port 0, plus a tiny "browser" that follows redirects with a cookie jar.
//
// Order of start: the provider's HTTP server listens first (its issuer URL is then known and
// goes into the gateway's idp config); the gateway starts; then `registerClient` builds the
// Provider with the one confidential client whose redirect_uri is the gateway's
// /api/idp/redirect (known only once the gateway listens). No fixed ports anywhere.
//
// Interaction (login and consent) is automatic: /interaction/:uid is answered here by
// provider.interactionFinished() with the account named by `loginAs`, and consent is given by
// creating a Grant for what the provider says is missing.
import { generateKeyPairSync } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FetchLike } from './https-fetch.js';

export interface TestAccount {
  /** The subject (`sub`) and the provider's account id. */
  sub: string;
  preferred_username?: string;
  groups?: string[];
}

export interface TestOidcProvider {
  issuer: string;
  clientId: string;
  clientSecret: string;
  /** Accounts by sub; tests may change groups between logins. */
  accounts: Map<string, TestAccount>;
  /** `METHOD /path` of every request the provider received, in order. */
  requests: string[];
  /** The account the next automatic login signs in as. */
  loginAs: string;
  /** Builds the Provider once the gateway's redirect URI is known. */
  registerClient(redirectUris: string[]): void;
  stop(): Promise<void>;
}

// oidc-provider ships no type declarations: load it untyped (test-only dependency).
const providerModule = 'oidc-provider';

export async function startOidcProvider(options: { accounts: TestAccount[]; clientId?: string; clientSecret?: string; /** default 0: any free port */ port?: number }): Promise<TestOidcProvider> {
  const { default: Provider } = (await import(providerModule)) as { default: new (issuer: string, config: Record<string, unknown>) => any };
  const accounts = new Map(options.accounts.map((a) => [a.sub, { ...a }]));
  const clientId = options.clientId ?? 'gatewayd';
  const clientSecret = options.clientSecret ?? 'a-client-secret-of-the-gateway-0123456789';
  let provider: any;
  let callback: ((req: IncomingMessage, res: ServerResponse) => void) | undefined;

  async function interaction(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const details = await provider.interactionDetails(req, res);
    const prompt = details.prompt as { name: string; details: Record<string, unknown> };
    if (prompt.name === 'login') {
      await provider.interactionFinished(req, res, { login: { accountId: op.loginAs } }, { mergeWithLastSubmission: false });
      return;
    }
    if (prompt.name === 'consent') {
      const accountId = details.session.accountId as string;
      const grant = details.grantId ? await provider.Grant.find(details.grantId) : new provider.Grant({ accountId, clientId: details.params.client_id });
      const missingScope = prompt.details.missingOIDCScope as string[] | undefined;
      const missingClaims = prompt.details.missingOIDCClaims as string[] | undefined;
      const missingResourceScopes = prompt.details.missingResourceScopes as Record<string, string[]> | undefined;
      if (missingScope) grant.addOIDCScope(missingScope.join(' '));
      if (missingClaims) grant.addOIDCClaims(missingClaims);
      for (const [indicator, scopes] of Object.entries(missingResourceScopes ?? {})) grant.addResourceScope(indicator, scopes.join(' '));
      const grantId = await grant.save();
      await provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
      return;
    }
    res.statusCode = 500;
    res.end(`unexpected prompt ${prompt.name}`);
  }

  const requests: string[] = [];
  const server: Server = createServer((req, res) => {
    requests.push(`${req.method} ${(req.url ?? '').split('?')[0]}`);
    if (!callback) {
      res.statusCode = 503;
      res.end('provider not configured yet');
      return;
    }
    if (req.method === 'GET' && /^\/interaction\/[^/?]+(\?.*)?$/.test(req.url ?? '')) {
      interaction(req, res).catch((err: Error) => {
        res.statusCode = 500;
        res.end(`interaction failed: ${err.message}`);
      });
      return;
    }
    callback(req, res);
  });
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, '127.0.0.1', resolve));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const signingKey = { ...privateKey.export({ format: 'jwk' }), kid: 'test-signing-key', use: 'sig', alg: 'RS256' };

  const op: TestOidcProvider = {
    issuer,
    clientId,
    clientSecret,
    accounts,
    requests,
    loginAs: options.accounts[0]?.sub ?? '',
    registerClient(redirectUris) {
      provider = new Provider(issuer, {
        clients: [
          {
            client_id: clientId,
            client_secret: clientSecret,
            redirect_uris: redirectUris,
            response_types: ['code'],
            grant_types: ['authorization_code'],
            token_endpoint_auth_method: 'client_secret_basic',
          },
        ],
        async findAccount(_ctx: unknown, sub: string) {
          const account = accounts.get(sub);
          if (!account) return undefined;
          return {
            accountId: sub,
            async claims() {
              const current = accounts.get(sub) ?? account;
              return {
                sub,
                ...(current.preferred_username !== undefined ? { preferred_username: current.preferred_username } : {}),
                ...(current.groups !== undefined ? { groups: current.groups } : {}),
              };
            },
          };
        },
        claims: { openid: ['sub'], profile: ['preferred_username'], groups: ['groups'] },
        // The gateway must use PKCE, for every client.
        pkce: { required: () => true },
        features: { devInteractions: { enabled: false } },
        cookies: { keys: ['oidc-provider-test-cookie-key'] },
        jwks: { keys: [signingKey] },
        ttl: { AuthorizationCode: 60, Interaction: 600, Session: 3600, Grant: 3600, AccessToken: 600, IdToken: 600 },
      });
      callback = provider.callback();
    },
    async stop() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return op;
}

/** A minimal cookie jar: cookies by origin and name (paths ignored; enough for the provider). */
export class CookieJar {
  private readonly byOrigin = new Map<string, Map<string, string>>();

  header(url: URL): string | undefined {
    const cookies = this.byOrigin.get(url.origin);
    if (!cookies || cookies.size === 0) return undefined;
    return [...cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  }

  store(url: URL, response: Response): void {
    for (const line of response.headers.getSetCookie()) {
      const [pair, ...attributes] = line.split(';');
      const eq = pair!.indexOf('=');
      const name = pair!.slice(0, eq).trim();
      const value = pair!.slice(eq + 1).trim();
      const cookies = this.byOrigin.get(url.origin) ?? new Map<string, string>();
      this.byOrigin.set(url.origin, cookies);
      const expired = attributes.some((a) => /^\s*expires=/i.test(a) && Date.parse(a.split('=')[1]!) <= Date.now()) || attributes.some((a) => /^\s*max-age=0\s*$/i.test(a));
      if (expired || value === '') cookies.delete(name);
      else cookies.set(name, value);
    }
  }
}

/** The global fetch without following redirects (the FetchLike contract). */
const manualFetch: FetchLike = (url, init) => fetch(url, { ...init, redirect: 'manual' } as RequestInit);

export interface Hop {
  url: URL;
  status: number;
  location?: URL;
}

/**
 * GETs `start` and follows redirects by hand (redirect: 'manual'), carrying cookies, until
 * `stop(url)` says the next URL is the end (it is not requested) or a response is not a
 * redirect. Returns every hop and the URL where it stopped. `fetch`: one that trusts the gateway CA
 * (https-fetch.ts) for flows through the HTTPS port.
 */
export async function followRedirects(
  start: string | URL,
  options: { stop: (url: URL) => boolean; jar?: CookieJar; headers?: Record<string, string>; maxHops?: number; fetch?: FetchLike },
): Promise<{ hops: Hop[]; final: URL; stopped: boolean; body?: string }> {
  const jar = options.jar ?? new CookieJar();
  const hops: Hop[] = [];
  let url = new URL(start);
  for (let i = 0; i < (options.maxHops ?? 20); i++) {
    const headers: Record<string, string> = { ...(i === 0 ? options.headers : {}) };
    const cookie = jar.header(url);
    if (cookie) headers.cookie = cookie;
    const response = await (options.fetch ?? manualFetch)(url, { headers });
    jar.store(url, response);
    const location = response.headers.get('location');
    if (response.status < 300 || response.status >= 400 || !location) {
      hops.push({ url, status: response.status });
      return { hops, final: url, stopped: false, body: await response.text() };
    }
    await response.arrayBuffer();
    const next = new URL(location, url);
    hops.push({ url, status: response.status, location: next });
    if (options.stop(next)) return { hops, final: next, stopped: true };
    url = next;
  }
  throw new Error(`more than ${options.maxHops ?? 20} redirects from ${start}`);
}
