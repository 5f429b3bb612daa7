// The devices of an edge node and their metrics: current values and quality, aliases, what the
// host has been told in this Sparkplug session (report by exception), and when a device is born
// (DBIRTH) or dead (DDEATH). The session (edge-session.ts) says when the node is born; the
// resource (sparkplug-resource.ts) feeds readings, read failures and liveness from endpoints.
// While the node is not born, the changes it would have reported are kept (node-history.ts),
// and after its births a device's live DDATA wait until they are delivered (history-replay.ts).
import { DATATYPES, jsonOf, putValue, QUALITY, qualityProperty, valueOf, ValueError, type DatatypeName, type MetricValue } from './metric-values.js';
import { KEPT_QUALITY, type KeptJson, type KeptQuality } from './node-history.js';
import type { MetricMessage } from './payload-codec.js';
import type { SparkplugDeviceDef, SparkplugMetricDef } from '../mapping/service-files.js';
import type { Timers } from '../mapping/drivers/types.js';
import { TokenBucket } from '../mqtt/limits.js';

export interface MetricSlot {
  readonly def: SparkplugMetricDef;
  readonly type: DatatypeName;
  /** Unique across the edge node; every DATA and CMD message names the metric by it. */
  readonly alias: number;
  value: MetricValue;
  /** The last reading failed or did not fit the datatype: Quality BAD until a good one. */
  bad: boolean;
  /** Why it is bad. */
  error: string | undefined;
  /** When the value (or the failure) was acquired, epoch ms; 0: never. */
  timestamp: number;
  /** A reading or a failure arrived since the device came (back) up. */
  fresh: boolean;
  /** What the host was told in this session (undefined: not yet, or the device is not born). */
  reported: { value: MetricValue; bad: boolean } | undefined;
  /** What the host has been or will be told, live or by the kept values (undefined: nothing yet). */
  told: { value: MetricValue; bad: boolean } | undefined;
}

export interface DeviceSlot {
  readonly deviceId: string;
  readonly metrics: MetricSlot[];
  /** Every endpoint it reads and writes through is enabled (its connections are up). */
  alive: boolean;
  /** A DBIRTH was published in the current session (and no DDEATH since). */
  born: boolean;
  /** Born while values kept for the node were waiting: its live DDATA wait until they are delivered. */
  replaying: boolean;
  /** The bounded wait for fresh readings before a DBIRTH (a timer handle). */
  waiting: unknown;
}

/** Where device messages go: the session, which adds seq and timestamp and publishes. */
export interface DeviceOutlet {
  /** The NBIRTH of the current session is out. */
  nodeBorn(): boolean;
  /** Not born for a reason (edge-session.ts awayFromHost): what is read is kept. */
  awayFromHost(): boolean;
  /** Publishes one device message; false when it was not sent (not born, not permitted). */
  send(type: 'DBIRTH' | 'DDATA' | 'DDEATH', deviceId: string, metrics: MetricMessage[]): boolean;
}

/** Metrics in the order of their timestamps (Sparkplug 3.0, tck-id-operational-behavior-data-publish-dbirth-order); a stable sort: ties keep the definition's order. */
const chronological = (metrics: MetricMessage[]) => metrics.sort((a, b) => a.timestamp! - b.timestamp!);

/** Where values go while the host cannot get them live (node-history.ts, delivered by history-replay.ts). */
export interface HistoryOutlet {
  /** Values are kept (the resource's history.enabled). */
  readonly keeping: boolean;
  keep(deviceId: string, metric: string, timestamp: number, value: KeptJson, quality: KeptQuality): void;
  /** Values kept and not delivered yet. */
  readonly size: number;
  /** A device was born while values were kept: deliver them. */
  deviceBorn(): void;
}

export class EdgeDevices {
  readonly devices: DeviceSlot[];
  readonly byId = new Map<string, DeviceSlot>();
  private readonly dirty = new Set<DeviceSlot>();
  private flushing = false;
  private flushTimer: unknown;

