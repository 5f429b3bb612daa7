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
import { writeFileSync } from 'node:fs';
import inspector from 'node:inspector/promises';
import { join } from 'node:path';
import net from 'node:net';
import { performance } from 'node:perf_hooks';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Aedes } from 'aedes';
import mqtt from 'mqtt';
import { loadConfig } from '../src/config/index.js';
import { aedesBaseOptions } from '../src/mqtt/index.js';
import { percentile, startBenchGateway } from './bench-support.js';

const CHILD_ENV = 'GATEWAYD_BENCH_CONNECT_CHILD';
const CONNECTS = Number(process.env.GATEWAYD_BENCH_CONNECTS ?? 2000);
const CONCURRENCY = 50;
const ROUNDS = Number(process.env.GATEWAYD_BENCH_CONNECT_ROUNDS ?? 3);
const USERNAME = 'device-pw';
const PASSWORD = 'Dev1ce-Passw0rd!';

type Kind = 'gatewayd' | 'bare';

// ------------------------------------------------------------------ broker side (child process)

async function runChild(kind: Kind): Promise<void> {
  let port: number;
  let stop: () => Promise<void>;
  if (kind === 'gatewayd') {
    // The daemon's defaults (LMDB broker state on, scrypt logN 15, throttles, audit log).
    const bench = await startBenchGateway({ adminPassword: 'Bench-Adm1n-Password', passwordHashCost: 15, prefix: 'gatewayd-bench-mqtt-connect-' });
    await bench.gateway.services.users.create({
      username: USERNAME,
      password: PASSWORD,
      identityProvider: 'local',
      initialPermissions: [{ resource: 'devices/#', operation: 'readWrite', context: 'mqtt' }],
    });
    port = bench.gateway.ports().mqtt;
    stop = () => bench.stop();
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
    execArgv: ['--enable-source-maps'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
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
function connectOnce(port: number): Promise<number> {
  const t0 = performance.now();
  const client = mqtt.connect({
    host: '127.0.0.1',
    port,
    protocolVersion: 4,
    reconnectPeriod: 0,
    connectTimeout: 60_000,
    clean: true,
    clientId: `c-${Math.random().toString(16).slice(2, 14)}`,
    username: USERNAME,
    password: PASSWORD,
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

interface ConnectRound {
  cpuUsPerConnect: number;
  p50Ms: number;
  p99Ms: number;
  connectsPerSec: number;
}

/** CONNECTS connects with CONCURRENCY in flight (bounded by the count). */
async function round(broker: BrokerProcess): Promise<ConnectRound> {
  const latencies: number[] = [];
  let started = 0;
  const c0 = await broker.cpuUs();
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (started < CONNECTS) {
        started++;
        latencies.push(await connectOnce(broker.port));
      }
    }),
  );
  const wall = performance.now() - t0;
  // Let the broker finish the disconnects it was sent (their cost belongs to this round).
  await new Promise((resolve) => setTimeout(resolve, 100));
  const c1 = await broker.cpuUs();
  latencies.sort((a, b) => a - b);
  return { cpuUsPerConnect: (c1 - c0) / CONNECTS, p50Ms: percentile(latencies, 50), p99Ms: percentile(latencies, 99), connectsPerSec: (CONNECTS * 1000) / wall };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
};

export async function benchMqttConnect(): Promise<Record<string, number>> {
  const gw = await startChild('gatewayd');
  const bare = await startChild('bare').catch(async (err: unknown) => {
    await gw.stop();
    throw err;
  });
  const results: Record<string, number> = {};
  const fmt = (n: number, digits = 0) => (Number.isFinite(n) ? n.toFixed(digits) : '-');
  try {
    // The password is verified once (scrypt), then remembered; warm both brokers' JIT too.
    for (const b of [gw, bare]) for (let i = 0; i < 300; i++) await connectOnce(b.port);
    const runs: Record<Kind, ConnectRound[]> = { gatewayd: [], bare: [] };
    await Promise.all([gw.profile(true), bare.profile(true)]);
    for (let r = 0; r < ROUNDS; r++) {
      for (const b of r % 2 ? [bare, gw] : [gw, bare]) runs[b.kind].push(await round(b));
      if (process.env.GATEWAYD_BENCH_VERBOSE === '1') {
        for (const k of ['gatewayd', 'bare'] as const) {
          const x = runs[k].at(-1)!;
          console.log(`  round ${r} ${k}: ${fmt(x.cpuUsPerConnect)} µs CPU/connect, p50 ${fmt(x.p50Ms, 1)} ms, p99 ${fmt(x.p99Ms, 1)} ms, ${fmt(x.connectsPerSec)}/s`);
        }
      }
    }
    await Promise.all([gw.profile(false), bare.profile(false)]);
    const pick = (k: Kind, f: (x: ConnectRound) => number) => median(runs[k].map(f));
    const ratio = (f: (x: ConnectRound) => number) => median(runs.gatewayd.map((x, i) => f(x) / f(runs.bare[i]!)));
    for (const k of ['bare', 'gatewayd'] as const) {
      results[`connect_${k}_cpu_us`] = pick(k, (x) => x.cpuUsPerConnect);
      results[`connect_${k}_p50_ms`] = pick(k, (x) => x.p50Ms);
      results[`connect_${k}_p99_ms`] = pick(k, (x) => x.p99Ms);
      results[`connect_${k}_per_s`] = pick(k, (x) => x.connectsPerSec);
    }
    results.connect_cpu_ratio_gatewayd_vs_bare = ratio((x) => x.cpuUsPerConnect);
    results.connect_p99_ratio_gatewayd_vs_bare = ratio((x) => x.p99Ms);
    console.log(`password connects, verified once before (cache), ${CONNECTS} at concurrency ${CONCURRENCY}, connect+CONNACK+disconnect, median of ${ROUNDS} alternating rounds:`);
    console.log('              broker CPU/connect   CONNACK p50   p99        connects/s');
    for (const k of ['bare', 'gatewayd'] as const) {
      console.log(`  ${k.padEnd(10)} ${fmt(results[`connect_${k}_cpu_us`]! / 1000, 2).padStart(8)} ms ${fmt(results[`connect_${k}_p50_ms`]!, 1).padStart(12)} ms ${fmt(results[`connect_${k}_p99_ms`]!, 1).padStart(7)} ms ${fmt(results[`connect_${k}_per_s`]!).padStart(10)}`);
    }
    console.log(`  gatewayd / bare (per round, median): CPU ${fmt(results.connect_cpu_ratio_gatewayd_vs_bare, 2)}, p99 ${fmt(results.connect_p99_ratio_gatewayd_vs_bare, 2)} (target <= 1.5)`);
    console.log('  (gatewayd: the real daemon — users in LMDB, LMDB broker state, throttles, audit; CPU = every thread of the broker process)');
  } finally {
    await bare.stop();
    await gw.stop();
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
