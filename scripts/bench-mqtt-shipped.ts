// The broker as shipped, beside what a user would pick instead (issue 20 point 2): the daemon
// started exactly as `npm start` starts it (the Node flags of package.json's start script, as
// the systemd unit and the image; its defaults, LMDB broker state, its logger at info), bare
// aedes 1.2.0 (stable), bare aedes 2.0.0-beta.1 (what gatewayd runs on, to tell aedes' share of a
// cost from gatewayd's) and Mosquitto when installed (aedes-2-lmdb on request: bare aedes 2 on
// gatewayd's LMDB persistence and durable-ack gate). Each broker is its own process, the mqtt.js
// clients run here. Per broker process (every thread, /proc/<pid>/task/*/schedstat, so other load
// on the machine changes little):
// - broker CPU per delivery, QoS 0 and QoS 1, one publisher to one subscriber, clean sessions,
//   MQTT 3.1.1, 64 messages in flight;
// - password connects: CPU per connect+disconnect and CONNACK p50/p99, 2,000 connects with 50 in
//   flight (the password verified once before: the daemon's verified-password cache answers);
// - idle RSS: 8 s after ready (before anything else happened), and 20 s after the load (the
//   daemon's idle collections, src/heap-footprint.ts, have had their quiet 5 s by then).
// Rounds interleave the brokers (rotating order); medians. Bounded: fixed counts and durations.
//
// Run: npm run bench -- mqtt-shipped
// GATEWAYD_BENCH_SHIPPED_KINDS=gatewayd,aedes-1.2,... picks brokers; gatewayd-node is the daemon
// with plain `node` (no flags); gatewayd-before is another build of the daemon, started as its own
// npm start starts it, from the checkout GATEWAYD_BENCH_BEFORE=<dir> (built, with node_modules). GATEWAYD_BENCH_CPU_PROFILE=<dir>: the daemon
// and the bare brokers run with --cpu-prof into that directory (a profile of the whole run, written at its stop).
// GATEWAYD_BENCH_DAEMON_FLAGS: more Node flags for the daemons (e.g. --perf-basic-prof under perf record).
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { Agent } from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { shippedNodeFlags } from './bench-footprint.js';
import { connectOnce, connectRound, type ConnectRound } from './bench-mqtt-connect.js';
import { Flow, median, type FlowResult } from './bench-mqtt.js';
import { daemonEnv, httpCall } from './bench-support.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const ROUNDS = Number(process.env.GATEWAYD_BENCH_ROUNDS ?? 9);
const MEASURE_MS = Number(process.env.GATEWAYD_BENCH_MEASURE_MS ?? 2000);
const RAMP_MS = 200;
const WARMUP_MS = 1500;
const USERNAME = 'bench-device';
const PASSWORD = 'Bench-Dev1ce-Passw0rd!';
const ADMIN_PASSWORD = 'Bench-Adm1n-Passw0rd!';
const IDLE_AFTER_START_MS = 8000;
const IDLE_AFTER_LOAD_MS = Number(process.env.GATEWAYD_BENCH_IDLE_AFTER_LOAD_MS ?? 20_000);
// GATEWAYD_BENCH_SHIPPED_PARTS=qos0,qos1,connect picks what is measured (all by default).
const PARTS = new Set(process.env.GATEWAYD_BENCH_SHIPPED_PARTS?.split(',') ?? ['qos0', 'qos1', 'connect']);

export type Kind = 'gatewayd' | 'gatewayd-node' | 'gatewayd-before' | 'aedes-1.2' | 'aedes-2' | 'aedes-2-lmdb' | 'mosquitto';
const ALL_KINDS: Kind[] = ['gatewayd', 'aedes-1.2', 'aedes-2', 'mosquitto'];

export interface BrokerProcess {
  kind: Kind;
  port: number;
  pid: number;
  /** CPU time of every thread of the process, µs. */
  cpuUs(): Promise<number>;
  rssMiB(): number;
  stop(): Promise<void>;
  /** Readies it for the clients (the daemon: its bench user), once the idle RSS was read. */
  prepare?(): Promise<void>;
  /** The daemon with GATEWAYD_BENCH_HEAP_SNAPSHOTS=<dir>: writes a V8 heap snapshot there (<label>.heapsnapshot). */
  snapshot?(label: string): Promise<void>;
}

