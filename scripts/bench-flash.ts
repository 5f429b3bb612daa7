// Flash wear benchmark (`npm run bench -- flash`, issue 28 point 6, docs/footprint.md "Flash"):
// what each broker process causes to be written to the block device while it does the same
// work. gatewayd runs exactly as `npm start` runs it (its Node flags, its defaults, log at info to
// a pipe as a journal would take it); Mosquitto 2 (Debian's) with `persistence true`, a
// persistence_location in a temp dir and its other defaults. Both run at the same time, each its
// own process, each with a bridge to an upstream Mosquitto of its own behind a TCP proxy (where
// outages are made). The mqtt.js clients run here.
//
// A scenario: setup (subscriptions, sessions), a settle period (what the setup staged lands
// before the window), then the window: /proc/<pid>/io write_bytes before, the work (1,000
// messages of 200 bytes at 100 msg/s from a paced, pipelined publisher: it does not wait for a
// PUBACK before the next), and a trailing wait of storage.backgroundCommitMs + the hold + two
// commit intervals + 1 s, so what gatewayd writes in the background lands inside the window.
// Bytes: /proc/<pid>/io write_bytes, the kernel's count of page cache it dirtied (the file
// system's journal not included): robust to other load on the machine. CPU figures (per-thread
// schedstat) are not: the machine is shared. Broker CPU per message is also measured for bare
// aedes 1.2 (QoS 1, online subscribers). Both bridges keep their default reconnect backoff.
//
// Messages that must wait (an offline persistent subscriber, a bridge whose uplink is down) are
// measured twice: on gatewayd with its defaults, where the wear budget makes each one its own
// journal frame at once (a burst within the budget's allowance), and on a second gatewayd with
// storage.flash.burstBytes 0 (gatewayd-spent), whose commits wait for the commit interval as they
// do once a budget is spent: what sustained load costs.
//
// GATEWAYD_BENCH_FLASH_SCENARIOS=idle,qos0,qos1,connect,persistent,offline,retained,bridge,outage,reference
// picks scenarios; GATEWAYD_BENCH_FLASH_REFERENCE_S (300) the reference workload's length,
// GATEWAYD_BENCH_FLASH_REFERENCE_PARTS=bridge,retained,ui,login its parts; GATEWAYD_BENCH_FLASH_IDLE_S
// (60); GATEWAYD_SET__STORAGE__* is passed to the daemon (other storage settings);
// GATEWAYD_BENCH_FLASH_STRACE=1 (or =<file> to keep the trace): the daemon's file writes are also
// counted at its system calls (scripts/write-trace.ts). write_bytes counts whole page cache folios,
// and kernels with large ext4 folios (6.16 and later) count a 4 KiB write into a large folio as the
// whole folio. strace slows the daemon: its CPU figures are then meaningless.
import { pathToFileURL } from 'node:url';
import mqtt, { type MqttClient } from 'mqtt';
import { projectedYears } from '../src/storage/flash-wear.js';
import { STORAGE_DEFAULTS } from '../src/storage/storage-defaults.js';
import { startMosquitto, type Mosquitto } from '../test/support/mosquitto.js';
import { startTcpProxy } from '../test/support/tcp-proxy.js';
import {
  aedesSide,
  client,
  counter,
  gatewaydSide,
  mosquittoSide,
  mosquittoVersion,
  NPM_START_FLAGS,
  pacedPublish,
  processIo,
  PAYLOAD_BYTES,
  RATE,
  sleep,
  warmUp,

  type GatewaydApi,
  type Side,
  type SideName,
  type StorageFigures,
} from './bench-flash-kit.js';
import { processCpuUs } from './bench-mqtt-shipped.js';
import type { TracedWrites } from './write-trace.js';