  constructor(
    defs: SparkplugDeviceDef[],
    private readonly outlet: DeviceOutlet,
    private readonly timers: Timers,
    private readonly options: {
      /** How long a device that comes up waits for fresh readings before its DBIRTH. */
      birthWaitMs: number;
      /** How long a DDATA gathers changes (0: those of the same I/O turn). */
      aggregateMs: number;
      /** DDATA per second at most; beyond, changes wait and are gathered. */
      maxMessagesPerSecond: number;
      /** DDATA metrics carry their datatype (what Tahu's decoder needs), not only birth metrics. */
      datatypeInData: boolean;
    },
    private readonly history?: HistoryOutlet,
  ) {
    let alias = 0;
    this.devices = defs.map((d) => ({
      deviceId: d.deviceId,
      metrics: d.metrics.map((m) => ({ def: m, type: m.datatype, alias: ++alias, value: null, bad: false, error: undefined, timestamp: 0, fresh: false, reported: undefined, told: undefined })),
      alive: false,
      born: false,
      replaying: false,
      waiting: undefined,
    }));
    for (const d of this.devices) this.byId.set(d.deviceId, d);
    this.rate = new TokenBucket(options.maxMessagesPerSecond);
  }

  /** DDATA per second, live and historical. */
  readonly rate: TokenBucket;

  /** A reading of a metric's endpoint (after its filter and transform). */
  reading(device: DeviceSlot, slot: MetricSlot, reading: unknown, at: number): void {
    try {
      slot.value = valueOf(slot.type, reading);
      slot.bad = false;
      slot.error = undefined;
    } catch (err) {
      if (!(err instanceof ValueError)) throw err;
      slot.bad = true;
      slot.error = err.message;
    }
    this.acquired(device, slot, at);
  }

  /** A read of a metric's endpoint failed: the value stays, its quality is BAD. */
  readFailed(device: DeviceSlot, slot: MetricSlot, error: string, at: number): void {
    slot.bad = true;
    slot.error = error;
    this.acquired(device, slot, at);
  }

  /** A value written through the metric's endpoint (a DCMD), acknowledged by the endpoint. */
  written(device: DeviceSlot, slot: MetricSlot, value: MetricValue, at: number): void {
    slot.value = value;
    slot.bad = false;
    slot.error = undefined;
    this.acquired(device, slot, at);
  }

  private acquired(device: DeviceSlot, slot: MetricSlot, at: number): void {
    slot.timestamp = at;
    slot.fresh = true;
    if (this.history?.keeping && (this.outlet.awayFromHost() || device.replaying)) this.keep(device, slot);
    if (device.born) this.markDirty(device);
    else this.tryBirth(device, false);
  }

  /** Its endpoints went up or down: DDEATH when it goes, DBIRTH once it is back and read. */
  setAlive(device: DeviceSlot, alive: boolean): void {
    if (device.alive === alive) return;
    device.alive = alive;
    if (!alive) {
      this.cancelWait(device);
      if (device.born) this.outlet.send('DDEATH', device.deviceId, []);
      this.unborn(device);
      return;
    }
    // Back up: its values are from before; the DBIRTH waits (bounded) for fresh ones.
    for (const m of device.metrics) m.fresh = false;
    device.waiting = this.timers.setTimeout(() => {
      device.waiting = undefined;
      this.tryBirth(device, true);
    }, this.options.birthWaitMs);
    this.tryBirth(device, false);
  }

  /** The node was born (rebirth: again, at a host's request): DBIRTH for every device that is up. */
  nodeBorn(rebirth: boolean): void {
    for (const d of this.devices) {
      const wasBorn = d.born;
      this.unborn(d);
      this.tryBirth(d, rebirth && wasBorn);
    }
  }

  /** The session is over (NDEATH): no device is born any more; changes the host was not told yet are kept. */
  sessionEnded(): void {
    for (const d of this.devices) {
      if (d.born && this.history?.keeping) for (const m of d.metrics) this.keep(d, m);
      this.unborn(d);
    }
  }

  /** The node is away from its host now: the current values of the devices that are up are kept (those the host was not told). */
  nodeAway(): void {
    if (!this.history?.keeping) return;
    for (const d of this.devices) if (d.alive) for (const m of d.metrics) this.keep(d, m);
  }

  /** The values kept for the node are delivered: born devices resume live DDATA (the changes since their DBIRTH). */
  replayDone(): void {
    for (const d of this.devices) {
      if (!d.replaying) continue;
      d.replaying = false;
      if (d.born) this.markDirty(d);
    }
  }

