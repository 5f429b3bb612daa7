// Broker state on disk (src/mqtt/persistence): the cost of the LMDB persistence against aedes'
// in-memory one, each under a bare aedes 2 broker in its own worker thread (clients in the main
// thread), and the time to open a store holding 10,000 persistent sessions with 100 queued
// messages each. Every loop is bounded by a count or a time limit.
//
// Run: npm run bench -- mqtt-persistence

import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import mqtt, { type IClientOptions, type MqttClient } from 'mqtt';
import { createLmdbPersistence, type LmdbPersistence } from '../src/mqtt/persistence/index.js';
import { openStore } from '../src/store/index.js';
import { TEST_LIMITS, startBareBroker } from '../test/support/bare-aedes.js';
import { percentile } from './bench-support.js';

const WORKER_ROLE = 'gatewayd-mqtt-persistence-bench-broker';
const SESSIONS = 10_000;
const QUEUED_PER_SESSION = 100;
const SUBSCRIBERS = 10;
const WINDOW = 32;
const WARMUP_MS = 500;
const MEASURE_MS = 2000;
const ROUNDS = 3;
const RETAINED_TOPICS = 10_000;
const RETAINED_PUBLISHES = 20_000;
const PAYLOAD = Buffer.alloc(64, 7);

type Kind = 'lmdb' | 'memory';

// ------------------------------------------------------------------ broker side (worker)

function threadCpuNs(): number {
  try {
    return Number(readFileSync('/proc/thread-self/schedstat', 'utf8').split(' ')[0]);
  } catch {
    return NaN;
  }
}

async function runBrokerWorker(kind: Kind, dir: string): Promise<void> {
  const port = parentPort!;
  const broker = await startBareBroker(kind === 'lmdb' ? { dir, limits: { maxQueuedMessages: 100_000 } } : {});
  port.on('message', (msg: { type: string; id?: number }) => {
    if (msg.type === 'cpu') port.postMessage({ type: 'cpu', id: msg.id, ns: threadCpuNs() });
    if (msg.type === 'stop') void broker.close().then(() => port.postMessage({ type: 'stopped' }));
  });
  port.postMessage({ type: 'ready', port: broker.port });
}

interface BrokerHandle {
  kind: Kind;
  port: number;
  cpu(): Promise<number>;
  stop(): Promise<void>;
}

async function startBroker(kind: Kind, dir: string): Promise<BrokerHandle> {
  const worker = new Worker(fileURLToPath(import.meta.url), { workerData: { role: WORKER_ROLE, kind, dir } });
  const waiting = new Map<number, (ns: number) => void>();
  let nextId = 0;
  let stopped: (() => void) | undefined;
  worker.on('message', (msg: { type: string; id?: number; ns?: number }) => {
    if (msg.type === 'cpu') waiting.get(msg.id!)?.(msg.ns!);
    if (msg.type === 'stopped') stopped?.();
  });
  const port = await new Promise<number>((resolve, reject) => {
    worker.once('message', (msg: { type: string; port: number }) => resolve(msg.port));
    worker.once('error', reject);
  });
  return {
    kind,
    port,
    cpu: () =>
      new Promise((resolve) => {
        const id = nextId++;
        waiting.set(id, (ns) => {
          waiting.delete(id);
          resolve(ns);
        });
        worker.postMessage({ type: 'cpu', id });
      }),
    stop: async () => {
      await new Promise<void>((resolve) => {
        stopped = resolve;
        worker.postMessage({ type: 'stop' });
      });
      await worker.terminate();
    },
  };
}

// ------------------------------------------------------------------ client side