const MESSAGES = 1000;
const CONNECTS = 300;
const CONNECT_RATE = 10;
const IDLE_S = Number(process.env.GATEWAYD_BENCH_FLASH_IDLE_S ?? 60);
const OUTAGE_S = 60;
const REFERENCE_S = Number(process.env.GATEWAYD_BENCH_FLASH_REFERENCE_S ?? 300);
const UI_POLL_S = 5;
/** GATEWAYD_BENCH_FLASH_REFERENCE_PARTS: the reference workload's parts (to tell their shares apart). */
const REFERENCE_PARTS = new Set(process.env.GATEWAYD_BENCH_FLASH_REFERENCE_PARTS?.split(',') ?? ['bridge', 'retained', 'ui', 'login']);
const LOGIN_EVERY_S = 60;
const RETAINED_TOPICS = 10;
const REFERENCE_RETAINED_TOPICS = 100;
const SCENARIOS = new Set(process.env.GATEWAYD_BENCH_FLASH_SCENARIOS?.split(',') ?? ['idle', 'qos0', 'qos1', 'connect', 'persistent', 'offline', 'retained', 'bridge', 'outage', 'reference']);
/** The daemon's storage timings: its defaults, or what GATEWAYD_SET__STORAGE__* sets. */
const TIMINGS = {
  holdMs: Number(process.env.GATEWAYD_SET__STORAGE__HOLDMS ?? STORAGE_DEFAULTS.holdMs),
  commitIntervalMs: Number(process.env.GATEWAYD_SET__STORAGE__COMMITINTERVALMS ?? STORAGE_DEFAULTS.commitIntervalMs),
  backgroundCommitMs: Number(process.env.GATEWAYD_SET__STORAGE__BACKGROUNDCOMMITMS ?? STORAGE_DEFAULTS.backgroundCommitMs),
};
/** Long enough for every background write the work staged to be committed inside the window. */
const TRAILING_MS = TIMINGS.backgroundCommitMs + TIMINGS.holdMs + 2 * TIMINGS.commitIntervalMs + 1000;
const SETTLE_MS = TRAILING_MS;
const TLC = { capacityBytes: 8e9, ratedWriteCycles: 1000 };
const PSLC = { capacityBytes: 8e9, ratedWriteCycles: 20_000 };

interface Measured {
  side: SideName;
  bytes: number;
  cancelledBytes: number;
  seconds: number;
  storage?: StorageFigures;
  logLines?: number;
  /** Broker CPU per message of the work, µs (where measured), and the same less the process's idle CPU over that time. */
  cpuUsPerMessage?: number;
  netCpuUsPerMessage?: number;
  /** Broker CPU over the whole window, µs per second. */
  cpuUsPerSecond: number;
  fromMs: number;
  toMs: number;
  /** Its file writes at the system calls (after the run, GATEWAYD_BENCH_FLASH_STRACE). */
  traced?: TracedWrites;
  /** What arrived where it should (deliveries, messages upstream). */
  delivered?: number;
}

interface Row {
  /** Key of its figures in the results. */
  id: string;
  /** The gatewayd whose figures the row shows (default gatewayd). */
  gatewayd?: 'gatewayd' | 'gatewayd-spent';
  label: string;
  /** Messages (or connects) the bytes are divided by; 0: per second. */
  units: number;
  unitName: string;
  /** Sustained rate of those units for the projection (per second). */
  unitRate: number;
  target?: { bytesPerUnit?: number; bytesPerSecond?: number };
  windowSeconds: number;
  sides: Measured[];
}

/**
 * One window on `sides` at once: io (and gatewayd's storage figures) before, `work` per side
 * (returns what it delivered and when its CPU is read), the trailing wait, io after.
 */
async function window(all: Sides, sides: Side[], work: (side: Side, mark: () => CpuMark) => Promise<{ delivered?: number; cpu?: CpuMark } | void>): Promise<{ seconds: number; sides: Measured[] }> {
  const before = await Promise.all(sides.map(async (s) => ({ io: processIo(s.pid()), storage: await s.storage?.(), lines: s.logLines?.(), cpuUs: processCpuUs(s.pid()) })));
  const t0 = performance.now();
  const fromMs = Date.now();
  const outcomes = await Promise.all(
    sides.map((s, i) => {
      const cpu0 = before[i]!.cpuUs;
      return work(s, () => ({ cpuUs: processCpuUs(s.pid()) - cpu0, seconds: (performance.now() - t0) / 1000 }));
    }),
  );
  await sleep(TRAILING_MS);
  const seconds = (performance.now() - t0) / 1000;
  const toMs = Date.now();
  const measured = await Promise.all(
    sides.map(async (s, i) => {
      const io = processIo(s.pid());
      const storage = await s.storage?.();
      const b = before[i]!;
      const o = outcomes[i] || {};
      const m: Measured = { side: s.name, bytes: io.written - b.io.written, cancelledBytes: io.cancelled - b.io.cancelled, seconds, fromMs, toMs, cpuUsPerSecond: (processCpuUs(s.pid()) - b.cpuUs) / seconds };
      if (storage && b.storage)
        m.storage = {
          commits: storage.commits - b.storage.commits,
          committed: storage.committed - b.storage.committed,
          cancelled: storage.cancelled - b.storage.cancelled,
          journalCommits: (storage.journalCommits ?? 0) - (b.storage.journalCommits ?? 0),
        };
      if (s.logLines && b.lines !== undefined) m.logLines = s.logLines() - b.lines;
      if (o.cpu) {
        m.cpuUsPerMessage = o.cpu.cpuUs / MESSAGES;
        const idle = all.idleCpuUsPerSecond.get(s.name);
        if (idle !== undefined) m.netCpuUsPerMessage = (o.cpu.cpuUs - idle * o.cpu.seconds) / MESSAGES;
      }
      if (o.delivered !== undefined) m.delivered = o.delivered;
      return m;
    }),
  );
  return { seconds, sides: measured };
}

