// A reboot storm (issue 32): the daemon comes back (after a power cut: SIGKILL) and every device
// reconnects at once. DEVICES devices log in with their own password (each a user of its own:
// after a restart the verified-password cache is empty, so every one costs a scrypt derivation)
// and DEVICES with a session token as password (a token is checked by its digest). The daemon runs
// as `npm start` runs it, on a data directory prepared once (users, a role granting devices/#,
// tokens), at auth.passwordHashCost HASH_COST for the devices' passwords (see below).
//
// Per run, from the ready line: the time until every device has its CONNACK (0), CONNACK latency
// p50/p99 (from each device's connect), the daemon's CPU (every thread, /proc/<pid>/task/*/
// schedstat: the scrypt derivations run in libuv's pool), and the restart itself (to ready: wall
// time and CPU). Devices are raw MQTT sockets (mqtt-packet) opened all at once; a refused one
// retries after RETRY_MS, at most RETRIES times. Bounded: fixed counts, every wait has a deadline.
//
// HASH_COST (GATEWAYD_BENCH_REBOOT_HASH_COST, default 12) is below the shipped default (15, 8 times
// the work per derivation) so that the emulated arm64 run ends in minutes; the x86 run at 15 is
// GATEWAYD_BENCH_REBOOT_HASH_COST=15.
//
// arm64, emulated: GATEWAYD_BENCH_REBOOT_ARM64="<qemu-aarch64-static> -L <sysroot> <arm64 node>"
// and GATEWAYD_BENCH_REBOOT_ARM64_HOME=<a copy of the built tree with arm64 node_modules: npm ci
// --cpu=arm64 --os=linux --libc=glibc --ignore-scripts --omit=dev> run the same storm on the same
// data directory (LMDB's files are the same on both) after the x86 runs, and print arm64/x86.
//
// The first connect storm after a start (issue 36): right after the ready line, 2,000 password
// connects of identical credentials, 50 in flight (bench/mqtt-connect's storm: connect, CONNACK,
// disconnect), then the same storm again; beside bare aedes 1.2 started and stormed the same way
// (its own first storm and its second). The first check of the password is one scrypt the first
// connects share (its time on this machine is printed: it bounds the storm's p99 from below).
// Per round the daemon starts on a data directory prepared once (one user) and ends by SIGKILL.
// The same storm with the user's session token as password (a fleet's credential: checked by its
// digest, no derivation) runs beside it, its own daemon started for it.
//
// Run: npm run bench -- reboot   (GATEWAYD_BENCH_REBOOT_DEVICES, GATEWAYD_BENCH_REBOOT_ROUNDS;
// GATEWAYD_BENCH_REBOOT_PARTS=devices,storm; GATEWAYD_BENCH_REBOOT_STORM_ROUNDS, 5;
// GATEWAYD_BENCH_REBOOT_STORM_HASH_COST: the storm user's auth.passwordHashCost, 15 as shipped;
// GATEWAYD_BENCH_REBOOT_STORM_FLAGS: more Node flags for the daemon, for an A/B;
// GATEWAYD_BENCH_REBOOT_STORM_CREDENTIALS=password,token: which storms of gatewayd;
// GATEWAYD_BENCH_REBOOT_BEFORE=<a built checkout>: that build's daemon stormed too, in the same rounds)
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { Agent } from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath, pathToFileURL } from 'node:url';
import mqttPacket from 'mqtt-packet';
import { scryptSync } from 'node:crypto';
import { shippedNodeFlags } from './bench-footprint.js';
import { connectOnce } from './bench-mqtt-connect.js';
import { processCpuUs, startBareAedes } from './bench-mqtt-shipped.js';
import { daemonEnv, httpCall, percentile } from './bench-support.js';

