// Acknowledgement latency when copies must wait (`npm run bench -- ack-latency`, issue 36,
// docs/mqtt-broker.md "What an acknowledgement means"): a QoS 1 publisher with 1, 10, 50 or 100
// messages in flight (a closed loop: the next message leaves when an acknowledgement frees a place)
// to a topic whose copies must be kept before the PUBACK: an offline persistent subscriber, or a
// bridge whose upstream is down. gatewayd runs as npm start runs it (bench-flash-kit.ts), beside
// Mosquitto 2 (Debian's, persistence true), which acknowledges at once and keeps the copies in
// memory until its autosave. Per window: acknowledged messages per second, PUBACK p50/p99, and
// what gatewayd wrote per message (/proc/<pid>/io write_bytes; journal frames from /metrics).
//
// Then the wear budget's two sides:
//   - spent: a gatewayd with a small burst allowance (GATEWAYD_BENCH_ACK_BURST_BYTES, 4 MB) and a
//     publisher with 1 in flight to a bridge that is down: the rate before and after the daemon
//     says the budget is spent (its log line, /metrics), and the time until it says it is refilled.
//   - the allowance (GATEWAYD_BENCH_ACK_ALLOWANCE=1, 10 minutes more): the default budget, 100 msg/s
//     with 1 in flight for GATEWAYD_BENCH_ACK_ALLOWANCE_S (600) to the bridge that is down: the
//     budget must last, and what the burst cost is measured.
//
// GATEWAYD_BENCH_ACK_MESSAGES (900 per run: under both brokers' default queue bound of 1,000),
// GATEWAYD_BENCH_ACK_ROUNDS (3), GATEWAYD_BENCH_ACK_SCENARIOS=offline,bridge,spent.
import { pathToFileURL } from 'node:url';
import mqtt, { type MqttClient } from 'mqtt';
import { startMosquitto } from '../test/support/mosquitto.js';
import { startTcpProxy, type TcpProxy } from '../test/support/tcp-proxy.js';
import { client, counter, gatewaydSide, mosquittoSide, mosquittoVersion, NPM_START_FLAGS, PAYLOAD_BYTES, processIo, sleep, type Side, type StorageFigures } from './bench-flash-kit.js';
import { processCpuUs } from './bench-mqtt-shipped.js';
import { percentile } from './bench-support.js';

const WINDOWS = [1, 10, 50, 100];
const MESSAGES = Number(process.env.GATEWAYD_BENCH_ACK_MESSAGES ?? 900);
const ROUNDS = Number(process.env.GATEWAYD_BENCH_ACK_ROUNDS ?? 3);
const SCENARIOS = new Set(process.env.GATEWAYD_BENCH_ACK_SCENARIOS?.split(',') ?? ['offline', 'bridge', 'spent']);
const SMALL_BURST = Number(process.env.GATEWAYD_BENCH_ACK_BURST_BYTES ?? 4_000_000);
const ALLOWANCE = process.env.GATEWAYD_BENCH_ACK_ALLOWANCE === '1';
const ALLOWANCE_S = Number(process.env.GATEWAYD_BENCH_ACK_ALLOWANCE_S ?? 600);

interface Run {
  seconds: number;
  /** PUBACK latencies, ms, sorted. */
  latencies: number[];
}

interface Cell {
  rate: number;
  p50: number;
  p99: number;
  bytesPerMessage?: number;
  framesPerMessage?: number;
  /** The broker's CPU (every thread) per message, µs. */
  cpuUs: number;
}

const payload = () => Buffer.alloc(PAYLOAD_BYTES, 'x');

/**
 * `count` QoS 1 publishes with at most `window` unacknowledged, each sent as soon as there is room
 * (and not before `pace` allows, when given: messages per second); the PUBACK latency of each.
 */
function closedLoop(c: MqttClient, topic: (i: number) => string, count: number, window: number, pace?: number, onAck?: (at: number, ms: number) => void): Promise<Run> {
  const latencies: number[] = [];
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    let sent = 0;
    let done = 0;
    let waiting: NodeJS.Timeout | undefined;
    const next = () => {
      waiting = undefined;
      while (sent < count && sent - done < window) {
        if (pace !== undefined) {
          const due = t0 + (sent * 1000) / pace;
          const wait = due - performance.now();
          if (wait > 0) {
            waiting ??= setTimeout(next, wait);
            return;
          }
        }
        const at = performance.now();
        c.publish(topic(sent++), payload(), { qos: 1 }, (err) => {
          if (err) return reject(err);
          const now = performance.now();
          latencies.push(now - at);
          onAck?.(now, now - at);
          if (++done === count) {
            if (waiting) clearTimeout(waiting);
            resolve({ seconds: (now - t0) / 1000, latencies: latencies.sort((a, b) => a - b) });
          } else if (!waiting) next();
        });
      }
    };
    next();
  });
}