interface CpuMark {
  cpuUs: number;
  seconds: number;
}

type Scenario = (all: Sides) => Promise<Row[]>;
interface Sides {
  gatewayd: Side;
  /** gatewayd with storage.flash.burstBytes 0: its acknowledgements wait for the commit interval (a spent budget). */
  spent: Side;
  mosquitto: Side;
  aedes: Side;
  upstream: Record<'gatewayd' | 'gatewayd-spent' | 'mosquitto', Mosquitto>;
  /** Each process's CPU at idle (the idle scenario), µs per second. */
  idleCpuUsPerSecond: Map<SideName, number>;
}
const brokers = (all: Sides) => [all.gatewayd, all.mosquitto];

const idle: Scenario = async (all) => {
  await sleep(SETTLE_MS);
  const w = await window(all, [...brokers(all), all.aedes], async () => {
    await sleep(IDLE_S * 1000 - TRAILING_MS);
  });
  for (const m of w.sides) all.idleCpuUsPerSecond.set(m.side, m.cpuUsPerSecond);
  return [{ id: 'idle', label: `idle (${IDLE_S} s)`, units: 0, unitName: 's', unitRate: 1, windowSeconds: w.seconds, sides: w.sides }];
};

/** 1,000 messages at 100/s from a publisher to one subscriber on each side (subscriber set up before the settle). */
function onlineFlow(id: string, label: string, qos: 0 | 1, clean: boolean, withAedes: boolean, target: number): Scenario {
  return async (all) => {
    const sides = withAedes ? [...brokers(all), all.aedes] : brokers(all);
    const tag = `${qos}${clean ? 'c' : 'p'}`;
    const counters = new Map<Side, ReturnType<typeof counter>>();
    const clients: MqttClient[] = [];
    for (const s of sides) {
      const n = counter();
      counters.set(s, n);
      const sub = await client(s, `flash-sub-${tag}`, { clean }, n.on);
      await sub.subscribeAsync(`bench/local/${tag}`, { qos: 1 });
      const pub = await client(s, `flash-pub-${tag}`);
      clients.push(sub, pub);
      await warmUp(pub, () => `bench/local/${tag}`, qos, n);
    }
    await sleep(SETTLE_MS);
    const w = await window(all, sides, async (s, mark) => {
      const pub = clients[sides.indexOf(s) * 2 + 1]!;
      const n = counters.get(s)!;
      const from = n.count;
      await pacedPublish(pub, MESSAGES, () => `bench/local/${tag}`, { qos });
      await n.reached(from + MESSAGES, 30_000, `${s.name} ${label}`);
      return { delivered: n.count - from, cpu: mark() };
    });
    // Clean leaves (a persistent subscriber's session is ended by a clean connect of its id).
    for (const c of clients) await c.endAsync();
    if (!clean) for (const s of sides) await (await client(s, `flash-sub-${tag}`, { clean: true })).endAsync();
    return [{ id, label, units: MESSAGES, unitName: 'msg', unitRate: RATE, target: { bytesPerUnit: target }, windowSeconds: w.seconds, sides: w.sides }];
  };
}

