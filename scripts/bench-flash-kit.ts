// The brokers and clients of the flash benchmark (scripts/bench-flash.ts): gatewayd as npm start
// runs it, with a bridge and its own API and /metrics readers; Mosquitto 2 with persistence true
// and its own bridge; bare aedes 1.2 for the CPU comparison; the paced publisher and counters.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { execFileSync, spawnSync, type ChildProcess } from 'node:child_process';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import mqtt, { type IClientOptions, type MqttClient } from 'mqtt';
import { startMosquitto, type Mosquitto } from '../test/support/mosquitto.js';
import type { TcpProxy } from '../test/support/tcp-proxy.js';
import { ADMIN_PASSWORD, shippedNodeFlags, startDaemonAt } from './bench-footprint.js';
import { startBareAedes } from './bench-mqtt-shipped.js';
import { startWriteTrace, type WriteTrace } from './write-trace.js';

export const RATE = 100;
export const PAYLOAD_BYTES = 200;
export const WARM_UP = 1000;
const USERNAME = 'bench-flash';
const PASSWORD = 'Bench-Fl4sh-Passw0rd!';
const STRACE = process.env.GATEWAYD_BENCH_FLASH_STRACE;
/** npm start's Node flags, --enable-source-maps included (the other benchmarks leave it out). */
export const NPM_START_FLAGS = [...(/--enable-source-maps/.test(JSON.parse(readFileSync(fileURLToPath(new URL('../../package.json', import.meta.url)), 'utf8')).scripts.start) ? ['--enable-source-maps'] : []), ...shippedNodeFlags()];

/** `mosquitto -h` prints its version (and exits 3). */
export const mosquittoVersion = () => /version (\S+)/.exec(spawnSync('/usr/sbin/mosquitto', ['-h'], { encoding: 'utf8' }).stdout)?.[1] ?? '?';
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(what: string, pred: () => boolean | Promise<boolean>, ms: number, every = 20): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await pred())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await sleep(every);
  }
}

/** write_bytes and cancelled_write_bytes of /proc/<pid>/io. */
export function processIo(pid: number): { written: number; cancelled: number } {
  const io = readFileSync(`/proc/${pid}/io`, 'utf8');
  const field = (name: string) => Number(new RegExp(`^${name}:\\s*(\\d+)$`, 'm').exec(io)?.[1] ?? NaN);
  return { written: field('write_bytes'), cancelled: field('cancelled_write_bytes') };
}

/** gatewayd-spent: a second gatewayd whose wear budget is off (storage.flash.burstBytes 0): what sustained load costs once a budget is spent. */
export type SideName = 'gatewayd' | 'gatewayd-spent' | 'mosquitto' | 'aedes-1.2';

/** A broker process under measurement. */
export interface Side {
  name: SideName;
  pid(): number;
  port: number;
  auth: Pick<IClientOptions, 'username' | 'password'>;
  /** Topic prefix its bridge gives upstream (gatewayd and Mosquitto). */
  upstreamPrefix?: string;
  proxy?: TcpProxy;
  /** Waits until its bridge is connected (true) or down (false). */
  linked?(up: boolean): Promise<void>;
  /** Lines it logged so far (gatewayd). */
  logLines?(): number;
  /** Its log lines about storage so far (gatewayd: the wear budget spent and refilled). */
  storageLog?(): string[];
  /** gatewayd's storage figures from /metrics. */
  storage?(): Promise<StorageFigures>;
  api?: GatewaydApi;
  /** Its file writes at the system calls (GATEWAYD_BENCH_FLASH_STRACE). */
  trace?: WriteTrace;
  stop(): Promise<void>;
  /** After the report: removes what stop() left for it. */
  cleanUp?(): void;
}

export interface StorageFigures {
  commits: number;
  committed: number;
  cancelled: number;
  /** Present in gatewayd's /metrics (the others' figures leave them out). */
  journaled?: number;
  journalCommits?: number;
  journalBytes?: number;
  fastCommits?: number;
  budgetBytes?: number;
  budgetSpent?: number;
}

