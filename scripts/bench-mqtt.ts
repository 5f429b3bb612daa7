// MQTT broker benchmark: the gatewayd broker (authorization hooks on, static access built on the
// real PermissionSet) against a bare Aedes broker (no hooks, same listener setup), and a user
// holding 10,000 permissions against one holding 10.
//
// Each broker runs in its own worker thread and the mqtt.js clients in the main thread, so the
// clients' CPU does not hide the broker's overhead, and the broker thread's CPU time per
// delivered message can be measured (robust against other load on the machine). Every loop is bounded by a message count or a time
// limit; the whole run takes well under a minute.
//
// Run: node .build/mqtt/scripts/bench-mqtt.js   (or import { benchMqtt })

import { generateKeyPairSync } from 'node:crypto';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import { Aedes } from 'aedes';
import mqtt, { type IClientOptions, type MqttClient } from 'mqtt';
import forge from 'node-forge';
import type { GatewayConfig } from '../src/config/config-schema.js';
import { loadConfig } from '../src/config/index.js';
import { createSilentLogger } from '../src/log/logger.js';
import { aedesBaseOptions, createBroker, type Broker } from '../src/mqtt/index.js';
import { StaticMqttAccess, type StaticPermission } from '../test/support/static-mqtt-access.js';

const WORKER_ROLE = 'gatewayd-mqtt-bench-broker';
const PAIRS_WIDE = 10;
/** Distinct topics per publisher: more than the broker's 256-entry decision cache, so the
 *  permission engine itself is exercised, not only the cache. */
const TOPICS_PER_PUBLISHER = 1000;
const WINDOW_PER_PAIR = 64;
const WARMUP_MS = 250;
const RAMP_MS = 100;
const MEASURE_MS = 400;
const ROUNDS = Number(process.env.GATEWAYD_BENCH_ROUNDS ?? 7);
/** GATEWAYD_BENCH_VERBOSE=1 prints every measured round. */
const VERBOSE = process.env.GATEWAYD_BENCH_VERBOSE === '1';
const CONNECT_MEASURE_MS = 2000;
const CONNECT_PARALLEL = 16;
const STORM_CLIENTS = 1000;
const STORM_ROUNDS = 3;
const PAYLOAD_BYTES = 64;

/** The daemon's defaults, on free ports. */
function benchConfig(): GatewayConfig['mqtt'] {
  return {
    ...loadConfig({ env: {} }).mqtt,
    port: 0,
    tlsPort: 0,
    // The rate limit is measured by the tests; here it must not trip (cost of the check stays in).
    maxPublishesPerSecond: 1_000_000_000,
  };
}

/**
 * Grants on <root>/<i>/+/v for i < n: publisher i uses <root>/<i>/<k>/v, subscriber i
 * <root>/<i>/+/v. Each user has its own root so flows on one broker never see each other.
 */
function permissions(root: string, n: number): StaticPermission[] {
  const out: StaticPermission[] = [];
  for (let i = 0; i < n; i++) out.push({ resource: `${root}/${i}/+/v`, operation: 'readWrite' });
  return out;
}

// ------------------------------------------------------------------ broker side (worker)

/**
 * CPU time (ns) the calling thread has run, from /proc/thread-self/schedstat (Linux). Unlike
 * wall-clock throughput it does not change when other processes compete for the cores.
 */
function threadCpuNs(): number {
  try {
    return Number(readFileSync('/proc/thread-self/schedstat', 'utf8').split(' ')[0]);
  } catch {
    return NaN;
  }
}

type BrokerKind = 'gatewayd' | 'bare';

function selfSignedCert(): { key: string; cert: string } {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const keyPem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const cert = forge.pki.createCertificate();
  cert.publicKey = forge.pki.publicKeyFromPem(publicKey.export({ type: 'spki', format: 'pem' }).toString());
  cert.serialNumber = '01';
  cert.validity.notBefore = new Date(Date.now() - 60_000);
  cert.validity.notAfter = new Date(Date.now() + 86_400_000);
  const attrs = [{ name: 'commonName', value: 'bench' }];
  cert.setSubject(attrs);
  cert.setIssuer(attrs);
  cert.sign(forge.pki.privateKeyFromPem(keyPem), forge.md.sha256.create());
  return { key: keyPem, cert: forge.pki.certificateToPem(cert) };
}