const connects: Scenario = async (all) => {
  // The password verified once before: what a device reconnecting meets.
  for (const s of brokers(all)) await (await client(s, 'flash-connect')).endAsync();
  await sleep(SETTLE_MS);
  const w = await window(all, brokers(all), async (s) => {
    const t0 = performance.now();
    for (let i = 0; i < CONNECTS; i++) {
      const c = await client(s, `flash-connect-${i % 10}`);
      await c.endAsync();
      await sleep(Math.max(0, t0 + ((i + 1) * 1000) / CONNECT_RATE - performance.now()));
    }
    return { delivered: CONNECTS };
  });
  return [{ id: 'connect', label: `${CONNECTS} password connects (${CONNECT_RATE}/s)`, units: CONNECTS, unitName: 'connect', unitRate: CONNECT_RATE, target: { bytesPerUnit: 100 }, windowSeconds: w.seconds, sides: w.sides }];
};

/** Rows of a scenario measured on gatewayd, gatewayd-spent and Mosquitto at once: one for each gatewayd. */
function burstAndSustained(row: Omit<Row, 'sides' | 'gatewayd'>, sides: Measured[]): Row[] {
  const others = sides.filter((m) => m.side !== 'gatewayd-spent');
  const sustained = sides.filter((m) => m.side !== 'gatewayd');
  return [
    { ...row, label: `${row.label} (within the wear budget: a burst)`, target: undefined, sides: others },
    { ...row, id: `${row.id}_sustained`, label: `${row.label} (budget spent: sustained)`, gatewayd: 'gatewayd-spent', sides: sustained },
  ];
}

const offline: Scenario = async (all) => {
  const sides = [...brokers(all), all.spent];
  const counters = new Map<Side, ReturnType<typeof counter>>();
  const pubs: MqttClient[] = [];
  for (const s of sides) {
    const sub = await client(s, 'flash-sub-offline', { clean: false });
    await sub.subscribeAsync('bench/local/offline', { qos: 1 });
    await sub.endAsync();
    pubs.push(await client(s, 'flash-pub-offline'));
  }
  await sleep(SETTLE_MS);
  const queued = await window(all, sides, async (s) => {
    await pacedPublish(pubs[sides.indexOf(s)]!, MESSAGES, () => 'bench/local/offline', { qos: 1 });
  });
  const subs: MqttClient[] = [];
  const back = await window(all, sides, async (s, mark) => {
    const n = counter();
    counters.set(s, n);
    subs.push(await client(s, 'flash-sub-offline', { clean: false }, n.on));
    await n.reached(MESSAGES, 60_000, `${s.name} drain`);
    return { delivered: n.count, cpu: mark() };
  });
  for (const c of [...pubs, ...subs]) await c.endAsync();
  for (const s of sides) await (await client(s, 'flash-sub-offline', { clean: true })).endAsync();
  return [
    ...burstAndSustained({ id: 'offline_queued', label: 'QoS 1 queued for an offline persistent subscriber', units: MESSAGES, unitName: 'msg', unitRate: RATE, target: { bytesPerUnit: 2048 }, windowSeconds: queued.seconds }, queued.sides),
    ...burstAndSustained({ id: 'offline_return', label: '… its return (drains the 1,000)', units: MESSAGES, unitName: 'msg', unitRate: RATE, target: { bytesPerUnit: 2048 }, windowSeconds: back.seconds }, back.sides),
  ];
};

const retained: Scenario = async (all) => {
  const pubs = await Promise.all(brokers(all).map((s) => client(s, 'flash-pub-retained')));
  await sleep(SETTLE_MS);
  const w = await window(all, brokers(all), (s) => pacedPublish(pubs[brokers(all).indexOf(s)]!, MESSAGES, (i) => `bench/local/tag/${i % RETAINED_TOPICS}`, { qos: 0, retain: true }));
  for (const p of pubs) await p.endAsync();
  return [{ id: 'retained', label: `retained QoS 0 updates, ${RETAINED_TOPICS} topics`, units: MESSAGES, unitName: 'msg', unitRate: RATE, target: { bytesPerUnit: 100 }, windowSeconds: w.seconds, sides: w.sides }];
};

