// Sparkplug history benchmark (docs/sparkplug.md "History"): what an outage of the primary host
// costs and how fast its backlog reaches the host afterwards. The daemon runs as shipped (npm
// start's node flags, a child process) with one edge node of 100 metrics (10 devices × 10, each
// its own Modbus endpoint on a server in this process, polled every 100 ms); the host (an mqtt.js
// client of this process decoding with the tests' host) publishes STATE offline, so the node
// dies and keeps what it reads, then STATE online.
//
// The issue's case is a 10-minute outage of 100 metrics changing at 1 Hz: 60,000 values. Time is
// simulated in two parts, both said in the output:
//  1. flash cost at the real rate: the registers change once a second for REAL_SECONDS; bytes the
//     daemon caused to be written (/proc/<pid>/io write_bytes) and LMDB commits, per value kept
//     (commits come at most every storage.commitIntervalMs, so the rate matters), once with
//     history.durability prompt (the default) and once with background;
//  2. the rest of the backlog fed 10 times faster than real time (the registers change every
//     100 ms) until 60,000 values are kept; then STATE online: the time until the host has every
//     historical value, the daemon's CPU for it (polling's own CPU, measured before, subtracted),
//     the bytes written by the delivery (the removals), and the daemon's RSS with the backlog kept.
// 3. Memory: RSS includes garbage V8 has not collected yet, so the same edge node also runs in this
//    process (the test kit's gateway) and the heap is measured after full collections while the
//    backlog grows: it must not grow with it.
//
// Run: npm run bench -- sparkplug-history
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import { startModbusServer, type ModbusTestServer } from '../test/mapping-support.js';
import { startGateway } from '../test/support/harness.js';
import { SparkplugHost } from '../test/support/sparkplug-host.js';
import { ADMIN_PASSWORD, rssMiB, shippedNodeFlags, startDaemonAt } from './bench-footprint.js';
import { benchService, cpuMs } from './bench-sparkplug.js';

const DEVICES = 10;
const METRICS = 10;
const POLL_MS = 100;
const OUTAGE_VALUES = 60_000; // 10 minutes × 100 metrics × 1 Hz
const REAL_SECONDS = 60;
const DEADLINE_MS = 300_000;

const service = (port: number, durability: 'prompt' | 'background', runAs = 'edge') =>
  benchService({ port, devices: DEVICES, metrics: METRICS, pollMs: POLL_MS, edge: [`runAs: ${runAs}`, 'primaryHostId: scada', `history: {maxValues: 200000, durability: ${durability}}`] });

/** Bytes the process caused to be written to the block device. */
function writtenBytes(pid: number): number {
  return Number(/^write_bytes:\s*(\d+)$/m.exec(readFileSync(`/proc/${pid}/io`, 'utf8'))![1]);
}

async function api(port: number, method: string, path: string, body?: string, contentType = 'application/json'): Promise<any> {
  const res = await fetch(`http://127.0.0.1:${port}${path}`, { method, headers: { authorization: `Basic ${Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64')}`, 'content-type': contentType }, ...(body === undefined ? {} : { body }) });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return res.headers.get('content-type')?.includes('json') ? JSON.parse(text) : text;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function waitFor<T>(what: string, check: () => Promise<T | undefined> | T | undefined, ms = DEADLINE_MS): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await sleep(50);
  }
}