/** One broker per worker thread, so neither JIT-pollutes the other's Aedes code paths. */
async function runBrokerWorker(kind: BrokerKind): Promise<void> {
  const port = parentPort!;
  const config = benchConfig();
  let listenPort: number;
  let stop: () => Promise<Record<string, number>>;
  if (kind === 'gatewayd') {
    const access = new StaticMqttAccess([
      { username: 'bench10', password: 'bench-pw-10', permissions: permissions('b10', 10) },
      { username: 'bench10k', password: 'bench-pw-10k', permissions: permissions('b10k', 10_000) },
    ]);
    const { key, cert } = selfSignedCert();
    const gatewayd: Broker = createBroker({ config, host: '127.0.0.1', log: createSilentLogger(), access, tls: { key, cert, ca: () => [] } });
    listenPort = (await gatewayd.start()).port;
    stop = async () => {
      await gatewayd.stop();
      // The numeric counters (the refusal table and the persistence block are not numbers).
      return Object.fromEntries(Object.entries(gatewayd.stats()).filter((e): e is [string, number] => typeof e[1] === 'number'));
    };
  } else {
    // Bare Aedes: default hooks, same Aedes options and the same TCP listener setup.
    const bare = await Aedes.createBroker(aedesBaseOptions(config));
    const server = net.createServer({ noDelay: true }, (socket) => {
      socket.setNoDelay(true);
      bare.handle(socket);
    });
    await new Promise<void>((resolve) => server.listen({ port: 0, host: '127.0.0.1', backlog: 2048 }, resolve));
    listenPort = (server.address() as net.AddressInfo).port;
    stop = async () => {
      await new Promise<void>((resolve) => bare.close(() => resolve()));
      server.close();
      return {};
    };
  }
  port.on('message', (msg: { type: string; id?: number }) => {
    if (msg.type === 'cpu') {
      port.postMessage({ type: 'cpu', id: msg.id, ns: threadCpuNs() });
      return;
    }
    if (msg.type !== 'stop') return;
    void stop().then((stats) => {
      port.postMessage({ type: 'stopped', stats });
      port.close();
    });
  });
  port.postMessage({ type: 'ready', port: listenPort });
}

// ------------------------------------------------------------------ client side

export function connectClient(port: number, options: IClientOptions = {}): Promise<MqttClient> {
  const client = mqtt.connect({
    host: '127.0.0.1',
    port,
    protocolVersion: 4,
    reconnectPeriod: 0,
    connectTimeout: 30_000,
    clientId: `b-${Math.random().toString(16).slice(2, 14)}`,
    ...options,
  });
  return new Promise((resolve, reject) => {
    client.once('connect', () => {
      // mqtt.js leaves Nagle on; with the broker's delayed ACKs that adds ~40 ms stalls that
      // would be measured as broker latency.
      (client.stream as unknown as { setNoDelay?: (on: boolean) => void }).setNoDelay?.(true);
      client.removeAllListeners('error');
      client.on('error', () => {});
      resolve(client);
    });
    client.once('error', (err) => {
      client.end(true);
      reject(err);
    });
  });
}

function percentile(values: Float64Array, count: number, p: number): number {
  if (count === 0) return NaN;
  const sorted = values.subarray(0, count).sort();
  return sorted[Math.min(count - 1, Math.floor((p / 100) * count))]!;
}

export interface FlowResult {
  msgsPerSec: number;
  p99Ms: number;
  /** Broker-thread CPU time per delivered message, microseconds. */
  cpuUsPerMsg: number;
}

/** Reads the broker thread's CPU time (ns). */
export type CpuProbe = () => Promise<number>;