/** Counts on each side's upstream what its bridge forwarded. */
async function upstreamCounters(all: Sides, sides = brokers(all)) {
  const out = new Map<Side, { n: ReturnType<typeof counter>; c: MqttClient }>();
  for (const s of sides) {
    const n = counter();
    const up = all.upstream[s.name as 'gatewayd' | 'gatewayd-spent' | 'mosquitto'];
    const c = mqtt.connect({ host: '127.0.0.1', port: up.port, clientId: `flash-up-${s.name}-${Date.now()}`, reconnectPeriod: 0 });
    c.on('message', n.on);
    await new Promise((r) => c.once('connect', r));
    await c.subscribeAsync(`${s.upstreamPrefix}bench/up/#`, { qos: 1 });
    out.set(s, { n, c });
  }
  return out;
}

const bridge: Scenario = async (all) => {
  const ups = await upstreamCounters(all);
  const pubs = await Promise.all(brokers(all).map((s) => client(s, 'flash-pub-bridge')));
  for (const s of brokers(all)) await s.linked!(true);
  for (const [i, s] of brokers(all).entries()) await warmUp(pubs[i]!, (k) => `bench/up/line/${k % 10}`, 1, ups.get(s)!.n);
  await sleep(SETTLE_MS);
  const w = await window(all, brokers(all), async (s, mark) => {
    const up = ups.get(s)!.n;
    const from = up.count;
    await pacedPublish(pubs[brokers(all).indexOf(s)]!, MESSAGES, (i) => `bench/up/line/${i % 10}`, { qos: 1 });
    await up.reached(from + MESSAGES, 60_000, `${s.name} forwarded`);
    return { delivered: up.count - from, cpu: mark() };
  });
  for (const p of pubs) await p.endAsync();
  for (const u of ups.values()) await u.c.endAsync();
  return [{ id: 'bridge', label: 'QoS 1 through a bridge, uplink up', units: MESSAGES, unitName: 'msg', unitRate: RATE, target: { bytesPerUnit: 100 }, windowSeconds: w.seconds, sides: w.sides }];
};

const outage: Scenario = async (all) => {
  const sides = [...brokers(all), all.spent];
  const ups = await upstreamCounters(all, sides);
  const pubs = await Promise.all(sides.map((s) => client(s, 'flash-pub-outage')));
  for (const s of sides) await s.linked!(true);
  await sleep(SETTLE_MS);
  const w = await window(all, sides, async (s) => {
    const up = ups.get(s)!.n;
    const from = up.count;
    const cutAt = performance.now();
    s.proxy!.cut();
    await s.linked!(false);
    await pacedPublish(pubs[sides.indexOf(s)]!, MESSAGES, (i) => `bench/up/line/${i % 10}`, { qos: 1 });
    await sleep(Math.max(0, cutAt + OUTAGE_S * 1000 - performance.now()));
    s.proxy!.restore();
    await up.reached(from + MESSAGES, 120_000, `${s.name} drained`);
    return { delivered: up.count - from };
  });
  for (const p of pubs) await p.endAsync();
  for (const u of ups.values()) await u.c.endAsync();
  return burstAndSustained({ id: 'outage', label: `QoS 1 through a bridge, ${OUTAGE_S} s uplink outage and drain`, units: MESSAGES, unitName: 'msg', unitRate: RATE, target: { bytesPerUnit: 2048 }, windowSeconds: w.seconds }, w.sides);
};

/** What the web UI's overview asks while open (ui/src/pages/overview.tsx: its cards, and the charts' polling of /api/dashboard?since=…), all of it every UI_POLL_S. */
async function pollLikeTheUi(api: GatewaydApi, token: string, since: { t: number }): Promise<void> {
  const paths = [`/api/dashboard?since=${since.t}`, '/api/listUsers?rowsPerPage=1&pageNumber=1&excludeAutoGenerated=true', '/api/client-registry/status', '/api/client-registry', '/api/connections', '/api/endpoints', '/api/maintenance/db'];
  for (const path of paths) {
    const res = await api.get(path, token);
    if (res.status !== 200) throw new Error(`UI poll ${path}: ${res.status} ${JSON.stringify(res.body)}`);
    const times = path.startsWith('/api/dashboard') ? (res.body as { times: number[] }).times : [];
    if (times.length) since.t = times[times.length - 1]!;
  }
}