/** A persistent session subscribed to `topic`, then away (its copies must be kept). */
async function offlineSubscriber(side: Side, id: string, topic: string): Promise<void> {
  const sub = await client(side, id, { clean: false });
  await sub.subscribeAsync(topic, { qos: 1 });
  await sub.endAsync();
}

/** Ends a persistent session (a clean connect of its id). */
async function endSession(side: Side, id: string): Promise<void> {
  await (await client(side, id, { clean: true })).endAsync();
}

const delta = (a: StorageFigures | undefined, b: StorageFigures | undefined, k: keyof StorageFigures) => (a?.[k] !== undefined && b?.[k] !== undefined ? b[k]! - a[k]! : undefined);

async function measure(side: Side, topic: (i: number) => string, window: number): Promise<Cell> {
  const pub = await client(side, `ack-pub-${window}`);
  try {
    const io0 = processIo(side.pid()).written;
    const s0 = await side.storage?.();
    const cpu0 = processCpuUs(side.pid());
    const run = await closedLoop(pub, topic, MESSAGES, window);
    const cpu1 = processCpuUs(side.pid());
    const io1 = processIo(side.pid()).written;
    const s1 = await side.storage?.();
    const frames = delta(s0, s1, 'journalCommits');
    return {
      rate: MESSAGES / run.seconds,
      p50: percentile(run.latencies, 50),
      p99: percentile(run.latencies, 99),
      bytesPerMessage: side.name === 'gatewayd' ? (io1 - io0) / MESSAGES : undefined,
      framesPerMessage: frames === undefined ? undefined : frames / MESSAGES,
      cpuUs: (cpu1 - cpu0) / MESSAGES,
    };
  } finally {
    await pub.endAsync();
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]!;
const fmt = (n: number | undefined, digits = 0) => (n === undefined || !Number.isFinite(n) ? '-' : n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits }));

function medianCell(cells: Cell[]): Cell {
  const pick = (f: (c: Cell) => number | undefined) => {
    const xs = cells.map(f).filter((x): x is number => x !== undefined);
    return xs.length ? median(xs) : undefined;
  };
  return { rate: pick((c) => c.rate)!, p50: pick((c) => c.p50)!, p99: pick((c) => c.p99)!, bytesPerMessage: pick((c) => c.bytesPerMessage), framesPerMessage: pick((c) => c.framesPerMessage), cpuUs: pick((c) => c.cpuUs)! };
}

async function table(name: string, sides: Side[], topicOf: (side: Side, window: number, round: number) => (i: number) => string, before: (side: Side, window: number, round: number) => Promise<void>, after: (side: Side, window: number, round: number) => Promise<void>, results: Record<string, number>): Promise<void> {
  const cells = new Map<string, Cell[]>();
  for (let round = 0; round < ROUNDS; round++) {
    for (const window of WINDOWS) {
      for (const side of sides) {
        await before(side, window, round);
        const cell = await measure(side, topicOf(side, window, round), window);
        await after(side, window, round);
        const key = `${side.name}/${window}`;
        cells.set(key, [...(cells.get(key) ?? []), cell]);
      }
    }
  }
  console.log(`\n${name}: median of ${ROUNDS} runs of ${MESSAGES} QoS 1 messages of ${PAYLOAD_BYTES} B per window`);
  const rows: string[][] = [['in flight', 'gatewayd msg/s', 'PUBACK p50 ms', 'p99 ms', 'CPU µs/msg', 'write_bytes B/msg', 'journal frames/msg', 'Mosquitto msg/s', 'PUBACK p50 ms', 'p99 ms', 'CPU µs/msg', 'target', 'met']];
  for (const window of WINDOWS) {
    const g = medianCell(cells.get(`gatewayd/${window}`)!);
    const m = medianCell(cells.get(`mosquitto/${window}`)!);
    const target = window === 1 ? '≥ 100 msg/s, p50 ≤ 10 ms' : window === 10 ? '≥ 500 msg/s' : '';
    const met = window === 1 ? g.rate >= 100 && g.p50 <= 10 : window === 10 ? g.rate >= 500 : undefined;
    rows.push([String(window), fmt(g.rate), fmt(g.p50, 1), fmt(g.p99, 1), fmt(g.cpuUs), fmt(g.bytesPerMessage), fmt(g.framesPerMessage, 2), fmt(m.rate), fmt(m.p50, 2), fmt(m.p99, 2), fmt(m.cpuUs), target, met === undefined ? '' : met ? 'yes' : 'NO']);
    for (const [side, c] of [['gatewayd', g], ['mosquitto', m]] as const) {
      results[`${name}_${side}_${window}_msg_per_s`] = c.rate;
      results[`${name}_${side}_${window}_p50_ms`] = c.p50;
      results[`${name}_${side}_${window}_p99_ms`] = c.p99;
      results[`${name}_${side}_${window}_cpu_us_per_msg`] = c.cpuUs;
      if (c.bytesPerMessage !== undefined) results[`${name}_${side}_${window}_write_bytes_per_msg`] = c.bytesPerMessage;
    }
  }
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
  for (const r of rows) console.log(r.map((cell, c) => cell.padStart(widths[c]!)).join('  '));
}

