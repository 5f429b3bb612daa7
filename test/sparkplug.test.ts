// Sparkplug B edge node (docs/design.md §14, docs/sparkplug.md) against the real gateway: a service
// file with a Modbus TCP peer (the test kit's), a Sparkplug resource publishing through the
// embedded broker as its runAs user, and a Sparkplug host written in the tests
// (support/sparkplug-host.ts) that decodes with Google's protobuf runtime, not the daemon's.
import { expect } from 'chai';
import type { MqttClient } from 'mqtt';
import { startGateway, GOOD_PASSWORD, type TestGateway } from './support/harness.js';
import { SparkplugHost, seqsOf, type SparkplugMessage } from './support/sparkplug-host.js';
import { startModbusServer, until, type ModbusTestServer } from './mapping-support.js';
import { edgePermissions, GROUP, pressService } from './sparkplug-support.js';

const NODE = 'gw1';
const DEVICE = 'press-7';

/** A SCADA host: reads everything Sparkplug, sends commands and its STATE. */
const HOST_PERMISSIONS = [
  { context: 'mqtt' as const, operation: 'read' as const, resource: 'spBv1.0/#' },
  { context: 'mqtt' as const, operation: 'write' as const, resource: `spBv1.0/${GROUP}/NCMD/#` },
  { context: 'mqtt' as const, operation: 'write' as const, resource: `spBv1.0/${GROUP}/DCMD/#` },
  { context: 'mqtt' as const, operation: 'write' as const, resource: 'spBv1.0/STATE/#' },
];

const metricNamed = (m: SparkplugMessage, name: string) => m.payload.metrics.find((x) => x.name === name);
const metricAliased = (m: SparkplugMessage, alias: number) => m.payload.metrics.find((x) => x.alias === alias);