const reference: Scenario = async (all) => {
  const ups = await upstreamCounters(all);
  const bridged = await Promise.all(brokers(all).map((s) => client(s, 'flash-pub-reference-bridge')));
  const tags = await Promise.all(brokers(all).map((s) => client(s, 'flash-pub-reference-tags')));
  for (const s of brokers(all)) await s.linked!(true);
  const api = all.gatewayd.api!;
  const uiToken = await api.login(); // the UI's session, signed in before
  await sleep(SETTLE_MS);
  const messages = REFERENCE_S * RATE;
  const w = await window(all, brokers(all), async (s) => {
    const i = brokers(all).indexOf(s);
    const up = ups.get(s)!.n;
    const from = up.count;
    const t0 = performance.now();
    const flows: Promise<void>[] = [];
    if (REFERENCE_PARTS.has('bridge')) flows.push(pacedPublish(bridged[i]!, messages, (k) => `bench/up/line/${k % 10}`, { qos: 1 }));
    if (REFERENCE_PARTS.has('retained')) flows.push(pacedPublish(tags[i]!, messages, (k) => `bench/local/plant/tag/${k % REFERENCE_RETAINED_TOPICS}`, { qos: 0, retain: true }));
    if (s.name === 'gatewayd') {
      // The UI open the whole time, and a login a minute.
      if (REFERENCE_PARTS.has('ui'))
        flows.push(
          (async () => {
          const since = { t: Date.now() };
          for (let k = 0; k < Math.ceil(REFERENCE_S / UI_POLL_S); k++) {
            await pollLikeTheUi(api, uiToken, since);
            await sleep(Math.max(0, t0 + (k + 1) * UI_POLL_S * 1000 - performance.now()));
          }
        })(),
        );
      if (REFERENCE_PARTS.has('login'))
        flows.push(
          (async () => {
          for (let k = 0; k < Math.floor(REFERENCE_S / LOGIN_EVERY_S); k++) {
            await sleep(Math.max(0, t0 + (k + 0.5) * LOGIN_EVERY_S * 1000 - performance.now()));
            await api.login();
          }
        })(),
        );
    }
    await Promise.all(flows);
    if (REFERENCE_PARTS.has('bridge')) await up.reached(from + messages, 60_000, `${s.name} forwarded`);
    return { delivered: up.count - from };
  });
  for (const c of [...bridged, ...tags]) await c.endAsync();
  for (const u of ups.values()) await u.c.endAsync();
  const length = REFERENCE_S % 60 === 0 ? `${REFERENCE_S / 60} min` : `${REFERENCE_S} s`;
  return [
    {
      id: 'reference',
      label: `reference workload, ${length}${REFERENCE_PARTS.size === 4 ? '' : ` (only ${[...REFERENCE_PARTS].join(' + ')})`}`,
      units: 0,
      unitName: 's',
      unitRate: 1,
      target: { bytesPerSecond: 4000 },
      // Per second of the load (the trailing wait's writes belong to it): conservative.
      windowSeconds: REFERENCE_S,
      sides: w.sides,
    },
  ];
};

const SCENARIO_LIST: [string, Scenario][] = [
  ['idle', idle],
  ['qos0', onlineFlow('qos0', 'QoS 0 to an online subscriber', 0, true, false, 100)],
  ['qos1', onlineFlow('qos1', 'QoS 1 to an online clean subscriber', 1, true, true, 100)],
  ['connect', connects],
  ['persistent', onlineFlow('persistent', 'QoS 1 to an online persistent subscriber', 1, false, true, 100)],
  ['offline', offline],
  ['retained', retained],
  ['bridge', bridge],
  ['outage', outage],
  ['reference', reference],
];

const fmt = (n: number, digits = 0) => (Number.isFinite(n) ? n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits }) : '∞');
const years = (y: number) => (Number.isFinite(y) ? (y >= 1000 ? '>1,000' : fmt(y, y < 10 ? 1 : 0)) : '∞');

/** Bytes per unit (or per second), and the projected years of both flashes at the scenario's rate. */
function figures(row: Row, m: Measured) {
  const perUnit = row.units > 0 ? m.bytes / row.units : m.bytes / row.windowSeconds;
  const perSecond = perUnit * row.unitRate;
  return { perUnit, perSecond, tlcYears: projectedYears(TLC, perSecond), pslcYears: projectedYears(PSLC, perSecond) };
}