/** Part 3: the heap after full collections while the backlog grows, the same edge node in this process. */
async function heapWithBacklog(modbus: ModbusTestServer): Promise<{ points: Array<{ values: number; heapMiB: number }>; beforeMiB: number; afterMiB: number }> {
  v8.setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  const heapMiB = () => {
    gc();
    gc();
    return process.memoryUsage().heapUsed / 1024 / 1024;
  };
  const gw = await startGateway({ overrides: { log: { level: 'error', requests: false } } });
  let changer: NodeJS.Timeout | undefined;
  try {
    const admin = await gw.login();
    await gw.userWith([{ context: 'mqtt', operation: 'readWrite', resource: 'spBv1.0/bench/#' }, { context: 'mqtt', operation: 'read', resource: 'spBv1.0/STATE/scada' }], 'edge-heap');
    const res = await gw.api('PUT', '/api/services/bench', { token: admin, raw: service(modbus.port, 'background', 'edge-heap'), headers: { 'content-type': 'application/yaml' } });
    if (res.status >= 300) throw new Error(`PUT /api/services/bench: ${res.status}`);
    const kept = async () => (await gw.api('GET', '/api/sparkplug/bench.edge', { token: admin })).body.history.values as number;
    // The host never says it is online: everything read is kept.
    await waitFor('waiting for the host', async () => ((await gw.api('GET', '/api/sparkplug/bench.edge', { token: admin })).body.node.state === 'waitingForHost' ? true : undefined), 30_000);
    await sleep(3000);
    const beforeMiB = heapMiB();
    const points: Array<{ values: number; heapMiB: number }> = [];
    changer = setInterval(() => {
      for (let i = 0; i < DEVICES * METRICS; i++) modbus.holding[i] = (modbus.holding[i]! + 1) & 0xffff;
    }, POLL_MS);
    for (const target of [10_000, 20_000, 30_000, 40_000]) {
      await waitFor(`${target} kept`, async () => ((await kept()) >= target ? true : undefined));
      points.push({ values: await kept(), heapMiB: heapMiB() });
    }
    clearInterval(changer);
    changer = undefined;
    // Once the last staged writes are committed (storage.backgroundCommitMs).
    await waitFor('on flash', async () => ((await gw.api('GET', '/api/sparkplug/bench.edge', { token: admin })).body.history.staged === 0 ? true : undefined), 30_000);
    return { points, beforeMiB, afterMiB: heapMiB() };
  } finally {
    if (changer) clearInterval(changer);
    await gw.stop();
  }
}