export interface GatewaydApi {
  call(method: string, path: string, body?: unknown, yaml?: string): Promise<{ status: number; body: any }>;
  /** A GET with that token (another session's: the UI's). */
  get(path: string, token: string): Promise<{ status: number; body: any }>;
  login(): Promise<string>;
}

/**
 * gatewayd as npm start runs it, with a bridge to `proxy`; `env`: more settings (GATEWAYD_SET__...),
 * over the GATEWAYD_SET__STORAGE__* of this process; `name`: another gatewayd beside the first
 * (its bridge's client id is its own, so the two do not take each other's session upstream).
 */
export async function gatewaydSide(proxy: TcpProxy, env: Record<string, string> = {}, name: 'gatewayd' | 'gatewayd-spent' = 'gatewayd'): Promise<Side> {
  const dataDir = mkdtempSync(join(tmpdir(), 'gatewayd-bench-flash-'));
  mkdirSync(join(dataDir, 'services'));
  const storageEnv = Object.fromEntries(Object.entries(process.env).filter(([k]) => k.startsWith('GATEWAYD_SET__STORAGE__'))) as Record<string, string>;
  // As npm start: its Node flags, its log level (info); only ports, data dir and admin password set.
  const { child, ready } = await startDaemonAt(dataDir, NPM_START_FLAGS, { GATEWAYD_LOG_LEVEL: 'info', ...storageEnv, ...env });
  const logged: string[] = [];
  const traceFile = STRACE === '1' ? join(dataDir, '..', `${basename(dataDir)}.strace`) : STRACE;
  const trace = traceFile ? await startWriteTrace(child.pid!, traceFile) : undefined;
  let lines = 0;
  let partial = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    for (const byte of chunk) if (byte === 10) lines++;
    // The storage lines (the wear budget spent, refilled), for the benchmarks that wait for them.
    const text = partial + chunk.toString('utf8');
    const parts = text.split('\n');
    partial = parts.pop() ?? '';
    for (const line of parts) if (line.includes('storage:')) logged.push(line);
  });
  const http = ready.http as number;
  let token = '';
  const call = async (method: string, path: string, body?: unknown, yaml?: string, as = token) => {
    const headers: Record<string, string> = as ? { authorization: `Bearer ${as}` } : {};
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (yaml !== undefined) headers['content-type'] = 'application/yaml';
    const res = await fetch(`http://127.0.0.1:${http}${path}`, { method, headers, body: yaml ?? (body === undefined ? undefined : JSON.stringify(body)) });
    const text = await res.text();
    return { status: res.status, body: res.headers.get('content-type')?.includes('json') ? JSON.parse(text) : text };
  };
  const login = async () => {
    const res = await call('POST', '/api/login', { username: 'admin', password: ADMIN_PASSWORD });
    if (res.status !== 200) throw new Error(`login: ${res.status}`);
    return res.body.token as string;
  };
  token = await login();
  const mustBe = (status: number, what: string) => (res: { status: number; body: unknown }) => {
    if (res.status !== status) throw new Error(`${what}: ${res.status} ${JSON.stringify(res.body)}`);
  };
  await call('POST', '/api/users', { username: USERNAME, password: PASSWORD, identityProvider: 'local', initialPermissions: [{ resource: 'bench/#', operation: 'readWrite', context: 'mqtt' }] }).then(mustBe(201, 'bench user'));
  await call('POST', '/api/users', { username: 'bench-bridge', password: 'Bench-Bridge-1', identityProvider: 'local', initialPermissions: [{ context: 'mqtt', resource: 'bench/up/#', operation: 'read' }] }).then(mustBe(201, 'bridge user'));
  const service = [
    'resources:',
    '  uplink:',
    '    type: Bridge',
    '    properties:',
    `      remote: {urls: ["mqtt://127.0.0.1:${proxy.port}"], clientId: ${name}-bridge}`,
    '      runAs: bench-bridge',
    '      topics: [{pattern: "bench/up/#", direction: out, qos: 1, remotePrefix: "site-gw/"}]',
    '',
  ].join('\n');
  await call('PUT', '/api/services/flash', undefined, service).then((res) => {
    if (res.status >= 300) throw new Error(`bridge service: ${res.status} ${JSON.stringify(res.body)}`);
  });
  const metric = (text: string, re: RegExp) => Number(re.exec(text)?.[1] ?? NaN);
  return {
    name,
    pid: () => child.pid!,
    port: ready.mqtt as number,
    auth: { username: USERNAME, password: PASSWORD },
    upstreamPrefix: 'site-gw/',
    proxy,
    linked: (up) => until(`gatewayd bridge ${up ? 'connected' : 'down'}`, async () => ((await call('GET', '/api/bridges/flash.uplink')).body.currentState === 'connected') === up, 30_000, 100),
    logLines: () => lines,
    storageLog: () => logged,
    async storage() {
      const text = (await call('GET', '/metrics')).body as string;
      return {
        commits: metric(text, /^gatewayd_storage_commits_total (\d+)/m),
        committed: metric(text, /^gatewayd_storage_writes_total\{outcome="committed"\} (\d+)/m),
        cancelled: metric(text, /^gatewayd_storage_writes_total\{outcome="cancelled"\} (\d+)/m),
        journaled: metric(text, /^gatewayd_storage_writes_total\{outcome="journaled"\} (\d+)/m),
        journalCommits: metric(text, /^gatewayd_storage_journal_commits_total (\d+)/m),
        journalBytes: metric(text, /^gatewayd_storage_journal_written_bytes_total (\d+)/m),
        fastCommits: metric(text, /^gatewayd_storage_fast_commits_total (\d+)/m),
        budgetBytes: metric(text, /^gatewayd_storage_wear_budget_bytes (\d+)/m),
        budgetSpent: metric(text, /^gatewayd_storage_wear_budget_spent (\d+)/m),
      };
    },
    api: { call, login, get: (path, as) => call('GET', path, undefined, undefined, as) },
    trace,
    stop: async () => {
      await stopDaemon(child, dataDir);
      await trace?.stop();
    },
    cleanUp: () => {
      if (STRACE === '1' && traceFile) rmSync(traceFile, { force: true });
    },
  };
}

