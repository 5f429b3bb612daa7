// Bridges to a real Mosquitto 2 (started by the kit, its own port and data dir), through a TCP
// proxy the test controls for every outage: forward and back with prefixes, failover between
// URLs and a stalled link, queue limits, the runAs user's rights (also revoked while it runs),
// two gateways bridged both ways without a loop, and invalid bridge files.
import { copyFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { connect, endAllClients, subscribe, withTimeout } from './support/mqtt-test-kit.js';
import { ADMIN_PASSWORD, startGateway, type TestGateway } from './support/harness.js';
import { startMosquitto, freePort, type Mosquitto } from './support/mosquitto.js';
import { startTcpProxy, type TcpProxy } from './support/tcp-proxy.js';
import { bridgeService, bridgeState, putService, upstreamClient } from './bridges-support.js';

describe('bridges to an upstream Mosquitto', function () {
  this.timeout(60_000);
  let mosquitto: Mosquitto;
  let proxy: TcpProxy;
  let gw: TestGateway;
  let admin: string;

  before(async () => {
    mosquitto = await startMosquitto({ websocket: true, tls: true });
  });
  after(async () => mosquitto?.close());
  beforeEach(async () => {
    proxy = await startTcpProxy({ port: mosquitto.port });
    gw = await startGateway({ overrides: { mqtt: { sysIntervalSeconds: 1 } } });
    admin = await gw.login();
  });
  afterEach(async () => {
    await endAllClients();
    await gw?.stop();
    await proxy?.close();
  });

  const local = (options = {}) => connect(gw.ports.mqtt, { username: 'admin', password: ADMIN_PASSWORD, ...options });

  it('forwards out with the remote prefix and brings in with the local one, as its runAs user, no password in the answer', async () => {
    await gw.userWith(
      [
        { context: 'mqtt', resource: 'plant/#', operation: 'read' },
        { context: 'mqtt', resource: 'state/#', operation: 'read' },
        { context: 'mqtt', resource: 'edge/cmd/#', operation: 'write' },
      ],
      'bridge-cloud',
    );
    const up = await upstreamClient(mosquitto.port);
    await subscribe(up.client, 'site-a/#', 1);
    await putService(
      gw,
      admin,
      'cloud',
      bridgeService('uplink', {
        urls: [`mqtt://127.0.0.1:${proxy.port}`],
        runAs: 'bridge-cloud',
        clientId: 'site-a-gw1',
        remote: { username: 'site-a-gw1', password: 'cloud-secret-123' },
        topics: [
          { pattern: 'plant/#', direction: 'out', qos: 1, remotePrefix: 'site-a/' },
          { pattern: 'cmd/#', direction: 'in', qos: 1, localPrefix: 'edge/', remotePrefix: 'site-a/' },
          { pattern: 'state/#', direction: 'out', qos: 1, remotePrefix: 'site-a/', retainAsPublished: false },
        ],
      }),
    );
    await bridgeState(gw, 'cloud.uplink');
    const device = await local();
    const inbox = (await import('./support/mqtt-test-kit.js')).collect(device);
    await subscribe(device, 'edge/#', 1);
    await device.publishAsync('plant/line-1/temp', '21.5', { qos: 1 });
    expect(await up.inbox.until((m) => m.topic === 'site-a/plant/line-1/temp')).to.deep.include({ payload: '21.5' });
    await up.client.publishAsync('site-a/cmd/valve', 'open', { qos: 1 });
    expect(await inbox.until((m) => m.topic === 'edge/cmd/valve')).to.deep.include({ payload: 'open' });

    // Retained flags follow the rule: kept under plant/ (the default), cleared under state/.
    await device.publishAsync('plant/line-1/mode', 'auto', { qos: 1, retain: true });
    await device.publishAsync('state/line-1', 'running', { qos: 1, retain: true });
    await up.inbox.until((m) => m.topic === 'site-a/state/line-1');
    const late = await upstreamClient(mosquitto.port);
    await subscribe(late.client, ['site-a/plant/#', 'site-a/state/#'], 1);
    await late.inbox.until((m) => m.topic === 'site-a/plant/line-1/mode' && m.payload === 'auto');
    await up.client.publishAsync('site-a/plant/marker', 'm', { qos: 1 });
    await late.inbox.until((m) => m.topic === 'site-a/plant/marker');
    expect(late.inbox.messages.map((m) => m.topic)).to.deep.equal(['site-a/plant/line-1/mode', 'site-a/plant/marker']);

    const res = await gw.api('GET', '/api/bridges/cloud.uplink', { token: admin });
    expect(res.status).to.equal(200);
    expect(res.body).to.deep.include({ id: 'cloud.uplink', currentState: 'connected', targetState: 'connected', runAs: 'bridge-cloud' });
    expect(res.body.remote).to.deep.include({ connectedTo: `mqtt://127.0.0.1:${proxy.port}`, clientId: 'site-a-gw1', username: 'site-a-gw1' });
    expect(res.body.counters).to.deep.include({ forwarded: 3, received: 1 });
    expect(res.body.queue).to.deep.include({ messages: 0, bytes: 0 });
    const list = await gw.api('GET', '/api/bridges', { token: admin });
    expect(list.body.map((b: { id: string }) => b.id)).to.deep.equal(['cloud.uplink']);
    const asYaml = await gw.api('GET', '/api/services/cloud', { token: admin, headers: { accept: 'application/yaml' } });
    const asJson = await gw.api('GET', '/api/services/cloud', { token: admin });
    expect(asJson.body.resources.uplink.properties.remote.password).to.equal('********');
    for (const text of [JSON.stringify(res.body), JSON.stringify(list.body), JSON.stringify(gw.logs()), asYaml.body, JSON.stringify(asJson.body)]) expect(text).not.to.include('cloud-secret-123');
    // What was read can be written back: the redacted password stands for the stored one.
    const back = await gw.api('PUT', '/api/services/cloud', { token: admin, body: asJson.body });
    expect(back.status).to.equal(200);
    expect(back.body.changes.unchanged).to.deep.equal(['cloud.uplink']);
    const metrics = await gw.api('GET', '/metrics', { token: admin });
    expect(metrics.body).to.match(/gatewayd_bridge_forwarded_total\{bridge="cloud.uplink"\} 3/);
    expect(metrics.body).to.match(/gatewayd_bridge_connected\{bridge="cloud.uplink"\} 1/);
  });

  it('fails over to the next URL, notices a stalled link by its keepalive, and goes back to the first URL once it answers', async () => {
    await gw.userWith([{ context: 'mqtt', resource: 'plant/#', operation: 'read' }], 'bridge-fo');
    const second = await startTcpProxy({ port: mosquitto.port });
    try {
      proxy.cut();
      const urls = [`mqtt://127.0.0.1:${proxy.port}`, `mqtt://127.0.0.1:${second.port}`];
      await putService(gw, admin, 'fo', bridgeService('b', { urls, runAs: 'bridge-fo', remote: { keepaliveSeconds: 1 }, topics: [{ pattern: 'plant/#', direction: 'out', qos: 1 }] }));
      expect((await bridgeState(gw, 'fo.b')).remote.connectedTo).to.equal(urls[1]);
      const up = await upstreamClient(mosquitto.port);
      await subscribe(up.client, 'plant/#', 1);
      const device = await local();
      await device.publishAsync('plant/a', '1', { qos: 1 });
      await up.inbox.until((m) => m.payload === '1');

      // The second link hangs without closing: the keepalive (1 s) finds out.
      second.stall();
      proxy.restore();
      const lost = await bridgeState(gw, 'fo.b', (v) => v.currentState === 'reconnecting');
      expect(lost.message).to.be.a('string');
      await device.publishAsync('plant/a', '2', { qos: 1 });
      const back = await bridgeState(gw, 'fo.b', (v) => v.currentState === 'connected' && v.remote.connectedTo === urls[0]);
      expect(back.queue.messages === 0 || back.queue.messages === 1).to.equal(true);
      await up.inbox.until((m) => m.payload === '2');
    } finally {
      await second.close();
    }
  });

  it('drops the oldest messages beyond maxMessages during an outage, says so once, and sends the rest in order', async () => {
    await gw.userWith([{ context: 'mqtt', resource: 'plant/#', operation: 'read' }], 'bridge-q');
    await putService(gw, admin, 'q', bridgeService('b', { urls: [`mqtt://127.0.0.1:${proxy.port}`], runAs: 'bridge-q', topics: [{ pattern: 'plant/#', direction: 'out', qos: 1 }], queue: { maxMessages: 5 } }));
    await bridgeState(gw, 'q.b');
    const up = await upstreamClient(mosquitto.port);
    await subscribe(up.client, 'plant/#', 1);
    proxy.cut();
    await bridgeState(gw, 'q.b', (v) => v.currentState !== 'connected');
    const device = await local();
    for (let n = 1; n <= 8; n++) await device.publishAsync('plant/m', String(n), { qos: 1 });
    const full = await bridgeState(gw, 'q.b', (v) => v.queue.messages === 5);
    expect(full.queue.dropped.maxMessages).to.equal(3);
    const sys = (await import('./support/mqtt-test-kit.js')).collect(device);
    await subscribe(device, ['$SYS/broker/bridges/q.b/#', '$SYS/broker/connection/q.b/state'], 0);
    await sys.until((m) => m.topic === '$SYS/broker/bridges/q.b/queue/messages' && m.payload === '5', 5000);
    await sys.until((m) => m.topic === '$SYS/broker/bridges/q.b/queue/dropped/maxMessages' && m.payload === '3', 5000);
    await sys.until((m) => m.topic === '$SYS/broker/connection/q.b/state' && m.payload === '0', 5000);
    expect(gw.logs().filter((l) => l.message === 'bridge queue drops messages')).to.have.lengthOf(1);
    proxy.restore();
    await up.inbox.until((m) => m.payload === '8', 10_000);
    expect(up.inbox.messages.map((m) => m.payload)).to.deep.equal(['4', '5', '6', '7', '8']);
    await bridgeState(gw, 'q.b', (v) => v.queue.messages === 0);
    const ended = gw.logs().find((l) => l.message === 'bridge queue dropped messages');
    expect(ended).to.deep.include({ dropped: { maxMessages: 3 } });
    const metrics = await gw.api('GET', '/metrics', { token: admin });
    expect(metrics.body).to.match(/gatewayd_bridge_dropped_total\{bridge="q.b",reason="max_messages"\} 3/);
  });

  it('drains a backlog at drainRatePerSecond over a slow link, live messages behind it in order', async () => {
    await gw.userWith([{ context: 'mqtt', resource: 'plant/#', operation: 'read' }], 'bridge-d');
    await putService(gw, admin, 'd', bridgeService('b', { urls: [`mqtt://127.0.0.1:${proxy.port}`], runAs: 'bridge-d', topics: [{ pattern: 'plant/#', direction: 'out', qos: 1 }], queue: { drainRatePerSecond: 20 } }));
    await bridgeState(gw, 'd.b');
    const up = await upstreamClient(mosquitto.port);
    await subscribe(up.client, 'plant/#', 1);
    proxy.cut();
    await bridgeState(gw, 'd.b', (v) => v.currentState !== 'connected');
    const device = await local();
    for (let n = 1; n <= 30; n++) await device.publishAsync('plant/backlog', String(n), { qos: 1 });
    proxy.slow(4000);
    await bridgeState(gw, 'd.b');
    const started = Date.now();
    await device.publishAsync('plant/live', 'live', { qos: 1 });
    await up.inbox.until((m) => m.payload === 'live', 15_000);
    // A second's burst (20), then 20 per second: the other 10 and the live one take at least half a second.
    expect(Date.now() - started).to.be.at.least(400);
    expect(up.inbox.messages.map((m) => m.payload)).to.deep.equal([...[...Array(30).keys()].map((i) => String(i + 1)), 'live']);
  });

  it('holds the link down on disconnect while the queue fills, keeps the queue across a changed definition, drops it with the bridge', async () => {
    await gw.userWith([{ context: 'mqtt', resource: 'plant/#', operation: 'read' }], 'bridge-op');
    const spec = { urls: [`mqtt://127.0.0.1:${proxy.port}`], runAs: 'bridge-op', topics: [{ pattern: 'plant/#', direction: 'out', qos: 1 }] };
    await putService(gw, admin, 'op', bridgeService('b', spec));
    await bridgeState(gw, 'op.b');
    const up = await upstreamClient(mosquitto.port);
    await subscribe(up.client, 'plant/#', 1);
    const off = await gw.api('PUT', '/api/bridges/op.b/operation', { token: admin, body: { operation: 'disconnect' } });
    expect(off.status).to.equal(200);
    expect(off.body.targetState).to.equal('disabled');
    await bridgeState(gw, 'op.b', (v) => v.currentState === 'disabled');
    const device = await local();
    await device.publishAsync('plant/a', '1', { qos: 1 });
    // A changed definition restarts the bridge with its queue; the file's target applies again (as for connections).
    await putService(gw, admin, 'op', bridgeService('b', { ...spec, queue: { maxMessages: 1000 } }));
    const restarted = await bridgeState(gw, 'op.b', (v) => v.queue.limits.maxMessages === 1000);
    expect(restarted.targetState).to.equal('connected');
    await device.publishAsync('plant/a', '2', { qos: 1 });
    await up.inbox.until((m) => m.payload === '2');
    expect(up.inbox.messages.map((m) => m.payload)).to.deep.equal(['1', '2']);
    expect((await gw.api('PUT', '/api/bridges/op.nope/operation', { token: admin, body: { operation: 'connect' } })).status).to.equal(404);
    expect((await gw.api('PUT', '/api/bridges/op.b/operation', { token: admin, body: { operation: 'enable' } })).status).to.equal(400);

    // Removed from the files: stopped, and its queue goes with it.
    await bridgeState(gw, 'op.b', (v) => v.queue.messages === 0);
    await gw.api('PUT', '/api/bridges/op.b/operation', { token: admin, body: { operation: 'disconnect' } });
    await bridgeState(gw, 'op.b', (v) => v.currentState === 'disabled');
    await device.publishAsync('plant/a', '3', { qos: 1 });
    expect((await gw.api('DELETE', '/api/services/op', { token: admin })).status).to.equal(200);
    expect((await gw.api('GET', '/api/bridges/op.b', { token: admin })).status).to.equal(404);
    await putService(gw, admin, 'op', bridgeService('b', spec));
    const fresh = await bridgeState(gw, 'op.b');
    expect(fresh.queue.messages).to.equal(0);
    expect(gw.logs().find((l) => l.message === 'bridge removed: its queue is deleted')).to.deep.include({ id: 'op.b', messages: 1 });
  });

  it('never sends what runAs may not read, and stops a flow at once when the permission is revoked (audited)', async () => {
    const user = await gw.userWith([{ context: 'mqtt', resource: 'plant/allowed/#', operation: 'read' }], 'bridge-r');
    await putService(gw, admin, 'r', bridgeService('b', { urls: [`mqtt://127.0.0.1:${proxy.port}`], runAs: 'bridge-r', topics: [{ pattern: 'plant/#', direction: 'out', qos: 1 }] }));
    await bridgeState(gw, 'r.b');
    const up = await upstreamClient(mosquitto.port);
    await subscribe(up.client, 'plant/#', 1);
    const device = await local();
    await device.publishAsync('plant/secret/recipe', 'x', { qos: 1 });
    await device.publishAsync('plant/allowed/temp', '1', { qos: 1 });
    await up.inbox.until((m) => m.payload === '1');
    expect(up.inbox.messages.map((m) => m.topic)).to.deep.equal(['plant/allowed/temp']);
    expect(gw.logs().find((l) => l.message === 'bridge.flow.refused')).to.deep.include({ audit: true, bridge: 'r.b', topic: 'plant/secret/recipe', direction: 'out' });

    // Revoked while it runs: the next message stays home.
    const revoked = await gw.api('PUT', `/api/users/${user.id}`, { token: admin, body: { permissions: [{ context: 'mqtt', resource: 'plant/other/#', operation: 'read' }] } });
    expect(revoked.status).to.equal(200);
    const changed = gw.logs().find((l) => l.message === 'bridge.runAs.changed');
    expect(changed).to.deep.include({ audit: true, bridge: 'r.b', runAs: 'bridge-r' });
    expect(changed!.rules).to.deep.equal([{ rule: 0, direction: 'out', filter: 'plant/#', wholeFilter: false }]);
    await device.publishAsync('plant/allowed/temp', '2', { qos: 1 });
    await device.publishAsync('plant/other/temp', '3', { qos: 1 });
    await up.inbox.until((m) => m.payload === '3');
    expect(up.inbox.messages.map((m) => m.payload)).to.deep.equal(['1', '3']);
    const view = await gw.api('GET', '/api/bridges/r.b', { token: admin });
    expect(view.body.counters.refusedOut).to.equal(2);
    const refusals = gw.logs().filter((l) => l.message === 'bridge.flow.refused');
    expect(refusals.map((l) => l.topic)).to.deep.equal(['plant/secret/recipe', 'plant/allowed/temp']);
  });

  it('two gateways bridged both ways to one Mosquitto do not loop (MQTT 5 no-local and a 3.1.1 bridge)', async () => {
    const other = await startGateway();
    try {
      const otherAdmin = await other.login();
      const both = [{ pattern: 'plant/#', direction: 'both', qos: 1 }];
      const perms = [{ context: 'mqtt' as const, resource: 'plant/#', operation: 'readWrite' as const }];
      await gw.userWith(perms, 'bridge-a');
      await other.userWith(perms, 'bridge-b');
      await putService(gw, admin, 'loop', bridgeService('b', { urls: [`mqtt://127.0.0.1:${proxy.port}`], runAs: 'bridge-a', topics: both, protocolVersion: 5, clientId: 'gw-a' }));
      await putService(other, otherAdmin, 'loop', bridgeService('b', { urls: [mosquitto.url], runAs: 'bridge-b', topics: both, protocolVersion: 4, clientId: 'gw-b' }));
      await bridgeState(gw, 'loop.b');
      await bridgeState(other, 'loop.b');
      const up = await upstreamClient(mosquitto.port);
      await subscribe(up.client, 'plant/#', 1);
      const atA = await local();
      const inboxA = (await import('./support/mqtt-test-kit.js')).collect(atA);
      await subscribe(atA, 'plant/#', 1);
      const atB = await connect(other.ports.mqtt, { username: 'admin', password: ADMIN_PASSWORD });
      const inboxB = (await import('./support/mqtt-test-kit.js')).collect(atB);
      await subscribe(atB, 'plant/#', 1);

      await atA.publishAsync('plant/x', 'from-a', { qos: 1 });
      await atB.publishAsync('plant/y', 'from-b', { qos: 1 });
      // A marker after both: a loop would have sent more copies before it arrives everywhere.
      await inboxB.until((m) => m.payload === 'from-a');
      await inboxA.until((m) => m.payload === 'from-b');
      await atA.publishAsync('plant/z', 'marker', { qos: 1 });
      await Promise.all([inboxA, inboxB, up.inbox].map((i) => i.until((m) => m.payload === 'marker')));
      await withTimeout(new Promise((r) => setTimeout(r, 300)), 1000, 'settle');
      const count = (msgs: { payload: string }[], p: string) => msgs.filter((m) => m.payload === p).length;
      for (const [where, inbox] of [['A', inboxA], ['B', inboxB], ['upstream', up.inbox]] as const) {
        for (const p of ['from-a', 'from-b', 'marker']) expect(count(inbox.messages, p), `${p} at ${where}`).to.equal(1);
      }
    } finally {
      await other.stop();
    }
  });

  it('connects over mqtts with a client certificate from the data directory, and over ws', async () => {
    await gw.userWith([{ context: 'mqtt', resource: 'plant/#', operation: 'read' }], 'bridge-tls');
    const tls = mosquitto.tls!;
    mkdirSync(join(gw.dataDir, 'bridge-certs'));
    for (const [from, to] of [[tls.ca, 'ca.pem'], [tls.clientCert, 'gw.pem'], [tls.clientKey, 'gw.key']]) copyFileSync(from!, join(gw.dataDir, 'bridge-certs', to!));
    const files = { caFile: 'bridge-certs/ca.pem', certFile: 'bridge-certs/gw.pem', keyFile: 'bridge-certs/gw.key' };
    const topics = (prefix: string) => [{ pattern: 'plant/#', direction: 'out', qos: 1, remotePrefix: prefix }];
    await putService(gw, admin, 'tls', bridgeService('b', { urls: [`mqtts://127.0.0.1:${tls.port}`], runAs: 'bridge-tls', remote: files, topics: topics('tls/') }));
    await putService(gw, admin, 'ws', bridgeService('b', { urls: [`ws://127.0.0.1:${mosquitto.wsPort}`], runAs: 'bridge-tls', topics: topics('ws/') }));
    await putService(gw, admin, 'nocert', bridgeService('b', { urls: [`mqtts://127.0.0.1:${tls.port}`], runAs: 'bridge-tls', remote: { ...files, caFile: 'bridge-certs/missing.pem' }, topics: topics('x/') }));
    await bridgeState(gw, 'tls.b');
    await bridgeState(gw, 'ws.b');
    const refused = await bridgeState(gw, 'nocert.b', (v) => v.currentState === 'reconnecting');
    expect(refused.message).to.include('cannot read caFile missing.pem');
    const up = await upstreamClient(mosquitto.port);
    await subscribe(up.client, '#', 1);
    const device = await local();
    await device.publishAsync('plant/a', 'over-tls-and-ws', { qos: 1 });
    await up.inbox.until((m) => m.topic === 'tls/plant/a');
    await up.inbox.until((m) => m.topic === 'ws/plant/a');
    expect(up.inbox.messages.filter((m) => m.topic === 'x/plant/a')).to.deep.equal([]);
  });

  it('refuses a bridge file with a wrong URL or an unknown runAs, naming the path of each problem', async () => {
    const text = bridgeService('b', { urls: ['http://central:8883', 'mqtt://user:pw@central'], runAs: 'nobody-here', topics: [{ pattern: 'plant/#/x', direction: 'out' }] });
    const res = await gw.api('PUT', '/api/services/bad', { token: admin, raw: text, headers: { 'content-type': 'application/yaml' } });
    expect(res.status).to.equal(400);
    const paths = res.body.errors.map((e: { path: string }) => e.path);
    expect(paths).to.include.members(['resources.b.properties.remote.urls[0]', 'resources.b.properties.remote.urls[1]', 'resources.b.properties.runAs', 'resources.b.properties.topics[0].pattern']);
    expect(res.body.errors.find((e: { path: string }) => e.path.endsWith('runAs')).message).to.include('nobody-here');
    expect((await gw.api('GET', '/api/bridges', { token: admin })).body).to.deep.equal([]);
    const dead = await freePort();
    const schemaBad = bridgeService('b', { urls: [`mqtt://127.0.0.1:${dead}`], runAs: 'admin', topics: [{ pattern: 'plant/#', direction: 'sideways' }] });
    const res2 = await gw.api('POST', '/api/services/bad/validate', { token: admin, raw: schemaBad, headers: { 'content-type': 'application/yaml' } });
    expect(res2.body.valid).to.equal(false);
    expect(res2.body.problems[0].path).to.equal('resources.b.properties.topics[0].direction');
  });
});