/** A JSON call to the daemon's API (a status of 300 or more throws, with the start of the body). */
function apiCaller(agent: Agent, port: number, timeoutMs: number) {
  return async (method: string, path: string, body: unknown, token?: string) => {
    const res = await httpCall(agent, port, method, path, token ? { authorization: `Bearer ${token}` } : {}, JSON.stringify(body), timeoutMs);
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${res.body.toString('utf8').slice(0, 300)}`);
    return JSON.parse(res.body.toString('utf8') || 'null') as any;
  };
}

const root = fileURLToPath(new URL('../..', import.meta.url));
const DEVICES = Number(process.env.GATEWAYD_BENCH_REBOOT_DEVICES ?? 1000);
const ROUNDS = Number(process.env.GATEWAYD_BENCH_REBOOT_ROUNDS ?? 3);
const HASH_COST = Number(process.env.GATEWAYD_BENCH_REBOOT_HASH_COST ?? 12);
const ADMIN_PASSWORD = 'Bench-Adm1n-Passw0rd!';
const PARTS = new Set(process.env.GATEWAYD_BENCH_REBOOT_PARTS?.split(',') ?? ['devices', 'storm']);
const STORM_ROUNDS = Number(process.env.GATEWAYD_BENCH_REBOOT_STORM_ROUNDS ?? 5);
const STORM_HASH_COST = Number(process.env.GATEWAYD_BENCH_REBOOT_STORM_HASH_COST ?? 15);
/** The daemon's setting for the storm (its user is hashed at it; a check uses the stored hash's own cost). */
const stormEnv: Record<string, string> = STORM_HASH_COST === 15 ? {} : { GATEWAYD_SET__AUTH__PASSWORDHASHCOST: String(STORM_HASH_COST) };
const STORM_FLAGS = process.env.GATEWAYD_BENCH_REBOOT_STORM_FLAGS?.split(/\s+/).filter(Boolean) ?? [];
const BEFORE = process.env.GATEWAYD_BENCH_REBOOT_BEFORE;
const STORM_USER = { username: 'storm-device', password: 'Storm-Dev1ce-Passw0rd!' };
const STORM_CREDENTIALS = new Set(process.env.GATEWAYD_BENCH_REBOOT_STORM_CREDENTIALS?.split(',') ?? ['password', 'token']);
const RETRY_MS = 1000;
const RETRIES = 5;
const BATCH = 100;

interface Device {
  kind: 'password' | 'token';
  username: string;
  password: string;
}

interface Launch {
  name: string;
  /** Command and arguments before main.js (the Node binary, or an emulator and the Node binary, and npm start's flags). */
  command: string[];
  home: string;
  /** How long the storm may take at most. */
  deadlineMs: number;
}

interface StormResult {
  readyMs: number;
  restartCpuMs: number;
  allBackMs: number;
  cpuMs: number;
  p50Ms: number;
  p99Ms: number;
  /** The token devices alone: all back, p99. */
  tokensBackMs: number;
  tokensP99Ms: number;
  retries: number;
}

function processCpuMs(pid: number): number {
  let ns = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
    } catch {
      // the thread ended meanwhile
    }
  }
  return ns / 1e6;
}

/** CPU of the whole process so far, threads that ended included (utime + stime, 10 ms ticks). */
function processTotalCpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

const envFor = (dataDir: string) => daemonEnv(dataDir, ADMIN_PASSWORD, { GATEWAYD_LOG_LEVEL: 'warn', GATEWAYD_SET__AUTH__PASSWORDHASHCOST: String(HASH_COST) });

/** `env`: the environment instead of the devices' (their hash cost, log at warn): the storm's is the daemon's defaults. */
async function startDaemon(launch: Launch, dataDir: string, env?: Record<string, string>): Promise<{ child: ChildProcess; ready: { http: number; mqtt: number }; startedAt: number }> {
  const startedAt = performance.now();
  const [command, ...args] = launch.command;
  const child = spawn(command!, [...args, join(launch.home, 'dist/src/main.js')], { env: env ? daemonEnv(dataDir, ADMIN_PASSWORD, env) : envFor(dataDir), stdio: ['ignore', 'pipe', 'inherit'] });
  const ready = await new Promise<{ http: number; mqtt: number }>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${launch.name}: no ready line within ${launch.deadlineMs} ms`)), launch.deadlineMs);
    createInterface({ input: child.stdout! }).on('line', (line) => {
      if (!line.includes('"ready"')) return;
      clearTimeout(timer);
      resolve(JSON.parse(line) as { http: number; mqtt: number });
    });
    child.once('exit', (code) => reject(new Error(`${launch.name}: daemon exited with ${code}`)));
  });
  return { child, ready, startedAt };
}

async function stopDaemon(child: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill(signal);
  await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 30_000))]);
  if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
}