function report(rows: Row[], results: Record<string, number>, mosquittoDbBytes: number): void {
  const traced = rows.some((r) => r.sides.some((m) => m.traced));
  const table: string[][] = [['scenario', 'window s', 'gatewayd', 'TLC y', 'pSLC y', ...(traced ? ['syscall blocks'] : []), 'LMDB commits + journal frames', 'log lines', 'Mosquitto', 'TLC y', 'pSLC y', 'target', 'met']];
  for (const row of rows) {
    const cells: string[] = [row.label, fmt(row.windowSeconds)];
    let met = '';
    for (const name of ['gatewayd', 'mosquitto'] as const) {
      const m = row.sides.find((x) => x.side === (name === 'gatewayd' ? (row.gatewayd ?? 'gatewayd') : name));
      if (!m) {
        cells.push('-', '-', '-', ...(name === 'gatewayd' ? ['-', '-', ...(traced ? ['-'] : [])] : []));
        continue;
      }
      const f = figures(row, m);
      cells.push(`${fmt(f.perUnit, f.perUnit < 10 ? 1 : 0)} B/${row.unitName}`, years(f.tlcYears), years(f.pslcYears));
      if (name === 'gatewayd') {
        if (traced) cells.push(m.traced ? `${fmt(m.traced.blockBytes / (row.units || row.windowSeconds), 0)} B/${row.unitName}, ${m.traced.syncs} syncs` : '-');
        cells.push(m.storage ? `${m.storage.commits}${m.storage.journalCommits ? ` + ${m.storage.journalCommits} journal frames` : ''} (${m.storage.committed} writes, ${m.storage.cancelled} cancelled)` : '-', String(m.logLines ?? '-'));
        const limit = row.target?.bytesPerUnit ?? row.target?.bytesPerSecond;
        if (limit !== undefined) met = f.perUnit <= limit ? 'yes' : 'NO';
      }
    }
    const t = row.target?.bytesPerUnit !== undefined ? `≤ ${fmt(row.target.bytesPerUnit)} B/${row.unitName}` : row.target?.bytesPerSecond !== undefined ? `≤ ${fmt(row.target.bytesPerSecond)} B/s` : '';
    table.push([...cells, t, met]);
    for (const m of row.sides) {
      const key = `${m.side.replace(/\W/g, '_')}_${row.id}`;
      results[`${key}_bytes`] = m.bytes;
      results[`${key}_bytes_per_${row.unitName}`] = figures(row, m).perUnit;
      if (m.cpuUsPerMessage !== undefined) results[`${key}_cpu_us_per_msg`] = m.cpuUsPerMessage;
      if (m.netCpuUsPerMessage !== undefined) results[`${key}_net_cpu_us_per_msg`] = m.netCpuUsPerMessage;
      results[`${key}_cpu_us_per_s`] = m.cpuUsPerSecond;
      if (m.traced) results[`${key}_syscall_block_bytes`] = m.traced.blockBytes;
    }
  }
  console.log(`\nBytes each broker process caused to be written (/proc/<pid>/io write_bytes over the window; per ${RATE} msg/s for the years: 8 GB eMMC, write amplification 3, TLC 1,000 / pSLC 20,000 cycles)`);
  console.log(`reference workload: 100 QoS 1 msg/s through the bridge + 100 retained QoS 0/s (${REFERENCE_RETAINED_TOPICS} topics) + the web UI open (its overview's requests every ${UI_POLL_S} s) + a login a minute; Mosquitto does the MQTT part`);
  console.log(`windows: the work, then ${fmt(TRAILING_MS / 1000, 1)} s (storage.backgroundCommitMs ${TIMINGS.backgroundCommitMs} + holdMs ${TIMINGS.holdMs} + 2 × commitIntervalMs ${TIMINGS.commitIntervalMs} + 1 s); settle ${fmt(SETTLE_MS / 1000, 1)} s before each`);
  const widths = table[0]!.map((_, c) => Math.max(...table.map((r) => r[c]!.length)));
  for (const r of table) console.log(r.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join('  '));
  console.log('\nDelivered / forwarded in each window; broker CPU per message from the first publish to the last arrival (µs, after a warm-up of 1,000; less the idle CPU of the idle window), and the process\'s CPU over the window. A shared machine: indicative only.');
  for (const row of rows) {
    const parts = row.sides.map((m) => {
      const cpu = m.cpuUsPerMessage === undefined ? '' : `, ${fmt(m.cpuUsPerMessage, 1)} µs/msg${m.netCpuUsPerMessage === undefined ? '' : ` (${fmt(m.netCpuUsPerMessage, 1)} less idle)`}`;
      return `${m.side} ${m.delivered ?? '-'}${cpu}, ${fmt(m.cpuUsPerSecond / 1e4, 1)} % CPU${m.cancelledBytes ? `, cancelled_write_bytes ${fmt(m.cancelledBytes)}` : ''}`;
    });
    console.log(`  ${row.label}: ${parts.join('; ')}`);
  }
  if (traced) {
    console.log('\ngatewayd\'s file writes at its system calls (4 KiB blocks touched, by file; syncs):');
    for (const row of rows) {
      const t = row.sides.find((m) => m.side === (row.gatewayd ?? 'gatewayd'))?.traced;
      if (t) console.log(`  ${row.label}: ${fmt(t.blockBytes)} B in blocks (${fmt(t.bytes)} B written), ${t.syncs} syncs; ${[...t.byFile].map(([f, b]) => `${f} ${fmt(b)}`).join(', ') || 'no file'}`);
    }
  }
  console.log(`Mosquitto's persistence file at its stop: ${fmt(mosquittoDbBytes)} B (its autosave writes this every autosave_interval, 1,800 s by default; not inside any window)`);
  results.mosquitto_db_bytes_at_stop = mosquittoDbBytes;
}

