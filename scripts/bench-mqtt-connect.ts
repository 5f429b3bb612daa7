// Connect cost of the real gateway's broker beside bare aedes of the same version: a password
// connect whose password was verified once before (the verified-password cache answers, no
// scrypt), as after a network blip. Each broker runs in its own child process so that the
// broker's CPU per connect counts every thread of it (LMDB writer, libuv pool) and none of the
// mqtt.js clients, which run here. Measured: broker CPU per connect+disconnect, and CONNACK
// latency (p50/p99) of CONNECTS connects kept CONCURRENCY in flight. Rounds alternate between
// the brokers so both see the same background load; ratios are taken per round.
//
// Run: npm run bench -- mqtt-connect   (also part of mqtt-auth)
// GATEWAYD_BENCH_CPU_PROFILE=<dir> writes a V8 CPU profile of each broker process there.

import { fork, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import inspector from 'node:inspector/promises';
import { join } from 'node:path';
import net from 'node:net';
import { performance } from 'node:perf_hooks';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Aedes } from 'aedes';
import mqtt from 'mqtt';
import forge from 'node-forge';
import { loadConfig } from '../src/config/index.js';
import { createLogger, createSilentLogger } from '../src/log/index.js';
import { aedesBaseOptions, createBroker } from '../src/mqtt/index.js';
import { StaticMqttAccess } from '../test/support/static-mqtt-access.js';
import { startBareBroker } from '../test/support/bare-aedes.js';
import { percentile, startBenchGateway } from './bench-support.js';

const CHILD_ENV = 'GATEWAYD_BENCH_CONNECT_CHILD';
const CONNECTS = Number(process.env.GATEWAYD_BENCH_CONNECTS ?? 2000);
const CONCURRENCY = 50;
const ROUNDS = Number(process.env.GATEWAYD_BENCH_CONNECT_ROUNDS ?? 5);
const USERNAME = 'device-pw';
const PASSWORD = 'Dev1ce-Passw0rd!';

/**
 * bare-lmdb: bare aedes on gatewayd's LMDB persistence, to tell the broker state's share from the
 * hooks'. broker (GATEWAYD_BENCH_CONNECT_KINDS=bare,broker,gatewayd): gatewayd's broker with every
 * hook but an in-memory user list instead of the daemon, to tell the hooks' share from the daemon's.
 */
type Kind = 'gatewayd' | 'bare' | 'bare-lmdb' | 'broker';
const KINDS = (process.env.GATEWAYD_BENCH_CONNECT_KINDS ?? 'bare,bare-lmdb,gatewayd').split(',') as Kind[];

// ------------------------------------------------------------------ broker side (child process)

/** The broker's TLS listener needs a key and certificate; nothing connects to it here. */
function selfSignedTls(): { key: string; cert: string; ca: () => string[] } {
  const keys = forge.pki.rsa.generateKeyPair(1024);
  const cert = forge.pki.createCertificate();
  cert.publicKey = keys.publicKey;
  cert.serialNumber = '01';
  cert.validity.notBefore = new Date(Date.now() - 60_000);
  cert.validity.notAfter = new Date(Date.now() + 86_400_000);
  cert.setSubject([{ name: 'commonName', value: 'bench' }]);
  cert.setIssuer([{ name: 'commonName', value: 'bench' }]);
  cert.sign(keys.privateKey, forge.md.sha256.create());
  return { key: forge.pki.privateKeyToPem(keys.privateKey), cert: forge.pki.certificateToPem(cert), ca: () => [] };
}

