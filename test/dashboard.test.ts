// The dashboard's last hour (docs/design.md §14, docs/operations.md "Dashboard"): a bounded ring of samples of the
// counters that feed /metrics and $SYS — rates from two samples, gauges as read, unknown as
// null, never more than the window — and GET /api/dashboard on the real gateway while a real
// MQTT client publishes (401/403, 400 on a bad `since`).
import { expect } from 'chai';
import { createDashboard, type DashboardSources } from '../src/metrics/dashboard.js';
import { ADMIN_PASSWORD, startGateway, type TestGateway } from './support/harness.js';
import { connect, endAllClients } from './support/mqtt-test-kit.js';
import { freePort } from './support/mosquitto.js';
import { bridgeService, bridgeState, putService } from './bridges-support.js';

describe('dashboard ring', () => {
  function fakeSources() {
    const state = { clients: 3, received: 1000, sent: 2000, bytesIn: 10_000, bytesOut: 20_000, drops: 5, failed: 1, cpu: 0, rss: 50e6, disk: 1e9 as number | undefined };
    const sources: DashboardSources = {
      broker: () => ({ clients: state.clients, connectsAccepted: 0, connectsRefused: 0, publishesRefused: 0, subscriptionsRefused: 0, queueDrops: state.drops, messagesReceived: state.received, messagesSent: state.sent, bytesReceived: state.bytesIn, bytesSent: state.bytesOut }),
      logins: () => ({ succeeded: 0, failed: state.failed }),
      freeDiskBytes: async () => state.disk,
      cpuMicros: () => state.cpu,
      rssBytes: () => state.rss,
    };
    return { state, sources };
  }
  const column = (view: ReturnType<ReturnType<typeof createDashboard>['view']>, id: string) => view.series.find((s) => s.id === id)!.values;

  it('turns counters into rates per second and per interval, gauges as read, the first rate unknown', async () => {
    let now = 1_000_000;
    const { state, sources } = fakeSources();
    const d = createDashboard({ sources, intervalMs: 10_000, windowMs: 3_600_000, now: () => now });
    await d.sample();
    now += 10_000;
    state.received += 500;
    state.sent += 1500;
    state.bytesIn += 4000;
    state.drops += 7;
    state.failed += 2;
    state.cpu += 2_500_000; // 2.5 s of CPU in 10 s
    state.clients = 4;
    state.disk = undefined;
    await d.sample();
    const view = d.view();
    expect(view.intervalSeconds).to.equal(10);
    expect(view.windowSeconds).to.equal(3600);
    expect(view.times).to.deep.equal([1_000_000, 1_010_000]);
    expect(column(view, 'messagesIn')).to.deep.equal([null, 50]);
    expect(column(view, 'messagesOut')).to.deep.equal([null, 150]);
    expect(column(view, 'bytesIn')).to.deep.equal([null, 400]);
    expect(column(view, 'dropped')).to.deep.equal([null, 7]);
    expect(column(view, 'loginFailures')).to.deep.equal([null, 2]);
    expect(column(view, 'cpu')).to.deep.equal([null, 25]);
    expect(column(view, 'clients')).to.deep.equal([3, 4]);
    expect(column(view, 'rss')).to.deep.equal([50e6, 50e6]);
    expect(column(view, 'freeDisk')).to.deep.equal([1e9, null]);
    // No bridges: no bridge series.
    expect(view.series.map((s) => s.id)).not.to.include('bridgeQueued');
    // A counter that went backwards (a restart of its source) is not a negative rate.
    now += 10_000;
    state.received = 0;
    await d.sample();
    expect(column(d.view(), 'messagesIn').at(-1)).to.equal(null);
  });

  it("counts in 'Messages in' what the gateway itself puts on its broker (mapping readings and routes, bridges)", async () => {
    let now = 1_000_000;
    const { state, sources } = fakeSources();
    let dataPlane = 100;
    const d = createDashboard({ sources: { ...sources, dataPlanePublished: () => dataPlane }, intervalMs: 10_000, windowMs: 3_600_000, now: () => now });
    await d.sample();
    now += 10_000;
    state.received += 200; // clients
    dataPlane += 300; // a Modbus endpoint's readings and a mapping's routes
    await d.sample();
    expect(column(d.view(), 'messagesIn')).to.deep.equal([null, 50]);
  });

  it('keeps one window of samples and answers those after `since`', async () => {
    let now = 0;
    const { sources } = fakeSources();
    const d = createDashboard({ sources: { ...sources, bridgeQueued: () => 12 }, intervalMs: 1000, windowMs: 60_000, now: () => now });
    for (let i = 0; i < 150; i++) {
      now = i * 1000;
      await d.sample();
    }
    const view = d.view();
    expect(view.times).to.have.length(60);
    expect(view.times[0]).to.equal(90_000);
    expect(view.times.at(-1)).to.equal(149_000);
    expect(view.series.every((s) => s.values.length === 60)).to.equal(true);
    expect(column(view, 'bridgeQueued').at(-1)).to.equal(12);
    expect(d.view(147_000).times).to.deep.equal([148_000, 149_000]);
    expect(d.view(149_000).times).to.deep.equal([]);
  });
});

