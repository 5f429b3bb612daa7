// Single sign-on through an OpenID Connect identity provider (docs/design.md §8), end to end: a real
// OpenID provider (oidc-provider, in process on 127.0.0.1 port 0) and the real gateway, the
// browser played by fetch with manual redirects and a cookie jar, trusting the gateway CA:
// gateway /api/idp/login (plain port) → the same on HTTPS → provider /auth → /interaction
// (automatic login and consent) → gateway https /api/idp/redirect → admin UI on HTTPS with
// #token=... → that token on the REST API.
import { createServer } from 'node:net';
import { expect } from 'chai';
import { startGateway, type TestGateway } from './support/harness.js';
import { fetchTrusting, type FetchLike } from './support/https-fetch.js';
import { CookieJar, followRedirects, startOidcProvider, type Hop, type TestOidcProvider } from './support/oidc-provider.js';
import { claimValue, createPendingLogins, groupsOf, isLoopbackHttp, roleGroupIds } from '../src/idp/index.js';

type Grant = { resource: string; operation: 'read' | 'write' | 'readWrite'; context: 'mqtt' | 'http' };

const ADMIN_UI = '/ui/';

/** A port nothing listens on (bound, then closed): discovery there fails with ECONNREFUSED. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

function fragmentOf(url: URL): URLSearchParams {
  return new URLSearchParams(url.hash.slice(1));
}

describe('idp single sign-on (OpenID Connect)', function () {
  this.timeout(30_000);
  let op: TestOidcProvider;
  let gw: TestGateway;
  let admin: string;
  const roleIds: Record<string, string> = {};
  /** Every gateway token, code and state the tests saw: none may reach a log line. */
  const secrets = new Set<string>();

  /** A browser that trusts the gateway CA (each gateway has its own). */
  let browserFetch: FetchLike;
  const isGatewayEnd = (url: URL) => url.origin === gw.httpsUrl && !url.pathname.startsWith('/api/idp/');
  const isCallback = (url: URL) => url.origin === gw.httpsUrl && url.pathname === '/api/idp/redirect';

  /** The whole browser flow as `sub`, in a fresh browser; returns where it ended and its hops. */
  async function signIn(sub: string, jar = new CookieJar()): Promise<{ final: URL; hops: Hop[]; fragment: URLSearchParams }> {
    op.loginAs = sub;
    const { final, hops, stopped, body } = await followRedirects(`${gw.baseUrl}/api/idp/login`, { stop: isGatewayEnd, jar, fetch: browserFetch });
    expect(stopped, `flow ended on ${final.href}: ${body}`).to.equal(true);
    for (const hop of hops) {
      if (isCallback(hop.url)) {
        secrets.add(hop.url.searchParams.get('code')!);
        secrets.add(hop.url.searchParams.get('state')!);
      }
    }
    const fragment = fragmentOf(final);
    if (fragment.get('token')) secrets.add(fragment.get('token')!);
    return { final, hops, fragment };
  }

  /**
   * The flow up to (not including) the gateway callback: the URL the provider sent the browser
   * to, and that browser's cookies (the gateway's state cookie among them).
   */
  async function callbackUrlFor(sub: string): Promise<{ url: URL; jar: CookieJar }> {
    op.loginAs = sub;
    const jar = new CookieJar();
    const { final, stopped } = await followRedirects(`${gw.httpsUrl}/api/idp/login`, { stop: isCallback, jar, fetch: browserFetch });
    expect(stopped).to.equal(true);
    secrets.add(final.searchParams.get('code')!);
    secrets.add(final.searchParams.get('state')!);
    return { url: final, jar };
  }

  async function get(url: URL | string, jar?: CookieJar, headers: Record<string, string> = {}, via = browserFetch): Promise<{ status: number; location?: URL; body: string; headers: Headers }> {
    const cookie = jar?.header(new URL(url));
    const res = await via(url, { headers: { ...headers, ...(cookie ? { cookie } : {}) } });
    jar?.store(new URL(url), res);
    const location = res.headers.get('location');
    return { status: res.status, ...(location ? { location: new URL(location, url) } : {}), body: await res.text(), headers: res.headers };
  }

  async function createRole(name: string, idpGroupIds: string, permissions: Grant[]): Promise<void> {
    const res = await gw.api('POST', '/api/roles', { token: admin, body: { name, isShared: true, permissions, idpGroupIds } });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    expect(res.body.idpGroupId).to.equal(idpGroupIds);
    roleIds[name] = res.body.id;
  }

  async function userByName(username: string): Promise<any | undefined> {
    const res = await gw.api('GET', `/api/listUsers?username[eq]=${encodeURIComponent(username)}`, { token: admin });
    expect(res.status).to.equal(200);
    return res.body.users[0];
  }

  const sharedRoleNames = (user: any) => (user.roles as any[]).filter((r) => r.isShared).map((r) => r.name).sort();

  before(async () => {
    op = await startOidcProvider({
      accounts: [
        { sub: 'sub-alice', preferred_username: 'alice', groups: ['operators'] },
        { sub: 'sub-bob', preferred_username: 'bob', groups: ['engineers', 'viewers', 'not-mapped'] },
        { sub: 'sub-carol-0042', groups: ['viewers'] },
        { sub: 'sub-admin', preferred_username: 'admin', groups: ['operators'] },
        { sub: 'sub-dave', preferred_username: 'dave', groups: ['visitors'] },
      ],
    });
    gw = await startGateway({
      overrides: {
        idp: {
          enabled: true,
          issuer: op.issuer,
          clientId: op.clientId,
          clientSecret: op.clientSecret,
          // Empty: the gateway derives https://<Host's name>:<HTTPS port>/api/idp/redirect from the request.
          redirectUri: '',
          scopes: 'openid profile groups',
          groupsClaim: 'groups',
          adminUiUrl: ADMIN_UI,
        },
      },
    });
    browserFetch = fetchTrusting(gw.caFile);
    op.registerClient([`${gw.httpsUrl}/api/idp/redirect`]);
    admin = await gw.login();
    await createRole('sso-operators', 'operators, ops-leads', [
      { resource: 'plant/#', operation: 'read', context: 'mqtt' },
      { resource: '/api/roles', operation: 'read', context: 'http' },
    ]);
    await createRole('sso-engineers', 'engineers', [{ resource: '/api/listUsers', operation: 'read', context: 'http' }]);
    await createRole('sso-viewers', 'viewers,guests', [{ resource: 'plant/+/status', operation: 'read', context: 'mqtt' }]);
    await createRole('sso-unrelated', 'somebody-else', [{ resource: 'secret/#', operation: 'readWrite', context: 'mqtt' }]);
  });

  after(async () => {
    await gw?.stop();
    await op?.stop();
  });

  it('reports the feature as enabled on GET /api/auth/idp', async () => {
    const res = await gw.api('GET', '/api/auth/idp');
    expect(res.status).to.equal(200);
    expect(res.body).to.deep.equal({ enabled: true });
  });

  it('moves a login started on the plain port to HTTPS before it starts: no state, no cookie', async () => {
    const res = await get(`${gw.baseUrl}/api/idp/login`, new CookieJar());
    expect(res.status).to.equal(302);
    expect(res.location!.href).to.equal(`${gw.httpsUrl}/api/idp/login`);
    expect(res.headers.get('set-cookie')).to.equal(null);
    expect(res.headers.get('strict-transport-security')).to.equal(null); // a plain answer
  });

  it('redirects to the provider with state, nonce and PKCE S256, and nothing else reaches the browser', async () => {
    const jar = new CookieJar();
    const res = await get(`${gw.httpsUrl}/api/idp/login`, jar);
    expect(res.status).to.equal(302);
    const location = res.location!;
    // The login is bound to this browser by an HttpOnly cookie holding the state, sent only over TLS.
    expect(jar.header(new URL(`${gw.httpsUrl}/api/idp/redirect`))).to.equal(`gatewayd_idp_state=${location.searchParams.get('state')}`);
    const cookie = res.headers.get('set-cookie')!.split(';').map((a) => a.trim());
    expect(cookie).to.include.members(['HttpOnly', 'SameSite=Lax', 'Secure', 'Path=/api/idp/redirect']);
    expect(res.headers.get('strict-transport-security')).to.equal('max-age=31536000');
    expect(location.origin).to.equal(op.issuer);
    const q = location.searchParams;
    expect(q.get('response_type')).to.equal('code');
    expect(q.get('client_id')).to.equal(op.clientId);
    // The default redirect URI: the gateway's HTTPS origin, under the name the browser used.
    expect(q.get('redirect_uri')).to.equal(`${gw.httpsUrl}/api/idp/redirect`);
    expect(q.get('scope')).to.equal('openid profile groups');
    expect(q.get('code_challenge_method')).to.equal('S256');
    expect(q.get('code_challenge')).to.match(/^[A-Za-z0-9_-]{43}$/);
    expect(q.get('state')).to.have.length.greaterThan(20);
    expect(q.get('nonce')).to.have.length.greaterThan(20);
    expect(q.has('client_secret')).to.equal(false);
    expect(q.has('code_verifier')).to.equal(false);
  });

  it('signs a user in: token in the admin UI fragment, the user created with the roles of its groups', async () => {
    const { final, fragment } = await signIn('sub-alice');
    // A relative admin UI URL is on the HTTPS origin too.
    expect(final.origin + final.pathname).to.equal(`${gw.httpsUrl}${ADMIN_UI}`);
    expect(final.search).to.equal('');
    const token = fragment.get('token')!;
    expect(token).to.match(/^[A-Za-z0-9_-]{43}$/);
    expect(Date.parse(fragment.get('expiresAt')!)).to.be.greaterThan(Date.now());

    const session = await gw.api('GET', '/api/session', { token });
    expect(session.status).to.equal(200);
    expect(session.body.username).to.equal('alice');
    expect(session.body.expiresAt).to.equal(fragment.get('expiresAt'));
    const grants = (session.body.permissions as Grant[]).map((p) => `${p.context} ${p.operation} ${p.resource}`).sort();
    expect(grants).to.deep.equal(['http read /api/roles', 'mqtt read plant/#']);
    // The mapped permission works, others do not.
    expect((await gw.api('GET', '/api/roles', { token })).status).to.equal(200);
    expect((await gw.api('GET', '/api/listUsers', { token })).status).to.equal(403);

    const user = await userByName('alice');
    expect(user.identityProvider).to.equal('idp');
    expect(sharedRoleNames(user)).to.deep.equal(['sso-operators']);
    expect(user.tokens).to.have.length(1);
    expect(user.tokens[0].label).to.equal('idp');
    // The gateway checked the ID token signature against the provider's keys and read the
    // profile and groups from UserInfo (oidc-provider keeps them out of a code-flow ID token).
    expect(op.requests).to.include.members(['GET /.well-known/openid-configuration', 'POST /token', 'GET /jwks', 'GET /me']);
    // No local password: the password login fails as for anyone.
    expect((await gw.api('POST', '/api/login', { body: { username: 'alice', password: 'anything-at-all' } })).status).to.equal(401);
  });

  it('maps several groups to several roles and ignores groups no role names', async () => {
    const { fragment } = await signIn('sub-bob');
    const token = fragment.get('token')!;
    expect((await gw.api('GET', '/api/session', { token })).body.username).to.equal('bob');
    expect(sharedRoleNames(await userByName('bob'))).to.deep.equal(['sso-engineers', 'sso-viewers']);
    expect((await gw.api('GET', '/api/listUsers', { token })).status).to.equal(200);
  });

  it('uses sub as the username when the provider sends no preferred_username', async () => {
    const { fragment } = await signIn('sub-carol-0042');
    expect((await gw.api('GET', '/api/session', { token: fragment.get('token')! })).body.username).to.equal('sub-carol-0042');
    expect(sharedRoleNames(await userByName('sub-carol-0042'))).to.deep.equal(['sso-viewers']);
  });

  it('synchronises the roles at every login when the groups change at the provider', async () => {
    const first = (await signIn('sub-alice')).fragment.get('token')!;
    op.accounts.get('sub-alice')!.groups = ['engineers', 'guests'];
    const second = (await signIn('sub-alice')).fragment.get('token')!;
    expect(second).to.not.equal(first);
    const user = await userByName('alice');
    expect(sharedRoleNames(user)).to.deep.equal(['sso-engineers', 'sso-viewers']);
    for (const token of [first, second]) {
      // The earlier token belongs to the same user: it sees the new permissions too.
      const grants = ((await gw.api('GET', '/api/session', { token })).body.permissions as Grant[]).map((p) => p.resource).sort();
      expect(grants).to.deep.equal(['/api/listUsers', 'plant/+/status']);
      expect((await gw.api('GET', '/api/roles', { token })).status).to.equal(403);
    }
    // Back to the original group.
    op.accounts.get('sub-alice')!.groups = ['ops-leads'];
    await signIn('sub-alice');
    expect(sharedRoleNames(await userByName('alice'))).to.deep.equal(['sso-operators']);
  });

  it('refuses a user none of whose groups is mapped, and takes the roles of a known one away', async () => {
    const { final, fragment } = await signIn('sub-dave');
    expect(final.pathname).to.equal(ADMIN_UI);
    expect(fragment.has('token')).to.equal(false);
    expect(fragment.get('error')).to.match(/no role of the gateway is mapped/);
    expect(await userByName('dave')).to.equal(undefined);

    op.accounts.get('sub-bob')!.groups = ['visitors'];
    const refused = await signIn('sub-bob');
    expect(refused.fragment.has('token')).to.equal(false);
    expect(sharedRoleNames(await userByName('bob'))).to.deep.equal([]);
    op.accounts.get('sub-bob')!.groups = ['engineers'];
    expect((await signIn('sub-bob')).fragment.has('token')).to.equal(true);
  });

  it('never takes over a local user of the same name', async () => {
    const before = await userByName('admin');
    expect(before.identityProvider).to.equal('local');
    const { final, fragment } = await signIn('sub-admin');
    expect(final.pathname).to.equal(ADMIN_UI);
    expect(fragment.has('token')).to.equal(false);
    expect(fragment.get('error')).to.match(/"admin" is not managed by the identity provider/);
    const after = await userByName('admin');
    expect(after.identityProvider).to.equal('local');
    expect(sharedRoleNames(after)).to.deep.equal(sharedRoleNames(before));
    expect(after.tokens.map((t: any) => t.fingerprint)).to.deep.equal(before.tokens.map((t: any) => t.fingerprint));
    await gw.login(); // the local password still works
    expect(gw.logs().some((l) => l.message === 'idp login failed' && l.reason === 'username held by another identity provider' && l.username === 'admin')).to.equal(true);
  });

  it('refuses a tampered or unknown state, and a state used once already', async () => {
    const { url: callback, jar } = await callbackUrlFor('sub-alice');
    expect(callback.searchParams.get('code')).to.be.a('string');

    const tampered = new URL(callback);
    tampered.searchParams.set('state', callback.searchParams.get('state')!.slice(0, -2) + 'xx');
    const t = await get(tampered, jar);
    expect(t.status).to.equal(302);
    expect(t.location!.pathname).to.equal(ADMIN_UI);
    expect(fragmentOf(t.location!).has('token')).to.equal(false);
    expect(fragmentOf(t.location!).get('error')).to.match(/unknown, expired or already used/);

    const unknown = new URL(`${gw.httpsUrl}/api/idp/redirect`);
    unknown.searchParams.set('code', 'made-up-code');
    unknown.searchParams.set('state', 'made-up-state');
    const u = await get(unknown, jar);
    expect(u.status).to.equal(302);
    expect(fragmentOf(u.location!).get('error')).to.match(/unknown, expired or already used/);

    // The genuine callback still works once (a wrong state consumed nothing)...
    const ok = await get(callback, jar);
    expect(ok.status).to.equal(302);
    const token = fragmentOf(ok.location!).get('token')!;
    secrets.add(token);
    expect((await gw.api('GET', '/api/session', { token })).body.username).to.equal('alice');
    // ...and never twice.
    const again = await get(callback, jar);
    expect(again.status).to.equal(302);
    expect(fragmentOf(again.location!).has('token')).to.equal(false);
    expect(fragmentOf(again.location!).get('error')).to.match(/unknown, expired or already used/);
  });

  it('refuses a code that does not belong to the state (the provider refuses the exchange)', async () => {
    const first = await callbackUrlFor('sub-alice');
    const second = await callbackUrlFor('sub-bob');
    // The code of the first flow with the state of the second: PKCE verifier and nonce differ.
    const mixed = new URL(second.url);
    mixed.searchParams.set('code', first.url.searchParams.get('code')!);
    const res = await get(mixed, second.jar);
    expect(res.status).to.equal(302);
    expect(fragmentOf(res.location!).has('token')).to.equal(false);
    expect(fragmentOf(res.location!).get('error')).to.match(/single sign-on failed/);
  });

  it('refuses a callback opened in another browser than the one that started the login (login CSRF)', async () => {
    // An attacker signs in at the provider, stops before the callback and sends that URL to a victim.
    const attacker = await callbackUrlFor('sub-bob');
    const victim = new CookieJar();
    const res = await get(attacker.url, victim);
    expect(res.status).to.equal(302);
    expect(fragmentOf(res.location!).has('token')).to.equal(false);
    expect(fragmentOf(res.location!).get('error')).to.match(/not started in this browser/);
    // The state is used up: not even the browser that started it can use it now.
    const late = await get(attacker.url, attacker.jar);
    expect(fragmentOf(late.location!).has('token')).to.equal(false);
  });

  it('answers 400 when the callback lacks code or state', async () => {
    const res = await gw.api('GET', '/api/idp/redirect?state=abc');
    expect(res.status).to.equal(400);
    expect(res.body.statusCode).to.equal(400);
  });

  it('audits SSO logins and failures without tokens, codes, states or the client secret', () => {
    const logins = gw.logs().filter((l) => l.message === 'login' && l.via === 'idp');
    expect(logins.length).to.be.greaterThan(3);
    expect(logins.some((l) => l.username === 'bob' && JSON.stringify(l.roles) === JSON.stringify(['sso-engineers', 'sso-viewers']))).to.equal(true);
    expect(gw.logs().some((l) => l.message === 'idp login failed' && l.reason === 'unknown state')).to.equal(true);
    const text = JSON.stringify(gw.logs());
    expect(secrets.size).to.be.greaterThan(10);
    for (const s of secrets) expect(text.includes(s), `a secret in the log`).to.equal(false);
    expect(text.includes(op.clientSecret)).to.equal(false);
    // The provider's metadata was discovered once and cached for every later login.
    expect(gw.logs().filter((l) => l.message === 'idp discovered')).to.have.length(1);
  });

  describe('when the provider cannot be reached', () => {
    let down: TestGateway;
    let port: number;
    let back: TestOidcProvider | undefined;
    let downFetch: FetchLike;
    before(async () => {
      port = await closedPort();
      down = await startGateway({
        overrides: { idp: { enabled: true, issuer: `http://127.0.0.1:${port}`, clientId: 'gatewayd', clientSecret: 'a-client-secret-of-the-gateway-0123456789', adminUiUrl: 'https://ui.example.test/admin#old' } },
      });
      downFetch = fetchTrusting(down.caFile);
    });
    after(async () => {
      await down?.stop();
      await back?.stop();
    });

    it('redirects back to the referring page of the gateway with an error', async () => {
      const referer = `${down.httpsUrl}/some/page`;
      const res = await get(`${down.httpsUrl}/api/idp/login`, undefined, { referer }, downFetch);
      expect(res.status).to.equal(302);
      const location = res.location!;
      expect(location.href.startsWith(`${referer}#`)).to.equal(true);
      expect(fragmentOf(location).get('error')).to.match(/single sign-on failed/);
      expect(down.logs().some((l) => l.message === 'idp login failed' && l.stage === 'login')).to.equal(true);
    });

    it('does not redirect to a foreign Referer (no open redirect): the admin UI instead', async () => {
      const res = await get(`${down.httpsUrl}/api/idp/login`, undefined, { referer: 'https://evil.example.test/phish' }, downFetch);
      expect(res.status).to.equal(302);
      const location = res.location!;
      expect(location.origin + location.pathname).to.equal('https://ui.example.test/admin');
      expect(fragmentOf(location).get('error')).to.match(/single sign-on failed/);
      const noReferer = await get(`${down.httpsUrl}/api/idp/login`, undefined, {}, downFetch);
      expect(noReferer.location!.origin).to.equal('https://ui.example.test');
      expect(noReferer.headers.get('set-cookie')).to.equal(null); // no login started, nothing to bind
    });

    it('discovers again at the next login once the provider is back', async () => {
      back = await startOidcProvider({ accounts: [{ sub: 'sub-x', preferred_username: 'xavier', groups: ['g'] }], port });
      back.registerClient([`${down.httpsUrl}/api/idp/redirect`]);
      const res = await get(`${down.httpsUrl}/api/idp/login`, undefined, {}, downFetch);
      expect(res.status).to.equal(302);
      expect(res.location!.origin).to.equal(back.issuer);
    });
  });

  describe('when idp is disabled (the default)', () => {
    let off: TestGateway;
    before(async () => {
      off = await startGateway();
    });
    after(() => off?.stop());

    it('reports enabled false and answers 501 on login and redirect', async () => {
      expect((await off.api('GET', '/api/auth/idp')).body).to.deep.equal({ enabled: false });
      const login = await off.api('GET', '/api/idp/login');
      expect(login.status).to.equal(501);
      expect(login.body.message).to.match(/not enabled/);
      const redirect = await off.api('GET', '/api/idp/redirect?code=abc&state=def');
      expect(redirect.status).to.equal(501);
      expect(redirect.body.message).to.match(/not enabled/);
    });
  });
});

