// DCMD: a host writes a metric of a device. The write goes through the metric's write endpoint
// the way an MQTT client's does: the value on <topic>/set (with MQTT 5 correlation data), the
// endpoint's filter, transform and driver, its acknowledgement on <topic>/set/result. Once the
// endpoint acknowledges, the new value is the metric's and goes to the host as DDATA. runAs must
// have write permission on <topic>/set, as any writer would.
import { randomBytes } from 'node:crypto';
import type { Logger } from '../log/index.js';
import type { DataPlane, MessageOrigin } from '../mqtt/index.js';
import { errorText } from '../mapping/runtime-context.js';
import { decodePayload, encodePayload } from '../mapping/topics.js';
import type { DeviceSlot, EdgeDevices, MetricSlot } from './edge-devices.js';
import type { CommandOutcome } from './edge-session.js';
import { commandValue, DATATYPES, jsonOf, ValueError, type MetricValue } from './metric-values.js';
import type { MetricMessage, PayloadMessage } from './payload-codec.js';

export interface DeviceCommandDeps {
  devices: EdgeDevices;
  dataPlane: DataPlane | undefined;
  /** The data-plane topic of an endpoint. */
  topicOf(endpointId: string): string;
  mayPublish(topic: string): boolean;
  /** Who a DCMD write is for (runAs, as the host's agent), in the write's audit event. */
  origin(): MessageOrigin;
  /** Counted per metric written (accepted: sent to the endpoint; failed: the endpoint said no). */
  counters: Record<CommandOutcome, number>;
  timeoutMs: number;
  log: Logger;
}

interface Pending {
  resolve(result: { ok: boolean; error?: string }): void;
  timer: NodeJS.Timeout;
}

export class DeviceCommands {
  private readonly pending = new Map<string, Pending>();
  private readonly unsubscribe: Array<() => void> = [];

  constructor(private readonly deps: DeviceCommandDeps) {}

  /** Listens for the acknowledgements of the write endpoints. */
  start(): void {
    const { dataPlane } = this.deps;
    if (!dataPlane) return;
    const endpoints = new Set(this.deps.devices.devices.flatMap((d) => d.metrics.flatMap((m) => (m.def.writeEndpoint ? [m.def.writeEndpoint] : []))));
    for (const id of endpoints) {
      this.unsubscribe.push(
        dataPlane.subscribe(`${this.deps.topicOf(id)}/set/result`, (_topic, payload, properties) => {
          const result = decodePayload(payload) as { ok?: unknown; error?: string; correlationData?: string } | null;
          const key = properties?.correlationData?.toString('utf8') ?? result?.correlationData;
          if (key !== undefined) this.settle(key, { ok: result?.ok === true, ...(result?.error !== undefined ? { error: result.error } : {}) });
        }),
      );
    }
  }

  stop(): void {
    for (const off of this.unsubscribe.splice(0)) off();
    for (const key of [...this.pending.keys()]) this.settle(key, { ok: false, error: 'the edge node stopped' });
  }

  private settle(key: string, result: { ok: boolean; error?: string }): void {
    const p = this.pending.get(key);
    if (!p) return;
    this.pending.delete(key);
    clearTimeout(p.timer);
    p.resolve(result);
  }

  /** A decoded DCMD for `deviceId`: each metric it names is checked and written. */
  handle(deviceId: string, payload: PayloadMessage): void {
    const { devices, counters, log } = this.deps;
    const device = devices.byId.get(deviceId);
    for (const m of payload.metrics) {
      const refused = this.check(device, deviceId, m);
      if (typeof refused === 'string') {
        counters.refused++;
        log.info('sparkplug device command refused', { deviceId, metric: m.name ?? m.alias, reason: refused });
        continue;
      }
      counters.accepted++;
      this.write(device!, refused.slot, refused.value);
    }
  }

  /** The metric and value of one command metric, or why it is refused. */
  private check(device: DeviceSlot | undefined, deviceId: string, m: MetricMessage): { slot: MetricSlot; value: MetricValue } | string {
    if (!device) return `no device ${deviceId} on this edge node`;
    if (!device.born) return `device ${deviceId} is not born`;
    const slot = m.alias !== undefined ? device.metrics.find((s) => s.alias === m.alias) : device.metrics.find((s) => s.def.name === m.name);
    if (!slot) return 'no such metric in the DBIRTH';
    // What does not agree with the DBIRTH is not this metric's command, whatever else it says.
    if (m.alias !== undefined && m.name !== undefined && m.name !== '' && m.name !== slot.def.name) return `the command names metric ${m.name}, its alias ${m.alias} is ${slot.def.name}`;
    if (m.datatype !== undefined && m.datatype !== 0 && m.datatype !== DATATYPES[slot.type]) return `the command says datatype ${m.datatype}, metric ${slot.def.name} is ${slot.type} (${DATATYPES[slot.type]})`;
    if (m.isHistorical) return 'a historical value is not a command';
    const endpointId = slot.def.writeEndpoint;
    if (!endpointId) return `metric ${slot.def.name} is not writable`;
    const topic = `${this.deps.topicOf(endpointId)}/set`;
    if (!this.deps.mayPublish(topic)) return `runAs may not write ${topic}`;
    if (!this.deps.dataPlane) return 'the embedded broker is off: endpoints cannot be written';
    try {
      return { slot, value: commandValue(slot.type, m) };
    } catch (err) {
      if (err instanceof ValueError) return err.message;
      throw err;
    }
  }

  private write(device: DeviceSlot, slot: MetricSlot, value: MetricValue): void {
    const { dataPlane, counters, log } = this.deps;
    const topic = this.deps.topicOf(slot.def.writeEndpoint!);
    const key = randomBytes(12).toString('base64url');
    const acknowledged = new Promise<{ ok: boolean; error?: string }>((resolve) => {
      const timer = setTimeout(() => this.settle(key, { ok: false, error: `no acknowledgement on ${topic}/set/result within ${this.deps.timeoutMs} ms` }), this.deps.timeoutMs);
      this.pending.set(key, { resolve, timer });
    });
    dataPlane!.publish(`${topic}/set`, encodePayload(jsonOf(value)), { qos: 1, properties: { correlationData: Buffer.from(key, 'utf8') }, origin: this.deps.origin() }).catch((err: unknown) => this.settle(key, { ok: false, error: errorText(err) }));
    void acknowledged.then((result) => {
      if (result.ok) return this.deps.devices.written(device, slot, value, Date.now());
      counters.failed++;
      log.warn('sparkplug device command not written', { deviceId: device.deviceId, metric: slot.def.name, error: result.error });
    });
  }
}
