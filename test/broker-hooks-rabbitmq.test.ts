// gatewayd as the permission engine of a real two-node RabbitMQ 3.10 cluster (issue 19): both
// nodes ask gatewayd's hooks over rabbitmq_auth_backend_http (node B through
// rabbitmq_auth_backend_cache), carrying the hook secret as the URL's userinfo. mqtt.js and
// mosquitto_pub/mosquitto_sub clients on both nodes go through the same permission cases as the
// embedded broker (test/support/mqtt-permission-cases.ts), and revocation reaches open
// connections on both nodes through the management API.
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import type { MqttClient } from 'mqtt';
import { GOOD_PASSWORD, startGateway, type TestGateway } from './support/harness.js';
import { collect, connect, endAllClients, subscribe, withTimeout } from './support/mqtt-test-kit.js';
import { casesFor, runPermissionCase, startObserver, type ClientTool } from './support/mqtt-permission-cases.js';
import { freePort, startRabbitKit, type RabbitKit, type RabbitNode } from './support/rabbitmq.js';

type Grant = { resource: string; operation: 'read' | 'write' | 'readWrite'; context: 'mqtt' | 'http' };
const mqttGrant = (resource: string, operation: Grant['operation'] = 'readWrite'): Grant => ({ resource, operation, context: 'mqtt' });

/** Resolves when the client's connection closes. */
const whenClosed = (client: MqttClient) => new Promise<void>((resolve) => (client.disconnected ? resolve() : client.once('close', () => resolve())));