  /** Keeps a metric's value when the host has not been told it (by exception, as live DDATA would). */
  private keep(device: DeviceSlot, slot: MetricSlot): void {
    const told = slot.told;
    if (slot.timestamp === 0 || (told && Object.is(told.value, slot.value) && told.bad === slot.bad)) return;
    const quality = slot.bad ? KEPT_QUALITY.BAD : told?.bad ? KEPT_QUALITY.RECOVERED : KEPT_QUALITY.GOOD;
    this.history!.keep(device.deviceId, slot.def.name, slot.timestamp, jsonOf(slot.value), quality);
    slot.told = { value: slot.value, bad: slot.bad };
  }

  stop(): void {
    for (const d of this.devices) this.cancelWait(d);
    if (this.flushTimer !== undefined) this.timers.clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    this.flushing = false;
    this.dirty.clear();
  }

  /** Every metric has a reading since the device came up, or `force` (the wait is over, a rebirth). */
  private tryBirth(device: DeviceSlot, force: boolean): void {
    if (device.born || !device.alive || !this.outlet.nodeBorn()) return;
    if (!force && device.waiting !== undefined && device.metrics.some((m) => !m.fresh && m.def.readEndpoint !== undefined)) return;
    this.cancelWait(device);
    const metrics = chronological(device.metrics.map((m) => this.metricMessage(m, true)));
    if (!this.outlet.send('DBIRTH', device.deviceId, metrics)) return;
    device.born = true;
    for (const m of device.metrics) m.reported = m.told = { value: m.value, bad: m.bad };
    if (this.history && this.history.size > 0) {
      device.replaying = true;
      this.history.deviceBorn();
    }
  }

  private unborn(device: DeviceSlot): void {
    device.born = false;
    device.replaying = false;
    this.dirty.delete(device);
    for (const m of device.metrics) m.reported = undefined;
  }

  private cancelWait(device: DeviceSlot): void {
    if (device.waiting !== undefined) this.timers.clearTimeout(device.waiting);
    device.waiting = undefined;
  }

  /** Changes are gathered until the current I/O callbacks are done (or aggregateMs): one DDATA per device for them. */
  private markDirty(device: DeviceSlot): void {
    this.dirty.add(device);
    this.scheduleFlush(this.options.aggregateMs);
  }

  private scheduleFlush(delayMs: number): void {
    if (this.flushing) return;
    this.flushing = true;
    const flush = () => {
      this.flushing = false;
      this.flushTimer = undefined;
      this.flush();
    };
    if (delayMs > 0) this.flushTimer = this.timers.setTimeout(flush, delayMs);
    else setImmediate(flush);
  }

  private flush(): void {
    for (const device of [...this.dirty]) {
      if (device.replaying) {
        // Its kept values go first; replayDone() makes it dirty again.
        this.dirty.delete(device);
        continue;
      }
      const changed = device.born ? device.metrics.filter((m) => m.reported && (!Object.is(m.reported.value, m.value) || m.reported.bad !== m.bad)) : [];
      if (changed.length && !this.rate.take()) {
        // Over maxMessagesPerSecond: the device stays dirty; later changes join this DDATA.
        this.scheduleFlush(Math.max(this.options.aggregateMs, this.rate.msUntilToken()));
        return;
      }
      this.dirty.delete(device);
      if (!changed.length || !this.outlet.send('DDATA', device.deviceId, chronological(changed.map((m) => this.metricMessage(m, false))))) continue;
      for (const m of changed) m.reported = m.told = { value: m.value, bad: m.bad };
    }
  }

  /**
   * A metric in a birth (name, alias, datatype) or a DATA message (alias, and the datatype unless
   * datatypeInData is off). Quality is a property when BAD, and GOOD is said again once a BAD
   * metric recovers.
   */
  private metricMessage(m: MetricSlot, birth: boolean): MetricMessage {
    const msg: MetricMessage = birth ? { name: m.def.name, alias: m.alias, datatype: DATATYPES[m.type] } : { alias: m.alias };
    if (!birth && this.options.datatypeInData) msg.datatype = DATATYPES[m.type];
    msg.timestamp = m.timestamp || Date.now();
    putValue(msg, m.type, m.value);
    if (m.bad) msg.properties = qualityProperty(QUALITY.BAD);
    else if (!birth && m.reported?.bad) msg.properties = qualityProperty(QUALITY.GOOD);
    return msg;
  }
}
