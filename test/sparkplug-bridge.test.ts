// A Sparkplug B edge node that goes upstream through a Bridge (`via: !ref <Bridge>`, docs/sparkplug.md
// "Through a Bridge"), against the real gateway, real Mosquitto 2 brokers upstream (where the host
// is) and the test kit's Modbus peer: the node opens a session of its own on the bridge's
// remote (clean, its own client id, its NDEATH the will), so the host sees births, data and
// deaths as from any edge node, and its commands come back down; the bridge keeps its own
// session and queue beside it. The host decodes with Google's protobuf runtime
// (support/sparkplug-host.ts), not the daemon's.
import { expect } from 'chai';
import type { MqttClient } from 'mqtt';
import { ADMIN_PASSWORD, startGateway, type TestGateway } from './support/harness.js';
import { startMosquitto, type MosquittoBroker } from './support/mosquitto-broker.js';
import { SparkplugHost, seqsOf, type SparkplugMessage } from './support/sparkplug-host.js';
import { collect, connect } from './support/mqtt-test-kit.js';
import { startModbusServer, until, type ModbusTestServer } from './mapping-support.js';
import { edgePermissions, GROUP, pressService } from './sparkplug-support.js';

const metricNamed = (m: SparkplugMessage, name: string) => m.payload.metrics.find((x) => x.name === name);
const bdSeqOf = (m: SparkplugMessage) => Number(metricNamed(m, 'bdSeq')!.longValue);

/** The press of sparkplug-support.ts behind a Bridge `cloud` to `url`; the edge node `node` goes upstream through it. */
function service(o: { node: string; runAs: string; url: string; modbusPort: number; bridgeExtra?: string; via?: string }): string {
  const bridge = `  cloud:
    type: Bridge
    properties:
      remote: {urls: ["${o.url}"], clientId: bridge-${o.node}, keepaliveSeconds: 5, reconnectMaxSeconds: 1}
      runAs: bridge-cloud
      topics: [{pattern: "plant/#", direction: out, qos: 1}]
${o.bridgeExtra ?? ''}`;
  return pressService(o.modbusPort, { edgeNodeId: o.node, runAs: o.runAs, via: o.via ?? '!ref cloud', keepaliveSeconds: 5, resources: bridge });
}