export async function stopDaemon(child: ChildProcess, dataDir: string): Promise<void> {
  if (child.exitCode === null && child.signalCode === null) {
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await Promise.race([exited, sleep(15_000)]);
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
  rmSync(dataDir, { recursive: true, force: true });
}

/** Mosquitto with persistence true and its defaults, a password file, and its own bridge to `proxy`. */
export async function mosquittoSide(proxy: TcpProxy, saved: { dbBytes: number }): Promise<Side> {
  const secrets = mkdtempSync(join(tmpdir(), 'gatewayd-bench-flash-passwd-'));
  execFileSync('mosquitto_passwd', ['-b', '-c', join(secrets, 'passwords'), USERNAME, PASSWORD]);
  const m: Mosquitto = await startMosquitto({
    persistence: true,
    config: [
      // Mosquitto's own defaults back (the test kit raises them for its tests).
      'max_queued_messages 1000',
      'max_inflight_messages 20',
      `password_file ${join(secrets, 'passwords')}`,
      'connection flash',
      `address 127.0.0.1:${proxy.port}`,
      'topic bench/up/# out 1 "" site-mq/',
      'clientid mosquitto-bridge',
    ],
  });
  const sys = await mqtt.connectAsync({ host: '127.0.0.1', port: m.port, clientId: 'bench-flash-sys', reconnectPeriod: 1000 });
  let state = '0';
  sys.on('message', (_t, p) => (state = p.toString()));
  await sys.subscribeAsync('$SYS/broker/connection/+/state', { qos: 0 });
  return {
    name: 'mosquitto',
    pid: () => m.pid()!,
    port: m.port,
    auth: { username: USERNAME, password: PASSWORD },
    upstreamPrefix: 'site-mq/',
    proxy,
    // Its default backoff (restart_timeout 5 30) waits up to 30 s between attempts after a long outage: a minute covers one wait and the attempt.
    linked: (up) => until(`mosquitto bridge ${up ? 'connected' : 'down'}`, () => state === (up ? '1' : '0'), 60_000),
    async stop() {
      sys.end(true);
      // What it saves at its stop is what its autosave (every 30 min by default) writes each time.
      await m.stop();
      const db = join(m.dir, 'mosquitto.db');
      saved.dbBytes = existsSync(db) ? statSync(db).size : 0;
      await m.close();
      rmSync(secrets, { recursive: true, force: true });
    },
  };
}

export async function aedesSide(): Promise<Side> {
  const b = await startBareAedes('aedes-1.2');
  return { name: 'aedes-1.2', pid: () => b.pid, port: b.port, auth: {}, stop: () => b.stop() };
}

/** An mqtt.js client of `side`, connected (MQTT 3.1.1); messages are handed to `onMessage` from the start. */
export async function client(side: Side, clientId: string, options: IClientOptions = {}, onMessage?: (topic: string) => void): Promise<MqttClient> {
  const c = mqtt.connect({ host: '127.0.0.1', port: side.port, clientId, protocolVersion: 4, reconnectPeriod: 0, ...side.auth, ...options });
  if (onMessage) c.on('message', (topic) => onMessage(topic));
  await new Promise<void>((resolve, reject) => {
    c.once('connect', () => resolve());
    c.once('error', reject);
  });
  return c;
}

/** Counts messages; `reached(n)` resolves once n arrived. */
export function counter() {
  let count = 0;
  const waiters: { n: number; resolve: () => void }[] = [];
  return {
    on: () => {
      count++;
      for (const w of waiters.filter((w) => count >= w.n)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve();
      }
    },
    get count() {
      return count;
    },
    reached(n: number, ms: number, what: string): Promise<void> {
      if (count >= n) return Promise.resolve();
      return Promise.race([
        new Promise<void>((resolve) => waiters.push({ n, resolve })),
        sleep(ms).then(() => {
          throw new Error(`${what}: ${count} of ${n} within ${ms} ms`);
        }),
      ]);
    },
  };
}

/** Unmeasured traffic first (JIT, buffers): WARM_UP messages at 500/s (under gatewayd's per-client limit), all arrived. */
export async function warmUp(pub: MqttClient, topicOf: (i: number) => string, qos: 0 | 1, arrived: ReturnType<typeof counter>): Promise<void> {
  const from = arrived.count;
  await pacedPublish(pub, WARM_UP, topicOf, { qos }, 500);
  await arrived.reached(from + WARM_UP, 60_000, 'warm-up');
}

/** `count` publishes at `rate` per second, pipelined; resolves once every one is acknowledged (QoS 1) or written (QoS 0). */
export async function pacedPublish(c: MqttClient, count: number, topicOf: (i: number) => string, opts: { qos: 0 | 1; retain?: boolean }, rate = RATE): Promise<void> {
  let settled = 0;
  let failure: Error | undefined;
  const t0 = performance.now();
  for (let sent = 0; sent < count; ) {
    const due = Math.min(count, Math.floor(((performance.now() - t0) * rate) / 1000) + 1);
    for (; sent < due; sent++) {
      const payload = Buffer.alloc(PAYLOAD_BYTES, 'x');
      payload.write(`${sent} `);
      c.publish(topicOf(sent), payload, { qos: opts.qos, retain: opts.retain ?? false }, (err) => {
        if (err) failure ??= err;
        settled++;
      });
    }
    if (sent < count) await sleep(Math.max(1, t0 + (sent * 1000) / rate - performance.now()));
  }
  await until(`acknowledgements of ${count} publishes`, () => settled >= count || failure !== undefined, 180_000, 10);
  if (failure) throw failure;
}