function connectClient(port: number, options: IClientOptions = {}): Promise<MqttClient> {
  const client = mqtt.connect({ host: '127.0.0.1', port, protocolVersion: 4, reconnectPeriod: 0, clientId: `pb-${Math.random().toString(16).slice(2, 12)}`, ...options });
  return new Promise((resolve, reject) => {
    client.once('connect', () => {
      (client.stream as unknown as { setNoDelay?: (on: boolean) => void }).setNoDelay?.(true);
      resolve(client);
    });
    client.once('error', reject);
  });
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

interface FlowResult {
  deliveriesPerSec: number;
  p99Ms: number;
  cpuUsPerDelivery: number;
}

/** One QoS 1 publisher (window of WINDOW unacknowledged) → SUBSCRIBERS persistent sessions online. */
async function qos1ToPersistentSessions(broker: BrokerHandle): Promise<FlowResult> {
  const subs: MqttClient[] = [];
  for (let i = 0; i < SUBSCRIBERS; i++) {
    const sub = await connectClient(broker.port, { clientId: `bench-session-${i}`, clean: false });
    await sub.subscribeAsync('plant/#', { qos: 1 });
    subs.push(sub);
  }
  const pub = await connectClient(broker.port);
  let delivered = 0;
  let measuring = false;
  const latencies: number[] = [];
  for (const sub of subs) {
    sub.on('message', (_topic, payload) => {
      if (!measuring) return;
      delivered++;
      if (latencies.length < 1_000_000) latencies.push(performance.now() - payload.readDoubleLE(0));
    });
  }
  let running = true;
  let inflight = 0;
  const pump = () => {
    while (running && inflight < WINDOW) {
      inflight++;
      const payload = Buffer.from(PAYLOAD);
      payload.writeDoubleLE(performance.now(), 0);
      pub.publish('plant/line/value', payload, { qos: 1 }, () => {
        inflight--;
        pump();
      });
    }
  };
  pump();
  await sleep(WARMUP_MS);
  const c0 = await broker.cpu();
  const t0 = performance.now();
  measuring = true;
  await sleep(MEASURE_MS);
  measuring = false;
  const c1 = await broker.cpu();
  const t1 = performance.now();
  running = false;
  for (let i = 0; i < 200 && inflight > 0; i++) await sleep(10);
  await Promise.all([pub, ...subs].map((c) => c.endAsync(true)));
  latencies.sort((a, b) => a - b);
  return { deliveriesPerSec: (delivered * 1000) / (t1 - t0), p99Ms: percentile(latencies, 99), cpuUsPerDelivery: (c1 - c0) / 1000 / delivered };
}

/** RETAINED_PUBLISHES retained QoS 0 messages over RETAINED_TOPICS topics, then a QoS 1 marker. */
async function retainedPublishRate(broker: BrokerHandle, qos: 0 | 1): Promise<number> {
  const pub = await connectClient(broker.port);
  const t0 = performance.now();
  if (qos === 0) {
    for (let i = 0; i < RETAINED_PUBLISHES; i++) {
      pub.publish(`site/${i % RETAINED_TOPICS}/state`, PAYLOAD, { qos: 0, retain: true });
      if (i % 1000 === 999) await new Promise((resolve) => setImmediate(resolve));
    }
    // Packets of one client are handled in order: its PUBACK comes after all the others.
    await pub.publishAsync('site/marker', PAYLOAD, { qos: 1 });
  } else {
    let sent = 0;
    let acked = 0;
    await new Promise<void>((resolve) => {
      const pump = () => {
        while (sent < RETAINED_PUBLISHES && sent - acked < WINDOW) {
          pub.publish(`site/${sent++ % RETAINED_TOPICS}/state`, PAYLOAD, { qos: 1, retain: true }, () => {
            if (++acked === RETAINED_PUBLISHES) resolve();
            else pump();
          });
        }
      };
      pump();
    });
  }
  const rate = (RETAINED_PUBLISHES * 1000) / (performance.now() - t0);
  await pub.endAsync(true);
  return rate;
}

// ------------------------------------------------------------------ restore and lookups (in-process)

async function populate(dir: string): Promise<number> {
  const t0 = performance.now();
  const store = openStore({ dir });
  const p = createLmdbPersistence({ store, limits: { ...TEST_LIMITS, maxQueuedMessages: QUEUED_PER_SESSION } });
  await p.setup({ id: 'bench-broker' });
  let counter = 0;
  for (let s = 0; s < SESSIONS; s++) {
    const clientId = `device-${s}`;
    await p.addSubscriptions({ id: clientId }, [{ topic: `devices/${s}/cmd/#`, qos: 1 }]);
    for (let m = 0; m < QUEUED_PER_SESSION; m++) {
      await p.outgoingEnqueue({ clientId }, { cmd: 'publish', topic: `devices/${s}/cmd/set`, payload: PAYLOAD, qos: 1, retain: false, brokerId: 'bench-broker', brokerCounter: ++counter });
    }
    if (s % 100 === 99) await p.flush();
  }
  await p.destroy();
  await store.close();
  return performance.now() - t0;
}

async function restoreTime(dir: string): Promise<{ ms: number; heapMiB: number; sessions: number; queued: number }> {
  const before = process.memoryUsage();
  const t0 = performance.now();
  const store = openStore({ dir });
  const p: LmdbPersistence = createLmdbPersistence({ store, limits: { ...TEST_LIMITS, maxQueuedMessages: QUEUED_PER_SESSION } });
  const ms = performance.now() - t0;
  const after = process.memoryUsage();
  const stats = p.stats();
  await p.destroy();
  await store.close();
  return { ms, heapMiB: (after.heapUsed + after.arrayBuffers - before.heapUsed - before.arrayBuffers) / 1048576, sessions: stats.sessions, queued: stats.queuedMessages };
}

async function retainedLookups(dir: string): Promise<{ prefixUs: number; allMs: number }> {
  const store = openStore({ dir });
  const p = createLmdbPersistence({ store, limits: TEST_LIMITS });
  await p.setup({ id: 'bench-broker' });
  for (let i = 0; i < RETAINED_TOPICS; i++) await p.storeRetained({ cmd: 'publish', topic: `zone/${i}/temp`, payload: PAYLOAD, qos: 0, retain: true });
  await p.flush();
  const drain = async (pattern: string) => {
    let n = 0;
    for await (const _ of p.createRetainedStream(pattern)) n++;
    return n;
  };
  const prefixRuns = 200;
  let t0 = performance.now();
  for (let i = 0; i < prefixRuns; i++) await drain(`zone/${i * 37}/+`);
  const prefixUs = ((performance.now() - t0) * 1000) / prefixRuns;
  t0 = performance.now();
  const all = await drain('#');
  const allMs = performance.now() - t0;
  if (all !== RETAINED_TOPICS) throw new Error(`expected ${RETAINED_TOPICS} retained, got ${all}`);
  await p.destroy();
  await store.close();
  return { prefixUs, allMs };
}

// ------------------------------------------------------------------ main

export async function benchMqttPersistence(): Promise<Record<string, number>> {
  const results: Record<string, number> = {};
  const fmt = (n: number, digits = 0) => (Number.isFinite(n) ? n.toFixed(digits) : '-');
  const root = mkdtempSync(join(tmpdir(), 'gatewayd-bench-persistence-'));
  try {
    const restoreDir = join(root, 'restore');
    const populateMs = await populate(restoreDir);
    const restore = await restoreTime(restoreDir);
    results.restore_10k_sessions_x100_ms = restore.ms;
    results.restore_heap_mib = restore.heapMiB;
    console.log(`restore: ${SESSIONS} sessions × ${QUEUED_PER_SESSION} queued (${restore.queued} messages, written in ${fmt(populateMs / 1000, 1)} s) open in ${fmt(restore.ms)} ms, heap +${fmt(restore.heapMiB, 1)} MiB (index only)`);

    const lookups = await retainedLookups(join(root, 'lookups'));
    results.retained_prefix_lookup_us = lookups.prefixUs;
    results.retained_full_scan_ms = lookups.allMs;
    console.log(`retained lookup among ${RETAINED_TOPICS} topics: 'zone/<n>/+' ${fmt(lookups.prefixUs)} µs, '#' ${fmt(lookups.allMs, 1)} ms`);

    const brokers = [await startBroker('lmdb', join(root, 'broker')), await startBroker('memory', '')];
    try {
      const flows: Record<Kind, FlowResult[]> = { lmdb: [], memory: [] };
      for (let round = 0; round < ROUNDS; round++) {
        for (const b of round % 2 ? [...brokers].reverse() : brokers) flows[b.kind].push(await qos1ToPersistentSessions(b));
      }
      const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
      console.log(`QoS 1, 1 publisher (window ${WINDOW}) → ${SUBSCRIBERS} persistent sessions online, bare aedes 2 (median of ${ROUNDS}):`);
      for (const kind of ['lmdb', 'memory'] as const) {
        const r = { d: median(flows[kind].map((f) => f.deliveriesPerSec)), p99: median(flows[kind].map((f) => f.p99Ms)), cpu: median(flows[kind].map((f) => f.cpuUsPerDelivery)) };
        results[`qos1_persistent_${kind}_deliveries_per_s`] = r.d;
        results[`qos1_persistent_${kind}_p99_ms`] = r.p99;
        results[`qos1_persistent_${kind}_broker_cpu_us_per_delivery`] = r.cpu;
        console.log(`  ${kind.padEnd(6)} ${fmt(r.d).padStart(7)} deliveries/s  p99 ${fmt(r.p99, 1).padStart(6)} ms  broker CPU ${fmt(r.cpu, 1).padStart(5)} µs/delivery`);
      }
      console.log(`retained publishes (${RETAINED_PUBLISHES} over ${RETAINED_TOPICS} topics, one publisher):`);
      for (const b of brokers) {
        const q0 = await retainedPublishRate(b, 0);
        const q1 = await retainedPublishRate(b, 1);
        results[`retained_qos0_${b.kind}_per_s`] = q0;
        results[`retained_qos1_${b.kind}_per_s`] = q1;
        console.log(`  ${b.kind.padEnd(6)} QoS 0 ${fmt(q0).padStart(7)}/s   QoS 1 (window ${WINDOW}, PUBACK once on disk for lmdb) ${fmt(q1).padStart(7)}/s`);
      }
    } finally {
      for (const b of brokers) await b.stop();
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
  return results;
}

if (!isMainThread && (workerData as { role?: string })?.role === WORKER_ROLE) {
  const { kind, dir } = workerData as { kind: Kind; dir: string };
  void runBrokerWorker(kind, dir);
} else if (isMainThread && process.argv[1] && import.meta.url === new URL(`file://${process.argv[1]}`).href) {
  benchMqttPersistence().then(
    () => process.exit(0),
    (err) => {
      console.error(err);
      process.exit(1);
    },
  );
}