/**
 * `pairs` publisher→subscriber pairs on one broker; subscriber i subscribes bench/<i>/+/v
 * (wildcard), or one exact topic for a single pair. Closed loop: each pair keeps at most
 * WINDOW_PER_PAIR messages between publish and receipt. The clients stay connected between
 * measured rounds so that rounds of different brokers can be interleaved.
 */
export class Flow {
  private readonly subs: MqttClient[] = [];
  private readonly pubs: MqttClient[] = [];
  private readonly inflight: number[];
  private readonly counters: number[];
  private readonly latencies = new Float64Array(2_000_000);
  private samples = 0;
  private delivered = 0;
  private measuring = false;
  private running = false;
  private drained: (() => void) | undefined;
  private readonly payload = Buffer.alloc(PAYLOAD_BYTES);

  constructor(
    private readonly cpu: CpuProbe,
    private readonly port: number,
    private readonly creds: IClientOptions,
    private readonly root: string,
    private readonly pairs: number,
    private readonly qos: 0 | 1,
    private readonly wildcard: boolean,
  ) {
    this.inflight = new Array<number>(pairs).fill(0);
    this.counters = new Array<number>(pairs).fill(0);
  }

  private topic(i: number, k: number): string {
    return this.wildcard ? `${this.root}/${i}/${k % TOPICS_PER_PUBLISHER}/v` : `${this.root}/${i}/0/v`;
  }

  async open(): Promise<void> {
    for (let i = 0; i < this.pairs; i++) {
      this.subs.push(await connectClient(this.port, this.creds));
      this.pubs.push(await connectClient(this.port, this.creds));
    }
    await Promise.all(this.subs.map((s, i) => s.subscribeAsync(this.wildcard ? `${this.root}/${i}/+/v` : this.topic(i, 0), { qos: this.qos })));
    this.subs.forEach((s, i) => {
      s.on('message', (_topic, msg) => {
        const now = performance.now();
        this.inflight[i]!--;
        if (this.measuring) {
          this.delivered++;
          if (this.samples < this.latencies.length) this.latencies[this.samples++] = now - msg.readDoubleLE(0);
        }
        if (this.running) this.pump(i);
        else if (this.drained && this.inflight.every((n) => n === 0)) this.drained();
      });
    });
  }

  private pump(i: number): void {
    const pub = this.pubs[i]!;
    while (this.running && this.inflight[i]! < WINDOW_PER_PAIR) {
      const buf = Buffer.from(this.payload);
      buf.writeDoubleLE(performance.now(), 0);
      this.inflight[i]!++;
      pub.publish(this.topic(i, this.counters[i]!++), buf, { qos: this.qos });
    }
  }

  /** Runs the loop for rampMs unmeasured then measureMs measured; bounded drain afterwards. */
  async run(rampMs: number, measureMs: number): Promise<FlowResult> {
    this.samples = 0;
    this.delivered = 0;
    this.running = true;
    for (let i = 0; i < this.pairs; i++) this.pump(i);
    await sleep(rampMs);
    const c0 = await this.cpu();
    this.measuring = true;
    const t0 = performance.now();
    await sleep(measureMs);
    const c1 = await this.cpu();
    this.measuring = false;
    const t1 = performance.now();
    this.running = false;
    await Promise.race([
      new Promise<void>((resolve) => {
        this.drained = resolve;
        if (this.inflight.every((n) => n === 0)) resolve();
      }),
      sleep(2000),
    ]);
    this.drained = undefined;
    return {
      msgsPerSec: (this.delivered * 1000) / (t1 - t0),
      p99Ms: percentile(this.latencies, this.samples, 99),
      cpuUsPerMsg: (c1 - c0) / 1000 / this.delivered,
    };
  }

