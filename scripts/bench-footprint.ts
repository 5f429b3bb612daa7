// Footprint benchmark: the daemon process as a gateway runs it.
//  (a) start-up to the ready line and resident memory at idle (2 s and 20 s after ready), first
//      start and restart, with the Node flags that `npm start` (and the systemd unit and the
//      image) pass, and with the young-generation flags npm start passed before issue 20
//      (--max-semi-space-size=2 --optimize-for-size) for comparison;
//  (b) restart to ready and idle RSS with 100,000 users in the store;
//  (c) POST /api/users/batch (100 users with passwords at hash cost 10 per request) on an empty
//      store and with 20,000 / 50,000 / 80,000 users: the rate must not fall as the store grows.
// Bounded: fixed user counts and request counts; every child process is killed at the end.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { Agent } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { UserCreateInput } from '../src/users/user-service.js';
import { daemonEnv, httpCall, now, startBenchGateway } from './bench-support.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const mainScript = join(root, 'dist/src/main.js');
/** The admin password of the daemons started here. */
export const ADMIN_PASSWORD = 'Bench-Passw0rd!';
const USERS = 100_000;
const SEED_CHUNK = 10_000;
const BATCH_SIZE = 100;
const BATCHES_PER_POINT = 5;
const BATCH_POINTS = [0, 20_000, 50_000, 80_000] as const;

/** The Node flags of `npm start` (package.json), the same the unit and the image pass. */
export function shippedNodeFlags(): string[] {
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts: { start: string } };
  const words = pkg.scripts.start.split(/\s+/);
  const from = words.indexOf('node');
  const to = words.findIndex((w) => w.endsWith('main.js'));
  if (from < 0 || to < from) throw new Error(`cannot read the node flags of "npm start": ${pkg.scripts.start}`);
  // All of them: --enable-source-maps, for one, costs 6-9 MiB of idle RSS (docs/footprint.md).
  return words.slice(from + 1, to);
}

export function rssMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024;
}

export interface DaemonStart {
  ms: number;
  /** 2 s after ready. */
  rssMiB: number;
  /** 20 s after ready: the idle collections have run (src/heap-footprint.ts). */
  rssLaterMiB: number;
}

/** The flags npm start passed before issue 20 (they bound the young generation and cost broker CPU). */
export const FORMER_FLAGS = ['--max-semi-space-size=2', '--optimize-for-size'];

/** The daemon on `dataDir` with these Node flags (free ports, services in <dataDir>/services, `env` on top), resolved at its ready line. */
export async function startDaemonAt(dataDir: string, nodeFlags: string[], env: Record<string, string> = {}): Promise<{ child: ChildProcess; ready: Record<string, unknown> }> {
  const child = spawn(process.execPath, [...nodeFlags, mainScript], {
    env: daemonEnv(dataDir, ADMIN_PASSWORD, { GATEWAYD_LOG_LEVEL: 'warn', ...env }),
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const ready = await new Promise<Record<string, unknown>>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on('line', (l) => l.includes('"ready"') && resolve(JSON.parse(l) as Record<string, unknown>));
    child.once('exit', (c) => reject(new Error(`daemon exited ${c}`)));
  });
  return { child, ready };
}

/** Spawns the daemon on `dataDir`, times it to its ready line, reads its RSS after 2 s of idle, stops it. */
export async function measureDaemonStart(dataDir: string, nodeFlags: string[]): Promise<DaemonStart> {
  const started = process.hrtime.bigint();
  const { child } = await startDaemonAt(dataDir, nodeFlags);
  try {
    const ms = Number(process.hrtime.bigint() - started) / 1e6;
    // Idle: start-up garbage settles, timers run once.
    await new Promise((r) => setTimeout(r, 2000));
    const early = rssMiB(child.pid!);
    await new Promise((r) => setTimeout(r, 18_000));
    return { ms, rssMiB: early, rssLaterMiB: rssMiB(child.pid!) };
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => (child.exitCode !== null ? r(undefined) : child.once('exit', r)));
  }
}

export async function startAndRestart(flags: string[]): Promise<{ first: DaemonStart; restart: DaemonStart }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'gatewayd-bench-start-'));
  try {
    const first = await measureDaemonStart(dataDir, flags);
    const restart = await measureDaemonStart(dataDir, flags);
    return { first, restart };
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}

function seedBatch(from: number, to: number): UserCreateInput[] {
  const batch: UserCreateInput[] = [];
  for (let k = from; k < to; k++) batch.push({ username: `device-${String(k).padStart(6, '0')}`, identityProvider: 'local' });
  return batch;
}

