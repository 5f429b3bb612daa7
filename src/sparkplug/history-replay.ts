// Delivers what an edge node kept while its host could not get it live (node-history.ts), once the
// node and its devices are born again: DDATA whose metrics carry is_historical and each its own
// acquisition time, in the order they were kept (per device), each message with the next seq like
// any other. A device's live DDATA resume once everything kept has gone out (edge-devices.ts).
//
// What "delivered" means: DDATA are QoS 0 (Sparkplug 3.0, tck-id-payloads-ddata-qos), so no
// acknowledgement comes for them. After each slice a PINGREQ goes out on the same connection and
// only its PINGRESP makes the slice leave the history: a broker handles a connection's packets in
// order, so it has read every DDATA before the PINGREQ and passed each to the subscribers it had
// then. A session that ends before the PINGRESP keeps the slice: it goes again after the next
// births (a host may get a value twice, never loses one to a cut link).
import type { Logger } from '../log/index.js';
import type { Timers } from '../mapping/drivers/types.js';
import { errorText } from '../mapping/runtime-context.js';
import type { DeviceSlot, EdgeDevices, MetricSlot } from './edge-devices.js';
import { DATATYPES, putValue, QUALITY, qualityProperty, valueOf, ValueError } from './metric-values.js';
import { KEPT_QUALITY, type KeptValue, type NodeHistory } from './node-history.js';
import type { MetricMessage } from './payload-codec.js';

/** Kept values read at once. */
const SLICE = 2000;
/** Metrics in one historical DDATA at most (about 12 KB). */
const METRICS_PER_MESSAGE = 500;

export interface ReplayDeps {
  history: NodeHistory;
  devices: EdgeDevices;
  /** Publishes one DDATA with the next seq; false when it did not go (not born, runAs may not). */
  send(deviceId: string, metrics: MetricMessage[]): boolean;
  /** Which MQTT session is current (a new one at every CONNECT). */
  sessionId(): number;
  /** Resolves once the broker has read everything `sessionId` published so far; rejects when that session is over. */
  confirm(sessionId: number): Promise<void>;
  nodeBorn(): boolean;
  /** Historical metrics carry their datatype too (as live ones, datatypeInData). */
  datatypeInData: boolean;
  timers: Timers;
  log: Logger;
}

/** A kept value as a historical metric of `slot`; throws ValueError when it no longer fits the metric's datatype. */
export function historicalMetric(slot: MetricSlot, kept: KeptValue, withDatatype: boolean): MetricMessage {
  const msg: MetricMessage = { alias: slot.alias, timestamp: kept.timestamp, isHistorical: true };
  if (withDatatype) msg.datatype = DATATYPES[slot.type];
  putValue(msg, slot.type, valueOf(slot.type, kept.value));
  if (kept.quality === KEPT_QUALITY.BAD) msg.properties = qualityProperty(QUALITY.BAD);
  else if (kept.quality === KEPT_QUALITY.RECOVERED) msg.properties = qualityProperty(QUALITY.GOOD);
  return msg;
}

export class HistoryReplay {
  private running = false;
  private again = false;
  private stopped = true;
  private wake: (() => void) | undefined;

  constructor(private readonly deps: ReplayDeps) {}

  start(): void {
    this.stopped = false;
  }

  stop(): void {
    this.stopped = true;
    this.wake?.();
  }

  /** A device was born with values kept: deliver them (once more after the pass under way, if one is). */
  kick(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    void this.run().finally(() => (this.running = false));
  }

  private async run(): Promise<void> {
    do {
      this.again = false;
      try {
        await this.pass();
      } catch (err) {
        this.deps.log.warn('sparkplug history not delivered', { id: this.deps.history.id, error: errorText(err) });
      }
    } while (this.again && !this.stopped);
  }

  /** One pass over the kept values, oldest first: every one of a born device goes out. */
  private async pass(): Promise<void> {
    const { history, devices, log } = this.deps;
    const session = this.deps.sessionId();
    const live = () => !this.stopped && this.deps.nodeBorn() && this.deps.sessionId() === session;
    let cursor = 0;
    const startedWith = history.size;
    while (live()) {
      const slice = history.read(cursor, SLICE);
      const atEnd = slice.length < SLICE;
      const groups = new Map<DeviceSlot, { metrics: MetricMessage[]; kept: KeptValue[] }>();
      const unfit: KeptValue[] = [];
      for (const kept of slice) {
        const device = devices.byId.get(kept.deviceId);
        const slot = device?.metrics.find((m) => m.def.name === kept.metric);
        if (!device || !slot) {
          unfit.push(kept);
          continue;
        }
        // A device that is not born keeps its values for its next DBIRTH.
        if (!device.born) continue;
        let metric: MetricMessage;
        try {
          metric = historicalMetric(slot, kept, this.deps.datatypeInData);
        } catch (err) {
          if (!(err instanceof ValueError)) throw err;
          unfit.push(kept);
          continue;
        }
        let group = groups.get(device);
        if (!group) groups.set(device, (group = { metrics: [], kept: [] }));
        group.metrics.push(metric);
        group.kept.push(kept);
      }
      history.discard(unfit, 'notInDefinition');
      // Published in one turn of the event loop, so nothing is kept between this read and the end of the replay.
      const sent: KeptValue[] = [];
      let complete = true;
      send: for (const [device, group] of groups) {
        for (let i = 0; i < group.metrics.length; i += METRICS_PER_MESSAGE) {
          if (!devices.rate.take()) {
            complete = false;
            break send;
          }
          if (!this.deps.send(device.deviceId, group.metrics.slice(i, i + METRICS_PER_MESSAGE))) return;
          sent.push(...group.kept.slice(i, i + METRICS_PER_MESSAGE));
        }
      }
      // Everything kept is out: live DDATA resume, after these on the same connection.
      if (complete && atEnd) devices.replayDone();
      if (sent.length) {
        try {
          await this.deps.confirm(session);
        } catch {
          return; // the session ended first: they stay, and go again after the next births
        }
        history.delivered(sent);
      }
      if (complete && atEnd) break;
      // Not all published (maxMessagesPerSecond): read again from here once a token is there.
      if (complete) cursor = slice.at(-1)!.seq + 1;
      else await this.pause(devices.rate.msUntilToken());
    }
    if (startedWith > 0 && live()) log.info('sparkplug history delivered', { id: history.id, kept: history.size });
  }

  private pause(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const timer = this.deps.timers.setTimeout(() => {
        this.wake = undefined;
        resolve();
      }, Math.max(1, ms));
      this.wake = () => {
        this.deps.timers.clearTimeout(timer);
        this.wake = undefined;
        resolve();
      };
    });
  }
}
