// Revocation pushes to the clusters' management APIs (src/broker-hooks/revocation.ts and
// management-clients.ts). RabbitMQ's client also runs against the real cluster in
// test/broker-hooks-rabbitmq.test.ts. VerneMQ and EMQX cannot be installed here, so each
// management API is a small fake HTTP server in this test that answers the documented calls
// and records them: a peer stub, used only because the real brokers are not installable
// (EMQX: `GET /api/v5/clients?username=`, `DELETE /api/v5/clients/{clientid}`, emqx-docs
// en_US/admin/api.md; VerneMQ: vmq-admin over HTTP, `session/show`, `session/disconnect`,
// vmq-docs administration/http-administration.md and managing-sessions.md; RabbitMQ 3.10's
// management API as the real one answered in the cluster test).
import { EventEmitter } from 'node:events';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { createHash, randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { GOOD_PASSWORD, startGateway, type TestGateway } from './support/harness.js';
import { withTimeout } from './support/mqtt-test-kit.js';
import { startTcpProxy } from './support/tcp-proxy.js';
import { emqx, rabbitmq, vernemq } from './support/broker-hook-fixtures.js';

type Kind = 'rabbitmq' | 'vernemq' | 'emqx';
interface Call {
  method: string;
  path: string;
  authorization: string | undefined;
}
interface Session {
  username: string;
  clientId: string;
  /** RabbitMQ: not yet in the management statistics (GET/DELETE by name answer 404). */
  fresh?: boolean;
}

/** A management API that knows a set of sessions and records every call. */
class FakeManagement extends EventEmitter {
  readonly calls: Call[] = [];
  sessions: Session[] = [];
  private server?: Server;
  constructor(readonly kind: Kind) {
    super();
  }

  async listen(port = 0): Promise<string> {
    this.server = createServer((req, res) => {
      this.calls.push({ method: req.method!, path: req.url!, authorization: req.headers.authorization });
      const answer = this.answer(req);
      res.writeHead(answer.status, { 'content-type': 'application/json' });
      res.end(answer.body === undefined ? '' : JSON.stringify(answer.body));
      this.emit('call');
    });
    await new Promise<void>((resolve) => this.server!.listen(port, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as { port: number }).port}`;
  }

  close(): Promise<void> {
    return new Promise((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  /** Resolves once a recorded call matches. */
  until(pred: (c: Call) => boolean, ms = 10_000): Promise<Call> {
    const found = this.calls.find(pred);
    if (found) return Promise.resolve(found);
    return withTimeout(
      new Promise<Call>((resolve) => {
        const check = () => {
          const c = this.calls.find(pred);
          if (c) {
            this.off('call', check);
            resolve(c);
          }
        };
        this.on('call', check);
      }),
      ms,
      `no ${this.kind} call matched: ${JSON.stringify(this.calls)}`,
    );
  }

  private answer(req: IncomingMessage): { status: number; body?: unknown } {
    const url = new URL(req.url!, 'http://x');
    const parts = url.pathname.split('/').map(decodeURIComponent);
    const remove = (pred: (s: Session) => boolean) => {
      const before = this.sessions.length;
      this.sessions = this.sessions.filter((s) => !pred(s));
      return before - this.sessions.length;
    };
    if (this.kind === 'rabbitmq') {
      const name = (s: Session) => `127.0.0.1:${s.clientId} -> 127.0.0.1:1883`;
      if (parts[2] === 'connections' && parts[3] === 'username') {
        const user = parts[4];
        if (req.method === 'GET') return { status: 200, body: this.sessions.filter((s) => s.username === user).map((s) => ({ name: name(s), user })) };
        remove((s) => s.username === user);
        return { status: 204 };
      }
      if (parts[2] === 'connections' && parts[3]) {
        const s = this.sessions.find((x) => name(x) === parts[3]);
        if (!s || s.fresh) return { status: 404, body: { error: 'Object Not Found', reason: 'Not Found' } };
        if (req.method === 'GET') return { status: 200, body: { name: parts[3], user: s.username, client_properties: { client_id: s.clientId, product: 'MQTT client' } } };
        remove((x) => x === s);
        return { status: 204 };
      }
    }
    if (this.kind === 'emqx') {
      if (url.pathname === '/api/v5/clients' && req.method === 'GET') {
        const mine = this.sessions.filter((s) => s.username === url.searchParams.get('username'));
        const limit = Number(url.searchParams.get('limit'));
        const page = Number(url.searchParams.get('page'));
        return { status: 200, body: { data: mine.slice((page - 1) * limit, page * limit).map((s) => ({ clientid: s.clientId, username: s.username })), meta: { page, limit, hasnext: page * limit < mine.length } } };
      }
      if (parts[3] === 'clients' && parts[4] && req.method === 'DELETE') return remove((s) => s.clientId === parts[4]) ? { status: 204 } : { status: 404, body: { code: 'CLIENTID_NOT_FOUND' } };
    }
    if (this.kind === 'vernemq') {
      if (url.pathname === '/api/v1/session/show') {
        const mine = this.sessions.filter((s) => s.username === url.searchParams.get('--user'));
        return { status: 200, body: { table: mine.map((s) => ({ client_id: s.clientId, mountpoint: '' })), type: 'table' } };
      }
      if (url.pathname === '/api/v1/session/disconnect') {
        remove((s) => s.clientId === url.searchParams.get('client-id'));
        return { status: 200, body: { text: 'Done', type: 'text' } };
      }
    }
    return { status: 404, body: { error: 'unknown call' } };
  }
}

const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
type Grant = { resource: string; operation: 'read' | 'write' | 'readWrite'; context: 'mqtt' };
const mqttGrant = (resource: string): Grant => ({ resource, operation: 'readWrite', context: 'mqtt' });

describe('revocation pushes to the clusters', function () {
  this.timeout(30_000);
  const fakes = { rabbitmq: new FakeManagement('rabbitmq'), vernemq: new FakeManagement('vernemq'), emqx: new FakeManagement('emqx') };
  const creds = { rabbitPassword: randomBytes(8).toString('hex'), vernemqKey: randomBytes(8).toString('hex'), emqxSecret: randomBytes(8).toString('hex') };
  let gw: TestGateway;
  let admin: string;
  let serial = 0;

  before(async () => {
    const [r, v, e] = await Promise.all([fakes.rabbitmq.listen(), fakes.vernemq.listen(), fakes.emqx.listen()]);
    gw = await startGateway({
      overrides: {
        brokerHooks: {
          enabled: true,
          revocationRetryMaxSeconds: 1,
          rabbitmq: { vhost: '/', managementUrl: r, username: 'gatewayd', password: creds.rabbitPassword },
          vernemq: { managementUrl: v, apiKey: creds.vernemqKey },
          emqx: { managementUrl: e, apiKey: 'gatewayd-key', apiSecret: creds.emqxSecret },
        },
      },
    });
    admin = await gw.login();
  });
  after(async () => {
    await gw?.stop();
    await Promise.all(Object.values(fakes).map((f) => f.close()));
  });

  const post = (path: string, body: Record<string, unknown>, headers: Record<string, string> = {}) => {
    const form = path.startsWith('rabbitmq/');
    return fetch(`${gw.baseUrl}/api/broker/hooks/${path}`, {
      method: 'POST',
      headers: { 'content-type': form ? 'application/x-www-form-urlencoded' : 'application/json', ...headers },
      body: form ? new URLSearchParams(Object.entries(body).map(([k, v]): [string, string] => [k, String(v)])).toString() : JSON.stringify(body),
    }).then(async (r) => ({ status: r.status, text: await r.text() }));
  };
  /** The user's client signs in through each cluster's hook with `secret`, and the fakes know the sessions. */
  async function signInEverywhere(username: string, secret: string, tag: string): Promise<Record<Kind, string>> {
    const ids = { rabbitmq: `r-${tag}-${++serial}`, vernemq: `v-${tag}-${serial}`, emqx: `e-${tag}-${serial}` };
    expect((await post('rabbitmq/user', rabbitmq.user({ username, password: secret, clientId: ids.rabbitmq }))).text).to.equal('allow');
    expect((await post('vernemq', vernemq.authOnRegister({ username, password: secret, clientId: ids.vernemq }), { 'vernemq-hook': 'auth_on_register' })).text).to.equal('{"result":"ok"}');
    expect(JSON.parse((await post('emqx/authn', emqx.authn({ username, password: secret, clientId: ids.emqx }))).text).result).to.equal('allow');
    for (const kind of ['rabbitmq', 'vernemq', 'emqx'] as const) fakes[kind].sessions.push({ username, clientId: ids[kind] });
    return ids;
  }
  const callsFor = (kind: Kind, username: string) => fakes[kind].calls.filter((c) => c.path.includes(encodeURIComponent(username)) || c.path.includes(username));

  it('a deleted user: all of its sessions on every cluster, with each API\'s credentials', async () => {
    const u = await gw.userWith([mqttGrant('d/#')]);
    const ids = await signInEverywhere(u.username, GOOD_PASSWORD, 'del');
    fakes.emqx.sessions.push({ username: u.username, clientId: `e-other-${serial}` }); // one gatewayd never saw
    expect((await gw.api('DELETE', `/api/users/${u.id}`, { token: admin })).status).to.equal(200);
    const name = encodeURIComponent(u.username);
    const rabbitDelete = await fakes.rabbitmq.until((c) => c.method === 'DELETE' && c.path === `/api/connections/username/${name}`);
    expect(rabbitDelete.authorization).to.equal(basic('gatewayd', creds.rabbitPassword));
    const emqxList = await fakes.emqx.until((c) => c.method === 'GET' && c.path.startsWith(`/api/v5/clients?username=${name}`));
    expect(emqxList.authorization).to.equal(basic('gatewayd-key', creds.emqxSecret));
    await fakes.emqx.until((c) => c.method === 'DELETE' && c.path === `/api/v5/clients/${ids.emqx}`);
    await fakes.emqx.until((c) => c.method === 'DELETE' && c.path === `/api/v5/clients/e-other-${serial}`);
    const verneShow = await fakes.vernemq.until((c) => c.path.startsWith(`/api/v1/session/show?--user=${name}`));
    expect(verneShow.authorization, 'the API key as the Basic username').to.equal(basic(creds.vernemqKey, ''));
    await fakes.vernemq.until((c) => c.path === `/api/v1/session/disconnect?client-id=${ids.vernemq}&--cleanup`);
    for (const kind of ['rabbitmq', 'vernemq', 'emqx'] as const) expect(fakes[kind].sessions.filter((s) => s.username === u.username), kind).to.deep.equal([]);
    const revokedLine = (l: Record<string, unknown>) => l.message === 'mqtt.sessions.revoked' && l.username === u.username;
    await gw.waitForLog((l) => revokedLine(l) && gw.logs().filter(revokedLine).length >= 3, 5000);
    const audit = gw.logs().filter((l) => l.message === 'mqtt.sessions.revoked' && l.username === u.username);
    expect(audit.map((l) => l.via).sort()).to.deep.equal(['emqx', 'rabbitmq', 'vernemq']);
    expect(audit.every((l) => l.reason === 'user deleted' && l.audit === true)).to.equal(true);
    const logs = JSON.stringify(gw.logs());
    for (const secret of Object.values(creds)) expect(logs, 'management credentials are never logged').to.not.include(secret);
  });

  it('a revoked token: exactly the sessions that signed in with it', async () => {
    const u = await gw.userWith([mqttGrant('t/#')]);
    const byToken = await signInEverywhere(u.username, u.token, 'tok');
    const byPassword = await signInEverywhere(u.username, GOOD_PASSWORD, 'pw');
    const fp = createHash('sha256').update(u.token).digest('hex');
    expect((await gw.api('DELETE', `/api/users/${u.id}/tokens?tokenId=${fp}`, { token: admin })).status).to.equal(200);
    await fakes.emqx.until((c) => c.method === 'DELETE' && c.path === `/api/v5/clients/${byToken.emqx}`);
    await fakes.vernemq.until((c) => c.path === `/api/v1/session/disconnect?client-id=${byToken.vernemq}`);
    const rabbitName = encodeURIComponent(`127.0.0.1:${byToken.rabbitmq} -> 127.0.0.1:1883`);
    await fakes.rabbitmq.until((c) => c.method === 'DELETE' && c.path === `/api/connections/${rabbitName}`);
    for (const kind of ['rabbitmq', 'vernemq', 'emqx'] as const) {
      expect(fakes[kind].sessions.filter((s) => s.username === u.username).map((s) => s.clientId), kind).to.deep.equal([byPassword[kind]]);
    }
    expect(callsFor('emqx', u.username).filter((c) => c.method === 'GET'), 'no listing: the sessions were known').to.deep.equal([]);
    // A session signed in through a hook is refused on its next call once its token is revoked.
    const topic = await post('emqx/authz', emqx.authz({ username: u.username, clientId: byToken.emqx }, 'publish', 't/x'));
    expect(JSON.parse(topic.text)).to.deep.equal({ result: 'deny' });
    expect(JSON.parse((await post('emqx/authz', emqx.authz({ username: u.username, clientId: byPassword.emqx }, 'publish', 't/x'))).text)).to.deep.equal({ result: 'allow' });
  });

  it('RabbitMQ: a connection its statistics do not list yet cannot be told apart, so all of the user\'s go', async () => {
    const u = await gw.userWith([mqttGrant('f/#')]);
    const ids = await signInEverywhere(u.username, u.token, 'fresh');
    fakes.rabbitmq.sessions.find((s) => s.clientId === ids.rabbitmq)!.fresh = true;
    const fp = createHash('sha256').update(u.token).digest('hex');
    expect((await gw.api('DELETE', `/api/users/${u.id}/tokens?tokenId=${fp}`, { token: admin })).status).to.equal(200);
    await fakes.rabbitmq.until((c) => c.method === 'DELETE' && c.path === `/api/connections/username/${encodeURIComponent(u.username)}`);
  });

  it('a lost permission closes the sessions admitted with it; a new or a wider one closes nothing', async () => {
    const u = await gw.userWith([mqttGrant('p/a/#'), mqttGrant('p/b/#')]);
    const ids = await signInEverywhere(u.username, GOOD_PASSWORD, 'perm');
    expect((await gw.api('PUT', `/api/users/${u.id}`, { token: admin, body: { permissions: [mqttGrant('p/a/#'), mqttGrant('p/b/#'), mqttGrant('p/c/#')] } })).status).to.equal(200);
    // p/# covers every earlier grant (filter subsumption, not equality): nothing lost either.
    expect((await gw.api('PUT', `/api/users/${u.id}`, { token: admin, body: { permissions: [mqttGrant('p/#')] } })).status).to.equal(200);
    // Each cluster's pushes go in order: once a later user's push arrived, one for u would have.
    const marker = await gw.userWith([mqttGrant('m/#')]);
    const markerIds = await signInEverywhere(marker.username, GOOD_PASSWORD, 'marker');
    expect((await gw.api('DELETE', `/api/users/${marker.id}`, { token: admin })).status).to.equal(200);
    await fakes.rabbitmq.until((c) => c.method === 'DELETE' && c.path === `/api/connections/username/${encodeURIComponent(marker.username)}`);
    await fakes.vernemq.until((c) => c.path === `/api/v1/session/disconnect?client-id=${markerIds.vernemq}&--cleanup`);
    await fakes.emqx.until((c) => c.method === 'DELETE' && c.path === `/api/v5/clients/${markerIds.emqx}`);
    for (const kind of ['rabbitmq', 'vernemq', 'emqx'] as const) expect(callsFor(kind, u.username).concat(fakes[kind].calls.filter((c) => c.path.includes(ids[kind]))), kind).to.deep.equal([]);
    // Now a loss: p/# narrowed to p/a/#.
    expect((await gw.api('PUT', `/api/users/${u.id}`, { token: admin, body: { permissions: [mqttGrant('p/a/#')] } })).status).to.equal(200);
    await fakes.emqx.until((c) => c.method === 'DELETE' && c.path === `/api/v5/clients/${ids.emqx}`);
    await fakes.vernemq.until((c) => c.path === `/api/v1/session/disconnect?client-id=${ids.vernemq}`);
    await fakes.rabbitmq.until((c) => c.method === 'DELETE' && c.path === `/api/connections/${encodeURIComponent(`127.0.0.1:${ids.rabbitmq} -> 127.0.0.1:1883`)}`);
    // Its credentials still hold: a client back through a broker's login cache is decided on the
    // permissions as they are now, not locked out.
    const authz = async (topic: string) => JSON.parse((await post('emqx/authz', emqx.authz({ username: u.username, clientId: ids.emqx }, 'publish', topic))).text);
    expect(await authz('p/a/1')).to.deep.equal({ result: 'allow' });
    expect(await authz('p/b/1')).to.deep.equal({ result: 'deny' });
  });

  it('after a restart (no session known), a permission change drops all of the user\'s sessions', async () => {
    const u = await gw.userWith([mqttGrant('r/#')]);
    fakes.emqx.sessions.push({ username: u.username, clientId: `e-unknown-${++serial}` });
    expect((await gw.api('PUT', `/api/users/${u.id}`, { token: admin, body: { permissions: [mqttGrant('r/x')] } })).status).to.equal(200);
    await fakes.emqx.until((c) => c.method === 'DELETE' && c.path === `/api/v5/clients/e-unknown-${serial}`);
  });

  it('retries while a cluster is unreachable, and gets through once it is back', async () => {
    // The cluster is behind a proxy the test cuts and restores: a port left free for the
    // cluster to come back on could be taken by another process meanwhile (EADDRINUSE).
    const down = new FakeManagement('emqx');
    const target = new URL(await down.listen());
    const link = await startTcpProxy({ host: '127.0.0.1', port: Number(target.port) });
    link.cut();
    const gw2 = await startGateway({ overrides: { brokerHooks: { enabled: true, revocationRetryMaxSeconds: 1, emqx: { managementUrl: `http://127.0.0.1:${link.port}`, apiKey: 'k', apiSecret: 's' } } } });
    try {
      const u = await gw2.userWith([mqttGrant('u/#')]);
      const authn = await fetch(`${gw2.baseUrl}/api/broker/hooks/emqx/authn`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(emqx.authn({ username: u.username, password: GOOD_PASSWORD, clientId: 'e-down' })) });
      expect(((await authn.json()) as { result: string }).result).to.equal('allow');
      expect((await gw2.api('DELETE', `/api/users/${u.id}`, { token: await gw2.login() })).status).to.equal(200);
      await gw2.waitForLog((l) => l.message === 'cluster revocation push failed, retrying' && l.via === 'emqx', 5000);
      expect(down.calls, 'nothing got through the cut link').to.deep.equal([]);
      down.sessions.push({ username: u.username, clientId: 'e-down' });
      link.restore();
      await down.until((c) => c.method === 'DELETE' && c.path === '/api/v5/clients/e-down', 10_000);
      expect(down.sessions).to.deep.equal([]);
    } finally {
      await gw2.stop();
      await link.close();
      await down.close();
    }
  });
});
