// Sparkplug history (docs/sparkplug.md "History", issue 31): what an edge node reads while it is not
// born is kept through the storage policy and published after its next births as historical DDATA
// (is_historical), in order, before live values resume, without a gap in seq.
// - The parts on a real LMDB store: kept values in order, never written when delivered before their
//   commit, bounds, a reopen; the replay: a slice leaves the history only once the broker answered
//   a PINGREQ sent after it.
// - The gateway: a host outage (STATE offline, online), a link outage (the test kit's TCP proxy
//   between the edge node and the broker, cut, and slowed so the link dies in the middle of the
//   replay), bounds in the resource, bad bounds refused with their path; the host decodes with
//   Google's protobuf runtime, and with Eclipse Tahu's JavaScript codec (sparkplug-payload) for the
//   datatype on DATA metrics.
import { expect } from 'chai';
import { rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { Writable } from 'node:stream';
import { createLogger } from '../src/log/index.js';
import { realTimers } from '../src/mapping/drivers/types.js';
import { EdgeDevices } from '../src/sparkplug/edge-devices.js';
import { HistoryReplay } from '../src/sparkplug/history-replay.js';
import { HISTORY_DATABASE, NodeHistory, type StoredValue } from '../src/sparkplug/node-history.js';
import type { MetricMessage } from '../src/sparkplug/payload-codec.js';
import { openStore, type Store } from '../src/store/index.js';
import { createStoragePolicy, type StagedTable, type StoragePolicy } from '../src/storage/index.js';
import { GOOD_PASSWORD, startGateway, tempDir, type TestGateway } from './support/harness.js';
import { SparkplugHost, seqsOf, type HostMetric, type SparkplugMessage } from './support/sparkplug-host.js';
import { backupAndDownload, upload, waitIdle } from './support/maintenance-kit.js';
import { startTcpProxy, type TcpProxy } from './support/tcp-proxy.js';
import { startModbusServer, until, type ModbusTestServer } from './mapping-support.js';
import { edgePermissions, GROUP, pressService } from './sparkplug-support.js';

const lines: string[] = [];
const quiet = createLogger({ level: 'warn', stream: new Writable({ write: (c, _e, cb) => (lines.push(String(c)), cb()) }) });

describe('Sparkplug history: kept values on a real store, and their replay', function () {
  this.timeout(20_000);
  let dir: string;
  let store: Store;
  let policy: StoragePolicy;
  let table: StagedTable<StoredValue>;
  const timings = { holdMs: 200, commitIntervalMs: 50, backgroundCommitMs: 600 };
  const open = () => {
    store = openStore({ dir });
    policy = createStoragePolicy({ store, timings });
    table = policy.table<StoredValue>(HISTORY_DATABASE, { keyEncoding: 'ordered-binary' });
  };
  const history = (limits: ConstructorParameters<typeof NodeHistory>[2] = { maxValues: 100, maxAgeSeconds: 0, durability: 'prompt' }, now?: () => number) => new NodeHistory({ table, store }, 'svc.edge', limits, quiet, now);

  beforeEach(() => {
    dir = tempDir('gatewayd-sparkplug-history-');
    open();
  });
  afterEach(async () => {
    await policy.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('keeps values in order; one delivered before its commit is never written; the count and the next seq survive a reopen', async () => {
    const h = history();
    h.keep('d', 'a', 10, 1, 0);
    h.keep('d', 'a', 20, 2, 0);
    h.keep('d', 'b', 30, 'x', 1);
    expect(h.read(0, 10).map((v) => [v.seq, v.metric, v.timestamp, v.value, v.quality])).to.deep.equal([
      [0, 'a', 10, 1, 0],
      [1, 'a', 20, 2, 0],
      [2, 'b', 30, 'x', 1],
    ]);
    expect(h.figures()).to.include({ values: 3, staged: 3 });
    h.delivered(h.read(0, 1));
    await policy.flush();
    expect(policy.stats()).to.include({ cancelledWrites: 1, committedWrites: 2 });
    expect([...table.db.getKeys({ start: ['svc.edge', 0], end: ['svc.edge', Number.MAX_SAFE_INTEGER] })]).to.deep.equal([
      ['svc.edge', 1],
      ['svc.edge', 2],
    ]);
    expect(h.figures()).to.include({ values: 2, staged: 0, published: 1 });

    await policy.close();
    await store.close();
    open();
    const again = history();
    expect(again.size).to.equal(2);
    again.keep('d', 'a', 40, 3, 0);
    expect(again.read(0, 10).map((v) => v.seq)).to.deep.equal([1, 2, 3]);
  });

  it('durability background: a kept value reaches the flash with the background commits, not the next prompt one', async () => {
    const h = history({ maxValues: 100, maxAgeSeconds: 0, durability: 'background' });
    const t = Date.now();
    h.keep('d', 'a', 10, 1, 0);
    expect(h.figures().staged).to.equal(1);
    await until(() => (h.figures().staged === 0 ? true : undefined), 5000, 'on flash');
    expect(Date.now() - t, 'not before storage.backgroundCommitMs').to.be.at.least(timings.backgroundCommitMs - 20);
    expect([...table.db.getKeys({ start: ['svc.edge', 0], end: ['svc.edge', 1] })]).to.deep.equal([['svc.edge', 0]]);
  });

  it('beyond maxValues and maxAgeSeconds the oldest go first, counted by reason and said once in the log', () => {
    lines.length = 0;
    let now = 1_000_000;
    const h = history({ maxValues: 3, maxAgeSeconds: 60, durability: 'prompt' }, () => now);
    for (let i = 0; i < 6; i++) h.keep('d', 'a', now + i, i, 0);
    expect(h.read(0, 10).map((v) => v.value)).to.deep.equal([3, 4, 5]);
    expect(h.dropped.maxValues).to.equal(3);
    expect(lines.filter((l) => l.includes('history.maxValues (3) reached'))).to.have.lengthOf(1);
    now += 61_000;
    h.keep('d', 'a', now, 6, 0);
    expect(h.read(0, 10).map((v) => v.value)).to.deep.equal([6]);
    expect(h.dropped.maxAge).to.equal(3);
    expect(h.figures().oldestAgeSeconds).to.equal(0);
  });

  /** An edge node's devices and replay around a session the test drives: born or not, and whether the broker answers the PINGREQ. */
  function node(h: NodeHistory) {
    const sent: Array<{ type: string; metrics: MetricMessage[] }> = [];
    let born = false;
    let sessionId = 1;
    const confirms: Array<{ resolve(): void; reject(e: Error): void }> = [];
    let replay: HistoryReplay | undefined = undefined;
    const devices = new EdgeDevices(
      [{ deviceId: 'd', metrics: [{ name: 'a', datatype: 'Int32', readEndpoint: 'e' }] }],
      { nodeBorn: () => born, awayFromHost: () => !born, send: (type, _id, metrics) => born && (sent.push({ type, metrics }), true) },
      realTimers,
      { birthWaitMs: 0, aggregateMs: 0, maxMessagesPerSecond: 1000, datatypeInData: true },
      { keeping: true, keep: (...a) => h.keep(...a), get size() { return h.size; }, deviceBorn: () => replay!.kick() },
    );
    replay = new HistoryReplay({
      history: h,
      devices,
      send: (deviceId, metrics) => born && (sent.push({ type: 'DDATA', metrics }), true),
      sessionId: () => sessionId,
      confirm: () => new Promise<void>((resolve, reject) => confirms.push({ resolve, reject })),
      nodeBorn: () => born,
      datatypeInData: true,
      timers: realTimers,
      log: quiet,
    });
    replay.start();
    const d = devices.devices[0]!;
    devices.setAlive(d, true);
    return {
      devices,
      d,
      sent,
      confirms,
      read: (v: number, at: number) => devices.reading(d, d.metrics[0]!, v, at),
      birth() {
        born = true;
        devices.nodeBorn(false);
      },
      death() {
        born = false;
        sessionId++;
        devices.sessionEnded();
        for (const c of confirms.splice(0)) c.reject(new Error('the session is over'));
      },
    };
  }
  const turn = () => new Promise((r) => setImmediate(r));
  const values = (m: { metrics: MetricMessage[] }) => m.metrics.map((x) => [x.intValue, x.timestamp, x.isHistorical ?? false]);

  it('after the births: one historical DDATA in order, then live DDATA; a slice whose PINGREQ is not answered stays and goes again after the next births', async () => {
    const h = history();
    const n = node(h);
    n.read(1, 10);
    n.read(1, 15); // not a change
    n.read(2, 20);
    n.read(3, 30);
    expect(h.size).to.equal(3);
    n.birth();
    await turn();
    expect(n.sent.map((s) => s.type)).to.deep.equal(['DBIRTH', 'DDATA']);
    expect(values(n.sent[1]!)).to.deep.equal([
      [1, 10, true],
      [2, 20, true],
      [3, 30, true],
    ]);
    expect(n.sent[1]!.metrics[0]!.datatype).to.equal(3);
    // The broker has not answered yet: still kept. The session ends: they stay.
    n.death();
    await turn();
    expect(h.size).to.equal(3);
    n.read(4, 40);
    n.birth();
    await turn();
    expect(values(n.sent.at(-1)!)).to.deep.equal([
      [1, 10, true],
      [2, 20, true],
      [3, 30, true],
      [4, 40, true],
    ]);
    // Live values wait for nothing more: a change now goes out as a live DDATA after them.
    n.read(5, 50);
    await turn();
    expect(values(n.sent.at(-1)!)).to.deep.equal([[5, 50, false]]);
    n.confirms[0]!.resolve();
    await until(() => (h.size === 0 ? true : undefined), 2000, 'delivered');
    expect(h.published).to.equal(4);
    n.devices.stop();
  });

  it('changes while the replay has not reached the end are kept too, and go out as history before live DDATA', async () => {
    const h = history({ maxValues: 10_000, maxAgeSeconds: 0, durability: 'prompt' });
    for (let i = 0; i < 2500; i++) h.keep('d', 'a', i, i, 0); // more than one slice
    const n = node(h);
    n.read(7000, 3000);
    n.birth();
    await turn();
    // The first slice is out, not confirmed: a change now is kept, not live.
    n.read(7001, 3001);
    expect(n.sent.slice(1).every((s) => s.metrics.every((m) => m.isHistorical))).to.equal(true);
    n.confirms.shift()!.resolve();
    await until(() => (n.confirms.length ? true : undefined), 2000, 'the second slice');
    n.confirms.shift()!.resolve();
    await until(() => (h.size === 0 ? true : undefined), 2000, 'delivered');
    const ddata = n.sent.filter((s) => s.type === 'DDATA');
    const historical = ddata.flatMap((s) => s.metrics.filter((m) => m.isHistorical).map((m) => m.intValue));
    expect(historical.slice(0, 2500)).to.deep.equal([...Array(2500).keys()]);
    expect(historical.slice(2500)).to.deep.equal([7000, 7001]);
    // Then the live DDATA: the host's current value is the DBIRTH's (7000) until it says 7001 without is_historical.
    await until(() => (values(n.sent.at(-1)!)[0]?.[2] === false ? true : undefined), 2000, 'live again');
    expect(values(n.sent.at(-1)!)).to.deep.equal([[7001, 3001, false]]);
    n.devices.stop();
  });
});

const NODE = 'gw1';
const DEVICE = 'press-7';
const HOST_PERMISSIONS = [
  { context: 'mqtt' as const, operation: 'read' as const, resource: 'spBv1.0/#' },
  { context: 'mqtt' as const, operation: 'write' as const, resource: `spBv1.0/${GROUP}/NCMD/#` },
  { context: 'mqtt' as const, operation: 'write' as const, resource: 'spBv1.0/STATE/#' },
];
const metricNamed = (m: SparkplugMessage, name: string) => m.payload.metrics.find((x) => x.name === name);

/** The historical values of one metric (by alias) that `edgeNodeId`'s DDATA carried from `from` on, in order of arrival. */
function historicalOf(host: SparkplugHost, edgeNodeId: string, alias: number, from: number): HostMetric[] {
  return host.messages.filter((m) => m.index >= from && m.type === 'DDATA' && m.edgeNodeId === edgeNodeId).flatMap((m) => m.payload.metrics.filter((x) => x.alias === alias && x.isHistorical));
}

describe('Sparkplug history in the gateway: outages of the host and of the link', function () {
  this.timeout(90_000);
  let gw: TestGateway;
  let admin: string;
  let plc: ModbusTestServer;
  let host: SparkplugHost;
  let proxy: TcpProxy | undefined;

  const putService = async (id: string, text: string) => {
    const res = await gw.api('PUT', `/api/services/${id}`, { token: admin, raw: text, headers: { 'content-type': 'application/yaml' } });
    expect(res.status, JSON.stringify(res.body)).to.be.oneOf([200, 201]);
  };
  const view = async (service: string) => (await gw.api('GET', `/api/sparkplug/${service}.edge`, { token: admin })).body;
  const state = (online: boolean, timestamp: number) => host.client.publishAsync('spBv1.0/STATE/scada', JSON.stringify({ online, timestamp }), { qos: 1, retain: true });
  /** Sets the temperature register and waits until the edge node has read it (its view shows the value). */
  const temperature = async (service: string, tenths: number) => {
    plc.holding[5] = tenths;
    await until(async () => ((await view(service)).devices[0].metrics[0].value === tenths / 10 ? true : undefined), 10_000, `temperature ${tenths / 10}`);
  };
  const bornAgain = async (edgeNodeId: string, from: number) => {
    const nbirth = await host.until((m) => m.type === 'NBIRTH' && m.edgeNodeId === edgeNodeId, 30_000, from);
    const dbirth = await host.until((m) => m.type === 'DBIRTH' && m.edgeNodeId === edgeNodeId, 30_000, nbirth.index);
    return { nbirth, dbirth, alias: (name: string) => metricNamed(dbirth, name)!.alias! };
  };

  before(async () => {
    plc = await startModbusServer();
    plc.holding[5] = 215;
    plc.holding[10] = 50;
    // Kept values reach the flash with the background commits: every half second here.
    gw = await startGateway({ overrides: { storage: { backgroundCommitMs: 500 } } });
    admin = await gw.login();
    await gw.userWith(HOST_PERMISSIONS, 'scada');
    host = await SparkplugHost.connect(`mqtt://127.0.0.1:${gw.ports.mqtt}`, GROUP, { username: 'scada', password: GOOD_PASSWORD, protocolVersion: 4 });
  });

  after(async () => {
    await host?.client.publishAsync('spBv1.0/STATE/scada', '', { qos: 1, retain: true }).catch(() => undefined);
    await host?.end().catch(() => undefined);
    await proxy?.close();
    await gw?.stop();
    await plc?.stop();
  });

  it('host outage: nothing kept at a start that goes well; STATE offline, the values read meanwhile are kept; STATE online: births, then the kept values as historical DDATA in order, then live DDATA; seq unbroken', async () => {
    await gw.userWith(edgePermissions(NODE), 'edge-gw1');
    const t0 = Date.now();
    await state(true, t0);
    await putService('press', pressService(plc.port, { primaryHostId: 'scada' }));
    const first = await bornAgain(NODE, 0);
    await until(async () => ((await view('press')).history?.values === 0 ? true : undefined), 10_000, 'nothing kept while born');
    // A start whose first session comes up at once keeps nothing: its readings are in the births.
    expect((await view('press')).history.published).to.equal(0);
    expect(host.messages.filter((m) => m.edgeNodeId === NODE && m.type === 'DDATA' && m.payload.metrics.some((x) => x.isHistorical))).to.deep.equal([]);

    await state(false, t0 + 1);
    await host.until((m) => m.type === 'NDEATH' && m.edgeNodeId === NODE, 10_000, first.dbirth.index);
    await until(async () => ((await view('press')).node.state === 'waitingForHost' ? true : undefined), 10_000, 'waiting for the host');
    const readAt: number[] = [];
    const outage = [201, 202, 203, 204, 205, 206, 207, 208, 209, 210];
    for (const v of outage) {
      await temperature('press', v);
      readAt.push(Date.now());
    }
    const kept = (await view('press')).history;
    expect(kept).to.include({ enabled: true, values: outage.length });
    expect(kept.oldestAgeSeconds).to.be.greaterThan(0);

    const from = host.messages.length;
    await state(true, t0 + 2);
    const { nbirth, dbirth, alias } = await bornAgain(NODE, from);
    expect(metricNamed(dbirth, 'temperature')!.floatValue).to.be.closeTo(21, 1e-5);
    const historical = await until(() => {
      const h = historicalOf(host, NODE, alias('temperature'), dbirth.index);
      return h.length >= outage.length ? h : undefined;
    }, 10_000, 'the kept values at the host');
    expect(historical.map((m) => Math.round(m.floatValue! * 10))).to.deep.equal(outage);
    for (const m of historical) expect(m).to.include({ isHistorical: true, datatype: 9 });
    const stamps = historical.map((m) => m.timestamp!);
    expect(stamps).to.deep.equal([...stamps].sort((a, b) => a - b));
    // Each value with the time it was read (before the test saw it in the view), not the time it was sent.
    stamps.forEach((t, i) => expect(t).to.be.within((readAt[i - 1] ?? t0) - 1000, readAt[i]!));
    await until(async () => ((await view('press')).history.values === 0 ? true : undefined), 10_000, 'delivered');

    // Live again: a change is a live DDATA, after every historical one.
    const liveFrom = host.messages.length;
    plc.holding[5] = 222;
    const live = await host.until((m) => m.type === 'DDATA' && m.edgeNodeId === NODE && m.payload.metrics.some((x) => x.alias === alias('temperature') && !x.isHistorical), 10_000, liveFrom);
    expect(live.payload.metrics.find((x) => x.alias === alias('temperature'))!.floatValue).to.be.closeTo(22.2, 1e-5);
    const lastHistorical = host.messages.filter((m) => m.edgeNodeId === NODE && m.type === 'DDATA' && m.payload.metrics.some((x) => x.isHistorical)).at(-1)!;
    expect(lastHistorical.index).to.be.lessThan(live.index);
    const seqs = seqsOf(host.messages, NODE, nbirth.index);
    seqs.forEach((seq, i) => expect(seq, `message ${i} after the NBIRTH`).to.equal(i % 256));

    const text = (await gw.api('GET', '/metrics', { token: admin })).body as string;
    const value = (line: string) => Number(text.split('\n').find((l) => l.startsWith(line + ' '))?.split(' ')[1]);
    expect(value('gatewayd_sparkplug_history_published_total{edge_node="press.edge"}')).to.be.greaterThanOrEqual(outage.length);
    expect(value('gatewayd_sparkplug_history_values{edge_node="press.edge"}')).to.equal(0);
    expect(value('gatewayd_sparkplug_history_dropped_total{edge_node="press.edge",reason="maxValues"}')).to.equal(0);
  });

  it('link outage (the TCP proxy between the edge node and the broker): cut, the values are kept; the link dies again in the middle of the replay: they stay, and all come after the next births', async () => {
    await gw.userWith(edgePermissions('gw2'), 'edge-gw2');
    proxy = await startTcpProxy({ port: gw.ports.mqtt! });
    const via = `{urls: ["mqtt://127.0.0.1:${proxy.port}"], username: edge-gw2, password: "${GOOD_PASSWORD}"}`;
    await putService('line2', pressService(plc.port, { edgeNodeId: 'gw2', runAs: 'edge-gw2', via }).replace(`deviceId: ${DEVICE}`, 'deviceId: oven-2'));
    const first = await bornAgain('gw2', 0);

    proxy.cut();
    // The broker sees the connection go and publishes the will.
    await host.until((m) => m.type === 'NDEATH' && m.edgeNodeId === 'gw2', 10_000, first.dbirth.index);
    await until(async () => ((await view('line2')).node.state !== 'born' ? true : undefined), 10_000, 'not born');
    const outage = [301, 302, 303, 304, 305, 306];
    for (const v of outage) await temperature('line2', v);
    expect((await view('line2')).history.values).to.be.at.least(outage.length);

    // The link comes back slow: the births pass, the historical DDATA (and the PINGREQ after it) cannot before the cut.
    const from = host.messages.length;
    proxy.slow(200);
    await bornAgain('gw2', from);
    proxy.cut();
    await until(async () => ((await view('line2')).node.state !== 'born' ? true : undefined), 10_000, 'not born');
    expect((await view('line2')).history.values, 'not confirmed: still kept').to.be.at.least(outage.length);

    const again = host.messages.length;
    proxy.restore();
    const { dbirth, alias } = await bornAgain('gw2', again);
    const historical = await until(() => {
      const h = historicalOf(host, 'gw2', alias('temperature'), dbirth.index);
      return h.length >= outage.length ? h : undefined;
    }, 20_000, 'the kept values at the host');
    // In order; the value read when the link came back the first time may follow (it was kept too).
    expect(historical.slice(0, outage.length).map((m) => Math.round(m.floatValue! * 10))).to.deep.equal(outage);
    await until(async () => ((await view('line2')).history.values === 0 ? true : undefined), 10_000, 'delivered');
    expect((await gw.api('DELETE', '/api/services/line2', { token: admin })).status).to.equal(200);
  });

  it('bounds in the resource: beyond maxValues the oldest go, counted in /metrics and said once in the log; bounds out of range are refused with their path', async () => {
    await gw.userWith(edgePermissions('gw3'), 'edge-gw3');
    const service = pressService(plc.port, { edgeNodeId: 'gw3', runAs: 'edge-gw3', primaryHostId: 'nobody' }).replace('      birthWaitMs: 2000\n', '      birthWaitMs: 2000\n      history: {maxValues: 3}\n');
    await putService('line3', service);
    await until(async () => ((await view('line3')).node.state === 'waitingForHost' ? true : undefined), 10_000, 'waiting for its host');
    for (const v of [401, 402, 403, 404, 405, 406]) await temperature('line3', v);
    const shown = (await view('line3')).history;
    expect(shown).to.include({ maxValues: 3, values: 3 });
    expect(shown.dropped.maxValues).to.be.at.least(3);
    const text = (await gw.api('GET', '/metrics', { token: admin })).body as string;
    expect(text).to.match(/gatewayd_sparkplug_history_dropped_total\{edge_node="line3\.edge",reason="maxValues"\} [3-9]/);
    expect(gw.logs().filter((l) => String(l.message).includes('history.maxValues (3) reached') && l.id === 'line3.edge')).to.have.lengthOf(1);

    const bad = pressService(plc.port, { edgeNodeId: 'gw4', runAs: 'edge-gw3' }).replace('      birthWaitMs: 2000\n', '      birthWaitMs: 2000\n      history: {maxValues: 0, maxAgeSeconds: -1, keep: forever}\n');
    const res = await gw.api('PUT', '/api/services/bad', { token: admin, raw: bad, headers: { 'content-type': 'application/yaml' } });
    expect(res.status).to.equal(400);
    const problems = Object.fromEntries((res.body.errors as Array<{ path: string; message: string }>).map((e) => [e.path, e.message]));
    expect(problems['resources.edge.properties.history.maxValues']).to.match(/>= 1/);
    expect(problems['resources.edge.properties.history.maxAgeSeconds']).to.match(/>= 0/);
    expect(Object.keys(problems).some((p) => p.startsWith('resources.edge.properties.history'))).to.equal(true);
    expect((await gw.api('GET', '/api/services/bad', { token: admin })).status).to.equal(404);

    // Removed from the files: its kept values go with it.
    expect((await gw.api('DELETE', '/api/services/line3', { token: admin })).status).to.equal(200);
    expect(gw.logs().some((l) => l.message === 'sparkplug edge node removed: its kept values are deleted' && l.id === 'line3.edge')).to.equal(true);
  });

  it('datatype on DATA metrics: Eclipse Tahu\'s JavaScript decoder reads live and historical values with it, and null without it (datatypeInData: false)', async () => {
    const tahu = (createRequire(import.meta.url)('sparkplug-payload') as { get(ns: string): { decodePayload(b: Uint8Array): { metrics: Array<{ alias?: unknown; value: unknown; type?: string; isHistorical?: boolean }> } } }).get('spBv1.0');
    const raw: Array<{ topic: string; payload: Buffer }> = [];
    const onMessage = (topic: string, payload: Buffer) => raw.push({ topic, payload });
    host.client.on('message', onMessage);
    try {
      await gw.userWith(edgePermissions('gw5'), 'edge-gw5');
      await putService('line5', pressService(plc.port, { edgeNodeId: 'gw5', runAs: 'edge-gw5' }));
      const { dbirth } = await bornAgain('gw5', 0);
      const ddataFrom = raw.length;
      plc.holding[5] = 555;
      const decoded = await until(() => {
        for (const r of raw.slice(ddataFrom)) {
          if (!r.topic.includes('/DDATA/gw5/')) continue;
          const p = tahu.decodePayload(r.payload);
          const m = p.metrics.find((x) => Number(x.alias) === metricNamed(dbirth, 'temperature')!.alias && !x.isHistorical);
          if (m) return m;
        }
        return undefined;
      }, 10_000, 'a live DDATA');
      expect(decoded.type).to.equal('Float');
      expect(decoded.value).to.be.closeTo(55.5, 1e-4);

      // Without the datatype, as Sparkplug 3.0 recommends: Tahu's decoder has no type to read the value by.
      const without = pressService(plc.port, { edgeNodeId: 'gw5', runAs: 'edge-gw5' }).replace('      birthWaitMs: 2000\n', '      birthWaitMs: 2000\n      datatypeInData: false\n');
      const from = host.messages.length;
      await putService('line5', without);
      const second = await bornAgain('gw5', from);
      const rawFrom = raw.length;
      plc.holding[5] = 556;
      const bare = await until(() => {
        for (const r of raw.slice(rawFrom)) {
          if (!r.topic.includes('/DDATA/gw5/')) continue;
          const m = tahu.decodePayload(r.payload).metrics.find((x) => Number(x.alias) === metricNamed(second.dbirth, 'temperature')!.alias && !x.isHistorical);
          if (m) return m;
        }
        return undefined;
      }, 10_000, 'a live DDATA without datatype');
      expect(bare.type).to.equal(undefined);
      expect(bare.value).to.equal(null);
      // The tests' own host (by field numbers, the type from the DBIRTH) reads it.
      const ours = await host.until((m) => m.type === 'DDATA' && m.edgeNodeId === 'gw5' && m.index > second.dbirth.index && m.payload.metrics.some((x) => x.floatValue !== undefined && Math.abs(x.floatValue - 55.6) < 1e-4), 10_000);
      expect(ours.payload.metrics[0]!.datatype).to.equal(undefined);
    } finally {
      host.client.off('message', onMessage);
      await gw.api('DELETE', '/api/services/line5', { token: admin });
    }
  });

  it('backup and restore: the backup carries what was kept; a restore brings back exactly that, and it is delivered after the births', async () => {
    await gw.userWith(edgePermissions('gw8'), 'edge-gw8');
    await putService('line8', pressService(plc.port, { edgeNodeId: 'gw8', runAs: 'edge-gw8', primaryHostId: 'scada8' }).replace(`deviceId: ${DEVICE}`, 'deviceId: mixer-8'));
    await until(async () => ((await view('line8')).node.state === 'waitingForHost' ? true : undefined), 10_000, 'waiting for its host');
    for (const v of [801, 802]) await temperature('line8', v);
    const onFlash = await until(async () => {
      const h = (await view('line8')).history;
      return h.values >= 2 && h.staged === 0 ? h.values : undefined;
    }, 10_000, 'kept on flash');
    await backupAndDownload(gw, admin).then(async ({ archive }) => {
      for (const v of [803, 804]) await temperature('line8', v);
      expect((await view('line8')).history.values).to.equal(onFlash + 2);
      const restore = await upload(gw, admin, archive);
      expect(restore.status, JSON.stringify(restore.body)).to.equal(202);
      const status = await waitIdle(gw);
      expect(status.restore?.succeeded, status.restore?.statusMessage).to.equal(true);
    });
    // The restore revoked every session of the replaced store: log in and connect again.
    admin = await gw.login();
    await host.end().catch(() => undefined);
    host = await SparkplugHost.connect(`mqtt://127.0.0.1:${gw.ports.mqtt}`, GROUP, { username: 'scada', password: GOOD_PASSWORD, protocolVersion: 4 });
    expect((await view('line8')).history.values, 'what the backup held').to.equal(onFlash);

    await host.client.publishAsync('spBv1.0/STATE/scada8', JSON.stringify({ online: true, timestamp: Date.now() }), { qos: 1, retain: true });
    try {
      const { dbirth, alias } = await bornAgain('gw8', 0);
      const historical = await until(() => {
        const h = historicalOf(host, 'gw8', alias('temperature'), dbirth.index);
        return h.some((m) => Math.round(m.floatValue! * 10) === 802) ? h : undefined;
      }, 10_000, 'the restored values at the host');
      const values = historical.map((m) => Math.round(m.floatValue! * 10));
      expect(values.slice(values.indexOf(801))).to.deep.equal([801, 802]);
      await until(async () => ((await view('line8')).history.values === 0 ? true : undefined), 10_000, 'delivered');
    } finally {
      await host.client.publishAsync('spBv1.0/STATE/scada8', '', { qos: 1, retain: true });
      await gw.api('DELETE', '/api/services/line8', { token: admin });
    }
  });
});