describe('GET /api/dashboard', function () {
  this.timeout(30_000);
  let gw: TestGateway;
  let admin: string;
  before(async () => {
    gw = await startGateway({ overrides: { dashboard: { intervalSeconds: 1, windowSeconds: 60 } } });
    admin = await gw.login();
  });
  after(async () => {
    await endAllClients();
    await gw.stop();
  });

  it('shows a publisher: clients and messages in move', async () => {
    const client = await connect(gw.ports.mqtt, { username: 'admin', password: ADMIN_PASSWORD });
    await gw.services.dashboard.sample();
    for (let i = 0; i < 40; i++) await client.publishAsync('dash/test', `${i}`, { qos: 1 });
    await gw.services.dashboard.sample();
    const res = await gw.api('GET', '/api/dashboard', { token: admin });
    expect(res.status).to.equal(200);
    expect(res.headers.get('cache-control')).to.equal('no-store');
    const view = res.body as { times: number[]; series: { id: string; values: (number | null)[] }[] };
    const last = (id: string) => view.series.find((s) => s.id === id)!.values.at(-1);
    expect(last('clients')).to.be.at.least(1);
    expect(last('messagesIn')).to.be.above(0);
    expect(last('bytesIn')).to.be.above(0);
    expect(last('rss')).to.be.above(10e6);
    expect(last('freeDisk')).to.be.above(0);
    expect(view.series.map((s) => s.id)).to.deep.equal(['clients', 'messagesIn', 'messagesOut', 'bytesIn', 'bytesOut', 'dropped', 'loginFailures', 'cpu', 'rss', 'freeDisk', 'flashWrites']);
    const since = await gw.api('GET', `/api/dashboard?since=${view.times.at(-1)}`, { token: admin });
    expect(since.body.times).to.deep.equal([]);
    expect(since.body.series.every((s: { values: unknown[] }) => s.values.length === 0)).to.equal(true);
    client.end();
  });

  it('charts the bridges\' queued messages once a bridge runs (its upstream down: they wait in its queue)', async () => {
    // A gateway of its own: the other tests see no bridge series.
    const gw = await startGateway({ overrides: { dashboard: { intervalSeconds: 1, windowSeconds: 60 } } });
    try {
      const admin = await gw.login();
      await gw.userWith([{ context: 'mqtt', resource: 'dash-bridge/#', operation: 'read' }], 'dash-bridge-user');
      // A port nothing listens on: the bridge stays reconnecting and keeps what it accepts.
      const down = await freePort();
      await putService(gw, admin, 'dash-uplink', bridgeService('uplink', { urls: [`mqtt://127.0.0.1:${down}`], runAs: 'dash-bridge-user', topics: [{ pattern: 'dash-bridge/#', direction: 'out', qos: 1 }] }));
      await bridgeState(gw, 'dash-uplink.uplink', (v) => v.currentState === 'reconnecting' || v.currentState === 'connecting');
      const client = await connect(gw.ports.mqtt, { username: 'admin', password: ADMIN_PASSWORD });
      for (let i = 0; i < 7; i++) await client.publishAsync('dash-bridge/value', `${i}`, { qos: 1 });
      await gw.services.dashboard.sample();
      const view = (await gw.api('GET', '/api/dashboard', { token: admin })).body as { series: { id: string; values: (number | null)[] }[] };
      expect(view.series.find((s) => s.id === 'bridgeQueued')?.values.at(-1)).to.equal(7);
      client.end();
    } finally {
      await gw.stop();
    }
  });

  it('needs read permission on /api/dashboard and a valid since', async () => {
    expect((await gw.api('GET', '/api/dashboard')).status).to.equal(401);
    const nobody = await gw.userWith([]);
    expect((await gw.api('GET', '/api/dashboard', { token: nobody.token })).status).to.equal(403);
    const viewer = await gw.userWith([{ context: 'http', resource: '/api/dashboard', operation: 'read' }]);
    expect((await gw.api('GET', '/api/dashboard', { token: viewer.token })).status).to.equal(200);
    for (const q of ['since=-1', 'since=soon', 'since=1.5', 'window=5']) expect((await gw.api('GET', `/api/dashboard?${q}`, { token: admin })).status, q).to.equal(400);
  });
});