/** The data directory: a role granting devices/#, DEVICES password devices and DEVICES token devices with their tokens. */
async function prepare(dataDir: string): Promise<{ passwordDevices: Device[]; tokenDevices: Device[] }> {
  const launch: Launch = { name: 'x86-64', command: [process.execPath, ...shippedNodeFlags()], home: root, deadlineMs: 60_000 };
  const { child, ready } = await startDaemon(launch, dataDir);
  const agent = new Agent({ keepAlive: true, maxSockets: 4 });
  try {
    const call = apiCaller(agent, ready.http, 600_000);
    const admin = (await call('POST', '/api/login', { username: 'admin', password: ADMIN_PASSWORD })).token as string;
    const role = await call('POST', '/api/roles', { name: 'devices', isShared: true, permissions: [{ resource: 'devices/#', operation: 'readWrite', context: 'mqtt' }] }, admin);
    const device = (kind: Device['kind'], i: number): Device => ({ kind, username: `${kind}-${String(i).padStart(5, '0')}`, password: `${kind}-${i}-Passw0rd!${(i * 7919) % 10007}` });
    const passwordDevices = Array.from({ length: DEVICES }, (_, i) => device('password', i));
    const tokenHolders = Array.from({ length: DEVICES }, (_, i) => device('token', i));
    for (const group of [passwordDevices, tokenHolders]) {
      for (let i = 0; i < group.length; i += BATCH) {
        await call('POST', '/api/users/batch', group.slice(i, i + BATCH).map((d) => ({ username: d.username, password: d.password, identityProvider: 'local', roles: [role.id] })), admin);
      }
    }
    const tokenDevices: Device[] = [];
    for (let i = 0; i < tokenHolders.length; i += 8) {
      const logins = await Promise.all(tokenHolders.slice(i, i + 8).map((d) => call('POST', '/api/login', { username: d.username, password: d.password, expireTimeInHours: 720 })));
      logins.forEach((l, k) => tokenDevices.push({ kind: 'token', username: tokenHolders[i + k]!.username, password: l.token as string }));
    }
    return { passwordDevices, tokenDevices };
  } finally {
    agent.destroy();
    await stopDaemon(child, 'SIGTERM');
  }
}

/** One device's connect until its CONNACK 0 (retried after a refusal); its latency from its last attempt's start and its retries. */
function connectDevice(port: number, device: Device, clientId: string, deadline: number, sockets: net.Socket[]): Promise<{ ms: number; retries: number; backAt: number }> {
  const attempt = (retries: number): Promise<{ ms: number; retries: number; backAt: number }> =>
    new Promise((resolve, reject) => {
      const started = performance.now();
      const socket = net.connect(port, '127.0.0.1');
      socket.setNoDelay(true);
      const parser = mqttPacket.parser({ protocolVersion: 4 });
      const retry = (why: string) => {
        socket.destroy();
        if (retries >= RETRIES || Date.now() + RETRY_MS > deadline) return reject(new Error(`${device.username}: ${why} after ${retries} retries`));
        setTimeout(() => attempt(retries + 1).then(resolve, reject), RETRY_MS);
      };
      socket.on('error', (err) => retry(err.message));
      parser.on('packet', (packet) => {
        if (packet.cmd !== 'connack') return;
        if (packet.returnCode !== 0) return retry(`CONNACK ${packet.returnCode}`);
        sockets.push(socket);
        resolve({ ms: performance.now() - started, retries, backAt: performance.now() });
      });
      socket.on('data', (chunk: Buffer) => parser.parse(chunk));
      socket.once('connect', () =>
        socket.write(mqttPacket.generate({ cmd: 'connect', protocolId: 'MQTT', protocolVersion: 4, clean: true, keepalive: 600, clientId, username: device.username, password: Buffer.from(device.password) })),
      );
    });
  return attempt(0);
}

