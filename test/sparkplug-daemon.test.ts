// The Sparkplug B edge node of the real daemon process on an upstream Mosquitto 2, where the
// host is: kill -9 of the daemon and the host still learns of the death, because the NDEATH is
// the will of the edge node's own MQTT session and Mosquitto sends it; the bdSeq in it is the
// one of the NBIRTH before, and the next session's is one more (kept in the store). A SIGTERM
// publishes the NDEATH itself and disconnects, so Mosquitto sends no will. The same holds through
// a Bridge (via: !ref <Bridge>): the node's own session on the bridge's remote carries the will.
// What the node keeps while its host is offline is on flash: a kill -9 in the middle of the outage
// loses none of it, and after the restart and the births it comes as historical DDATA.
import { expect } from 'chai';
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { ADMIN_PASSWORD, GOOD_PASSWORD, startDaemonProcess, tempDir } from './support/harness.js';
import { startMosquitto, type MosquittoBroker } from './support/mosquitto-broker.js';
import { SparkplugHost, type SparkplugMessage } from './support/sparkplug-host.js';
import { startModbusServer, until, type ModbusTestServer } from './mapping-support.js';

const GROUP = 'site-b';
const bdSeqOf = (m: SparkplugMessage) => m.payload.metrics.find((x) => x.name === 'bdSeq')?.longValue;