describe('RabbitMQ cluster with gatewayd as its auth backend', function () {
  this.timeout(60_000);
  let kit: RabbitKit;
  let a: RabbitNode;
  let b: RabbitNode;
  let gw: TestGateway;
  let admin: string;
  const secret = randomBytes(16).toString('hex');

  before(async function () {
    this.timeout(240_000);
    // The nodes need gatewayd's URL at start and gatewayd their management URL: a free port for gatewayd first.
    const httpPort = await freePort();
    const hooksUrl = `http://rabbitmq:${secret}@127.0.0.1:${httpPort}/api/broker/hooks/rabbitmq`;
    kit = await startRabbitKit();
    // Statistics every 500 ms: single connections can be closed once the management API lists them.
    const conf = ['collect_statistics_interval = 500'];
    [a, b] = await Promise.all([kit.startNode({ auth: { httpUrl: hooksUrl }, conf }), kit.startNode({ auth: { httpUrl: hooksUrl, cache: true, cacheTtlMs: 5000 }, conf })]);
    await kit.joinCluster(b!, a!);
    gw = await startGateway({
      overrides: {
        http: { port: httpPort },
        brokerHooks: {
          enabled: true,
          secret,
          allowFrom: ['127.0.0.1/32'],
          revocationRetryMaxSeconds: 2,
          rabbitmq: { vhost: '/', managementUrl: a!.managementUrl, username: a!.admin.username, password: a!.admin.password },
        },
      },
    });
    admin = await gw.login();
  });
  after(async function () {
    this.timeout(60_000);
    await gw?.stop();
    await kit?.destroy();
  });
  afterEach(() => endAllClients());

  it('runs as a two-node cluster', async () => {
    const nodes = (await a.api('GET', '/api/nodes')) as { name: string; running: boolean }[];
    expect(nodes.filter((n) => n.running).map((n) => n.name).sort()).to.deep.equal([a.name, b.name].sort());
  });

  // The permission table: every case with each client tool on each node, observed from the other node.
  for (const tool of ['mqtt.js', 'mosquitto'] as ClientTool[]) {
    for (const side of ['A', 'B'] as const) {
      describe(`${tool} on node ${side}`, () => {
        let observer: Awaited<ReturnType<typeof startObserver>>;
        const node = () => (side === 'A' ? a : b);
        const other = () => (side === 'A' ? b : a);
        before(async () => {
          observer = await startObserver(other().mqttPort, admin);
        });
        after(() => observer?.client.endAsync(true));
        for (const c of casesFor(false)) {
          it(`${c.name}: ${c.expect}`, () =>
            runPermissionCase({ gw, admin, broker: { rewritesTopics: false, port: node().mqttPort, observerPort: other().mqttPort }, observer, tool, c }));
        }
      });
    }
  }

  describe('revocation reaches open connections on both nodes', () => {
    async function connectedOnBoth(username: string, secrets: [string, string]) {
      const onA = await connect(a.mqttPort, { username, password: secrets[0], clientId: `rev-a-${randomBytes(4).toString('hex')}` });
      const onB = await connect(b.mqttPort, { username, password: secrets[1], clientId: `rev-b-${randomBytes(4).toString('hex')}` });
      return { onA, onB };
    }

    it('deleting the user closes its connections on both nodes, and it cannot come back', async () => {
      const u = await gw.userWith([mqttGrant('rev/#')]);
      const { onA, onB } = await connectedOnBoth(u.username, [GOOD_PASSWORD, u.token]);
      const both = withTimeout(Promise.all([whenClosed(onA), whenClosed(onB)]), 15_000, 'connections still open');
      expect((await gw.api('DELETE', `/api/users/${u.id}`, { token: admin })).status).to.equal(200);
      await both;
      // Node A has no auth cache: the next login asks gatewayd, which no longer knows the user.
      const err = await connect(a.mqttPort, { username: u.username, password: GOOD_PASSWORD }).then(
        () => undefined,
        (e: { code?: number }) => e,
      );
      expect(err?.code).to.be.oneOf([4, 5]);
      const audit = gw.logs().filter((l) => l.message === 'mqtt.sessions.revoked' && l.username === u.username);
      expect(audit.length, JSON.stringify(audit)).to.be.greaterThan(0);
      expect(audit[0]).to.include({ via: 'rabbitmq', reason: 'user deleted' });
    });

    it('revoking a token closes the connections that used it, on both nodes, and no other', async () => {
      const u = await gw.userWith([mqttGrant('tok/#')]);
      const second = await gw.login(u.username, GOOD_PASSWORD);
      const byToken = await connectedOnBoth(u.username, [u.token, u.token]);
      const byPassword = await connect(b.mqttPort, { username: u.username, password: GOOD_PASSWORD, clientId: `rev-pw-${randomBytes(4).toString('hex')}` });
      const bySecond = await connect(a.mqttPort, { username: u.username, password: second, clientId: `rev-t2-${randomBytes(4).toString('hex')}` });
      // RabbitMQ 3.10 closes one connection by name only once its statistics list it (else all of the user's go).
      const ids = [byToken.onA, byToken.onB, byPassword, bySecond].map((c) => c.options.clientId);
      for (let i = 0; i < 100; i++) {
        const listed = ((await a.api('GET', '/api/connections')) as { client_properties?: { client_id?: string } }[]).map((c) => c.client_properties?.client_id);
        if (ids.every((id) => listed.includes(id))) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      const { createHash } = await import('node:crypto');
      const fp = createHash('sha256').update(u.token).digest('hex');
      const both = withTimeout(Promise.all([whenClosed(byToken.onA), whenClosed(byToken.onB)]), 15_000, 'token connections still open');
      expect((await gw.api('DELETE', `/api/users/${u.id}/tokens?tokenId=${fp}`, { token: admin })).status).to.equal(200);
      await both;
      // The others still publish (the push that closed the two has been made by now).
      await byPassword.publishAsync('tok/still', 'yes', { qos: 1 });
      await bySecond.publishAsync('tok/still', 'yes', { qos: 1 });
      expect(byPassword.connected && bySecond.connected).to.equal(true);
    });

    it('losing a permission closes the connections (they had cached it), gaining one does not', async () => {
      const u = await gw.userWith([mqttGrant('perm/a/#'), mqttGrant('perm/b/#')]);
      const { onA, onB } = await connectedOnBoth(u.username, [u.token, GOOD_PASSWORD]);
      await onA.publishAsync('perm/a/1', 'x', { qos: 1 }); // RabbitMQ caches this topic decision per connection
      // A new grant: nothing lost, the connections stay.
      expect((await gw.api('PUT', `/api/users/${u.id}`, { token: admin, body: { permissions: [mqttGrant('perm/a/#'), mqttGrant('perm/b/#'), mqttGrant('perm/c/#')] } })).status).to.equal(200);
      await onB.publishAsync('perm/c/1', 'x', { qos: 1 });
      expect(onA.connected && onB.connected).to.equal(true);
      const both = withTimeout(Promise.all([whenClosed(onA), whenClosed(onB)]), 15_000, 'connections still open');
      expect((await gw.api('PUT', `/api/users/${u.id}`, { token: admin, body: { permissions: [mqttGrant('perm/b/#')] } })).status).to.equal(200);
      await both;
      // Reconnected, the lost topic is refused and the kept one allowed.
      const again = await connect(a.mqttPort, { username: u.username, password: u.token });
      await again.publishAsync('perm/b/1', 'kept', { qos: 1 });
      const gone = whenClosed(again);
      again.publish('perm/a/1', 'lost', { qos: 1 });
      await withTimeout(gone, 10_000, 'a publish on the lost topic was not refused');
    });
  });

  it('delivers across the nodes with the hooks deciding both ends', async () => {
    const writer = await gw.userWith([mqttGrant('x/+/temp', 'write')]);
    const reader = await gw.userWith([mqttGrant('x/#', 'read')]);
    const sub = await connect(b.mqttPort, { username: reader.username, password: reader.token });
    const inbox = collect(sub);
    expect(await subscribe(sub, 'x/#', 1)).to.deep.equal([1]);
    const pub = await connect(a.mqttPort, { username: writer.username, password: GOOD_PASSWORD });
    await pub.publishAsync('x/7/temp', '21.5', { qos: 1 });
    expect((await inbox.until((m) => m.topic === 'x/7/temp', 10_000)).payload).to.equal('21.5');
  });

  it('the nodes carry the hook secret; a call without it is refused with 403 and nothing about users', async () => {
    const u = await gw.userWith([mqttGrant('s/#')]);
    const form = new URLSearchParams({ username: u.username, password: GOOD_PASSWORD, vhost: '/', client_id: 'no-secret' });
    const res = await fetch(`${gw.baseUrl}/api/broker/hooks/rabbitmq/user`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: form });
    expect(res.status).to.equal(403);
    const text = await res.text();
    expect(text).to.not.include(u.username);
    expect(text).to.not.match(/allow|deny/);
    // The same login through a node (which sends the secret) is decided.
    const client = await connect(a.mqttPort, { username: u.username, password: GOOD_PASSWORD });
    expect(client.connected).to.equal(true);
  });
});