  async close(): Promise<void> {
    await Promise.all([...this.subs, ...this.pubs].map((c) => c.endAsync(true).catch(() => undefined)));
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

function summary(runs: FlowResult[]): FlowResult {
  return {
    msgsPerSec: median(runs.map((x) => x.msgsPerSec)),
    p99Ms: median(runs.map((x) => x.p99Ms)),
    cpuUsPerMsg: median(runs.map((x) => x.cpuUsPerMsg)),
  };
}

/** Median over rounds of value(a[i]) / value(b[i]). */
function pairedRatio(a: FlowResult[], b: FlowResult[], value: (r: FlowResult) => number): number {
  return median(a.map((r, i) => value(r) / value(b[i]!)));
}

/** Interleaves ROUNDS measured runs of each variant; returns every run, per variant. */
async function compare(
  variants: Array<{ broker: BrokerHandle; creds: IClientOptions; root: string }>,
  pairs: number,
  qos: 0 | 1,
  wildcard: boolean,
): Promise<FlowResult[][]> {
  const flows = variants.map((v) => new Flow(v.broker.cpu, v.broker.port, v.creds, v.root, pairs, qos, wildcard));
  try {
    for (const f of flows) await f.open();
    for (const f of flows) await f.run(0, WARMUP_MS); // JIT and buffers warm, not counted
    const runs: FlowResult[][] = flows.map(() => []);
    for (let round = 0; round < ROUNDS; round++) {
      // Rotate the order so no variant always runs first after a pause.
      for (let j = 0; j < flows.length; j++) {
        const idx = (j + round) % flows.length;
        const r = await flows[idx]!.run(RAMP_MS, MEASURE_MS);
        runs[idx]!.push(r);
        if (VERBOSE) console.log(`  round ${round} variant ${idx}: ${r.msgsPerSec.toFixed(0)} msg/s, p99 ${r.p99Ms.toFixed(2)} ms, broker ${r.cpuUsPerMsg.toFixed(2)} us/msg`);
      }
    }
    return runs;
  } finally {
    await Promise.all(flows.map((f) => f.close()));
  }
}

/** Connect + disconnect cycles with a few in parallel, for CONNECT_MEASURE_MS (bounded). */
async function connectRate(port: number, creds: IClientOptions): Promise<number> {
  let done = 0;
  const end = performance.now() + CONNECT_MEASURE_MS;
  const t0 = performance.now();
  const worker = async () => {
    while (performance.now() < end) {
      const c = await connectClient(port, creds);
      await c.endAsync(true);
      done++;
    }
  };
  await Promise.all(Array.from({ length: CONNECT_PARALLEL }, worker));
  return (done * 1000) / (performance.now() - t0);
}

/** Milliseconds until STORM_CLIENTS clients started at once are all connected. */
async function storm(port: number, creds: IClientOptions): Promise<number> {
  const t0 = performance.now();
  const clients = await Promise.all(Array.from({ length: STORM_CLIENTS }, () => connectClient(port, creds)));
  const ms = performance.now() - t0;
  await Promise.all(clients.map((c) => c.endAsync(true).catch(() => undefined)));
  return ms;
}

function cpuProbe(worker: Worker): CpuProbe {
  let nextId = 0;
  const pending = new Map<number, (ns: number) => void>();
  worker.on('message', (msg: { type: string; id: number; ns: number }) => {
    if (msg.type !== 'cpu') return;
    pending.get(msg.id)?.(msg.ns);
    pending.delete(msg.id);
  });
  return () =>
    new Promise<number>((resolve) => {
      const id = nextId++;
      pending.set(id, resolve);
      worker.postMessage({ type: 'cpu', id });
    });
}

interface BrokerHandle {
  worker: Worker;
  port: number;
  cpu: CpuProbe;
}

function startBroker(kind: BrokerKind): Promise<BrokerHandle> {
  const worker = new Worker(new URL(import.meta.url), { workerData: { role: WORKER_ROLE, kind } });
  return new Promise((resolve, reject) => {
    worker.once('error', reject);
    worker.once('message', (msg: { type: string; port: number }) => {
      if (msg.type === 'ready') resolve({ worker, port: msg.port, cpu: cpuProbe(worker) });
      else reject(new Error(`unexpected message ${msg.type}`));
    });
  });
}

async function stopBroker(worker: Worker): Promise<Record<string, number>> {
  const stopped = new Promise<Record<string, number>>((resolve) => {
    worker.on('message', (msg: { type: string; stats: Record<string, number> }) => {
      if (msg.type === 'stopped') resolve(msg.stats);
    });
  });
  worker.postMessage({ type: 'stop' });
  const stats = await Promise.race([stopped, new Promise<Record<string, number>>((r) => setTimeout(() => r({}), 10_000))]);
  await worker.terminate();
  return stats;
}

export async function benchMqtt(): Promise<Record<string, number>> {
  const gw = await startBroker('gatewayd');
  const bareBroker = await startBroker('bare').catch(async (err: unknown) => {
    await stopBroker(gw.worker);
    throw err;
  });
  const results: Record<string, number> = {};
  const rows: string[][] = [];
  const fmt = (n: number, digits = 0) => (Number.isFinite(n) ? n.toFixed(digits) : '-');
  const u10: IClientOptions = { username: 'bench10', password: 'bench-pw-10' };
  const u10k: IClientOptions = { username: 'bench10k', password: 'bench-pw-10k' };
  try {
    const scenarios: Array<{ key: string; label: string; pairs: number; qos: 0 | 1; wildcard: boolean }> = [
      { key: 'qos0_1to1', label: 'QoS0 1→1', pairs: 1, qos: 0, wildcard: false },
      { key: 'qos1_1to1', label: 'QoS1 1→1', pairs: 1, qos: 1, wildcard: false },
      { key: 'qos0_10to10', label: 'QoS0 10→10 wildcard', pairs: PAIRS_WIDE, qos: 0, wildcard: true },
      { key: 'qos1_10to10', label: 'QoS1 10→10 wildcard', pairs: PAIRS_WIDE, qos: 1, wildcard: true },
    ];
    for (const s of scenarios) {
      const [bareRuns, gw10Runs, gw10kRuns] = (await compare(
        [
          { broker: bareBroker, creds: {}, root: 'b10' },
          { broker: gw, creds: u10, root: 'b10' },
          { broker: gw, creds: u10k, root: 'b10k' },
        ],
        s.pairs,
        s.qos,
        s.wildcard,
      )) as [FlowResult[], FlowResult[], FlowResult[]];
      const [bare, gw10, gw10k] = [bareRuns, gw10Runs, gw10kRuns].map(summary) as [FlowResult, FlowResult, FlowResult];
      // Ratios of runs made in the same round (adjacent in time, same background load), median.
      const wallRatio = pairedRatio(gw10Runs, bareRuns, (r) => r.msgsPerSec);
      const cpuRatio = pairedRatio(bareRuns, gw10Runs, (r) => r.cpuUsPerMsg);
      const wallRatio10k = pairedRatio(gw10kRuns, gw10Runs, (r) => r.msgsPerSec);
      const cpuRatio10k = pairedRatio(gw10Runs, gw10kRuns, (r) => r.cpuUsPerMsg);
      const put = (name: string, r: FlowResult) => {
        results[`${s.key}_${name}_msgs_per_s`] = r.msgsPerSec;
        results[`${s.key}_${name}_p99_ms`] = r.p99Ms;
        results[`${s.key}_${name}_broker_cpu_us_per_msg`] = r.cpuUsPerMsg;
      };
      put('bare', bare);
      put('gatewayd', gw10);
      put('gatewayd_10k_perms', gw10k);
      // Two ratios each: wall-clock throughput, and capacity = inverse broker CPU cost per message.
      results[`${s.key}_ratio_gatewayd_vs_bare`] = wallRatio;
      results[`${s.key}_capacity_ratio_gatewayd_vs_bare`] = cpuRatio;
      results[`${s.key}_ratio_10k_vs_10_perms`] = wallRatio10k;
      results[`${s.key}_capacity_ratio_10k_vs_10_perms`] = cpuRatio10k;
      rows.push([
        s.label,
        fmt(bare.msgsPerSec), fmt(bare.p99Ms, 1), fmt(bare.cpuUsPerMsg, 1),
        fmt(gw10.msgsPerSec), fmt(gw10.p99Ms, 1), fmt(gw10.cpuUsPerMsg, 1),
        fmt(gw10k.msgsPerSec), fmt(gw10k.p99Ms, 1), fmt(gw10k.cpuUsPerMsg, 1),
        `${fmt(wallRatio, 2)} / ${fmt(cpuRatio, 2)}`,
        `${fmt(wallRatio10k, 2)} / ${fmt(cpuRatio10k, 2)}`,
      ]);
    }

    const connBare = await connectRate(bareBroker.port, {});
    const connGw = await connectRate(gw.port, u10);
    // Interleaved, median of STORM_ROUNDS each.
    const stormsBare: number[] = [];
    const stormsGw: number[] = [];
    for (let i = 0; i < STORM_ROUNDS; i++) {
      stormsGw.push(await storm(gw.port, u10));
      stormsBare.push(await storm(bareBroker.port, {}));
      if (VERBOSE) console.log(`  storm round ${i}: gatewayd ${stormsGw.at(-1)!.toFixed(0)} ms, bare ${stormsBare.at(-1)!.toFixed(0)} ms`);
    }
    const stormBare = median(stormsBare);
    const stormGw = median(stormsGw);
    results.connects_per_s_bare = connBare;
    results.connects_per_s_gatewayd_password = connGw;
    results.storm_1000_clients_ms_bare = stormBare;
    results.storm_1000_clients_ms_gatewayd = stormGw;

    const header = [
      'scenario',
      'bare msg/s', 'p99 ms', 'us/msg',
      'gw msg/s', 'p99 ms', 'us/msg',
      'gw10k msg/s', 'p99 ms', 'us/msg',
      'gw/bare wall/cpu', '10k/10 wall/cpu',
    ];
    const table = [header, ...rows];
    const widths = header.map((_, c) => Math.max(...table.map((r) => r[c]!.length)));
    const line = (r: string[]) => r.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join('  ');
    console.log('MQTT broker benchmark (each broker in its own worker thread, mqtt.js clients in the main thread)');
    console.log(`window ${WINDOW_PER_PAIR} msgs/pair, ${PAYLOAD_BYTES} B payload, ${ROUNDS} interleaved rounds of ${MEASURE_MS} ms per variant (medians), ${TOPICS_PER_PUBLISHER} topics/publisher in 10→10`);
    console.log(line(header));
    for (const r of rows) console.log(line(r));
    console.log('us/msg = broker-thread CPU per delivered message. Ratios = median over rounds of same-round pairs: wall-clock msg/s, then capacity (inverse CPU cost).');
    console.log('Targets: gw/bare >= 0.90, 10k/10 >= 0.90. Wall-clock numbers swing with other load on the machine; CPU cost per message much less (it still depends on batching).');
    console.log('');
    console.log(`connects/s (connect+disconnect, ${CONNECT_PARALLEL} in parallel): bare ${fmt(connBare)}, gatewayd with password ${fmt(connGw)}`);
    console.log('  (password checked by the static test access, not scrypt: this is the broker\'s own overhead)');
    console.log(`${STORM_CLIENTS} clients connecting at once, all connected after: bare ${fmt(stormBare)} ms, gatewayd ${fmt(stormGw)} ms`);
  } finally {
    await stopBroker(bareBroker.worker);
    const stats = await stopBroker(gw.worker);
    if (stats.publishesRefused || stats.rateLimitDisconnects || stats.connectsRefused) {
      console.log('warning: refusals during the benchmark', stats);
    }
  }
  return results;
}

const roleData = workerData as { role?: string; kind?: BrokerKind } | null;
if (!isMainThread && roleData?.role === WORKER_ROLE) {
  void runBrokerWorker(roleData.kind ?? 'gatewayd');
} else if (isMainThread && process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  benchMqtt().then(
    () => process.exit(0),
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
}