describe('Sparkplug B edge node of the daemon process, on an upstream Mosquitto', function () {
  this.timeout(90_000);
  let mosquitto: MosquittoBroker;
  let plc: ModbusTestServer;
  let host: SparkplugHost;
  let dataDir: string;
  const dirs: string[] = [];
  const children: ChildProcess[] = [];

  const start = async (dir = dataDir, env: Record<string, string> = {}) => {
    const daemon = await startDaemonProcess(dir, { GATEWAYD_SET__MAPPING__SERVICES_DIR: join(dir, 'services'), ...env });
    children.push(daemon.child);
    return daemon;
  };
  /** A tank level (holding 0, the PLC of the test kit) as the one metric of a Sparkplug edge node. */
  const tankService = (o: { edgeNodeId: string; runAs: string; via: string; resources?: string; primaryHostId?: string }) => `resources:
  plc:
    type: Connection
    properties: {protocol: Modbus, configuration: {host: 127.0.0.1, port: ${plc.port}}}
  level:
    type: Endpoint
    properties: {connection: !ref plc, operation: read, address: {table: holding, address: 0}, pollIntervalMs: 50}
${o.resources ?? ''}  edge:
    type: Sparkplug
    properties:
      groupId: ${GROUP}
      edgeNodeId: ${o.edgeNodeId}
      runAs: ${o.runAs}
      keepaliveSeconds: 5
      via: ${o.via}
${o.primaryHostId ? `      primaryHostId: ${o.primaryHostId}\n` : ''}      devices: [{deviceId: tank, metrics: [{name: level, endpoint: !ref level, datatype: UInt16}]}]
`;
  const api = async (port: number, method: string, path: string, body?: unknown, contentType = 'application/json') => {
    const auth = `Basic ${Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64')}`;
    const res = await fetch(`http://127.0.0.1:${port}${path}`, { method, headers: { authorization: auth, 'content-type': contentType }, ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }) });
    return { status: res.status, body: await res.text() };
  };

  before(async () => {
    mosquitto = await startMosquitto();
    plc = await startModbusServer();
    plc.holding[0] = 42;
    dataDir = tempDir();
    mkdirSync(join(dataDir, 'services'));
    host = await SparkplugHost.connect(mosquitto.url, GROUP, { protocolVersion: 4 });
  });

  after(async () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    await host?.end().catch(() => undefined);
    await plc?.stop();
    await mosquitto?.stop();
    for (const dir of [dataDir, ...dirs]) if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('kill -9: Mosquitto sends the will, an NDEATH whose bdSeq is the NBIRTH\'s; the next session\'s bdSeq is one more; SIGTERM: the node\'s own NDEATH and no will', async () => {
    const first = await start();
    const http = first.ready.http as number;
    const user = await api(http, 'POST', '/api/users', {
      username: 'edge-up',
      password: GOOD_PASSWORD,
      identityProvider: 'local',
      initialPermissions: [{ context: 'mqtt', operation: 'readWrite', resource: `spBv1.0/${GROUP}/+/gw-up/#` }],
    });
    expect(user.status, user.body).to.equal(201);
    const service = tankService({ edgeNodeId: 'gw-up', runAs: 'edge-up', via: `{urls: ["${mosquitto.url}"]}` });
    const put = await api(http, 'PUT', '/api/services/upstream', service, 'application/yaml');
    expect(put.status, put.body).to.equal(201);

    const nbirth = await host.until((m) => m.type === 'NBIRTH', 20_000);
    const bdSeq = bdSeqOf(nbirth)!;
    const dbirth = await host.until((m) => m.type === 'DBIRTH', 20_000, nbirth.index);
    expect(dbirth.payload.metrics[0]).to.include({ name: 'level', datatype: 6, intValue: 42 });
    const shown = JSON.parse((await api(http, 'GET', '/api/sparkplug/upstream.edge')).body);
    expect(shown.via).to.deep.equal({ kind: 'remote', urls: [mosquitto.url] });
    expect(shown.node).to.include({ state: 'born', server: mosquitto.url, bdSeq: Number(bdSeq) });

    first.child.kill('SIGKILL');
    await first.exited;
    const will = await host.until((m) => m.type === 'NDEATH', 20_000, dbirth.index);
    expect(bdSeqOf(will)).to.equal(bdSeq);
    expect(will.payload.seq).to.equal(undefined);
    expect(will.payload.metrics.map((m) => [m.name, m.datatype])).to.deep.equal([['bdSeq', 4]]);
    expect(will).to.include({ qos: 1, retain: false });
    // MQTT 3.1.1, clean session (Mosquitto logs the CONNECT's protocol level and flags).
    expect(mosquitto.log()).to.match(/as gatewayd-site-b-gw-up \(p2, c1, k5/);

    const second = await start();
    const reborn = await host.until((m) => m.type === 'NBIRTH', 20_000, will.index);
    const next = String((Number(bdSeq) + 1) % 256);
    expect(bdSeqOf(reborn)).to.equal(next);
    await host.until((m) => m.type === 'DBIRTH', 20_000, reborn.index);

    second.child.kill('SIGTERM');
    expect(await second.exited).to.equal(0);
    const own = await host.until((m) => m.type === 'NDEATH', 20_000, reborn.index);
    expect(bdSeqOf(own)).to.equal(next);
    // A marker published after the daemon is gone arrives after anything Mosquitto would still send for it.
    await host.client.publishAsync(`spBv1.0/${GROUP}/MARK/test`, 'x', { qos: 1 });
    const mark = await host.until((m) => m.type === 'MARK', 10_000, own.index);
    expect(host.messages.slice(own.index + 1, mark.index).filter((m) => m.type === 'NDEATH')).to.deep.equal([]);
  });

  it('via !ref <Bridge>: a session of the node\'s own on the bridge\'s remote; kill -9 and Mosquitto sends its NDEATH with the NBIRTH\'s bdSeq', async () => {
    const dir = tempDir();
    dirs.push(dir);
    mkdirSync(join(dir, 'services'));
    const daemon = await start(dir);
    const http = daemon.ready.http as number;
    const users = [
      { username: 'edge-br', resource: `spBv1.0/${GROUP}/+/gw-br/#`, operation: 'readWrite' },
      { username: 'bridge-up', resource: 'plant/#', operation: 'read' },
    ];
    for (const u of users) {
      const res = await api(http, 'POST', '/api/users', { username: u.username, password: GOOD_PASSWORD, identityProvider: 'local', initialPermissions: [{ context: 'mqtt', operation: u.operation, resource: u.resource }] });
      expect(res.status, res.body).to.equal(201);
    }
    const cloud = `  cloud:
    type: Bridge
    properties:
      remote: {urls: ["${mosquitto.url}"], clientId: gw-br-bridge}
      runAs: bridge-up
      topics: [{pattern: "plant/#", direction: out, qos: 1}]
`;
    const service = tankService({ edgeNodeId: 'gw-br', runAs: 'edge-br', via: '!ref cloud', resources: cloud });
    const from = host.messages.length;
    const put = await api(http, 'PUT', '/api/services/bridged', service, 'application/yaml');
    expect(put.status, put.body).to.equal(201);
    const nbirth = await host.until((m) => m.type === 'NBIRTH' && m.edgeNodeId === 'gw-br', 20_000, from);
    const dbirth = await host.until((m) => m.type === 'DBIRTH' && m.edgeNodeId === 'gw-br', 20_000, nbirth.index);
    expect(dbirth.payload.metrics[0]).to.include({ name: 'level', datatype: 6, intValue: 42 });
    const shown = JSON.parse((await api(http, 'GET', '/api/sparkplug/bridged.edge')).body);
    expect(shown.via).to.deep.equal({ kind: 'bridge', bridgeId: 'bridged.cloud', urls: [mosquitto.url] });
    expect(shown.node).to.include({ state: 'born', server: mosquitto.url, bdSeq: Number(bdSeqOf(nbirth)) });

    daemon.child.kill('SIGKILL');
    await daemon.exited;
    const will = await host.until((m) => m.type === 'NDEATH' && m.edgeNodeId === 'gw-br', 20_000, dbirth.index);
    expect(bdSeqOf(will)).to.equal(bdSeqOf(nbirth));
    expect(will.payload.seq).to.equal(undefined);
    expect(will.qos).to.equal(1);
    expect(mosquitto.log()).to.match(/Client gatewayd-site-b-gw-br closed its connection|Client gatewayd-site-b-gw-br disconnected/);
  });

  it('kill -9 while the primary host is offline: the values kept before it survive; after the restart and the births they come as historical DDATA, in order, with those read after', async () => {
    const dir = tempDir();
    dirs.push(dir);
    mkdirSync(join(dir, 'services'));
    const state = (online: boolean, timestamp: number) => host.client.publishAsync('spBv1.0/STATE/scada', JSON.stringify({ online, timestamp }), { qos: 1, retain: true });
    const t0 = Date.now();
    await state(true, t0);
    try {
      // history.durability background (the default): kept values reach the flash with the background commits, here every second.
      const fast = { GATEWAYD_SET__STORAGE__BACKGROUND_COMMIT_MS: '1000' };
      let daemon = await start(dir, fast);
      let http = daemon.ready.http as number;
      const user = await api(http, 'POST', '/api/users', {
        username: 'edge-hist',
        password: GOOD_PASSWORD,
        identityProvider: 'local',
        initialPermissions: [
          { context: 'mqtt', operation: 'readWrite', resource: `spBv1.0/${GROUP}/+/gw-hist/#` },
          { context: 'mqtt', operation: 'read', resource: 'spBv1.0/STATE/scada' },
        ],
      });
      expect(user.status, user.body).to.equal(201);
      const from = host.messages.length;
      const put = await api(http, 'PUT', '/api/services/hist', tankService({ edgeNodeId: 'gw-hist', runAs: 'edge-hist', via: `{urls: ["${mosquitto.url}"]}`, primaryHostId: 'scada' }), 'application/yaml');
      expect(put.status, put.body).to.equal(201);
      const dbirth = await host.until((m) => m.type === 'DBIRTH' && m.edgeNodeId === 'gw-hist', 20_000, from);
      const view = async () => JSON.parse((await api(http, 'GET', '/api/sparkplug/hist.edge')).body);
      /** Sets the tank level and waits until the edge node has read it. */
      const level = async (v: number) => {
        plc.holding[0] = v;
        await until(async () => ((await view()).devices[0].metrics[0].value === v ? true : undefined), 10_000, `level ${v}`);
      };

      await state(false, t0 + 1);
      await host.until((m) => m.type === 'NDEATH' && m.edgeNodeId === 'gw-hist', 10_000, dbirth.index);
      for (const v of [101, 102, 103, 104, 105]) await level(v);
      // On flash: nothing of the history is only in memory any more (within storage.backgroundCommitMs).
      await until(async () => {
        const h = (await view()).history;
        return h.values >= 5 && h.staged === 0 ? true : undefined;
      }, 10_000, 'the kept values on flash');
      daemon.child.kill('SIGKILL');
      await daemon.exited;

      daemon = await start(dir, fast);
      http = daemon.ready.http as number;
      await until(async () => ((await view()).node.state === 'waitingForHost' ? true : undefined), 20_000, 'waiting for the host after the restart');
      expect((await view()).history.values, 'found on flash after the restart').to.be.at.least(5);
      for (const v of [106, 107, 108]) await level(v);

      const again = host.messages.length;
      await state(true, t0 + 2);
      const reborn = await host.until((m) => m.type === 'DBIRTH' && m.edgeNodeId === 'gw-hist', 20_000, again);
      const alias = reborn.payload.metrics.find((m) => m.name === 'level')!.alias!;
      const historical = await until(() => {
        const h = host.messages.filter((m) => m.index > reborn.index && m.type === 'DDATA' && m.edgeNodeId === 'gw-hist').flatMap((m) => m.payload.metrics.filter((x) => x.alias === alias && x.isHistorical));
        return h.some((m) => m.intValue === 108) ? h : undefined;
      }, 20_000, 'the kept values at the host');
      // The restart's first reading (105 again) is kept too: consecutive repeats aside, every value in order.
      const seen = historical.map((m) => m.intValue).filter((v, i, all) => i === 0 || v !== all[i - 1]);
      expect(seen.slice(seen.indexOf(101))).to.deep.equal([101, 102, 103, 104, 105, 106, 107, 108]);
      const stamps = historical.map((m) => m.timestamp!);
      expect(stamps).to.deep.equal([...stamps].sort((a, b) => a - b));
      await until(async () => ((await view()).history.values === 0 ? true : undefined), 10_000, 'delivered');
      daemon.child.kill('SIGTERM');
      expect(await daemon.exited).to.equal(0);
    } finally {
      await host.client.publishAsync('spBv1.0/STATE/scada', '', { qos: 1, retain: true });
    }
  });
});