export async function benchFlash(): Promise<Record<string, number>> {
  const upstream = { gatewayd: await startMosquitto(), 'gatewayd-spent': await startMosquitto(), mosquitto: await startMosquitto() };
  const proxies = {
    gatewayd: await startTcpProxy({ port: upstream.gatewayd.port }),
    'gatewayd-spent': await startTcpProxy({ port: upstream['gatewayd-spent'].port }),
    mosquitto: await startTcpProxy({ port: upstream.mosquitto.port }),
  };
  const saved = { dbBytes: NaN };
  const started: Side[] = [];
  const rows: Row[] = [];
  const results: Record<string, number> = {};
  try {
    const gatewayd = await gatewaydSide(proxies.gatewayd);
    started.push(gatewayd);
    const spent = await gatewaydSide(proxies['gatewayd-spent'], { GATEWAYD_SET__STORAGE__FLASH__BURST_BYTES: '0' }, 'gatewayd-spent');
    started.push(spent);
    const mosquitto = await mosquittoSide(proxies.mosquitto, saved);
    started.push(mosquitto);
    const aedes = await aedesSide();
    started.push(aedes);
    const all: Sides = { gatewayd, spent, mosquitto, aedes, upstream, idleCpuUsPerSecond: new Map() };
    console.log(`gatewayd = node ${NPM_START_FLAGS.join(' ')} dist/src/main.js (npm start), ${process.version}; Mosquitto ${mosquittoVersion()}, persistence true`);
    console.log(`${MESSAGES} messages of ${PAYLOAD_BYTES} B at ${RATE} msg/s per scenario; storage ${JSON.stringify(TIMINGS)}`);
    for (const s of [gatewayd, spent, mosquitto]) await s.linked!(true);
    for (const [name, scenario] of SCENARIO_LIST) {
      if (!SCENARIOS.has(name)) continue;
      const t0 = performance.now();
      const out = await scenario(all);
      rows.push(...out);
      for (const row of out) {
        const g = row.sides.find((m) => m.side === (row.gatewayd ?? 'gatewayd'));
        const q = row.sides.find((m) => m.side === 'mosquitto');
        console.log(`${row.label}: gatewayd ${g ? fmt(figures(row, g).perUnit, 1) : '-'} B/${row.unitName}, Mosquitto ${q ? fmt(figures(row, q).perUnit, 1) : '-'} B/${row.unitName} (window ${fmt(row.windowSeconds)} s; ${fmt((performance.now() - t0) / 1000)} s with setup and settle)`);
      }
    }
  } finally {
    for (const s of [...started].reverse()) await s.stop().catch((err: unknown) => console.error(`stopping ${s.name}:`, err));
    for (const p of Object.values(proxies)) await p.close();
    for (const u of Object.values(upstream)) await u.close();
  }
  for (const m of rows.flatMap((r) => r.sides)) {
    const trace = started.find((s) => s.name === m.side)?.trace;
    if (trace) m.traced = trace.between(m.fromMs, m.toMs);
  }
  for (const s of started) s.cleanUp?.();
  report(rows, results, saved.dbBytes);
  return results;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  benchFlash().then(
    () => process.exit(0),
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
}