/** Until `pred` holds (polled), at most `ms`. */
async function until(what: string, pred: () => boolean | Promise<boolean>, ms: number, every = 100): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await pred())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await sleep(every);
  }
}

/** A small budget spent by a publisher with 1 in flight to a bridge that is down; then its refill. */
async function spent(proxy: TcpProxy, results: Record<string, number>): Promise<void> {
  const side = await gatewaydSide(proxy, { GATEWAYD_SET__STORAGE__FLASH__BURST_BYTES: String(SMALL_BURST) }, 'gatewayd-spent');
  try {
    await side.linked!(true);
    proxy.cut();
    await side.linked!(false);
    const pub = await client(side, 'ack-pub-spent');
    const acks: { at: number; ms: number }[] = [];
    let spentAt: number | undefined;
    const t0 = performance.now();
    const loop = closedLoop(pub, (i) => `bench/up/spent/${i % 10}`, 100_000, 1, undefined, (at, ms) => {
      acks.push({ at, ms });
      if (spentAt === undefined && side.storageLog!().some((l) => l.includes('wear budget is spent'))) spentAt = at;
    });
    // Until the daemon says so, and 10 s beyond (bounded).
    await until('the wear budget spent', () => spentAt !== undefined, 300_000);
    await sleep(10_000);
    const metrics = await side.storage!();
    pub.end(true);
    void loop.catch(() => undefined);
    const beforeAcks = acks.filter((a) => a.at < spentAt!);
    const afterAcks = acks.filter((a) => a.at >= spentAt! + 1000);
    const rate = (xs: typeof acks) => (xs.length < 2 ? 0 : (xs.length - 1) / ((xs.at(-1)!.at - xs[0]!.at) / 1000));
    const p50 = (xs: typeof acks) => percentile(xs.map((a) => a.ms).sort((a, b) => a - b), 50);
    console.log(
      `\nwear budget spent (storage.flash.burstBytes ${fmt(SMALL_BURST)}, 1 in flight, bridge down): spent after ${fmt((spentAt! - t0) / 1000, 1)} s and ${fmt(beforeAcks.length)} messages ` +
        `(${fmt(SMALL_BURST / Math.max(1, beforeAcks.length))} B of budget per message); before: ${fmt(rate(beforeAcks))} msg/s, PUBACK p50 ${fmt(p50(beforeAcks), 1)} ms; ` +
        `after: ${fmt(rate(afterAcks))} msg/s, p50 ${fmt(p50(afterAcks), 0)} ms; /metrics gatewayd_storage_wear_budget_spent ${metrics.budgetSpent}, _bytes ${fmt(metrics.budgetBytes)}`,
    );
    const spentLines = side.storageLog!().filter((l) => l.includes('wear budget is spent')).length;
    const refillStarted = performance.now();
    await until('the wear budget refilled', () => side.storageLog!().some((l) => l.includes('wear budget is refilled')), 600_000, 500);
    const refillS = (performance.now() - refillStarted) / 1000;
    const after = await side.storage!();
    console.log(`  the log said "spent" ${spentLines} time(s); "refilled" ${fmt(refillS, 0)} s after the publisher stopped (/metrics spent ${after.budgetSpent}, _bytes ${fmt(after.budgetBytes)})`);
    Object.assign(results, { spent_messages: beforeAcks.length, spent_before_msg_per_s: rate(beforeAcks), spent_after_msg_per_s: rate(afterAcks), spent_after_p50_ms: p50(afterAcks), spent_refill_s: refillS, spent_log_lines: spentLines });
    proxy.restore();
  } finally {
    await side.stop();
    side.cleanUp?.();
  }
}

