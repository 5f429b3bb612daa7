// gatewayd on ARM, emulated (issue 32 point 1; docs/platforms.md): the arm64 package's own
// install (its production node_modules with the prebuilt arm64 LMDB, msgpackr and serialport
// binaries, unpacked with dpkg-deb -x) started by qemu-user with Debian's cross runtime
// libraries, on the Node 22 the package bundles and on Node 24 from the npm registry. Checked:
// ready (the platform check passes silently), an HTTPS login trusting the gateway CA, an MQTT
// round trip of a password user, a Modbus read from the test kit's peer, a backup and a
// restore (whose store check is a child Node process: it starts through the emulator,
// GATEWAYD_NODE_LAUNCHER), SIGTERM, and a restart that keeps the data. armv7: run the same way
// when the npm registry has a Node for armv7 at or above the floor; it has not (20.11 at most).
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import mqtt from 'mqtt';
import { NODE_FLOOR, TESTED_NODE_MAJORS } from '../src/platform/index.js';
import { fetchTrusting } from '../test/support/https-fetch.js';
import { ADMIN_PASSWORD, daemonTestEnv, GOOD_PASSWORD, type TestGateway } from '../test/support/harness.js';
import { backupAndDownload, upload, waitIdle } from '../test/support/maintenance-kit.js';
import { startModbusServer, type ModbusTestServer } from '../test/mapping-support.js';
import { compareDotted, debFor, EMULATION, emulator, npmNode, registryVersions, seconds, startDaemon, stopDaemon, unpackDeb, type RunningDaemon } from './support/platform-kit.js';

/** Emulated start-up takes 16-20 s on a quiet 2-core x86 machine; CI may be busier. */
const READY_MS = 240_000;
const STOP_MS = 90_000;

const plantService = (port: number) => `resources:
  plc:
    type: Connection
    properties:
      protocol: Modbus
      configuration: {host: 127.0.0.1, port: ${port}, timeoutMs: 5000}
  temperature:
    type: Endpoint
    properties:
      connection: !ref plc
      operation: read
      address: {table: holding, address: 0, quantity: 1}
      pollIntervalMs: 500
`;

/** The plain-HTTP API of a daemon (loopback is served in full) in the shape the maintenance kit takes. */
function apiOf(baseUrl: string): TestGateway {
  const api: TestGateway['api'] = async (method, path, opts = {}) => {
    const headers: Record<string, string> = { ...(opts.headers ?? {}) };
    if (opts.token) headers.authorization = `Bearer ${opts.token}`;
    let body: string | FormData | undefined;
    if (opts.raw !== undefined) body = opts.raw as FormData;
    else if (opts.body !== undefined) {
      body = JSON.stringify(opts.body);
      headers['content-type'] = 'application/json';
    }
    const res = await fetch(baseUrl + path, { method, headers, body, redirect: 'manual' });
    const text = await res.text();
    const parsed: unknown = (res.headers.get('content-type') ?? '').includes('json') && text ? JSON.parse(text) : text;
    return { status: res.status, body: parsed as any, headers: res.headers };
  };
  return { baseUrl, api } as TestGateway;
}