async function runChild(kind: Kind): Promise<void> {
  let port: number;
  let stop: () => Promise<void>;
  if (kind === 'gatewayd') {
    // The daemon's defaults (LMDB broker state on, scrypt logN 15, throttles, audit log).
    // The daemon's own logger at its default level (info: one line per connect, as mosquitto's
    // "New client connected") on its stdout, which is /dev/null here: formatting and the write are paid.
    const log = createLogger({ level: process.env.GATEWAYD_BENCH_LOG_LEVEL ?? 'info' });
    const bench = await startBenchGateway({ adminPassword: 'Bench-Adm1n-Password', passwordHashCost: 15, prefix: 'gatewayd-bench-mqtt-connect-', log });
    await bench.gateway.services.users.create({
      username: USERNAME,
      password: PASSWORD,
      identityProvider: 'local',
      initialPermissions: [{ resource: 'devices/#', operation: 'readWrite', context: 'mqtt' }],
    });
    port = bench.gateway.ports().mqtt;
    stop = () => bench.stop();
  } else if (kind === 'broker') {
    const access = new StaticMqttAccess([{ username: USERNAME, password: PASSWORD, permissions: [{ resource: 'devices/#', operation: 'readWrite' }] }]);
    const broker = createBroker({ config: loadConfig({ env: {} }).mqtt, host: '127.0.0.1', log: createSilentLogger(), access, tls: selfSignedTls() });
    port = (await broker.start()).port;
    stop = () => broker.stop();
  } else if (kind === 'bare-lmdb') {
    const dir = mkdtempSync(join(tmpdir(), 'gatewayd-bench-mqtt-connect-lmdb-'));
    const broker = await startBareBroker({ dir, aedes: aedesBaseOptions(loadConfig({ env: {} }).mqtt) });
    port = broker.port;
    stop = async () => {
      await broker.close();
      rmSync(dir, { recursive: true, force: true });
    };
  } else {
    const config = loadConfig({ env: {} }).mqtt;
    const aedes = await Aedes.createBroker(aedesBaseOptions(config));
    const server = net.createServer({ noDelay: true }, (socket) => {
      socket.setNoDelay(true);
      aedes.handle(socket);
    });
    await new Promise<void>((resolve) => server.listen({ port: 0, host: '127.0.0.1', backlog: 2048 }, resolve));
    port = (server.address() as net.AddressInfo).port;
    stop = async () => {
      await new Promise<void>((resolve) => aedes.close(() => resolve()));
      server.close();
    };
  }
  const profileDir = process.env.GATEWAYD_BENCH_CPU_PROFILE;
  const session = profileDir ? new inspector.Session() : undefined;
  if (session) {
    // Only the measured rounds are profiled (not start-up, user creation, warm-up).
    session.connect();
    await session.post('Profiler.enable');
  }
  process.on('message', (msg: { type: string; id?: number }) => {
    if (msg.type === 'profile-start' && session) {
      void session.post('Profiler.start').then(() => process.send!({ type: 'profiling' }));
    } else if (msg.type === 'profile-stop' && session) {
      void session.post('Profiler.stop').then(({ profile }) => {
        writeFileSync(join(profileDir!, `connect-${kind}.cpuprofile`), JSON.stringify(profile));
        process.send!({ type: 'profiled' });
      });
    } else if (msg.type === 'cpu') {
      const u = process.cpuUsage();
      process.send!({ type: 'cpu', id: msg.id, us: u.user + u.system });
    } else if (msg.type === 'stop') {
      void stop().finally(() => process.send!({ type: 'stopped' }, () => process.exit(0)));
    }
  });
  process.send!({ type: 'ready', port });
}

// ------------------------------------------------------------------ client side

interface BrokerProcess {
  kind: Kind;
  port: number;
  cpuUs(): Promise<number>;
  /** Starts / stops (and writes) the CPU profile with GATEWAYD_BENCH_CPU_PROFILE. */
  profile(on: boolean): Promise<void>;
  stop(): Promise<void>;
}