describe('Sparkplug B edge node', function () {
  this.timeout(60_000);
  let gw: TestGateway;
  let admin: string;
  let plc: ModbusTestServer;
  let host: SparkplugHost;
  const hosts: SparkplugHost[] = [];
  const clients: MqttClient[] = [];

  const putService = async (id: string, text: string) => {
    const res = await gw.api('PUT', `/api/services/${id}`, { token: admin, raw: text, headers: { 'content-type': 'application/yaml' } });
    expect(res.status, JSON.stringify(res.body)).to.be.oneOf([200, 201]);
    return res.body;
  };
  const view = async (service = 'press') => (await gw.api('GET', `/api/sparkplug/${service}.edge`, { token: admin })).body;
  /**
   * Waits until the edge node and every device are born (the API says so, and the host has the
   * NBIRTH of that session and a DBIRTH after it); answers those births and the aliases.
   */
  const born = async (node = NODE, service = 'press') => {
    const v = await until(async () => {
      const x = await view(service);
      return x.node?.state === 'born' && x.devices.every((d: { state: string }) => d.state === 'born') ? x : undefined;
    }, 15_000, `${node} born`);
    return until(() => {
      const nbirth = host.messages.filter((m) => m.type === 'NBIRTH' && m.edgeNodeId === node).at(-1);
      const dbirth = host.messages.filter((m) => m.type === 'DBIRTH' && m.edgeNodeId === node).at(-1);
      if (!nbirth || !dbirth || dbirth.index < nbirth.index || metricNamed(nbirth, 'bdSeq')!.longValue !== String(v.node.bdSeq)) return undefined;
      return { nbirth, dbirth, bdSeq: Number(metricNamed(nbirth, 'bdSeq')!.longValue), alias: (name: string) => metricNamed(dbirth, name)!.alias! };
    }, 10_000, `${node} births at the host`);
  };
  const connectHost = async (username = 'scada') => {
    const h = await SparkplugHost.connect(`mqtt://127.0.0.1:${gw.ports.mqtt}`, GROUP, { username, password: GOOD_PASSWORD, protocolVersion: 4 });
    hosts.push(h);
    return h;
  };

  before(async () => {
    plc = await startModbusServer();
    plc.holding[5] = 215;
    plc.holding[10] = 50;
    gw = await startGateway();
    admin = await gw.login();
    await gw.userWith(edgePermissions(NODE), 'edge-gw1');
    await gw.userWith(HOST_PERMISSIONS, 'scada');
    host = await connectHost();
    await putService('press', pressService(plc.port));
  });

  after(async () => {
    for (const h of hosts) await h.end().catch(() => undefined);
    for (const c of clients) await c.endAsync(true).catch(() => undefined);
    await gw?.stop();
    await plc?.stop();
  });

  it('births: NBIRTH (seq 0, bdSeq Int64, Node Control/Rebirth false without alias), then DBIRTH with every metric, its type and value', async () => {
    const nbirth = await host.until((m) => m.type === 'NBIRTH');
    expect(nbirth.topic).to.equal(`spBv1.0/${GROUP}/NBIRTH/${NODE}`);
    expect(nbirth.qos).to.equal(0);
    expect(nbirth.retain).to.equal(false);
    expect(nbirth.payload.seq).to.equal(0);
    expect(nbirth.payload.timestamp).to.be.closeTo(Date.now(), 60_000);
    const bdSeq = metricNamed(nbirth, 'bdSeq')!;
    expect(bdSeq.datatype).to.equal(4); // Int64
    expect(bdSeq.longValue).to.match(/^\d+$/);
    const rebirth = metricNamed(nbirth, 'Node Control/Rebirth')!;
    expect(rebirth).to.include({ datatype: 11, booleanValue: false });
    expect(rebirth.alias).to.equal(undefined);

    const dbirth = await host.until((m) => m.type === 'DBIRTH');
    expect(dbirth.topic).to.equal(`spBv1.0/${GROUP}/DBIRTH/${NODE}/${DEVICE}`);
    expect(dbirth).to.include({ qos: 0, retain: false });
    expect(dbirth.payload.timestamp).to.be.closeTo(Date.now(), 60_000);
    expect(dbirth.payload.seq).to.equal(1);
    for (const m of [...nbirth.payload.metrics, ...dbirth.payload.metrics]) expect(m.timestamp, m.name).to.be.closeTo(Date.now(), 60_000);
    expect(dbirth.index).to.be.greaterThan(nbirth.index);
    const temperature = metricNamed(dbirth, 'temperature')!;
    expect(temperature.datatype).to.equal(9); // Float
    expect(temperature.floatValue).to.be.closeTo(21.5, 1e-5);
    expect(temperature.alias).to.be.a('number');
    expect(temperature.timestamp).to.be.closeTo(Date.now(), 60_000);
    const setpoint = metricNamed(dbirth, 'setpoint')!;
    expect(setpoint).to.include({ datatype: 3, intValue: 50 }); // Int32
    expect(setpoint.alias).to.not.equal(temperature.alias);
    // Nothing of the device before its birth.
    expect(host.messages.filter((m) => m.type === 'DDATA' && m.index < dbirth.index)).to.deep.equal([]);
  });

  it('reports by exception: a DDATA with only the metric that changed, by alias, with its datatype', async () => {
    const dbirth = await host.until((m) => m.type === 'DBIRTH');
    const temperatureAlias = metricNamed(dbirth, 'temperature')!.alias!;
    const from = host.messages.length;
    plc.holding[5] = 230;
    const ddata = await host.until((m) => m.type === 'DDATA' && metricAliased(m, temperatureAlias)?.isHistorical === undefined, 10_000, from);
    expect(ddata.topic).to.equal(`spBv1.0/${GROUP}/DDATA/${NODE}/${DEVICE}`);
    expect(ddata).to.include({ qos: 0, retain: false });
    expect(ddata.payload.timestamp).to.be.closeTo(Date.now(), 60_000);
    expect(ddata.payload.seq).to.be.a('number');
    const sent = metricAliased(ddata, temperatureAlias)!;
    expect(sent.timestamp).to.be.closeTo(Date.now(), 60_000);
    expect(sent.floatValue).to.be.closeTo(23, 1e-5);
    expect(sent.name).to.equal(undefined);
    expect(sent.datatype).to.equal(9); // datatypeInData: true by default
    expect(ddata.payload.metrics).to.have.lengthOf(1);
    // The value stays: no more DDATA for it while it does not change (several polls).
    await new Promise((r) => setTimeout(r, 300));
    expect(host.messages.slice(ddata.index + 1).filter((m) => m.type === 'DDATA' && metricAliased(m, temperatureAlias))).to.deep.equal([]);
  });

  it('NCMD Node Control/Rebirth: NBIRTH again (seq 0, the same bdSeq) and every DBIRTH; seq goes up by one across node and device messages', async () => {
    const before = await born();
    const from = host.messages.length;
    await host.rebirth(NODE);
    const nbirth = await host.until((m) => m.type === 'NBIRTH', 10_000, from);
    expect(nbirth.payload.seq).to.equal(0);
    expect(metricNamed(nbirth, 'bdSeq')!.longValue).to.equal(String(before.bdSeq));
    const dbirth = await host.until((m) => m.type === 'DBIRTH', 10_000, from);
    expect(dbirth.payload.seq).to.equal(1);
    expect(metricNamed(dbirth, 'temperature')).to.not.equal(undefined);
    // Data after the rebirth, then a second rebirth: the numbers never skip or repeat.
    for (const v of [240, 241, 242]) {
      const at = host.messages.length;
      plc.holding[5] = v;
      await host.until((m) => m.type === 'DDATA' && m.payload.metrics.some((x) => x.floatValue !== undefined && Math.abs(x.floatValue - v / 10) < 1e-4), 10_000, at);
    }
    const seqs = seqsOf(host.messages, NODE, nbirth.index);
    expect(seqs[0]).to.equal(0);
    seqs.forEach((seq, i) => expect(seq, `message ${i} after the NBIRTH`).to.equal(i % 256));
    expect(seqs.length).to.be.greaterThanOrEqual(5);
    expect((await view()).commands.NCMD.accepted).to.be.greaterThanOrEqual(1);
  });

  it('DCMD on a writable metric writes the Modbus register through the endpoint, and the new value comes back as DDATA', async () => {
    const { alias } = await born();
    const from = host.messages.length;
    const written = new Promise<{ address: number; values: number[] }>((resolve) => plc.events.once('write', resolve));
    await host.command(`spBv1.0/${GROUP}/DCMD/${NODE}/${DEVICE}`, [{ alias: alias('setpoint'), intValue: 77 }]);
    expect(await written).to.deep.include({ address: 10, values: [77] });
    expect(plc.holding[10]).to.equal(77);
    const ddata = await host.until((m) => m.type === 'DDATA' && metricAliased(m, alias('setpoint'))?.intValue === 77, 10_000, from);
    expect(ddata.deviceId).to.equal(DEVICE);
    const counts = (await view()).commands.DCMD;
    expect(counts.accepted).to.be.greaterThanOrEqual(1);
    // A control action in the audit trail: the host's command, written as the edge node's runAs.
    await gw.services.audit.settled();
    const audited = await until(async () => (await gw.api('GET', '/api/audit?endpoint=press.setpoint&category=control', { token: admin })).body.items.find((e: { details: { value?: unknown } }) => e.details.value === 77));
    expect(audited).to.deep.include({ action: 'endpoint written', outcome: 'success' });
    expect(audited.actor).to.include({ username: 'edge-gw1' });
    expect(audited.details).to.include({ via: 'Sparkplug host (DCMD to edge node press.edge)', topic: 'services/press/setpoint/set' });

    // A read-only metric is not written; neither is a value outside the metric's type.
    const refusedBefore = counts.refused;
    const writes: unknown[] = [];
    const onWrite = (w: unknown) => writes.push(w);
    plc.events.on('write', onWrite);
    await host.command(`spBv1.0/${GROUP}/DCMD/${NODE}/${DEVICE}`, [{ alias: alias('temperature'), floatValue: 99 }]);
    await host.command(`spBv1.0/${GROUP}/DCMD/${NODE}/${DEVICE}`, [{ alias: alias('setpoint'), longValue: '99999999999' }]);
    await until(async () => ((await view()).commands.DCMD.refused >= refusedBefore + 2 ? true : undefined), 10_000, 'two refusals');
    plc.events.off('write', onWrite);
    expect(writes).to.deep.equal([]);
    expect(plc.holding[10]).to.equal(77);
  });

  it('a read that fails gives the metric Quality BAD (0); the next good reading says GOOD (192) with its value', async () => {
    const { alias } = await born();
    const from = host.messages.length;
    plc.exception = 4; // server device failure: the connection stays up
    const bad = await host.until((m) => m.type === 'DDATA' && metricAliased(m, alias('temperature'))?.properties?.Quality !== undefined, 10_000, from);
    expect(metricAliased(bad, alias('temperature'))!.properties!.Quality).to.deep.include({ type: 3, intValue: 0 });
    const badView = (await view()).devices[0].metrics.find((m: { name: string }) => m.name === 'temperature');
    expect(badView.quality).to.equal('BAD');
    expect(badView.error).to.be.a('string');
    const at = host.messages.length;
    plc.holding[5] = 250;
    delete plc.exception;
    const good = await host.until((m) => m.type === 'DDATA' && metricAliased(m, alias('temperature'))?.properties?.Quality?.intValue === 192, 10_000, at);
    expect(metricAliased(good, alias('temperature'))!.floatValue).to.be.closeTo(25, 1e-5);
  });

  it('a device whose connection is lost gets a DDEATH, and a DBIRTH with fresh values once it is back', async () => {
    const { nbirth } = await born();
    const from = host.messages.length;
    const port = plc.port;
    await plc.stop();
    const ddeath = await host.until((m) => m.type === 'DDEATH', 10_000, from);
    expect(ddeath.topic).to.equal(`spBv1.0/${GROUP}/DDEATH/${NODE}/${DEVICE}`);
    expect(ddeath.payload.seq).to.be.a('number');
    expect(ddeath).to.include({ qos: 0, retain: false });
    expect(ddeath.payload.timestamp).to.be.closeTo(Date.now(), 60_000);
    const dead = await view();
    expect(dead.node.state).to.equal('born');
    expect(dead.devices[0].state).to.equal('dead');
    expect(dead.devices[0].metrics[0].quality).to.equal('STALE');

    plc = await startModbusServer(port);
    plc.holding[5] = 199;
    plc.holding[10] = 12;
    const dbirth = await host.until((m) => m.type === 'DBIRTH', 20_000, ddeath.index);
    expect(metricNamed(dbirth, 'temperature')!.floatValue).to.be.closeTo(19.9, 1e-5);
    expect(metricNamed(dbirth, 'setpoint')!.intValue).to.equal(12);
    // One session throughout: the NDEATH never came, the seq went on.
    expect(host.messages.slice(nbirth.index).filter((m) => m.type === 'NDEATH' || m.type === 'NBIRTH').length).to.be.lessThanOrEqual(1);
    const seqs = seqsOf(host.messages, NODE, nbirth.index);
    seqs.forEach((seq, i) => expect(seq).to.equal((seqs[0]! + i) % 256));
  });

  it('a change to the service file gives a new birth (NDEATH, then NBIRTH and DBIRTH with the new metric), not a daemon restart', async () => {
    const { bdSeq } = await born();
    const from = host.messages.length;
    await putService('press', pressService(plc.port, { extraMetric: true }));
    const ndeath = await host.until((m) => m.type === 'NDEATH', 10_000, from);
    expect(metricNamed(ndeath, 'bdSeq')!.longValue).to.equal(String(bdSeq));
    expect(ndeath.payload.metrics).to.have.lengthOf(1); // bdSeq only
    expect(ndeath.payload.seq).to.equal(undefined);
    const nbirth = await host.until((m) => m.type === 'NBIRTH', 10_000, from);
    expect(nbirth.index).to.be.greaterThan(ndeath.index);
    expect(metricNamed(nbirth, 'bdSeq')!.longValue).to.equal(String((bdSeq + 1) % 256));
    const dbirth = await host.until((m) => m.type === 'DBIRTH', 10_000, nbirth.index);
    expect(metricNamed(dbirth, 'raw')).to.deep.include({ datatype: 6, intValue: plc.holding[10] });
    await putService('press', pressService(plc.port));
    await host.until((m) => m.type === 'DBIRTH' && metricNamed(m, 'raw') === undefined, 10_000, dbirth.index);
  });

  it('with primaryHostId, births wait for the host STATE online; offline: NDEATH and a new session that waits; online again: births with the next bdSeq', async () => {
    await gw.userWith(edgePermissions('gw2'), 'edge-gw2');
    const from = host.messages.length;
    await putService('line2', pressService(plc.port, { edgeNodeId: 'gw2', runAs: 'edge-gw2', primaryHostId: 'scada' }).replace(`deviceId: ${DEVICE}`, 'deviceId: oven-2'));
    await until(async () => ((await view('line2')).node.state === 'waitingForHost' ? true : undefined), 10_000, 'waiting for the host');
    const state = (online: boolean, timestamp: number) => host.client.publishAsync('spBv1.0/STATE/scada', JSON.stringify({ online, timestamp }), { qos: 1, retain: true });
    try {
      const t1 = Date.now();
      await state(true, t1);
      const nbirth = await host.until((m) => m.type === 'NBIRTH' && m.edgeNodeId === 'gw2', 10_000, from);
      expect(host.messages.slice(from, nbirth.index).filter((m) => m.edgeNodeId === 'gw2')).to.deep.equal([]);
      await host.until((m) => m.type === 'DBIRTH' && m.edgeNodeId === 'gw2', 10_000, nbirth.index);
      const bdSeq = Number(metricNamed(nbirth, 'bdSeq')!.longValue);

      // A late death of an older host session (older timestamp) changes nothing.
      await state(false, t1 - 1000);
      await state(false, t1);
      const ndeath = await host.until((m) => m.type === 'NDEATH' && m.edgeNodeId === 'gw2', 10_000, nbirth.index);
      expect(metricNamed(ndeath, 'bdSeq')!.longValue).to.equal(String(bdSeq));
      await until(async () => ((await view('line2')).node.state === 'waitingForHost' ? true : undefined), 10_000, 'waiting again');
      expect((await view('line2')).node.bdSeq).to.equal((bdSeq + 1) % 256);

      await state(true, t1 + 10);
      const again = await host.until((m) => m.type === 'NBIRTH' && m.edgeNodeId === 'gw2', 10_000, ndeath.index);
      expect(metricNamed(again, 'bdSeq')!.longValue).to.equal(String((bdSeq + 1) % 256));
      expect(host.of('NDEATH').filter((m) => m.edgeNodeId === 'gw2')).to.have.lengthOf(1);
    } finally {
      await host.client.publishAsync('spBv1.0/STATE/scada', '', { qos: 1, retain: true });
      const at = host.messages.length;
      expect((await gw.api('DELETE', '/api/services/line2', { token: admin })).status).to.equal(200);
      // Removed: it leaves with an NDEATH of its own.
      await host.until((m) => m.type === 'NDEATH' && m.edgeNodeId === 'gw2', 10_000, at);
    }
  });


  it('the permission engine decides: an NCMD from a client without write permission never arrives; runAs without a permission leaves the node dead with the reason', async () => {
    await born();
    await gw.userWith([{ context: 'mqtt', operation: 'read', resource: 'spBv1.0/#' }], 'viewer');
    const viewer = await connectHost('viewer');
    const accepted = (await view()).commands.NCMD.accepted;
    const from = host.messages.length;
    const closed = new Promise<void>((resolve) => viewer.client.once('close', () => resolve()));
    await viewer.rebirth(NODE).catch(() => undefined);
    await closed; // MQTT 3.1.1: a forbidden publish ends the connection
    await host.rebirth(NODE);
    const nbirth = await host.until((m) => m.type === 'NBIRTH', 10_000, from);
    // Only the host's own NCMD reached the broker's subscribers and the edge node.
    expect(host.messages.slice(from, nbirth.index).filter((m) => m.type === 'NCMD')).to.have.lengthOf(1);
    await until(async () => ((await view()).commands.NCMD.accepted === accepted + 1 ? true : undefined), 10_000, 'one rebirth accepted');

    await gw.userWith([{ context: 'mqtt', operation: 'read', resource: 'spBv1.0/#' }], 'edge-readonly');
    const two = `resources:
  plc:
    type: Connection
    properties: {protocol: Modbus, configuration: {host: 127.0.0.1, port: ${plc.port}}}
  temperature:
    type: Endpoint
    properties: {connection: !ref plc, operation: read, address: {table: holding, address: 5}, pollIntervalMs: 200}
  readonly:
    type: Sparkplug
    properties: {groupId: ${GROUP}, edgeNodeId: gw3, runAs: edge-readonly, devices: [{deviceId: d, metrics: [{name: t, endpoint: !ref temperature, datatype: Float}]}]}
  ghost:
    type: Sparkplug
    properties: {groupId: ${GROUP}, edgeNodeId: gw4, runAs: nobody-here, devices: [{deviceId: d, metrics: [{name: t, endpoint: !ref temperature, datatype: Float}]}]}
`;
    await putService('line3', two);
    try {
      const readonly = await until(async () => {
        const v = (await gw.api('GET', '/api/sparkplug/line3.readonly', { token: admin })).body;
        return v.node.state === 'dead' ? v : undefined;
      }, 10_000, 'readonly dead');
      expect(readonly.node.message).to.equal(`runAs user edge-readonly may not publish spBv1.0/${GROUP}/NBIRTH/gw3`);
      const ghost = await until(async () => {
        const v = (await gw.api('GET', '/api/sparkplug/line3.ghost', { token: admin })).body;
        return v.node.state === 'dead' ? v : undefined;
      }, 10_000, 'ghost dead');
      expect(ghost.node.message).to.equal('runAs user nobody-here does not exist');
      expect(host.messages.filter((m) => m.edgeNodeId === 'gw3' || m.edgeNodeId === 'gw4')).to.deep.equal([]);
    } finally {
      await gw.api('DELETE', '/api/services/line3', { token: admin });
    }
  });

  it('a DCMD is written only when runAs may write the endpoint\'s <topic>/set', async () => {
    await gw.userWith(edgePermissions('gw5', false), 'edge-gw5');
    const from = host.messages.length;
    await putService('line5', pressService(plc.port, { edgeNodeId: 'gw5', runAs: 'edge-gw5' }));
    try {
      const { alias } = await born('gw5', 'line5');
      const writes: unknown[] = [];
      const onWrite = (w: unknown) => writes.push(w);
      plc.events.on('write', onWrite);
      await host.command(`spBv1.0/${GROUP}/DCMD/gw5/${DEVICE}`, [{ alias: alias('setpoint'), intValue: 5 }]);
      await until(async () => ((await view('line5')).commands.DCMD.refused === 1 ? true : undefined), 10_000, 'refused');
      plc.events.off('write', onWrite);
      expect(writes).to.deep.equal([]);
      expect(host.messages.slice(from).filter((m) => m.type === 'DDATA' && m.edgeNodeId === 'gw5' && metricAliased(m, alias('setpoint'))?.intValue === 5)).to.deep.equal([]);
    } finally {
      await gw.api('DELETE', '/api/services/line5', { token: admin });
    }
  });

  it('GET /api/sparkplug and /api/sparkplug/{id}: state, devices, last values; the operation disables (NDEATH) and enables (births); /metrics counts births, data and commands', async () => {
    await born();
    const list = await gw.api('GET', '/api/sparkplug', { token: admin });
    expect(list.status).to.equal(200);
    const edge = list.body.find((e: { id: string }) => e.id === 'press.edge');
    expect(edge).to.deep.include({ groupId: GROUP, edgeNodeId: NODE, runAs: 'edge-gw1', currentState: 'enabled', targetState: 'enabled', via: { kind: 'local' } });
    expect(edge.node.state).to.equal('born');
    expect(edge.node.server).to.match(/^mqtt:\/\/127\.0\.0\.1:\d+$/);
    const metrics = edge.devices[0].metrics;
    expect(edge.devices[0]).to.include({ deviceId: DEVICE, state: 'born' });
    expect(metrics.map((m: { name: string }) => m.name)).to.deep.equal(['temperature', 'setpoint']);
    expect(metrics[0]).to.include({ datatype: 'Float', writable: false, quality: 'GOOD', value: plc.holding[5]! / 10 });
    expect(metrics[1]).to.include({ datatype: 'Int32', writable: true, quality: 'GOOD', value: plc.holding[10] });
    expect((await gw.api('GET', '/api/sparkplug/press.nothing', { token: admin })).status).to.equal(404);
    const schema = await gw.api('GET', '/api/sparkplug/schema', { token: admin });
    expect(schema.body.title).to.equal('Sparkplug');

    const from = host.messages.length;
    const off = await gw.api('PUT', '/api/sparkplug/press.edge/operation', { token: admin, body: { operation: 'disable' } });
    expect(off.status).to.equal(200);
    expect(off.body.targetState).to.equal('disabled');
    await host.until((m) => m.type === 'NDEATH', 10_000, from);
    await until(async () => ((await view()).currentState === 'disabled' ? true : undefined), 10_000, 'disabled');
    expect((await view()).node.state).to.equal('disabled');
    await gw.api('PUT', '/api/sparkplug/press.edge/operation', { token: admin, body: { operation: 'enable' } });
    await host.until((m) => m.type === 'DBIRTH', 10_000, from);
    await host.rebirth(NODE);
    await until(async () => ((await view()).commands.NCMD.accepted > 0 ? true : undefined), 10_000, 'a rebirth');

    const text = (await gw.api('GET', '/metrics', { token: admin })).body as string;
    const value = (line: string) => Number(text.split('\n').find((l) => l.startsWith(line + ' '))?.split(' ')[1]);
    expect(value('gatewayd_sparkplug_edge_node_born{edge_node="press.edge"}')).to.equal(1);
    expect(value('gatewayd_sparkplug_messages_total{edge_node="press.edge",type="NBIRTH"}')).to.be.greaterThanOrEqual(2);
    expect(value('gatewayd_sparkplug_messages_total{edge_node="press.edge",type="DBIRTH"}')).to.be.greaterThanOrEqual(2);
    expect(value('gatewayd_sparkplug_messages_total{edge_node="press.edge",type="DDATA"}')).to.be.a('number');
    expect(value('gatewayd_sparkplug_commands_total{edge_node="press.edge",type="NCMD",result="accepted"}')).to.be.greaterThanOrEqual(1);
  });

  it('MQTT 5: an intentional end is a DISCONNECT with reason 0x04, so the broker publishes the will: one NDEATH, the one registered at CONNECT', async () => {
    await gw.userWith(edgePermissions('gw6'), 'edge-gw6');
    const from = host.messages.length;
    await putService('line6', pressService(plc.port, { edgeNodeId: 'gw6', runAs: 'edge-gw6' }).replace('      birthWaitMs: 2000\n', '      birthWaitMs: 2000\n      protocolVersion: 5\n'));
    try {
      const { nbirth, bdSeq } = await born('gw6', 'line6');
      const off = await gw.api('PUT', '/api/sparkplug/line6.edge/operation', { token: admin, body: { operation: 'disable' } });
      expect(off.status).to.equal(200);
      const ndeath = await host.until((m) => m.type === 'NDEATH' && m.edgeNodeId === 'gw6', 10_000, from);
      expect(metricNamed(ndeath, 'bdSeq')!.longValue).to.equal(String(bdSeq));
      // The will's payload was made before the CONNECT: older than the NBIRTH (an NDEATH of the node's own would be newer).
      expect(ndeath.payload.timestamp).to.be.at.most(nbirth.payload.timestamp!);
      await until(async () => ((await view('line6')).currentState === 'disabled' ? true : undefined), 10_000, 'disabled');
      // A marker after the disable arrives after anything the broker would still send for the node.
      await host.client.publishAsync(`spBv1.0/${GROUP}/NCMD/marker`, 'x', { qos: 1 });
      await host.until((m) => m.type === 'NCMD' && m.edgeNodeId === 'marker', 10_000, ndeath.index);
      expect(host.messages.filter((m) => m.type === 'NDEATH' && m.edgeNodeId === 'gw6')).to.have.lengthOf(1);
    } finally {
      await gw.api('DELETE', '/api/services/line6', { token: admin });
    }
  });

  it('a Sparkplug resource that does not fit is refused with the path of each problem, and nothing runs', async () => {
    const bad = `resources:
  plc:
    type: Connection
    properties: {protocol: Modbus, configuration: {host: 127.0.0.1, port: ${plc.port}}}
  t:
    type: Endpoint
    properties: {connection: !ref plc, operation: read, address: {table: holding, address: 5}, pollIntervalMs: 100}
  w:
    type: Endpoint
    properties: {connection: !ref plc, operation: write, address: {table: holding, address: 6}}
  edge:
    type: Sparkplug
    properties:
      groupId: ${GROUP}
      edgeNodeId: gw9
      runAs: edge-gw1
      via: elsewhere
      devices:
        - deviceId: d
          metrics:
            - {name: Temp, endpoint: !ref plc, datatype: Float}
            - {name: temp, endpoint: !ref t, datatype: Float, writable: true}
            - {name: w, endpoint: !ref w, datatype: Int16}
        - deviceId: D
          metrics: [{name: x, endpoint: !ref t, datatype: Float}]
  other:
    type: Sparkplug
    properties: {groupId: "a/b", edgeNodeId: gw8, runAs: edge-gw1, devices: [{deviceId: d, metrics: [{name: x, endpoint: !ref t, datatype: DataSet}]}]}
`;
    const res = await gw.api('PUT', '/api/services/bad', { token: admin, raw: bad, headers: { 'content-type': 'application/yaml' } });
    expect(res.status).to.equal(400);
    const problems = Object.fromEntries((res.body.errors as Array<{ path: string; message: string }>).map((e) => [e.path, e.message]));
    const at = 'resources.edge.properties';
    expect(problems[`${at}.via`]).to.match(/not local, an upstream broker/);
    expect(problems[`${at}.devices[0].metrics[0].endpoint`]).to.match(/is not an Endpoint of this service/);
    expect(problems[`${at}.devices[0].metrics[1].name`]).to.match(/used twice .*ignoring case/);
    expect(problems[`${at}.devices[0].metrics[1].writeEndpoint`]).to.match(/needs writeEndpoint/);
    expect(problems[`${at}.devices[0].metrics[2].writable`]).to.match(/is a write endpoint: set writable: true/);
    expect(problems[`${at}.devices[1].deviceId`]).to.match(/used twice .*ignoring case/);
    expect(problems['resources.other.properties.groupId']).to.match(/pattern/);
    expect(problems['resources.other.properties.devices[0].metrics[0].datatype']).to.match(/allowed values/);
    expect((await gw.api('GET', '/api/services/bad', { token: admin })).status).to.equal(404);
    expect((await gw.api('GET', '/api/sparkplug', { token: admin })).body.map((e: { id: string }) => e.id)).to.not.include('bad.edge');
  });

});