/** CPU time of every thread of process `pid`, µs (each task's schedstat: other load changes it little). */
export function processCpuUs(pid: number): number {
  let ns = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
    } catch {
      // the thread ended meanwhile
    }
  }
  return ns / 1000;
}

function rssMiB(pid: number): number {
  return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

function handle(kind: Kind, child: ChildProcess, port: number, cleanup: () => void): BrokerProcess {
  const pid = child.pid!;
  return {
    kind,
    port,
    pid,
    cpuUs: async () => processCpuUs(pid),
    rssMiB: () => rssMiB(pid),
    stop: async () => {
      const exited = new Promise<void>((resolve) => (child.exitCode !== null ? resolve() : child.once('exit', () => resolve())));
      child.kill('SIGTERM');
      await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 15_000))]);
      if (child.exitCode === null) child.kill('SIGKILL');
      cleanup();
    },
  };
}

/** The Node flags of the npm start script in `dir`'s package.json. */
function startFlagsOf(dir: string): string[] {
  const words = (JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { scripts: { start: string } }).scripts.start.split(/\s+/);
  return words.slice(words.indexOf('node') + 1, words.findIndex((w) => w.endsWith('main.js')));
}

/** The daemon as `npm start` runs it (or with plain node, or another build), a user with a password holding bench/#. */
async function startDaemon(kind: 'gatewayd' | 'gatewayd-node' | 'gatewayd-before'): Promise<BrokerProcess> {
  const dataDir = mkdtempSync(join(tmpdir(), 'gatewayd-bench-shipped-'));
  const before = process.env.GATEWAYD_BENCH_BEFORE;
  if (kind === 'gatewayd-before' && !before) throw new Error('gatewayd-before needs GATEWAYD_BENCH_BEFORE=<checkout>');
  const home = kind === 'gatewayd-before' ? before! : root;
  const flags = kind === 'gatewayd' ? shippedNodeFlags() : kind === 'gatewayd-before' ? startFlagsOf(home) : [];
  const profileDir = process.env.GATEWAYD_BENCH_CPU_PROFILE;
  const snapshotDir = kind === 'gatewayd' ? process.env.GATEWAYD_BENCH_HEAP_SNAPSHOTS : undefined;
  const diagnostics = [
    ...(profileDir && kind === 'gatewayd' ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : []),
    ...(snapshotDir ? ['--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${snapshotDir}`] : []),
    // e.g. --perf-basic-prof for `perf record` (the V8 profiler's samples skew towards short native calls).
    ...(process.env.GATEWAYD_BENCH_DAEMON_FLAGS?.split(/\s+/).filter(Boolean) ?? []),
  ];
  const child = spawn(process.execPath, [...flags, ...diagnostics, join(home, 'dist/src/main.js')], {
    // The default (1,000/s per connection) would pace the publisher: a throughput limit, not a cost.
    env: daemonEnv(dataDir, ADMIN_PASSWORD, { GATEWAYD_SET__MQTT__MAXPUBLISHESPERSECOND: '1000000000' }),
    // Its log lines (info: one per connect) are read and dropped here, as a journal would take them.
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const ready = await new Promise<{ http: number; mqtt: number }>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on('line', (line) => {
      if (!line.includes('"ready"')) return;
      const entry = JSON.parse(line) as { http: number; mqtt: number };
      resolve(entry);
    });
    child.once('exit', (code) => reject(new Error(`daemon exited with ${code}`)));
  });
  const broker = handle(kind, child, ready.mqtt, () => rmSync(dataDir, { recursive: true, force: true }));
  return { ...broker, prepare: () => createBenchUser(ready.http), ...(snapshotDir ? { snapshot: (label: string) => heapSnapshot(child, snapshotDir, label) } : {}) };
}

/** Signals the daemon to write a heap snapshot into `dir` and waits until it is complete, as <label>.heapsnapshot. */
async function heapSnapshot(child: ChildProcess, dir: string, label: string): Promise<void> {
  const before = new Set(readdirSync(dir));
  child.kill('SIGUSR2');
  const deadline = Date.now() + 120_000;
  let file: string | undefined;
  let size = -1;
  while (Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 500));
    file ??= readdirSync(dir).find((f) => f.endsWith('.heapsnapshot') && !before.has(f));
    if (!file) continue;
    const now = statSync(join(dir, file)).size;
    if (now > 0 && now === size) return renameSync(join(dir, file), join(dir, `${label}.heapsnapshot`));
    size = now;
  }
  throw new Error('the heap snapshot was not written within 120 s');
}