async function startChild(kind: Kind): Promise<BrokerProcess> {
  const child: ChildProcess = fork(fileURLToPath(import.meta.url), [], {
    env: { ...process.env, [CHILD_ENV]: kind },
    // GATEWAYD_BENCH_PERF=1: JIT symbols for `perf record -p <pid>` (on-CPU samples, unlike V8's profile).
    execArgv: ['--enable-source-maps', ...(process.env.GATEWAYD_BENCH_PERF === '1' ? ['--perf-basic-prof'] : [])],
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  const waiting = new Map<number, (us: number) => void>();
  let nextId = 0;
  let stopped: (() => void) | undefined;
  let profiler: (() => void) | undefined;
  child.on('message', (msg: { type: string; id?: number; us?: number }) => {
    if (msg.type === 'cpu') waiting.get(msg.id!)?.(msg.us!);
    if (msg.type === 'stopped') stopped?.();
    if (msg.type === 'profiling' || msg.type === 'profiled') profiler?.();
  });
  const port = await new Promise<number>((resolve, reject) => {
    child.once('message', (msg: { type: string; port: number }) => resolve(msg.port));
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`${kind} broker exited with ${code}`)));
  });
  return {
    kind,
    port,
    cpuUs: () =>
      new Promise((resolve) => {
        const id = nextId++;
        waiting.set(id, (us) => {
          waiting.delete(id);
          resolve(us);
        });
        child.send({ type: 'cpu', id });
      }),
    profile: (on: boolean) =>
      process.env.GATEWAYD_BENCH_CPU_PROFILE
        ? new Promise<void>((resolve) => {
            profiler = resolve;
            child.send({ type: on ? 'profile-start' : 'profile-stop' });
          })
        : Promise.resolve(),
    stop: async () => {
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      await Promise.race([
        new Promise<void>((resolve) => {
          stopped = resolve;
          child.send({ type: 'stop' });
        }),
        new Promise((resolve) => setTimeout(resolve, 15_000)),
      ]);
      await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 5000))]);
      if (child.exitCode === null) child.kill('SIGKILL');
    },
  };
}

/** Connects, waits for the CONNACK, disconnects (forcibly, as a device that drops off). Returns ms to CONNACK. */
export function connectOnce(port: number, username = USERNAME, password = PASSWORD): Promise<number> {
  const t0 = performance.now();
  const client = mqtt.connect({
    host: '127.0.0.1',
    port,
    protocolVersion: 4,
    reconnectPeriod: 0,
    connectTimeout: 60_000,
    clean: true,
    clientId: `c-${Math.random().toString(16).slice(2, 14)}`,
    username,
    password,
  });
  return new Promise((resolve, reject) => {
    client.once('connect', () => {
      const ms = performance.now() - t0;
      client.end(true, () => resolve(ms));
    });
    client.once('error', (err) => {
      client.end(true);
      reject(err);
    });
  });
}

export interface ConnectRound {
  cpuUsPerConnect: number;
  p50Ms: number;
  p99Ms: number;
  connectsPerSec: number;
}

/** CONNECTS connects with CONCURRENCY in flight (bounded by the count). */
function round(broker: BrokerProcess): Promise<ConnectRound> {
  return connectRound(broker.port, () => broker.cpuUs());
}

/** `CONNECTS` password connects, `CONCURRENCY` in flight: broker CPU (µs, from `cpuUs`) per connect, CONNACK latency. */
export async function connectRound(port: number, cpuUs: () => Promise<number>, username = USERNAME, password = PASSWORD): Promise<ConnectRound> {
  const latencies: number[] = [];
  let started = 0;
  const c0 = await cpuUs();
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (started < CONNECTS) {
        started++;
        latencies.push(await connectOnce(port, username, password));
      }
    }),
  );
  const wall = performance.now() - t0;
  // Let the broker finish the disconnects it was sent (their cost belongs to this round).
  await new Promise((resolve) => setTimeout(resolve, 100));
  const c1 = await cpuUs();
  latencies.sort((a, b) => a - b);
  return { cpuUsPerConnect: (c1 - c0) / CONNECTS, p50Ms: percentile(latencies, 50), p99Ms: percentile(latencies, 99), connectsPerSec: (CONNECTS * 1000) / wall };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
};