/** POST /api/users/batch rate (users/s) at each store size of BATCH_POINTS. */
async function batchCreateRates(): Promise<{ users: number; perSecond: number }[]> {
  const bench = await startBenchGateway({ adminPassword: ADMIN_PASSWORD, passwordHashCost: 10, prefix: 'gatewayd-bench-batch-' });
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const out: { users: number; perSecond: number }[] = [];
  try {
    const { users } = bench.gateway.services;
    const login = await httpCall(agent, bench.port, 'POST', '/api/login', {}, JSON.stringify({ username: 'admin', password: ADMIN_PASSWORD }));
    const auth = { authorization: `Bearer ${JSON.parse(login.body.toString('utf8')).token as string}`, 'content-type': 'application/json' };
    let seeded = 0;
    let posted = 0;
    for (const point of BATCH_POINTS) {
      while (seeded < point) {
        const to = Math.min(point, seeded + SEED_CHUNK);
        await users.createMany(seedBatch(seeded, to));
        seeded = to;
      }
      const t0 = now();
      for (let b = 0; b < BATCHES_PER_POINT; b++) {
        const body = Array.from({ length: BATCH_SIZE }, (_, i) => ({ username: `batch-${posted + i}`, password: 'Batch-Passw0rd!', identityProvider: 'local' }));
        posted += BATCH_SIZE;
        const res = await httpCall(agent, bench.port, 'POST', '/api/users/batch', auth, JSON.stringify(body));
        if (res.status !== 201) throw new Error(`POST /api/users/batch: ${res.status} ${res.body.toString('utf8')}`);
      }
      out.push({ users: seeded + posted - BATCH_SIZE * BATCHES_PER_POINT, perSecond: (BATCH_SIZE * BATCHES_PER_POINT) / ((now() - t0) / 1000) });
    }
  } finally {
    agent.destroy();
    await bench.stop();
  }
  return out;
}

/** A data directory holding 100,000 users (created through UserService.createMany, no passwords). */
async function dataDirWithUsers(): Promise<{ dataDir: string; cleanup: () => void }> {
  const bench = await startBenchGateway({ adminPassword: ADMIN_PASSWORD, passwordHashCost: 10, prefix: 'gatewayd-bench-100k-' });
  const { users } = bench.gateway.services;
  for (let from = 0; from < USERS; from += SEED_CHUNK) await users.createMany(seedBatch(from, Math.min(USERS, from + SEED_CHUNK)));
  const dataDir = bench.dataDir;
  // stop() would remove the directory: stop the daemon but keep its files.
  await bench.stop({ keepDataDir: true });
  return { dataDir, cleanup: () => rmSync(dataDir, { recursive: true, force: true }) };
}

export async function benchFootprint(): Promise<Record<string, number>> {
  const flags = shippedNodeFlags();
  const shipped = await startAndRestart(flags);
  const defaults = await startAndRestart(FORMER_FLAGS);
  const big = await dataDirWithUsers();
  let bigRestart: DaemonStart;
  try {
    await measureDaemonStart(big.dataDir, flags); // first start after the seed: page cache warm like a reboot's second start
    bigRestart = await measureDaemonStart(big.dataDir, flags);
  } finally {
    big.cleanup();
  }
  const rates = await batchCreateRates();

  const f = (n: number) => n.toFixed(0);
  console.log(`footprint: node flags of npm start: ${flags.join(' ') || '(none)'}`);
  console.log(`footprint: empty store, shipped flags: first start ${f(shipped.first.ms)} ms, restart ${f(shipped.restart.ms)} ms (target ≤ 800), idle RSS ${shipped.restart.rssMiB.toFixed(1)} MiB 2 s after ready, ${shipped.restart.rssLaterMiB.toFixed(1)} MiB 20 s after (target ≤ 70)`);
  console.log(`footprint: empty store, former flags (${FORMER_FLAGS.join(' ')}): first start ${f(defaults.first.ms)} ms, restart ${f(defaults.restart.ms)} ms, idle RSS ${defaults.restart.rssMiB.toFixed(1)} MiB, ${defaults.restart.rssLaterMiB.toFixed(1)} MiB 20 s after`);
  console.log(`footprint: 100,000 users, shipped flags: restart ${f(bigRestart.ms)} ms (target ≤ 1000), idle RSS ${bigRestart.rssMiB.toFixed(1)} MiB`);
  console.log(`footprint: POST /api/users/batch (${BATCH_SIZE} users, hash cost 10): ${rates.map((r) => `${f(r.perSecond)} users/s at ${r.users.toLocaleString('en')} users`).join(', ')}`);
  return {
    restartMs: shipped.restart.ms,
    firstStartMs: shipped.first.ms,
    idleRssMiB: shipped.restart.rssMiB,
    idleRss20sMiB: shipped.restart.rssLaterMiB,
    formerFlagsRestartMs: defaults.restart.ms,
    formerFlagsIdleRssMiB: defaults.restart.rssMiB,
    formerFlagsIdleRss20sMiB: defaults.restart.rssLaterMiB,
    restart100kUsersMs: bigRestart.ms,
    idleRss100kUsersMiB: bigRestart.rssMiB,
    ...Object.fromEntries(rates.map((r) => [`batchUsersPerSecondAt${r.users}`, r.perSecond])),
  };
}
