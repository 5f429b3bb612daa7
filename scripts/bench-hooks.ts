// Cluster broker hooks (docs/scaling-out.md), measured as shipped: the daemon runs as its own
// process with `npm start`'s node flags, and its CPU (every thread, from /proc) is read around
// each phase.
// 1. Decisions per second and gatewayd CPU per decision of each hook over keep-alive HTTP
//    (CONCURRENCY requests in flight; the hooks' rate limit raised so it does not cap the run).
// 2. A real RabbitMQ 3.10 node (test/support/rabbitmq.ts) with gatewayd as its HTTP auth
//    backend, the same behind rabbitmq_auth_backend_cache, and one on RabbitMQ's internal user
//    database, in the same run: MQTT connects per second and QoS 1 publish throughput, each
//    publisher cycling over TOPICS topics (more than the MQTT plugin's 12 cached per connection,
//    so the backend is asked as a busy device fleet would make it), and gatewayd's CPU meanwhile.
//
// Run: npm run bench -- hooks   (GATEWAYD_BENCH_HOOKS_RABBITMQ=0 skips part 2; GATEWAYD_BENCH_HOOKS_ONLY=name,...
// measures only those hooks; GATEWAYD_BENCH_NODE_FLAGS adds node flags to the daemon, e.g. --cpu-prof)
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { Agent } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath, pathToFileURL } from 'node:url';
import mqtt, { type MqttClient } from 'mqtt';
import { freePort, startRabbitKit, type RabbitNode } from '../test/support/rabbitmq.js';
import { shippedNodeFlags } from './bench-footprint.js';
import { httpCall, now, percentile } from './bench-support.js';

const root = join(fileURLToPath(new URL('.', import.meta.url)), '..', '..');
const mainScript = join(root, 'dist/src/main.js');
const ADMIN_PASSWORD = 'Bench-Adm1n-Password';
const DEVICE = { username: 'device-1', password: 'Dev1ce-Passw0rd!' };
const CONCURRENCY = 8;
const PHASE_MS = Number(process.env.GATEWAYD_BENCH_HOOKS_MS ?? 2000);
const MQTT_PARALLEL = 8;
const PUBLISHERS = 4;
const TOPICS = 64;
const CLK_TCK = 100; // Linux USER_HZ

/** CPU seconds (user + system, all threads) of a process so far. */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / CLK_TCK;
}

interface Daemon {
  child: ChildProcess;
  port: number;
  dataDir: string;
  stop(): Promise<void>;
}