/** Starts the daemon on `dataDir`, lets every device reconnect at once, measures, and cuts its power. */
async function storm(launch: Launch, dataDir: string, devices: Device[]): Promise<StormResult> {
  const { child, ready, startedAt } = await startDaemon(launch, dataDir);
  const sockets: net.Socket[] = [];
  try {
    const readyAt = performance.now();
    const pid = child.pid!;
    const restartCpuMs = processTotalCpuMs(pid);
    const cpuAtReady = processCpuMs(pid);
    const deadline = Date.now() + launch.deadlineMs;
    const outcomes = await Promise.all(devices.map((d, i) => connectDevice(ready.mqtt, d, `device-${i}`, deadline, sockets)));
    const allBackMs = performance.now() - readyAt;
    const cpuMs = processCpuMs(pid) - cpuAtReady;
    const latencies = outcomes.map((o) => o.ms).sort((a, b) => a - b);
    const tokens = outcomes.filter((_, i) => devices[i]!.kind === 'token');
    return {
      readyMs: readyAt - startedAt,
      restartCpuMs,
      allBackMs,
      cpuMs,
      p50Ms: percentile(latencies, 50),
      p99Ms: percentile(latencies, 99),
      tokensBackMs: Math.max(0, ...tokens.map((o) => o.backAt - readyAt)),
      tokensP99Ms: percentile(tokens.map((o) => o.ms).sort((a, b) => a - b), 99),
      retries: outcomes.reduce((n, o) => n + o.retries, 0),
    };
  } finally {
    for (const s of sockets) s.destroy();
    // A power cut: the next start is a recovery.
    await stopDaemon(child, 'SIGKILL');
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]!;
const spread = (xs: number[], digits = 0) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length > 1 ? ` (${s[0]!.toFixed(digits)}–${s.at(-1)!.toFixed(digits)})` : '';
};

/** A data directory with one user allowed devices/#, its password at the daemon's default cost (as bench/mqtt's storm); the user's session token. */
async function prepareStorm(dataDir: string): Promise<string> {
  const launch: Launch = { name: 'x86-64', command: [process.execPath, ...shippedNodeFlags()], home: root, deadlineMs: 60_000 };
  const { child, ready } = await startDaemon(launch, dataDir, stormEnv);
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  try {
    const call = apiCaller(agent, ready.http, 120_000);
    const admin = (await call('POST', '/api/login', { username: 'admin', password: ADMIN_PASSWORD })).token as string;
    await call('POST', '/api/users', { ...STORM_USER, identityProvider: 'local', initialPermissions: [{ resource: 'devices/#', operation: 'readWrite', context: 'mqtt' }] }, admin);
    return (await call('POST', '/api/login', { ...STORM_USER, expireTimeInHours: 720 })).token as string;
  } finally {
    agent.destroy();
    await stopDaemon(child, 'SIGTERM');
  }
}

interface StormRound {
  cpuUsPerConnect: number;
  p50Ms: number;
  p99Ms: number;
  /** p99 of the connects that started after the first CONNACK (the first ones wait for the password's one scrypt). */
  p99AfterFirstCheckMs: number;
}

interface StormPair {
  first: StormRound;
  second: StormRound;
}

const STORM_CONNECTS = 2000;
const STORM_IN_FLIGHT = 50;

/** bench/mqtt-connect's storm (connectRound): STORM_CONNECTS connects, STORM_IN_FLIGHT at a time, each connect, CONNACK, disconnect. */
async function connectStorm(port: number, cpuUs: () => number, password = STORM_USER.password): Promise<StormRound> {
  const started: number[] = [];
  const latencies: number[] = [];
  let firstAck = Infinity;
  let next = 0;
  const c0 = cpuUs();
  await Promise.all(
    Array.from({ length: STORM_IN_FLIGHT }, async () => {
      while (next < STORM_CONNECTS) {
        const i = next++;
        started[i] = performance.now();
        latencies[i] = await connectOnce(port, STORM_USER.username, password);
        firstAck = Math.min(firstAck, started[i]! + latencies[i]!);
      }
    }),
  );
  // The disconnects the broker was sent belong to the storm.
  await new Promise((resolve) => setTimeout(resolve, 100));
  const cpu = cpuUs() - c0;
  const sorted = [...latencies].sort((a, b) => a - b);
  const after = latencies.filter((_, i) => started[i]! >= firstAck).sort((a, b) => a - b);
  return { cpuUsPerConnect: cpu / STORM_CONNECTS, p50Ms: percentile(sorted, 50), p99Ms: percentile(sorted, 99), p99AfterFirstCheckMs: percentile(after, 99) };
}

type StormKind = 'gatewayd' | 'token' | 'before' | 'aedes';