async function httpsLogin(daemon: RunningDaemon, caFile: string, username: string, password: string): Promise<{ status: number; token?: string }> {
  const res = await fetchTrusting(caFile)(`https://127.0.0.1:${daemon.ready.https as number}/api/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username, password }),
  });
  const body = (await res.json()) as { token?: string };
  return { status: res.status, token: body.token };
}

/** The first message on `topic` whose payload matches, within `ms`. */
function nextMessage(client: mqtt.MqttClient, topic: string, match: RegExp, ms: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      client.off('message', onMessage);
      reject(new Error(`no message on ${topic} matching ${match} within ${ms} ms`));
    }, ms);
    const onMessage = (t: string, payload: Buffer) => {
      if (t !== topic || !match.test(payload.toString())) return;
      clearTimeout(timer);
      client.off('message', onMessage);
      resolve(payload.toString());
    };
    client.on('message', onMessage);
  });
}

interface EmulatedLine {
  arch: 'arm64' | 'armhf';
  label: string;
  /** The Node binary for the target: the package's bundled one, or one from the npm registry. */
  node: (lib: string) => Promise<{ bin: string; version: string }>;
}

/**
 * The emulated checks of one Node line on the target's package install, in `dir`; every
 * process and the peer it starts are ended before it returns.
 */
async function runEmulated(line: EmulatedLine, dir: string): Promise<void> {
  let modbus: ModbusTestServer | undefined;
  let daemon: RunningDaemon | undefined;
  try {
    const { qemu, sysroot } = emulator(line.arch);
    const { file } = await debFor(line.arch);
    unpackDeb(file, join(dir, 'install'));
    const lib = join(dir, 'install/usr/lib/gatewayd');
    const node = await line.node(lib);
    modbus = await startModbusServer();
    modbus.holding[0] = 215;
    const dataDir = join(dir, 'data');
    const services = join(dir, 'services');
    mkdirSync(services);
    writeFileSync(join(services, 'plant.yaml'), plantService(modbus.port));
    const start = () =>
      startDaemon({
        command: qemu,
        args: ['-L', sysroot, node.bin, join(lib, 'dist/src/main.js')],
        cwd: lib,
        env: {
          ...daemonTestEnv(dataDir),
          GATEWAYD_SET__LOG__REQUESTS: 'false',
          GATEWAYD_SET__MAPPING__SERVICESDIR: services,
          // The daemon's own Node children (the store check of a restore) start through the emulator too.
          GATEWAYD_NODE_LAUNCHER: JSON.stringify([qemu, '-L', sysroot]),
        },
        readyTimeoutMs: READY_MS,
      });

    // ---- first start
    daemon = await start();
    const firstReady = daemon.readyAfterMs;
    expect(daemon.stderr(), 'the platform check passes without a word').to.equal('');
    const caFile = join(dataDir, 'pki/ca.cert.pem');
    const admin = await httpsLogin(daemon, caFile, 'admin', ADMIN_PASSWORD);
    expect(admin.status).to.equal(200);

    // ---- a password user over MQTT, and the Modbus peer's register on the service's topic
    const https = fetchTrusting(caFile);
    const created = await https(`https://127.0.0.1:${daemon.ready.https as number}/api/users`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${admin.token!}` },
      body: JSON.stringify({
        username: 'device-1',
        password: GOOD_PASSWORD,
        identityProvider: 'local',
        initialPermissions: [
          { resource: 'arm/#', operation: 'readWrite', context: 'mqtt' },
          { resource: 'services/#', operation: 'read', context: 'mqtt' },
        ],
      }),
    });
    expect(created.status, await created.clone().text()).to.equal(201);
    const client = await mqtt.connectAsync({ host: '127.0.0.1', port: daemon.ready.mqtt as number, username: 'device-1', password: GOOD_PASSWORD, clientId: 'device-1', reconnectPeriod: 0, connectTimeout: 60_000 });
    try {
      const granted = await client.subscribeAsync(['arm/echo', 'services/plant/temperature'], { qos: 1 });
      expect(granted.map((g) => g.qos)).to.deep.equal([1, 1]);
      const echo = nextMessage(client, 'arm/echo', /^hello from x86$/, 30_000);
      await client.publishAsync('arm/echo', 'hello from x86', { qos: 1 });
      expect(await echo).to.equal('hello from x86');
      const reading = await nextMessage(client, 'services/plant/temperature', /215/, 60_000);
      expect(JSON.parse(reading)).to.deep.equal([215]);
    } finally {
      await client.endAsync();
    }

    // ---- backup and restore: the store check runs in a child Node, through the emulator
    const plain = apiOf(`http://127.0.0.1:${daemon.ready.http as number}`);
    const restoreStarted = Date.now();
    const { archive } = await backupAndDownload(plain, admin.token!);
    const restore = await upload(plain, admin.token!, archive);
    expect(restore.status, JSON.stringify(restore.body)).to.equal(202);
    const status = await waitIdle(plain);
    expect(status.restore?.succeeded, status.restore?.statusMessage).to.equal(true);
    const restoreMs = Date.now() - restoreStarted;

    // ---- SIGTERM
    const ca = readFileSync(caFile);
    expect(await stopDaemon(daemon, STOP_MS)).to.equal(0);
    expect(daemon.lines.map((l) => l.message)).to.include.members(['stopping', 'stopped']);

    // ---- restart on the same data: the user, its password and the CA are still there
    daemon = await start();
    const restartReady = daemon.readyAfterMs;
    expect(daemon.stderr()).to.equal('');
    expect(readFileSync(caFile).equals(ca), 'the same gateway CA').to.equal(true);
    expect((await httpsLogin(daemon, caFile, 'device-1', GOOD_PASSWORD)).status).to.equal(200);
    expect(await stopDaemon(daemon, STOP_MS)).to.equal(0);
    console.log(
      `      ${line.arch} Node ${node.version} under ${qemu.split('/').pop()}: ready after ${seconds(firstReady)} s (first start), ${seconds(restartReady)} s (restart); backup and restore ${seconds(restoreMs)} s`,
    );
  } finally {
    if (daemon && daemon.child.exitCode === null) daemon.child.kill('SIGKILL');
    await modbus?.stop();
  }
}

function describeEmulated(line: EmulatedLine): void {
  describe(`${line.arch} under qemu-user: ${line.label}`, function () {
    this.timeout(900_000);
    let dir: string;
    beforeEach(() => (dir = mkdtempSync(join(tmpdir(), `gatewayd-${line.arch}-`))));
    afterEach(() => rmSync(dir, { recursive: true, force: true }));

    it('ready; HTTPS login with the gateway CA; MQTT round trip of a password user; Modbus read; backup and restore; SIGTERM; a restart keeps the data', () => runEmulated(line, dir));
  });
}

describeEmulated({ arch: 'arm64', label: 'Node 22 bundled in the package', node: async (lib) => ({ bin: join(lib, 'node/bin/node'), version: readFileSync(join(lib, '../../share/doc/gatewayd/copyright'), 'utf8').match(/Node\.js (\d+\.\d+\.\d+) binary/)![1]! }) });
describeEmulated({ arch: 'arm64', label: 'Node 24 from the npm registry', node: () => npmNode(EMULATION.arm64.nodePackage, '24') });

describe('armhf under qemu-user', function () {
  this.timeout(900_000);
  let dir: string;
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'gatewayd-armhf-'))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it(`runs the same checks when the npm registry has an armv7 Node of a tested line (${EMULATION.armhf.nodePackage}); it has none at or above ${NODE_FLOOR}`, async function () {
    const versions = (await registryVersions(EMULATION.armhf.nodePackage)).sort(compareDotted);
    const tested = versions.filter((v) => compareDotted(v, NODE_FLOOR) >= 0 && TESTED_NODE_MAJORS.includes(parseInt(v, 10)));
    console.log(`      ${EMULATION.armhf.nodePackage} on the registry: newest ${versions.at(-1)}; of a tested line: ${tested.join(', ') || 'none'}`);
    if (!tested.length) this.skip();
    const newest = tested.at(-1)!;
    await runEmulated({ arch: 'armhf', label: `Node ${newest} from the npm registry`, node: () => npmNode(EMULATION.armhf.nodePackage, newest) }, dir);
  });
});