/** The daemon as `npm start` runs it, with hooks on; `extra`: more configuration (GATEWAYD_CONFIG). */
async function startDaemon(httpPort: number, extra: Record<string, unknown> = {}): Promise<Daemon> {
  const dataDir = mkdtempSync(join(tmpdir(), 'gatewayd-bench-hooks-'));
  const configFile = join(dataDir, 'bench-config.json');
  writeFileSync(configFile, JSON.stringify({ brokerHooks: { enabled: true, maxRequestsPerSecond: 1_000_000, maxQueuedLogins: 100_000, ...extra } }));
  const extraFlags = process.env.GATEWAYD_BENCH_NODE_FLAGS?.split(' ').filter(Boolean) ?? [];
  const child = spawn(process.execPath, [...shippedNodeFlags(), ...extraFlags, mainScript], {
    env: {
      PATH: process.env.PATH ?? '',
      GATEWAYD_CONFIG: configFile,
      GATEWAYD_DATA_DIR: dataDir,
      GATEWAYD_HOST: '127.0.0.1',
      GATEWAYD_HTTP_PORT: String(httpPort),
      GATEWAYD_MQTT_PORT: '0',
      GATEWAYD_MQTTS_PORT: '0',
      GATEWAYD_ADMIN_PASSWORD: ADMIN_PASSWORD,
      GATEWAYD_SET__MAPPING__SERVICESDIR: join(dataDir, 'services'),
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const port = await new Promise<number>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on('line', (l) => {
      if (l.includes('"ready"')) resolve(Number(JSON.parse(l).http));
    });
    child.once('exit', (c) => reject(new Error(`daemon exited ${c}`)));
  });
  child.stdout!.resume();
  return {
    child,
    port,
    dataDir,
    async stop() {
      child.kill('SIGTERM');
      await new Promise((r) => (child.exitCode !== null ? r(undefined) : child.once('exit', r)));
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** The device user (write and read on devices/#) and its session token, over REST. */
async function seed(agent: Agent, port: number): Promise<string> {
  const json = { 'content-type': 'application/json' };
  const login = await httpCall(agent, port, 'POST', '/api/login', json, JSON.stringify({ username: 'admin', password: ADMIN_PASSWORD }));
  const admin = JSON.parse(login.body.toString()).token as string;
  const created = await httpCall(agent, port, 'POST', '/api/users', { ...json, authorization: `Bearer ${admin}` }, JSON.stringify({ ...DEVICE, identityProvider: 'local', initialPermissions: [{ resource: 'devices/#', operation: 'readWrite', context: 'mqtt' }] }));
  if (created.status !== 201) throw new Error(`create user: ${created.status} ${created.body.toString()}`);
  const device = await httpCall(agent, port, 'POST', '/api/login', json, JSON.stringify({ username: DEVICE.username, password: DEVICE.password }));
  return JSON.parse(device.body.toString()).token as string;
}

interface HookCall {
  path: string;
  headers: Record<string, string>;
  body: (i: number) => string | Buffer;
  expect: (body: string) => boolean;
}

/** Calls one hook for PHASE_MS with CONCURRENCY in flight: decisions/s, gatewayd CPU µs per decision, p50/p99 ms. */
async function phase(daemon: Daemon, call: HookCall): Promise<{ perSecond: number; cpuMicros: number; p50: number; p99: number }> {
  const agent = new Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  const latencies: number[] = [];
  let i = 0;
  // Warm-up: JIT and caches (verified password, permission sets) as in steady operation.
  for (let w = 0; w < 200; w++) await httpCall(agent, daemon.port, 'POST', call.path, call.headers, call.body(i++));
  const cpu0 = cpuSeconds(daemon.child.pid!);
  const t0 = now();
  const end = t0 + PHASE_MS;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (now() < end) {
        const started = now();
        const res = await httpCall(agent, daemon.port, 'POST', call.path, call.headers, call.body(i++));
        latencies.push(now() - started);
        if (res.status !== 200 || !call.expect(res.body.toString())) throw new Error(`${call.path}: ${res.status} ${res.body.toString()}`);
      }
    }),
  );
  const seconds = (now() - t0) / 1000;
  const cpu = cpuSeconds(daemon.child.pid!) - cpu0;
  agent.destroy();
  latencies.sort((a, b) => a - b);
  return { perSecond: latencies.length / seconds, cpuMicros: (cpu * 1e6) / latencies.length, p50: percentile(latencies, 50), p99: percentile(latencies, 99) };
}

async function hookDecisions(results: Record<string, number>): Promise<void> {
  const daemon = await startDaemon(0);
  try {
    const agent = new Agent({ keepAlive: true });
    const token = await seed(agent, daemon.port);
    agent.destroy();
    const json = { 'content-type': 'application/json' };
    const form = { 'content-type': 'application/x-www-form-urlencoded' };
    const verne = (hook: string) => ({ ...json, 'vernemq-hook': hook });
    const u = DEVICE.username;
    const q = (o: Record<string, string>) => new URLSearchParams(o).toString();
    const ok = (s: string) => s === 'allow' || s.includes('"ok"') || s.includes('"allow"');
    const calls: Record<string, HookCall> = {
      rabbitmqUserToken: { path: '/api/broker/hooks/rabbitmq/user', headers: form, body: (i) => q({ username: u, password: token, vhost: '/', client_id: `c${i % 100}` }), expect: ok },
      rabbitmqUserPassword: { path: '/api/broker/hooks/rabbitmq/user', headers: form, body: (i) => q({ username: u, password: DEVICE.password, vhost: '/', client_id: `c${i % 100}` }), expect: ok },
      rabbitmqTopicWrite: { path: '/api/broker/hooks/rabbitmq/topic', headers: form, body: (i) => q({ username: u, vhost: '/', resource: 'topic', name: 'amq.topic', permission: 'write', tags: '', routing_key: `devices.d${i % TOPICS}.temp`, 'variable_map.client_id': `c${i % 100}`, 'variable_map.username': u, 'variable_map.vhost': '/' }), expect: ok },
      rabbitmqResource: { path: '/api/broker/hooks/rabbitmq/resource', headers: form, body: (i) => q({ username: u, vhost: '/', resource: 'exchange', name: 'amq.topic', permission: 'write', tags: '', client_id: `c${i % 100}` }), expect: ok },
      vernemqRegisterToken: { path: '/api/broker/hooks/vernemq', headers: verne('auth_on_register'), body: (i) => JSON.stringify({ peer_addr: '127.0.0.1', peer_port: 1000 + (i % 50000), username: u, password: token, mountpoint: '', client_id: `v${i % 100}`, clean_session: true }), expect: ok },
      vernemqPublish: { path: '/api/broker/hooks/vernemq', headers: verne('auth_on_publish'), body: (i) => JSON.stringify({ username: u, client_id: `v${i % 100}`, mountpoint: '', qos: 1, topic: `devices/d${i % TOPICS}/temp`, payload: 'MjEuNQ==', retain: false }), expect: ok },
      vernemqSubscribe: { path: '/api/broker/hooks/vernemq', headers: verne('auth_on_subscribe'), body: (i) => JSON.stringify({ username: u, client_id: `v${i % 100}`, mountpoint: '', topics: [{ topic: `devices/d${i % TOPICS}/#`, qos: 1 }] }), expect: ok },
      emqxAuthnToken: { path: '/api/broker/hooks/emqx/authn', headers: json, body: (i) => JSON.stringify({ clientid: `e${i % 100}`, username: u, password: token, peerhost: '127.0.0.1', cert_common_name: '' }), expect: ok },
      emqxAuthzPublish: { path: '/api/broker/hooks/emqx/authz', headers: json, body: (i) => JSON.stringify({ clientid: `e${i % 100}`, username: u, peerhost: '127.0.0.1', action: 'publish', topic: `devices/d${i % TOPICS}/temp`, qos: '1', retain: 'false' }), expect: ok },
    };
    console.log(`hook decisions over keep-alive HTTP (${CONCURRENCY} in flight, ${PHASE_MS} ms each; daemon as npm start runs it):`);
    const only = process.env.GATEWAYD_BENCH_HOOKS_ONLY?.split(',');
    for (const [name, call] of Object.entries(calls).filter(([n]) => !only || only.includes(n))) {
      const r = await phase(daemon, call);
      results[`${name}PerSecond`] = r.perSecond;
      results[`${name}CpuMicros`] = r.cpuMicros;
      console.log(`  ${name.padEnd(22)} ${r.perSecond.toFixed(0).padStart(6)}/s  gatewayd CPU ${r.cpuMicros.toFixed(0).padStart(4)} µs/decision  p50 ${r.p50.toFixed(2)} ms  p99 ${r.p99.toFixed(2)} ms`);
    }
  } finally {
    await daemon.stop();
  }
}

// ---------------------------------------------------------------- part 2: through RabbitMQ

function connectClient(port: number, username: string, password: string): Promise<MqttClient> {
  const client = mqtt.connect({ host: '127.0.0.1', port, protocolVersion: 4, reconnectPeriod: 0, connectTimeout: 30_000, username, password, clientId: `b-${Math.random().toString(16).slice(2, 14)}` });
  return new Promise((resolve, reject) => {
    client.once('connect', () => resolve(client));
    client.once('error', (err) => {
      client.end(true);
      reject(err);
    });
  });
}

async function connectsPerSecond(node: RabbitNode, username: string, password: string): Promise<number> {
  let done = 0;
  const t0 = now();
  const end = t0 + PHASE_MS * 1.5;
  await Promise.all(
    Array.from({ length: MQTT_PARALLEL }, async () => {
      while (now() < end) {
        await (await connectClient(node.mqttPort, username, password)).endAsync(true);
        done++;
      }
    }),
  );
  return (done * 1000) / (now() - t0);
}

async function publishesPerSecond(node: RabbitNode, username: string, password: string): Promise<number> {
  const clients = await Promise.all(Array.from({ length: PUBLISHERS }, () => connectClient(node.mqttPort, username, password)));
  let done = 0;
  const t0 = now();
  const end = t0 + PHASE_MS * 1.5;
  try {
    await Promise.all(
      clients.map(async (c, k) => {
        for (let i = 0; now() < end; i++) {
          await c.publishAsync(`devices/d${(i + k * 7) % TOPICS}/temp`, '21.5', { qos: 1 });
          done++;
        }
      }),
    );
  } finally {
    await Promise.all(clients.map((c) => c.endAsync(true)));
  }
  return (done * 1000) / (now() - t0);
}

async function throughRabbitMq(results: Record<string, number>): Promise<void> {
  const httpPort = await freePort();
  const hooksUrl = `http://127.0.0.1:${httpPort}/api/broker/hooks/rabbitmq`;
  const kit = await startRabbitKit();
  let daemon: Daemon | undefined;
  try {
    const [internal, http, cached] = await Promise.all([kit.startNode(), kit.startNode({ auth: { httpUrl: hooksUrl } }), kit.startNode({ auth: { httpUrl: hooksUrl, cache: true, cacheTtlMs: 60_000 } })]);
    await internal!.addUser(DEVICE.username, DEVICE.password);
    daemon = await startDaemon(httpPort);
    const agent = new Agent({ keepAlive: true });
    await seed(agent, daemon.port);
    agent.destroy();
    console.log(`through RabbitMQ 3.10 (MQTT, ${MQTT_PARALLEL} connects in flight; ${PUBLISHERS} QoS 1 publishers over ${TOPICS} topics):`);
    for (const [label, node] of [['internal', internal], ['gatewayd', http], ['gatewaydCache', cached]] as const) {
      // One connect first: the verified-password cache and RabbitMQ's auth cache as in steady operation.
      await (await connectClient(node!.mqttPort, DEVICE.username, DEVICE.password)).endAsync(true);
      const cpu0 = cpuSeconds(daemon.child.pid!);
      const connects = await connectsPerSecond(node!, DEVICE.username, DEVICE.password);
      const cpu1 = cpuSeconds(daemon.child.pid!);
      const publishes = await publishesPerSecond(node!, DEVICE.username, DEVICE.password);
      const cpu2 = cpuSeconds(daemon.child.pid!);
      const phaseSeconds = (PHASE_MS * 1.5) / 1000;
      results[`${label}ConnectsPerSecond`] = connects;
      results[`${label}PublishesPerSecond`] = publishes;
      results[`${label}GatewaydCpuShareConnects`] = (cpu1 - cpu0) / phaseSeconds;
      results[`${label}GatewaydCpuSharePublishes`] = (cpu2 - cpu1) / phaseSeconds;
      console.log(
        `  ${label.padEnd(14)} connects ${connects.toFixed(0).padStart(5)}/s (gatewayd ${((100 * (cpu1 - cpu0)) / phaseSeconds).toFixed(0).padStart(3)}% of a core)` +
          `   publishes ${publishes.toFixed(0).padStart(6)}/s (gatewayd ${((100 * (cpu2 - cpu1)) / phaseSeconds).toFixed(0).padStart(3)}% of a core)`,
      );
    }
  } finally {
    await daemon?.stop();
    await kit.destroy();
  }
}

export async function benchHooks(): Promise<Record<string, number>> {
  const results: Record<string, number> = {};
  await hookDecisions(results);
  if (process.env.GATEWAYD_BENCH_HOOKS_RABBITMQ !== '0') await throughRabbitMq(results);
  return results;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  benchHooks().then(
    () => process.exit(0),
    (err) => {
      console.error(err);
      process.exit(1);
    },
  );
}