/** The default allowance: 100 msg/s with 1 in flight to the bridge that is down, for ALLOWANCE_S. */
async function allowance(side: Side, results: Record<string, number>): Promise<void> {
  const pub = await client(side, 'ack-pub-allowance');
  const io0 = processIo(side.pid()).written;
  const s0 = await side.storage!();
  const count = ALLOWANCE_S * 100;
  const run = await closedLoop(pub, (i) => `bench/up/allowance/${i % 10}`, count, 1, 100);
  const s1 = await side.storage!();
  const bytes = processIo(side.pid()).written - io0;
  await pub.endAsync();
  const spentLines = side.storageLog!().filter((l) => l.includes('wear budget is spent')).length;
  console.log(
    `\nallowance: ${fmt(count)} messages at 100 msg/s, 1 in flight, bridge down, default budget: ${fmt(count / run.seconds)} msg/s, PUBACK p50 ${fmt(percentile(run.latencies, 50), 1)} ms, p99 ${fmt(percentile(run.latencies, 99), 1)} ms; ` +
      `written ${fmt(bytes)} B (${fmt(bytes / count)} B/msg), ${fmt((s1.journalCommits ?? 0) - (s0.journalCommits ?? 0))} journal frames; budget left ${fmt(s1.budgetBytes)} B; "spent" lines ${spentLines}`,
  );
  Object.assign(results, { allowance_msg_per_s: count / run.seconds, allowance_p50_ms: percentile(run.latencies, 50), allowance_p99_ms: percentile(run.latencies, 99), allowance_bytes_per_msg: bytes / count, allowance_budget_left: s1.budgetBytes ?? NaN, allowance_spent_lines: spentLines });
}

export async function benchAckLatency(): Promise<Record<string, number>> {
  const results: Record<string, number> = {};
  const upstream = await startMosquitto();
  const proxies = { gatewayd: await startTcpProxy({ port: upstream.port }), mosquitto: await startTcpProxy({ port: upstream.port }), spent: await startTcpProxy({ port: upstream.port }) };
  const started: Side[] = [];
  try {
    const gatewayd = await gatewaydSide(proxies.gatewayd);
    started.push(gatewayd);
    const mosquitto = await mosquittoSide(proxies.mosquitto, { dbBytes: 0 });
    started.push(mosquitto);
    const sides = [gatewayd, mosquitto];
    console.log(`gatewayd = node ${NPM_START_FLAGS.join(' ')} dist/src/main.js (npm start, its defaults), ${process.version}; Mosquitto ${mosquittoVersion()}, persistence true`);
    for (const s of sides) await s.linked!(true);
    // Unmeasured traffic first (JIT, buffers).
    for (const s of sides) {
      const c = await client(s, 'ack-warm');
      await closedLoop(c, () => 'bench/local/warm', 2000, 10);
      await c.endAsync();
    }
    if (SCENARIOS.has('offline')) {
      const subId = (w: number, r: number) => `ack-offline-${w}-${r}`;
      await table(
        'offline',
        sides,
        (_s, w, r) => () => `bench/local/ack/${w}/${r}`,
        (s, w, r) => offlineSubscriber(s, subId(w, r), `bench/local/ack/${w}/${r}`),
        (s, w, r) => endSession(s, subId(w, r)),
        results,
      );
    }
    if (SCENARIOS.has('bridge')) {
      for (const s of sides) {
        s.proxy!.cut();
        await s.linked!(false);
      }
      await table('bridge', sides, (_s, w, r) => (i) => `bench/up/ack/${w}/${r}/${i % 10}`, async () => undefined, async () => undefined, results);
      if (ALLOWANCE) await allowance(gatewayd, results);
      const up = counter();
      const watcher = mqtt.connect({ host: '127.0.0.1', port: upstream.port, clientId: 'ack-upstream', reconnectPeriod: 0 });
      watcher.on('message', up.on);
      await new Promise((r) => watcher.once('connect', r));
      await watcher.subscribeAsync('site-gw/bench/up/#', { qos: 1 });
      for (const s of sides) {
        s.proxy!.restore();
        await s.linked!(true);
      }
      // gatewayd's bridge delivers what it kept (Mosquitto's kept up to its queue bound).
      const kept = ROUNDS * WINDOWS.length * MESSAGES + (ALLOWANCE ? ALLOWANCE_S * 100 : 0);
      await up.reached(kept, 300_000, 'gatewayd bridge drain');
      console.log(`after the outage gatewayd's bridge delivered all ${fmt(kept)} acknowledged messages upstream`);
      await watcher.endAsync();
    }
    if (SCENARIOS.has('spent')) await spent(proxies.spent, results);
  } finally {
    for (const s of [...started].reverse()) await s.stop().catch((err: unknown) => console.error(`stopping ${s.name}:`, err));
    for (const s of started) s.cleanUp?.();
    for (const p of Object.values(proxies)) await p.close();
    await upstream.close();
  }
  return results;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  benchAckLatency().then(
    () => process.exit(0),
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
}