describe('idp helpers', () => {
  it('pending logins are single use, expire and stay bounded', () => {
    let now = 1_000_000;
    const pending = createPendingLogins({ ttlMs: 600_000, maxEntries: 3, now: () => now });
    const login = (n: number) => ({ nonce: `n${n}`, codeVerifier: `v${n}`, redirectUri: 'http://gw/api/idp/redirect' });
    pending.put('a', login(1));
    expect(pending.take('a')).to.deep.equal(login(1));
    expect(pending.take('a')).to.equal(undefined);
    pending.put('b', login(2));
    now += 600_000;
    expect(pending.take('b')).to.equal(undefined);
    for (const s of ['c', 'd', 'e', 'f']) pending.put(s, login(3));
    expect(pending.size()).to.equal(3);
    expect(pending.take('c')).to.equal(undefined); // the oldest made room
    expect(pending.take('f')).to.deep.equal(login(3));
  });

  it('reads groups and role group ids leniently', () => {
    expect(groupsOf(['a', 2, '', 'b'])).to.deep.equal(['a', 'b']);
    expect(groupsOf('single')).to.deep.equal(['single']);
    expect(groupsOf(undefined)).to.deep.equal([]);
    expect(claimValue({ realm_access: { roles: ['x'] } }, 'realm_access.roles')).to.deep.equal(['x']);
    expect(claimValue({ 'https://example/groups': ['y'] }, 'https://example/groups')).to.deep.equal(['y']);
    expect(roleGroupIds({ idpGroupIds: ' a, b ,,c ' })).to.deep.equal(['a', 'b', 'c']);
    expect(roleGroupIds({})).to.deep.equal([]);
  });

  it('allows plain http only for loopback issuers', () => {
    expect(isLoopbackHttp(new URL('http://127.0.0.1:4000'))).to.equal(true);
    expect(isLoopbackHttp(new URL('http://localhost:4000'))).to.equal(true);
    expect(isLoopbackHttp(new URL('http://[::1]:4000'))).to.equal(true);
    expect(isLoopbackHttp(new URL('http://10.0.0.5'))).to.equal(false);
    expect(isLoopbackHttp(new URL('https://127.0.0.1'))).to.equal(false);
  });
});