describe('Sparkplug B edge node through a Bridge (via: !ref <Bridge>)', function () {
  this.timeout(90_000);
  let gw: TestGateway;
  let admin: string;
  let plc: ModbusTestServer;
  let upA: MosquittoBroker;
  let upB: MosquittoBroker;
  let hostA: SparkplugHost;
  let hostB: SparkplugHost;
  const clients: MqttClient[] = [];

  const putService = async (id: string, text: string) => {
    const res = await gw.api('PUT', `/api/services/${id}`, { token: admin, raw: text, headers: { 'content-type': 'application/yaml' } });
    expect(res.status, JSON.stringify(res.body)).to.be.oneOf([200, 201]);
  };
  const view = async (serviceId: string) => (await gw.api('GET', `/api/sparkplug/${serviceId}.edge`, { token: admin })).body;
  /** The node born (API) and its births at `host` (the NBIRTH of that bdSeq, a DBIRTH after it). */
  const born = async (serviceId: string, node: string, host: SparkplugHost) => {
    const v = await until(async () => {
      const x = await view(serviceId);
      return x.node?.state === 'born' && x.devices.every((d: { state: string }) => d.state === 'born') ? x : undefined;
    }, 20_000, `${node} born`);
    return until(() => {
      const nbirth = host.messages.filter((m) => m.type === 'NBIRTH' && m.edgeNodeId === node).at(-1);
      const dbirth = host.messages.filter((m) => m.type === 'DBIRTH' && m.edgeNodeId === node).at(-1);
      if (!nbirth || !dbirth || dbirth.index < nbirth.index || bdSeqOf(nbirth) !== v.node.bdSeq) return undefined;
      return { view: v, nbirth, dbirth, bdSeq: bdSeqOf(nbirth), alias: (name: string) => metricNamed(dbirth, name)!.alias! };
    }, 10_000, `${node} births at the host`);
  };

  before(async () => {
    [upA, upB, plc] = await Promise.all([startMosquitto(), startMosquitto(), startModbusServer()]);
    plc.holding[5] = 215;
    plc.holding[10] = 50;
    gw = await startGateway();
    admin = await gw.login();
    await gw.userWith([{ context: 'mqtt', operation: 'read', resource: 'plant/#' }], 'bridge-cloud');
    for (const node of ['gw1', 'gw2']) await gw.userWith(edgePermissions(node), `edge-${node}`);
    hostA = await SparkplugHost.connect(upA.url, GROUP, { protocolVersion: 4 });
    hostB = await SparkplugHost.connect(upB.url, GROUP, { protocolVersion: 4 });
    await putService('press', service({ node: 'gw1', runAs: 'edge-gw1', url: upA.url, modbusPort: plc.port }));
  });

  after(async () => {
    for (const c of clients) await c.endAsync(true).catch(() => undefined);
    for (const h of [hostA, hostB]) await h?.end().catch(() => undefined);
    await gw?.stop();
    await plc?.stop();
    for (const m of [upA, upB]) await m?.stop();
  });

  it('births reach the host on the bridge\'s remote through a session of the node\'s own (clean, its client id, the NDEATH its will); nothing on the gateway\'s broker; the bridge forwards beside it', async () => {
    const { view: v, nbirth, dbirth } = await born('press', 'gw1', hostA);
    expect(v.via).to.deep.equal({ kind: 'bridge', bridgeId: 'press.cloud', urls: [upA.url] });
    expect(v.node.server).to.equal(upA.url);
    expect(nbirth.payload.seq).to.equal(0);
    expect(dbirth.payload.seq).to.equal(1);
    expect(metricNamed(dbirth, 'temperature')!.floatValue).to.be.closeTo(21.5, 1e-5);
    // Mosquitto's log: the edge node's own clean session (c1) whose will is its NDEATH, QoS 1, not retained; the bridge's persistent one (c0).
    const log = upA.log();
    expect(log).to.match(/New client connected from \S+ as gatewayd-site-a-gw1 \(p2, c1, k5\)\.\n\d+: Will message specified \(\d+ bytes\) \(r0, q1\)\.\n\d+: \tspBv1\.0\/site-a\/NDEATH\/gw1\n/);
    expect(log).to.match(/New bridge connected from \S+ as bridge-gw1 \(p2, c0, k5\)/);

    // A rebirth goes upstream only: a subscriber of the gateway's broker sees none of it.
    const local = await connect(gw.ports.mqtt, { username: 'admin', password: ADMIN_PASSWORD, reconnectPeriod: 0 });
    clients.push(local);
    const inbox = collect(local);
    await local.subscribeAsync(['spBv1.0/#', 'mark'], { qos: 1 });
    const from = hostA.messages.length;
    await hostA.rebirth('gw1');
    await hostA.until((m) => m.type === 'DBIRTH', 10_000, from);
    // The bridge takes the gateway's plant/# up on its own session.
    const upstream = await connect(upA.port, { reconnectPeriod: 0 });
    clients.push(upstream);
    const upInbox = collect(upstream);
    await upstream.subscribeAsync('plant/#', { qos: 1 });
    await local.publishAsync('plant/line-1/temp', '21.5', { qos: 1 });
    await local.publishAsync('mark', 'x', { qos: 1 });
    await upInbox.until((m) => m.topic === 'plant/line-1/temp', 10_000);
    await inbox.until((m) => m.topic === 'mark', 10_000);
    expect(inbox.messages.map((m) => m.topic)).to.deep.equal(['mark']);
  });

  it('a DCMD from the host upstream writes the Modbus register through the endpoint; the value comes back as DDATA, seq going on', async () => {
    const { alias, nbirth } = await born('press', 'gw1', hostA);
    const from = hostA.messages.length;
    const written = new Promise<{ address: number; values: number[] }>((resolve) => plc.events.once('write', resolve));
    await hostA.command(`spBv1.0/${GROUP}/DCMD/gw1/press-7`, [{ alias: alias('setpoint'), intValue: 77 }]);
    expect(await written).to.deep.include({ address: 10, values: [77] });
    await hostA.until((m) => m.type === 'DDATA' && m.payload.metrics.some((x) => x.alias === alias('setpoint') && x.intValue === 77), 10_000, from);
    const seqs = seqsOf(hostA.messages, 'gw1', nbirth.index);
    seqs.forEach((seq, i) => expect(seq, `message ${i} after the NBIRTH`).to.equal(i % 256));
    expect((await view('press')).commands.DCMD.accepted).to.be.greaterThanOrEqual(1);
  });

  it('the bridge\'s disconnect holds the node down too (NDEATH with its bdSeq; dead, saying why); connect: births with the next bdSeq', async () => {
    const { bdSeq, dbirth } = await born('press', 'gw1', hostA);
    const op = (operation: string) => gw.api('PUT', '/api/bridges/press.cloud/operation', { token: admin, body: { operation } });
    try {
      expect((await op('disconnect')).status).to.equal(200);
      const ndeath = await hostA.until((m) => m.type === 'NDEATH' && m.edgeNodeId === 'gw1', 10_000, dbirth.index);
      expect(bdSeqOf(ndeath)).to.equal(bdSeq);
      const dead = await until(async () => {
        const v = await view('press');
        return v.node.state === 'dead' ? v : undefined;
      }, 10_000, 'node dead');
      expect(dead.node.message).to.match(/bridge press\.cloud is disabled/);
      expect(dead.currentState).to.equal('enabled');
    } finally {
      expect((await op('connect')).status).to.equal(200);
    }
    const again = await born('press', 'gw1', hostA);
    // No bdSeq was spent while held down (no CONNECT went out): the next session's is one more.
    expect(again.bdSeq).to.equal((bdSeq + 1) % 256);
    expect(again.nbirth.index).to.be.greaterThan(dbirth.index);
  });

  it('a new remote for the Bridge: NDEATH on the old broker, a new session and births on the new one; a change that leaves the remote alone leaves the node alone', async () => {
    const text = (url: string, bridgeExtra?: string) => service({ node: 'gw2', runAs: 'edge-gw2', url, modbusPort: plc.port, ...(bridgeExtra ? { bridgeExtra } : {}) });
    await putService('line2', text(upA.url));
    try {
      const first = await born('line2', 'gw2', hostA);
      // Only the bridge's queue changes: the bridge restarts, the edge node keeps its session.
      await putService('line2', text(upA.url, '      queue: {maxMessages: 5000}\n'));
      await until(async () => ((await gw.api('GET', '/api/bridges/line2.cloud', { token: admin })).body.queue.limits.maxMessages === 5000 ? true : undefined), 10_000, 'bridge restarted');
      expect((await view('line2')).node).to.include({ state: 'born', bdSeq: first.bdSeq });

      const fromB = hostB.messages.length;
      await putService('line2', text(upB.url, '      queue: {maxMessages: 5000}\n'));
      const ndeath = await hostA.until((m) => m.type === 'NDEATH' && m.edgeNodeId === 'gw2', 10_000, first.dbirth.index);
      expect(bdSeqOf(ndeath)).to.equal(first.bdSeq);
      const moved = await born('line2', 'gw2', hostB);
      expect(moved.nbirth.index).to.be.at.least(fromB);
      expect(moved.bdSeq).to.equal((first.bdSeq + 1) % 256);
      expect(moved.view.via.urls).to.deep.equal([upB.url]);
      expect(moved.view.node.server).to.equal(upB.url);
      expect(hostA.messages.slice(ndeath.index + 1).filter((m) => m.edgeNodeId === 'gw2')).to.deep.equal([]);
    } finally {
      expect((await gw.api('DELETE', '/api/services/line2', { token: admin })).status).to.equal(200);
    }
  });

  it('runAs bounds what the node publishes upstream: without write on its topics it stays dead with the reason and never connects there', async () => {
    await gw.userWith([{ context: 'mqtt', operation: 'read', resource: `spBv1.0/${GROUP}/#` }], 'edge-readonly');
    await putService('line3', service({ node: 'gw3', runAs: 'edge-readonly', url: upA.url, modbusPort: plc.port }));
    try {
      const v = await until(async () => {
        const x = await view('line3');
        return x.node.state === 'dead' ? x : undefined;
      }, 10_000, 'node dead');
      expect(v.node.message).to.equal(`runAs user edge-readonly may not publish spBv1.0/${GROUP}/NBIRTH/gw3`);
      expect(upA.log()).to.not.include('gatewayd-site-a-gw3');
      expect(hostA.messages.filter((m) => m.edgeNodeId === 'gw3')).to.deep.equal([]);
    } finally {
      expect((await gw.api('DELETE', '/api/services/line3', { token: admin })).status).to.equal(200);
    }
  });

  it('a via that names no Bridge (a Connection, an unknown resource) is refused with its path; a Bridge that is wrong itself is reported on its own', async () => {
    const refused = async (text: string) => {
      const res = await gw.api('PUT', '/api/services/bad', { token: admin, raw: text, headers: { 'content-type': 'application/yaml' } });
      expect(res.status).to.equal(400);
      return (res.body.errors as Array<{ path: string; message: string }>).map((e) => `${e.path}: ${e.message}`);
    };
    const base = { node: 'gw9', runAs: 'edge-gw1', url: upA.url, modbusPort: plc.port };
    expect(await refused(service({ ...base, via: '!ref plc' }))).to.deep.equal([
      `resources.edge.properties.via: "bad.plc" is not local, an upstream broker {urls: [...]}, or a Bridge of this service (!ref <name>)`,
    ]);
    expect(await refused(service({ ...base, via: '!ref nowhere' }))).to.deep.equal(['resources.edge.properties.via: !ref nowhere: no such resource or parameter']);
    expect(await refused(service({ ...base, url: 'http://127.0.0.1:1' }))).to.deep.equal(['resources.cloud.properties.remote.urls[0]: scheme http is not mqtt, mqtts, ws or wss']);
    expect((await gw.api('GET', '/api/services/bad', { token: admin })).status).to.equal(404);
  });
});
