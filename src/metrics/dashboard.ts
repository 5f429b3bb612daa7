// The dashboard's last hour (docs/design.md §14): a ring in memory, one sample every intervalMs (10 s)
// for windowMs (an hour: 360 samples), read from the same counters as /metrics and $SYS. Rates
// are the difference of two samples; gauges are read as they are. Fixed-size typed arrays: the
// ring never grows, and GET /api/dashboard copies at most one window out of it.
import type { Part } from '../daemon.js';
import type { FlashStatus } from '../storage/index.js';
import type { BrokerMetricsSource } from './metrics.js';

export type DashboardUnit = 'count' | 'per-second' | 'bytes' | 'bytes-per-second' | 'percent';

export interface DashboardSources {
  broker: () => BrokerMetricsSource | undefined;
  logins: () => { succeeded: number; failed: number };
  /**
   * Messages the gateway itself put on its broker (the data plane: mapping readings and routes,
   * bridges bringing messages in): counted with what clients sent in "Messages in".
   */
  dataPlanePublished?: () => number;
  freeDiskBytes: () => Promise<number | undefined>;
  /** Messages waiting in bridge queues, when bridges exist (absent: no series). */
  bridgeQueued?: () => number | undefined;
  /** Bytes this process caused to be written to the block device (/proc/self/io write_bytes). */
  writtenBytes?: () => number | undefined;
  /** The flash's projected life at the last hour's write rate, and the wear budget (src/storage/flash-wear.ts). */
  flash?: () => FlashStatus;
  /** Process CPU time and resident memory (defaults: this process). */
  cpuMicros?: () => number;
  rssBytes?: () => number;
}

export interface DashboardSeries {
  id: string;
  label: string;
  unit: DashboardUnit;
  values: (number | null)[];
}

export interface DashboardView {
  intervalSeconds: number;
  windowSeconds: number;
  /** Epoch ms of each sample, oldest first. */
  times: number[];
  series: DashboardSeries[];
  /** Writes to the flash, its projected life and the wear budget (when the gateway knows its flash). */
  flash?: FlashStatus;
}

export interface Dashboard {
  /** Takes one sample now (the part does it every intervalMs). */
  sample(): Promise<void>;
  /** The samples after `since` (epoch ms), oldest first. */
  view(since?: number): DashboardView;
  part: Part;
}

interface Reading {
  at: number;
  clients?: number;
  received?: number;
  sent?: number;
  bytesIn?: number;
  bytesOut?: number;
  dropped?: number;
  loginFailures: number;
  cpu: number;
  rss: number;
  freeDisk?: number;
  bridgeQueued?: number;
  written?: number;
}

interface SeriesSpec {
  id: string;
  label: string;
  unit: DashboardUnit;
  /** The value of a sample from the reading before it (undefined at the first) and the reading. */
  value: (prev: Reading | undefined, cur: Reading) => number | undefined;
  /** Shown only while its source exists. */
  optional?: true;
}

const perSecond = (pick: (r: Reading) => number | undefined) => (prev: Reading | undefined, cur: Reading) => {
  const a = prev && pick(prev);
  const b = pick(cur);
  if (a === undefined || b === undefined || cur.at <= prev!.at || b < a) return undefined;
  return (b - a) / ((cur.at - prev!.at) / 1000);
};
const perInterval = (pick: (r: Reading) => number | undefined) => (prev: Reading | undefined, cur: Reading) => {
  const a = prev && pick(prev);
  const b = pick(cur);
  return a === undefined || b === undefined || b < a ? undefined : b - a;
};

function specs(intervalSeconds: number): SeriesSpec[] {
  const per = `per ${intervalSeconds} s`;
  return [
    { id: 'clients', label: 'Connected clients', unit: 'count', value: (_p, c) => c.clients },
    // Clients' publishes and the data plane's (mapping, bridges): what reached the broker.
    { id: 'messagesIn', label: 'Messages in', unit: 'per-second', value: perSecond((r) => r.received) },
    { id: 'messagesOut', label: 'Messages out', unit: 'per-second', value: perSecond((r) => r.sent) },
    { id: 'bytesIn', label: 'Bytes in', unit: 'bytes-per-second', value: perSecond((r) => r.bytesIn) },
    { id: 'bytesOut', label: 'Bytes out', unit: 'bytes-per-second', value: perSecond((r) => r.bytesOut) },
    { id: 'dropped', label: `Dropped messages (${per})`, unit: 'count', value: perInterval((r) => r.dropped) },
    { id: 'loginFailures', label: `Login failures (${per})`, unit: 'count', value: perInterval((r) => r.loginFailures) },
    { id: 'bridgeQueued', label: 'Bridge queues', unit: 'count', value: (_p, c) => c.bridgeQueued, optional: true },
    {
      id: 'cpu',
      label: 'CPU (of one core)',
      unit: 'percent',
      value: (p, c) => (p && c.at > p.at && c.cpu >= p.cpu ? ((c.cpu - p.cpu) / 1000 / (c.at - p.at)) * 100 : undefined),
    },
    { id: 'rss', label: 'Memory (RSS)', unit: 'bytes', value: (_p, c) => c.rss },
    { id: 'freeDisk', label: 'Free disk', unit: 'bytes', value: (_p, c) => c.freeDisk },
    { id: 'flashWrites', label: 'Written to flash', unit: 'bytes-per-second', value: perSecond((r) => r.written), optional: true },
  ];
}