/** The first storm after a start and the one after it: the daemon (as npm start runs it, log at info; with the password, with the token) and bare aedes 1.2, alternately. */
async function connectStorms(results: Record<string, number>): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'gatewayd-bench-storm-'));
  try {
    const token = await prepareStorm(dataDir);
    const launch: Launch = { name: 'x86-64', command: [process.execPath, ...shippedNodeFlags(), ...STORM_FLAGS], home: root, deadlineMs: 120_000 };
    const before: Launch | undefined = BEFORE ? { ...launch, command: [process.execPath, ...shippedNodeFlags()], home: BEFORE } : undefined;
    const runs: Record<StormKind, StormPair[]> = { gatewayd: [], token: [], before: [], aedes: [] };
    const kinds: StormKind[] = [
      ...(STORM_CREDENTIALS.has('password') ? (['gatewayd'] as const) : []),
      'aedes',
      ...(STORM_CREDENTIALS.has('token') ? (['token'] as const) : []),
      ...(before ? (['before'] as const) : []),
    ];
    const scryptMs: number[] = [];
    for (let r = 0; r < STORM_ROUNDS; r++) {
      for (const kind of r % 2 ? [...kinds].reverse() : kinds) {
        if (kind !== 'aedes') {
          const { child, ready } = await startDaemon(kind === 'before' ? before! : launch, dataDir, { ...stormEnv, GATEWAYD_LOG_LEVEL: 'info' });
          try {
            const cpu = () => processCpuUs(child.pid!);
            const password = kind === 'token' ? token : STORM_USER.password;
            const first = await connectStorm(ready.mqtt, cpu, password);
            const second = await connectStorm(ready.mqtt, cpu, password);
            runs[kind].push({ first, second });
          } finally {
            await stopDaemon(child, 'SIGKILL');
          }
        } else {
          const bare = await startBareAedes('aedes-1.2');
          try {
            const cpu = () => processCpuUs(bare.pid);
            const first = await connectStorm(bare.port, cpu);
            const second = await connectStorm(bare.port, cpu);
            runs.aedes.push({ first, second });
          } finally {
            await bare.stop();
          }
        }
      }
      // One derivation of the daemon's default cost here, between the rounds (what the first connects wait for).
      const c0 = process.cpuUsage();
      scryptSync(STORM_USER.password, 'sixteen-byte-salt', 64, { N: 2 ** STORM_HASH_COST, r: 8, p: 1, maxmem: 64 * 1024 * 1024 });
      const c = process.cpuUsage(c0);
      scryptMs.push((c.user + c.system) / 1000);
    }
    const range = (xs: number[], digits = 0) => `${median(xs).toFixed(digits)}${spread(xs, digits)}`;
    const pick = (xs: StormPair[], f: (p: StormPair) => number, digits = 0) => range(xs.map(f), digits);
    console.log(`\nconnect storms after a start: ${STORM_ROUNDS} rounds of 2,000 connects, 50 in flight, identical credentials (scrypt logN ${STORM_HASH_COST}: ${range(scryptMs)} ms of CPU a derivation here, ${range(scryptMs.map((ms) => (ms * 1000) / STORM_CONNECTS))} µs a connect of the storm)`);
    const rows: string[][] = [['', 'storm', 'CPU µs/connect', 'CONNACK p50 ms', 'p99 ms', 'p99 after the first check']];
    const names: Record<StormKind, string> = { gatewayd: 'gatewayd, password', token: 'gatewayd, session token', aedes: 'aedes 1.2', before: 'gatewayd before' };
    for (const kind of (['gatewayd', 'token', 'aedes', 'before'] as const).filter((k) => runs[k].length)) {
      const xs = runs[kind];
      rows.push([names[kind], 'first after start', pick(xs, (p) => p.first.cpuUsPerConnect), pick(xs, (p) => p.first.p50Ms, 1), pick(xs, (p) => p.first.p99Ms), pick(xs, (p) => p.first.p99AfterFirstCheckMs)]);
      rows.push(['', 'second', pick(xs, (p) => p.second.cpuUsPerConnect), pick(xs, (p) => p.second.p50Ms, 1), pick(xs, (p) => p.second.p99Ms), pick(xs, (p) => p.second.p99AfterFirstCheckMs)]);
    }
    const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
    for (const r of rows) console.log(r.map((cell, c) => (c < 2 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join('  '));
    const a1 = median(runs.aedes.map((p) => p.first.cpuUsPerConnect));
    const a2 = median(runs.aedes.map((p) => p.second.cpuUsPerConnect));
    Object.assign(results, { storm_hash_cost: STORM_HASH_COST, storm_scrypt_cpu_ms: median(scryptMs), storm_aedes_first_cpu_us: a1, storm_aedes_second_cpu_us: a2, storm_aedes_first_p99_ms: median(runs.aedes.map((p) => p.first.p99Ms)) });
    // Per round (the rounds alternate, so each pair saw the same background load).
    const firstRatios = (kind: StormKind) => runs[kind].map((p, i) => p.first.cpuUsPerConnect / runs.aedes[i]!.first.cpuUsPerConnect);
    if (runs.gatewayd.length) {
      const g1 = median(runs.gatewayd.map((p) => p.first.cpuUsPerConnect));
      const g2 = median(runs.gatewayd.map((p) => p.second.cpuUsPerConnect));
      const ratios = firstRatios('gatewayd');
      // The one derivation the storm's credentials need is a cost of auth.passwordHashCost, not of the connect path: apart.
      const withoutDerivation = runs.gatewayd.map((p, i) => (p.first.cpuUsPerConnect - (scryptMs[i]! * 1000) / STORM_CONNECTS) / runs.aedes[i]!.first.cpuUsPerConnect);
      console.log(
        `password: gatewayd's first storm / aedes 1.2's first storm: ${median(ratios).toFixed(2)}${spread(ratios, 2)} per round (target ≤ 1.2), ${median(withoutDerivation).toFixed(2)}${spread(withoutDerivation, 2)} without the one derivation; / aedes 1.2's second storm ${(g1 / a2).toFixed(2)}; ` +
          `gatewayd first / second ${(g1 / g2).toFixed(2)}, aedes 1.2 first / second ${(a1 / a2).toFixed(2)}; gatewayd's first-storm CONNACK p99 ${median(runs.gatewayd.map((p) => p.first.p99Ms)).toFixed(0)} ms (target < 100; the first ${STORM_IN_FLIGHT} connects, ${((100 * STORM_IN_FLIGHT) / STORM_CONNECTS).toFixed(1)} %, wait for one scrypt), after the first check ${median(runs.gatewayd.map((p) => p.first.p99AfterFirstCheckMs)).toFixed(0)} ms`,
      );
      Object.assign(results, {
        storm_gatewayd_first_cpu_us: g1,
        storm_gatewayd_second_cpu_us: g2,
        storm_first_ratio_to_aedes_first: median(ratios),
        storm_first_ratio_to_aedes_first_without_derivation: median(withoutDerivation),
        storm_gatewayd_first_p50_ms: median(runs.gatewayd.map((p) => p.first.p50Ms)),
        storm_gatewayd_first_p99_ms: median(runs.gatewayd.map((p) => p.first.p99Ms)),
        storm_gatewayd_first_p99_after_first_check_ms: median(runs.gatewayd.map((p) => p.first.p99AfterFirstCheckMs)),
        storm_gatewayd_second_p99_ms: median(runs.gatewayd.map((p) => p.second.p99Ms)),
      });
    }
    if (runs.token.length) {
      const ratios = firstRatios('token');
      const t1 = median(runs.token.map((p) => p.first.cpuUsPerConnect));
      console.log(
        `session token: gatewayd's first storm / aedes 1.2's first storm: ${median(ratios).toFixed(2)}${spread(ratios, 2)} per round (target ≤ 1.2); gatewayd first / second ${(t1 / median(runs.token.map((p) => p.second.cpuUsPerConnect))).toFixed(2)}; ` +
          `first-storm CONNACK p99 ${median(runs.token.map((p) => p.first.p99Ms)).toFixed(0)} ms (target < 100)`,
      );
      Object.assign(results, {
        storm_token_first_cpu_us: t1,
        storm_token_first_ratio_to_aedes_first: median(ratios),
        storm_token_first_p99_ms: median(runs.token.map((p) => p.first.p99Ms)),
        storm_token_second_p99_ms: median(runs.token.map((p) => p.second.p99Ms)),
      });
    }
    if (before && runs.gatewayd.length) {
      const ab = runs.gatewayd.map((p, i) => p.first.cpuUsPerConnect / runs.before[i]!.first.cpuUsPerConnect);
      console.log(`gatewayd / gatewayd before (${BEFORE}), first storm per round: ${median(ab).toFixed(2)}${spread(ab, 2)}; before's first / aedes 1.2's first ${(median(runs.before.map((p) => p.first.cpuUsPerConnect)) / a1).toFixed(2)}, its p99 ${median(runs.before.map((p) => p.first.p99Ms)).toFixed(0)} ms`);
      results.storm_first_ratio_to_before = median(ab);
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}

export async function benchReboot(): Promise<Record<string, number>> {
  const results: Record<string, number> = {};
  if (PARTS.has('storm')) await connectStorms(results);
  if (PARTS.has('devices')) await devicesReboot(results);
  return results;
}

async function devicesReboot(results: Record<string, number>): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'gatewayd-bench-reboot-'));
  try {
    const t0 = performance.now();
    const { passwordDevices, tokenDevices } = await prepare(dataDir);
    console.log(`reboot: ${DEVICES} password devices (own users, scrypt logN ${HASH_COST}) and ${DEVICES} token devices prepared in ${((performance.now() - t0) / 1000).toFixed(0)} s`);
    // Interleaved so that the password and the token devices arrive mixed, as after a real reboot.
    const devices = passwordDevices.flatMap((d, i) => [d, tokenDevices[i]!]);
    const launches: Launch[] = [{ name: 'x86-64', command: [process.execPath, ...shippedNodeFlags()], home: root, deadlineMs: 600_000 }];
    const arm = process.env.GATEWAYD_BENCH_REBOOT_ARM64;
    if (arm) launches.push({ name: 'arm64 (qemu)', command: [...arm.split(/\s+/).filter(Boolean), ...shippedNodeFlags()], home: process.env.GATEWAYD_BENCH_REBOOT_ARM64_HOME ?? root, deadlineMs: 3_600_000 });
    const byLaunch = new Map<string, StormResult[]>();
    for (const launch of launches) {
      const rounds = launch.name === 'x86-64' ? ROUNDS : Number(process.env.GATEWAYD_BENCH_REBOOT_ARM64_ROUNDS ?? 1);
      const runs: StormResult[] = [];
      for (let r = 0; r < rounds; r++) runs.push(await storm(launch, dataDir, devices));
      byLaunch.set(launch.name, runs);
      const pick = (f: (x: StormResult) => number, digits = 0) => `${median(runs.map(f)).toFixed(digits)}${spread(runs.map(f), digits)}`;
      console.log(
        `reboot ${launch.name}, median of ${runs.length} (range): restart to ready ${pick((x) => x.readyMs)} ms wall, ${pick((x) => x.restartCpuMs)} ms CPU; ` +
          `all ${devices.length} back ${pick((x) => x.allBackMs)} ms after ready (the token devices ${pick((x) => x.tokensBackMs)} ms, their p99 ${pick((x) => x.tokensP99Ms)} ms); CONNACK p50 ${pick((x) => x.p50Ms)} ms, p99 ${pick((x) => x.p99Ms)} ms; ` +
          `daemon CPU ${pick((x) => x.cpuMs)} ms (${pick((x) => (x.cpuMs * 1000) / devices.length)} µs per device); retries ${pick((x) => x.retries)}`,
      );
      const key = launch.name.startsWith('x86') ? 'x86' : 'arm64';
      for (const [name, f] of Object.entries({ readyMs: (x: StormResult) => x.readyMs, restartCpuMs: (x: StormResult) => x.restartCpuMs, allBackMs: (x: StormResult) => x.allBackMs, cpuMs: (x: StormResult) => x.cpuMs, p50Ms: (x: StormResult) => x.p50Ms, p99Ms: (x: StormResult) => x.p99Ms, tokensBackMs: (x: StormResult) => x.tokensBackMs, tokensP99Ms: (x: StormResult) => x.tokensP99Ms, retries: (x: StormResult) => x.retries })) {
        results[`${key}_${name}`] = median(runs.map(f));
      }
    }
    if (byLaunch.size === 2) {
      const ratio = (name: string) => results[`arm64_${name}`]! / results[`x86_${name}`]!;
      for (const name of ['readyMs', 'restartCpuMs', 'allBackMs', 'cpuMs', 'p99Ms']) results[`arm64_over_x86_${name}`] = ratio(name);
      console.log(
        `reboot arm64 (qemu) / x86-64: restart ${ratio('readyMs').toFixed(1)}× wall, ${ratio('restartCpuMs').toFixed(1)}× CPU; all back ${ratio('allBackMs').toFixed(1)}×; CONNACK p99 ${ratio('p99Ms').toFixed(1)}×; daemon CPU ${ratio('cpuMs').toFixed(1)}×`,
      );
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  benchReboot().then(
    () => process.exit(0),
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
}