/** The bench user, created through the REST API (after the idle RSS was read: hashing its password takes memory). */
async function createBenchUser(httpPort: number): Promise<void> {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  try {
    const login = await httpCall(agent, httpPort, 'POST', '/api/login', {}, JSON.stringify({ username: 'admin', password: ADMIN_PASSWORD }));
    const token = (JSON.parse(login.body.toString('utf8')) as { token: string }).token;
    const created = await httpCall(
      agent,
      httpPort,
      'POST',
      '/api/users',
      { authorization: `Bearer ${token}` },
      JSON.stringify({ username: USERNAME, password: PASSWORD, identityProvider: 'local', initialPermissions: [{ resource: 'bench/#', operation: 'readWrite', context: 'mqtt' }] }),
    );
    if (created.status !== 201) throw new Error(`creating the bench user: ${created.status} ${created.body.toString('utf8')}`);
  } finally {
    agent.destroy();
  }
}

/** A bare aedes (scripts/bench-bare-aedes.ts) in its own process. */
export async function startBareAedes(kind: 'aedes-1.2' | 'aedes-2' | 'aedes-2-lmdb'): Promise<BrokerProcess> {
  // GATEWAYD_BENCH_CPU_PROFILE: profiled as the daemon is, to compare the two (<kind>.cpuprofile).
  const profileDir = process.env.GATEWAYD_BENCH_CPU_PROFILE;
  const profile = profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`, `--cpu-prof-name=${kind}.cpuprofile`] : [];
  const flags = process.env.GATEWAYD_BENCH_DAEMON_FLAGS?.split(/\s+/).filter(Boolean) ?? [];
  const child = spawn(process.execPath, [...profile, ...flags, join(root, 'dist/scripts/bench-bare-aedes.js'), kind], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolve, reject) => {
    createInterface({ input: child.stdout! }).once('line', (line) => resolve((JSON.parse(line) as { port: number }).port));
    child.once('exit', (code) => reject(new Error(`${kind} exited with ${code}`)));
  });
  return handle(kind, child, port, () => {});
}

async function startMosquitto(): Promise<BrokerProcess> {
  const dir = mkdtempSync(join(tmpdir(), 'gatewayd-bench-mosquitto-'));
  const port = await freePort();
  execFileSync('mosquitto_passwd', ['-b', '-c', join(dir, 'passwords'), USERNAME, PASSWORD]);
  // Started as root, mosquitto drops to its own user, which must read its files.
  chmodSync(dir, 0o755);
  chmodSync(join(dir, 'passwords'), 0o644);
  writeFileSync(join(dir, 'mosquitto.conf'), [`listener ${port} 127.0.0.1`, 'allow_anonymous false', `password_file ${join(dir, 'passwords')}`, 'persistence false', ''].join('\n'));
  const child = spawn('/usr/sbin/mosquitto', ['-c', join(dir, 'mosquitto.conf')], { stdio: 'ignore' });
  // Ready once it accepts connections (bounded).
  for (let i = 0; ; i++) {
    const up = await new Promise<boolean>((resolve) => {
      const s = net.connect(port, '127.0.0.1', () => {
        s.destroy();
        resolve(true);
      });
      s.on('error', () => resolve(false));
    });
    if (up) break;
    if (i > 100) throw new Error('mosquitto did not start');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return handle('mosquitto', child, port, () => rmSync(dir, { recursive: true, force: true }));
}

/** One broker of `kind` in its own process (the daemon as npm start runs it, with its bench user once prepared). */
export function startBroker(kind: Kind): Promise<BrokerProcess> {
  if (kind === 'gatewayd' || kind === 'gatewayd-node' || kind === 'gatewayd-before') return startDaemon(kind);
  if (kind === 'mosquitto') return startMosquitto();
  return startBareAedes(kind);
}

/** The bench user's credentials (prepared brokers; bare ones take any). */
export const CREDS = { username: USERNAME, password: PASSWORD };

interface Figures {
  qos0: FlowResult[];
  qos1: FlowResult[];
  connect: ConnectRound[];
  rssAfterStart: number;
  rssAfterLoad: number;
}

export async function benchMqttShipped(): Promise<Record<string, number>> {
  const wanted = (process.env.GATEWAYD_BENCH_SHIPPED_KINDS?.split(',') as Kind[] | undefined) ?? ALL_KINDS;
  const kinds = wanted.filter((k) => k !== 'mosquitto' || existsSync('/usr/sbin/mosquitto'));
  const brokers: BrokerProcess[] = [];
  const figures = new Map<Kind, Figures>();
  const flows: Flow[] = [];
  const results: Record<string, number> = {};
  try {
    for (const kind of kinds) brokers.push(await startBroker(kind));
    await new Promise((resolve) => setTimeout(resolve, IDLE_AFTER_START_MS));
    for (const b of brokers) figures.set(b.kind, { qos0: [], qos1: [], connect: [], rssAfterStart: b.rssMiB(), rssAfterLoad: NaN });
    for (const b of brokers) await b.prepare?.();

    for (const qos of [0, 1] as const) {
      if (!PARTS.has(`qos${qos}`)) continue;
      const byBroker = brokers.map((b) => new Flow(() => b.cpuUs().then((us) => us * 1000), b.port, CREDS, 'bench', 1, qos, false));
      flows.push(...byBroker);
      for (const f of byBroker) await f.open();
      for (const f of byBroker) await f.run(0, WARMUP_MS); // JIT and buffers warm, not counted
      for (let r = 0; r < ROUNDS; r++) {
        for (let j = 0; j < brokers.length; j++) {
          const i = (j + r) % brokers.length;
          const run = await byBroker[i]!.run(RAMP_MS, MEASURE_MS);
          figures.get(brokers[i]!.kind)![qos === 0 ? 'qos0' : 'qos1'].push(run);
        }
      }
      for (const f of byBroker) await f.close();
    }

    // Password connects: the password verified once before, and one unmeasured round (JIT).
    if (PARTS.has('connect')) for (const b of brokers) await connectOnce(b.port, USERNAME, PASSWORD);
    if (PARTS.has('connect')) for (const b of brokers) await connectRound(b.port, () => b.cpuUs(), USERNAME, PASSWORD);
    for (let r = 0; r < (PARTS.has('connect') ? ROUNDS : 0); r++) {
      for (let j = 0; j < brokers.length; j++) {
        const b = brokers[(j + r) % brokers.length]!;
        figures.get(b.kind)!.connect.push(await connectRound(b.port, () => b.cpuUs(), USERNAME, PASSWORD));
      }
    }
    await new Promise((resolve) => setTimeout(resolve, IDLE_AFTER_LOAD_MS));
    for (const b of brokers) figures.get(b.kind)!.rssAfterLoad = b.rssMiB();
  } finally {
    await Promise.all(flows.map((f) => f.close().catch(() => undefined)));
    for (const b of brokers) await b.stop();
  }

  const fmt = (n: number, digits = 1) => (Number.isFinite(n) ? n.toFixed(digits) : '-');
  /** Per-round ratios (the rounds of both ran minutes apart at most): their median and quartiles. */
  const ratiosTo = (kind: Kind, pick: (f: Figures) => number[], base: Kind): number[] => {
    const a = figures.get(kind);
    const b = figures.get(base);
    if (!a || !b) return [];
    const ys = pick(b);
    return pick(a).map((x, i) => x / ys[i]!);
  };
  const ratioTo = (kind: Kind, pick: (f: Figures) => number[], base: Kind) => {
    const xs = ratiosTo(kind, pick, base);
    return xs.length ? median(xs) : NaN;
  };
  const quartiles = (xs: number[]) => {
    const sorted = [...xs].sort((a, b) => a - b);
    const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.round(q * (sorted.length - 1)))]!;
    return sorted.length ? `${at(0.25).toFixed(2)}–${at(0.75).toFixed(2)}` : '-';
  };
  const cpu0 = (f: Figures) => f.qos0.map((x) => x.cpuUsPerMsg);
  const cpu1 = (f: Figures) => f.qos1.map((x) => x.cpuUsPerMsg);
  const cpuConnect = (f: Figures) => f.connect.map((x) => x.cpuUsPerConnect);
  const rows: string[][] = [['', 'QoS 0 µs/msg', 'QoS 1 µs/msg', 'connect µs', 'CONNACK p50 ms', 'p99 ms', 'idle RSS MiB (start / after load)']];
  for (const [kind, f] of figures) {
    const key = kind.replace(/[.-]/g, '_');
    results[`${key}_qos0_cpu_us_per_msg`] = median(cpu0(f));
    results[`${key}_qos1_cpu_us_per_msg`] = median(cpu1(f));
    results[`${key}_connect_cpu_us`] = median(cpuConnect(f));
    results[`${key}_connack_p50_ms`] = median(f.connect.map((x) => x.p50Ms));
    results[`${key}_connack_p99_ms`] = median(f.connect.map((x) => x.p99Ms));
    results[`${key}_idle_rss_mib`] = f.rssAfterStart;
    results[`${key}_idle_rss_after_load_mib`] = f.rssAfterLoad;
    rows.push([
      kind,
      fmt(results[`${key}_qos0_cpu_us_per_msg`]!),
      fmt(results[`${key}_qos1_cpu_us_per_msg`]!),
      fmt(results[`${key}_connect_cpu_us`]!, 0),
      fmt(results[`${key}_connack_p50_ms`]!),
      fmt(results[`${key}_connack_p99_ms`]!),
      `${fmt(f.rssAfterStart)} / ${fmt(f.rssAfterLoad)}`,
    ]);
  }
  for (const kind of figures.keys()) {
    if (!kind.startsWith('gatewayd')) continue;
    const key = kind.replace(/[.-]/g, '_');
    for (const base of ['aedes-1.2', 'aedes-2'] as Kind[]) {
      const b = base.replace(/[.-]/g, '_');
      results[`${key}_vs_${b}_qos0_cpu`] = ratioTo(kind, cpu0, base);
      results[`${key}_vs_${b}_qos1_cpu`] = ratioTo(kind, cpu1, base);
      results[`${key}_vs_${b}_connect_cpu`] = ratioTo(kind, cpuConnect, base);
    }
  }
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
  const line = (r: string[]) => r.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join('   ');
  console.log(`MQTT brokers as shipped: broker-process CPU (all threads), medians of ${ROUNDS} interleaved rounds (${MEASURE_MS} ms flows, 1 → 1, 64 in flight, 64 B; 2,000 password connects, 50 in flight)`);
  console.log(`gatewayd = ${['node', ...shippedNodeFlags(), 'dist/src/main.js'].join(' ')} (npm start), its defaults`);
  for (const r of rows) console.log(line(r));
  for (const kind of figures.keys()) {
    if (!kind.startsWith('gatewayd')) continue;
    const key = kind.replace(/[.-]/g, '_');
    const r = (base: string, what: string) => fmt(results[`${key}_vs_${base}_${what}`]!, 2);
    console.log(
      `${kind} / aedes 1.2: QoS 0 ${r('aedes_1_2', 'qos0_cpu')}, QoS 1 ${r('aedes_1_2', 'qos1_cpu')} (targets ≤ 1.10), connect ${r('aedes_1_2', 'connect_cpu')} (≤ 1.5); ` +
        `/ aedes 2 beta: QoS 0 ${r('aedes_2', 'qos0_cpu')}, QoS 1 ${r('aedes_2', 'qos1_cpu')}, connect ${r('aedes_2', 'connect_cpu')}`,
    );
    // The spread of the per-round ratios: how far one run's median can be trusted.
    if (figures.has('aedes-1.2')) {
      console.log(
        `  per-round ratios to aedes 1.2, quartiles: QoS 0 ${quartiles(ratiosTo(kind, cpu0, 'aedes-1.2'))}, QoS 1 ${quartiles(ratiosTo(kind, cpu1, 'aedes-1.2'))}, connect ${quartiles(ratiosTo(kind, cpuConnect, 'aedes-1.2'))}`,
      );
    }
  }
  // Another build beside this one (GATEWAYD_BENCH_BEFORE): this build's figures over that one's, per round.
  if (figures.has('gatewayd') && figures.has('gatewayd-before')) {
    const ab = (pick: (f: Figures) => number[]) => {
      const xs = ratiosTo('gatewayd', pick, 'gatewayd-before');
      return `${fmt(median(xs), 2)} (${quartiles(xs)})`;
    };
    console.log(`gatewayd / gatewayd-before, per round: QoS 0 ${ab(cpu0)}, QoS 1 ${ab(cpu1)}, connect ${ab(cpuConnect)}`);
  }
  return results;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  benchMqttShipped().then(
    () => process.exit(0),
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
}