export async function benchMqttConnect(): Promise<Record<string, number>> {
  const brokers: BrokerProcess[] = [];
  const results: Record<string, number> = {};
  const fmt = (n: number, digits = 0) => (Number.isFinite(n) ? n.toFixed(digits) : '-');
  try {
    for (const kind of KINDS) brokers.push(await startChild(kind));
    // The password is verified once (scrypt), then remembered. Then one unmeasured round each:
    // the daemon runs far more code than bare aedes, and its JIT takes a few thousand connects
    // to settle (profiled: TurboFan still compiling in the first measured rounds).
    for (const b of brokers) await connectOnce(b.port);
    for (const b of brokers) await round(b);
    const runs = Object.fromEntries(KINDS.map((k) => [k, [] as ConnectRound[]])) as Record<Kind, ConnectRound[]>;
    await Promise.all(brokers.map((b) => b.profile(true)));
    for (let r = 0; r < ROUNDS; r++) {
      // Rotate the order so no broker always runs first after a pause.
      for (let j = 0; j < brokers.length; j++) {
        const b = brokers[(j + r) % brokers.length]!;
        runs[b.kind].push(await round(b));
      }
      if (process.env.GATEWAYD_BENCH_VERBOSE === '1') {
        for (const k of KINDS) {
          const x = runs[k].at(-1)!;
          console.log(`  round ${r} ${k}: ${fmt(x.cpuUsPerConnect)} µs CPU/connect, p50 ${fmt(x.p50Ms, 1)} ms, p99 ${fmt(x.p99Ms, 1)} ms, ${fmt(x.connectsPerSec)}/s`);
        }
      }
    }
    await Promise.all(brokers.map((b) => b.profile(false)));
    const pick = (k: Kind, f: (x: ConnectRound) => number) => median(runs[k].map(f));
    // Ratios of rounds run next to each other (same background load), median over rounds.
    const ratio = (k: Kind, f: (x: ConnectRound) => number) => median(runs[k].map((x, i) => f(x) / f(runs.bare[i]!)));
    const key = (k: Kind) => k.replace('-', '_');
    for (const k of KINDS) {
      results[`connect_${key(k)}_cpu_us`] = pick(k, (x) => x.cpuUsPerConnect);
      results[`connect_${key(k)}_p50_ms`] = pick(k, (x) => x.p50Ms);
      results[`connect_${key(k)}_p99_ms`] = pick(k, (x) => x.p99Ms);
      results[`connect_${key(k)}_per_s`] = pick(k, (x) => x.connectsPerSec);
      if (k !== 'bare') {
        results[`connect_cpu_ratio_${key(k)}_vs_bare`] = ratio(k, (x) => x.cpuUsPerConnect);
        results[`connect_p99_ratio_${key(k)}_vs_bare`] = ratio(k, (x) => x.p99Ms);
      }
    }
    console.log(`password connects, verified once before (cache), ${CONNECTS} at concurrency ${CONCURRENCY}, connect+CONNACK+disconnect, median of ${ROUNDS} rotating rounds:`);
    console.log('              broker CPU/connect   CONNACK p50       p99   connects/s   / bare: CPU   p99');
    for (const k of KINDS) {
      const r = (name: string) => results[`connect_${name}_${key(k)}_vs_bare`];
      console.log(
        `  ${k.padEnd(10)} ${fmt(results[`connect_${key(k)}_cpu_us`]! / 1000, 3).padStart(8)} ms ${fmt(results[`connect_${key(k)}_p50_ms`]!, 1).padStart(12)} ms ${fmt(results[`connect_${key(k)}_p99_ms`]!, 1).padStart(7)} ms ${fmt(results[`connect_${key(k)}_per_s`]!).padStart(10)}` +
          (k === 'bare' ? '' : `   ${fmt(r('cpu_ratio')!, 2).padStart(9)} ${fmt(r('p99_ratio')!, 2).padStart(5)}`),
      );
    }
    console.log('  target: gatewayd / bare <= 1.5. gatewayd = the real daemon (users in LMDB, LMDB broker state, throttles,');
    console.log('  its logger at info to /dev/null); bare-lmdb = bare aedes on the same LMDB persistence. CPU = every thread of the broker process.');
  } finally {
    for (const b of brokers.reverse()) await b.stop();
  }
  return results;
}

const childKind = process.env[CHILD_ENV] as Kind | undefined;
if (childKind) {
  runChild(childKind).catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
} else if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  benchMqttConnect().then(
    () => process.exit(0),
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
}