export function createDashboard(deps: { sources: DashboardSources; intervalMs: number; windowMs: number; now?: () => number }): Dashboard {
  const { sources } = deps;
  const now = deps.now ?? Date.now;
  const cpuMicros = sources.cpuMicros ?? (() => {
    const u = process.cpuUsage();
    return u.user + u.system;
  });
  const rssBytes = sources.rssBytes ?? (() => process.memoryUsage.rss());
  const intervalSeconds = Math.round(deps.intervalMs / 1000);
  const capacity = Math.max(2, Math.ceil(deps.windowMs / deps.intervalMs));
  const all = specs(Math.max(1, intervalSeconds));
  const times = new Float64Array(capacity);
  // NaN: unknown (JSON null).
  const columns = all.map(() => new Float64Array(capacity).fill(Number.NaN));
  let size = 0;
  let head = 0; // next slot to write
  let previous: Reading | undefined;
  let timer: NodeJS.Timeout | undefined;
  let sampling: Promise<void> | undefined;

  async function read(): Promise<Reading> {
    const b = sources.broker();
    const logins = sources.logins();
    const freeDisk = await sources.freeDiskBytes().catch(() => undefined);
    return {
      at: now(),
      clients: b?.clients,
      received: b?.messagesReceived === undefined ? undefined : b.messagesReceived + (sources.dataPlanePublished?.() ?? 0),
      sent: b?.messagesSent,
      bytesIn: b?.bytesReceived,
      bytesOut: b?.bytesSent,
      dropped: b?.queueDrops,
      loginFailures: logins.failed,
      cpu: cpuMicros(),
      rss: rssBytes(),
      freeDisk,
      bridgeQueued: sources.bridgeQueued?.(),
      written: sources.writtenBytes?.(),
    };
  }

  async function sample(): Promise<void> {
    const cur = await read();
    times[head] = cur.at;
    all.forEach((s, i) => {
      const v = s.value(previous, cur);
      columns[i]![head] = v === undefined || !Number.isFinite(v) ? Number.NaN : v;
    });
    previous = cur;
    head = (head + 1) % capacity;
    size = Math.min(size + 1, capacity);
  }

  function view(since?: number): DashboardView {
    const out: number[] = [];
    const slots: number[] = [];
    for (let i = 0; i < size; i++) {
      const slot = (head - size + i + capacity) % capacity;
      if (since !== undefined && times[slot]! <= since) continue;
      slots.push(slot);
      out.push(times[slot]!);
    }
    const series: DashboardSeries[] = [];
    all.forEach((s, i) => {
      const column = columns[i]!;
      const values = slots.map((slot) => (Number.isNaN(column[slot]!) ? null : Math.round(column[slot]! * 100) / 100));
      // A series with no value in the window (no bridge ran) is left out rather than drawn empty.
      if (s.optional && values.every((v) => v === null)) return;
      series.push({ id: s.id, label: s.label, unit: s.unit, values });
    });
    const flash = sources.flash?.();
    return { intervalSeconds: deps.intervalMs / 1000, windowSeconds: Math.round((capacity * deps.intervalMs) / 1000), times: out, series, ...(flash ? { flash } : {}) };
  }

  const tick = () => {
    // One sample at a time: a slow statfs never piles up samples.
    sampling ??= sample().finally(() => (sampling = undefined));
  };

  return {
    sample,
    view,
    part: {
      name: 'dashboard',
      start: async () => {
        await sample();
        timer = setInterval(tick, deps.intervalMs);
        timer.unref();
      },
      stop: async () => {
        clearInterval(timer);
        await sampling;
      },
    },
  };
}