export async function benchSparkplugHistory(): Promise<Record<string, number>> {
  const modbus = await startModbusServer();
  const heap = await heapWithBacklog(modbus);
  for (let i = 0; i < DEVICES * METRICS; i++) modbus.holding[i] = 0;
  const dataDir = mkdtempSync(join(tmpdir(), 'gatewayd-bench-sparkplug-history-'));
  mkdirSync(join(dataDir, 'services'));
  const started = await startDaemonAt(dataDir, shippedNodeFlags());
  const pid = started.child.pid!;
  const http = started.ready.http as number;
  const mqttPort = started.ready.mqtt as number;
  let host: SparkplugHost | undefined;
  let changer: NodeJS.Timeout | undefined;
  const change = () => {
    for (let i = 0; i < DEVICES * METRICS; i++) modbus.holding[i] = (modbus.holding[i]! + 1) & 0xffff;
  };
  try {
    await api(http, 'POST', '/api/users', JSON.stringify({ username: 'edge', password: ADMIN_PASSWORD, identityProvider: 'local', initialPermissions: [{ context: 'mqtt', operation: 'readWrite', resource: 'spBv1.0/bench/#' }, { context: 'mqtt', operation: 'read', resource: 'spBv1.0/STATE/scada' }] }));
    host = await SparkplugHost.connect(`mqtt://127.0.0.1:${mqttPort}`, 'bench', { username: 'admin', password: ADMIN_PASSWORD, protocolVersion: 4 });
    const state = (online: boolean) => host!.client.publishAsync('spBv1.0/STATE/scada', JSON.stringify({ online, timestamp: Date.now() }), { qos: 1, retain: true });
    await state(true);
    await api(http, 'PUT', '/api/services/bench', service(modbus.port, 'prompt'), 'application/yaml');
    await waitFor('births', () => (host!.of('DBIRTH').length >= DEVICES ? true : undefined), 30_000);
    const kept = async () => (await api(http, 'GET', '/api/sparkplug/bench.edge')).history as { values: number; staged: number; dropped: Record<string, number> };
    await waitFor('nothing kept while born', async () => ((await kept()).values === 0 ? true : undefined), 30_000);

    const rssBefore = rssMiB(pid);
    await state(false);
    await waitFor('the node waits for its host', async () => ((await api(http, 'GET', '/api/sparkplug/bench.edge')).node.state === 'waitingForHost' ? true : undefined), 30_000);
    // Polling alone (nothing changes): the CPU to subtract.
    await sleep(3000);
    const idleCpu0 = cpuMs(pid);
    const idleT0 = performance.now();
    await sleep(10_000);
    const pollingCpuPerMs = (cpuMs(pid) - idleCpu0) / (performance.now() - idleT0);
    const storeBytes = () => statSync(join(dataDir, 'db', 'data.mdb')).size;
    const storeBefore = storeBytes();
    // 1. Real rate: every metric changes once a second.
    const commits = async () => Number(/^gatewayd_storage_commits_total (\d+)/m.exec(await api(http, 'GET', '/metrics'))![1]);
    const realRate = async () => {
      const values0 = (await kept()).values;
      const written0 = writtenBytes(pid);
      const commits0 = await commits();
      changer = setInterval(change, 1000);
      await sleep(REAL_SECONDS * 1000);
      clearInterval(changer);
      await waitFor('on flash', async () => ((await kept()).staged === 0 ? true : undefined), 30_000);
      return { values: (await kept()).values - values0, bytes: writtenBytes(pid) - written0, commits: (await commits()) - commits0 };
    };
    const prompt = await realRate();
    // The same with history.durability background (the node restarts, still waiting for its host).
    await api(http, 'PUT', '/api/services/bench', service(modbus.port, 'background'), 'application/yaml');
    await waitFor('the node waits for its host', async () => ((await api(http, 'GET', '/api/sparkplug/bench.edge')).node.state === 'waitingForHost' ? true : undefined), 30_000);
    const background = await realRate();
    const realValues = prompt.values + background.values;

    // 2. The rest of the backlog, 10 times faster than real time.
    const written1 = writtenBytes(pid);
    const fastT0 = performance.now();
    changer = setInterval(change, POLL_MS);
    await waitFor('the backlog kept', async () => ((await kept()).values >= OUTAGE_VALUES ? true : undefined));
    clearInterval(changer);
    changer = undefined;
    await waitFor('on flash', async () => ((await kept()).staged === 0 ? true : undefined), 10_000);
    const fastSeconds = (performance.now() - fastT0) / 1000;
    const backlog = await kept();
    const fastValues = backlog.values - realValues;
    const fastBytes = writtenBytes(pid) - written1;
    const rssWithBacklog = rssMiB(pid);
    const storeGrowth = storeBytes() - storeBefore;

    // The host comes back: births, then the backlog.
    const from = host.messages.length;
    const cpu0 = cpuMs(pid);
    const written2 = writtenBytes(pid);
    let wireBytes = 0;
    const countBytes = (topic: string, payload: Buffer) => void (topic.includes('/DDATA/') && (wireBytes += payload.length));
    host.client.on('message', countBytes);
    const t0 = performance.now();
    await state(true);
    let historical = 0;
    let messages = 0;
    await waitFor('the backlog at the host', () => {
      historical = 0;
      messages = 0;
      for (const m of host!.messages.slice(from)) {
        if (m.type !== 'DDATA') continue;
        const n = m.payload.metrics.filter((x) => x.isHistorical).length;
        if (n === 0) continue;
        historical += n;
        messages++;
      }
      return historical >= backlog.values ? true : undefined;
    });
    const deliveryMs = performance.now() - t0;
    const deliveryCpu = cpuMs(pid) - cpu0 - pollingCpuPerMs * deliveryMs;
    await waitFor('removed', async () => ((await kept()).values === 0 ? true : undefined), 30_000);
    await waitFor('on flash', async () => ((await kept()).staged === 0 ? true : undefined), 10_000);
    const deliveryBytes = writtenBytes(pid) - written2;
    const rssAfter = rssMiB(pid);
    host.client.off('message', countBytes);

    console.log(
      `sparkplug-history: ${DEVICES}×${METRICS} metrics (each its own Modbus endpoint, polled every ${POLL_MS} ms), the primary host offline; the issue's case is a 10-minute outage at 1 Hz: ${OUTAGE_VALUES.toLocaleString('en')} values`,
    );
    for (const [name, r] of [['prompt', prompt], ['background', background]] as const) {
      console.log(
        `  real rate, durability ${name} (every metric changes once a second, ${REAL_SECONDS} s): ${r.values} values kept, ${r.commits} LMDB commits (${(r.commits / REAL_SECONDS).toFixed(1)}/s), ` +
          `${(r.bytes / 1024).toFixed(0)} KiB written: ${(r.bytes / r.values).toFixed(0)} bytes per value; a 10-minute outage at this rate: ${(((r.bytes / r.values) * OUTAGE_VALUES) / 1024 / 1024).toFixed(1)} MiB`,
      );
    }
    console.log(`  then fed 10× faster than real time (every 100 ms, durability background): ${fastValues} more values in ${fastSeconds.toFixed(0)} s, ${(fastBytes / fastValues).toFixed(0)} bytes written per value at that rate`);
    console.log(`  polling alone (100 endpoints every ${POLL_MS} ms, nothing changing): ${(pollingCpuPerMs * 100).toFixed(0)}% of a core, subtracted below`);
    console.log(`  backlog kept: ${backlog.values} values, the store file grew by ${(storeGrowth / 1024 / 1024).toFixed(1)} MiB (${(storeGrowth / backlog.values).toFixed(0)} bytes per value); daemon RSS ${rssBefore.toFixed(1)} MiB before the outage, ${rssWithBacklog.toFixed(1)} MiB with the backlog kept, ${rssAfter.toFixed(1)} MiB once delivered`);
    console.log(
      `  heap after full collections (the same edge node in this process, fed 10× faster): ${heap.beforeMiB.toFixed(1)} MiB before the outage; ` +
        heap.points.map((p) => `${p.heapMiB.toFixed(1)} MiB at ${p.values.toLocaleString('en')} kept`).join(', ') +
        `; ${heap.afterMiB.toFixed(1)} MiB once the last ones were on flash`,
    );
    console.log(
      `  STATE online → every historical value at the host: ${(deliveryMs / 1000).toFixed(2)} s (${Math.round(backlog.values / (deliveryMs / 1000)).toLocaleString('en')} values/s) in ${messages} historical DDATA (${(wireBytes / backlog.values).toFixed(1)} bytes per value on the wire); ` +
        `daemon CPU ${deliveryCpu.toFixed(0)} ms (${((deliveryCpu * 1000) / backlog.values).toFixed(1)} µs per value, polling's own CPU subtracted); ` +
        `removing them wrote ${(deliveryBytes / 1024).toFixed(0)} KiB (${(deliveryBytes / backlog.values).toFixed(0)} bytes per value)`,
    );
    return {
      promptValues: prompt.values,
      promptCommitsPerSecond: prompt.commits / REAL_SECONDS,
      promptBytesPerValue: prompt.bytes / prompt.values,
      backgroundValues: background.values,
      backgroundCommitsPerSecond: background.commits / REAL_SECONDS,
      backgroundBytesPerValue: background.bytes / background.values,
      fastRateBytesPerValue: fastBytes / fastValues,
      backlogValues: backlog.values,
      storeBytesPerValue: storeGrowth / backlog.values,
      heapBeforeMiB: heap.beforeMiB,
      heapAt10kMiB: heap.points[0]!.heapMiB,
      heapAt40kMiB: heap.points.at(-1)!.heapMiB,
      heapAfterMiB: heap.afterMiB,
      rssBeforeMiB: rssBefore,
      rssWithBacklogMiB: rssWithBacklog,
      rssAfterMiB: rssAfter,
      deliverySeconds: deliveryMs / 1000,
      deliveryValuesPerSecond: backlog.values / (deliveryMs / 1000),
      deliveryMessages: messages,
      deliveryWireBytesPerValue: wireBytes / backlog.values,
      deliveryCpuMs: deliveryCpu,
      deliveryCpuUsPerValue: (deliveryCpu * 1000) / backlog.values,
      deliveryBytesPerValue: deliveryBytes / backlog.values,
      droppedMaxValues: backlog.dropped.maxValues ?? 0,
    };
  } finally {
    if (changer) clearInterval(changer);
    await host?.client.publishAsync('spBv1.0/STATE/scada', '', { qos: 1, retain: true }).catch(() => undefined);
    await host?.end();
    started.child.kill('SIGTERM');
    await new Promise((r) => (started.child.exitCode !== null ? r(undefined) : started.child.once('exit', r)));
    rmSync(dataDir, { recursive: true, force: true });
    await modbus.stop();
  }
}
