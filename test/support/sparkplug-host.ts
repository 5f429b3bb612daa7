// A Sparkplug B host application for the tests: an mqtt.js client that subscribes to a group,
// decodes what edge nodes publish and sends commands and STATE. It decodes and encodes with
// Google's protobuf runtime (google-protobuf's BinaryReader/BinaryWriter) by the field numbers
// of the specification's sparkplug_b.proto, not with protobufjs and the .proto the daemon
// uses: a mistake on either side shows as a failed test instead of cancelling out.
import pb, { type BinaryReader } from 'google-protobuf';
import mqtt, { type IClientOptions, type MqttClient } from 'mqtt';

export interface HostPropertyValue {
  type?: number;
  isNull?: boolean;
  intValue?: number;
  longValue?: string;
  stringValue?: string;
  booleanValue?: boolean;
}
export interface HostMetric {
  name?: string;
  alias?: number;
  timestamp?: number;
  datatype?: number;
  isHistorical?: boolean;
  isNull?: boolean;
  properties?: Record<string, HostPropertyValue>;
  intValue?: number;
  /** uint64 as decimal text (every bit kept). */
  longValue?: string;
  floatValue?: number;
  doubleValue?: number;
  booleanValue?: boolean;
  stringValue?: string;
}
export interface HostPayload {
  timestamp?: number;
  seq?: number;
  metrics: HostMetric[];
}
export interface SparkplugMessage {
  topic: string;
  type: string;
  edgeNodeId: string;
  deviceId?: string;
  payload: HostPayload;
  /** Order of arrival at the host. */
  index: number;
  retain: boolean;
  qos: number;
}

/** Reads the fields of one message: calls `field(number, reader)` for each (which must consume it or skip). */
function readFields(bytes: Uint8Array, field: (n: number, r: BinaryReader) => boolean): void {
  const r = new pb.BinaryReader(bytes);
  while (r.nextField()) {
    if (r.isEndGroup()) break;
    if (!field(r.getFieldNumber(), r)) r.skipField();
  }
}

function decodePropertyValue(bytes: Uint8Array): HostPropertyValue {
  const v: HostPropertyValue = {};
  readFields(bytes, (n, r) => {
    if (n === 1) v.type = r.readUint32();
    else if (n === 2) v.isNull = r.readBool();
    else if (n === 3) v.intValue = r.readUint32();
    else if (n === 4) v.longValue = r.readUint64String();
    else if (n === 7) v.booleanValue = r.readBool();
    else if (n === 8) v.stringValue = r.readString();
    else return false;
    return true;
  });
  return v;
}

function decodeMetric(bytes: Uint8Array): HostMetric {
  const m: HostMetric = {};
  readFields(bytes, (n, r) => {
    switch (n) {
      case 1: m.name = r.readString(); return true;
      case 2: m.alias = Number(r.readUint64String()); return true;
      case 3: m.timestamp = Number(r.readUint64String()); return true;
      case 4: m.datatype = r.readUint32(); return true;
      case 5: m.isHistorical = r.readBool(); return true;
      case 7: m.isNull = r.readBool(); return true;
      case 9: {
        const keys: string[] = [];
        const values: HostPropertyValue[] = [];
        readFields(r.readBytes(), (pn, pr) => {
          if (pn === 1) keys.push(pr.readString());
          else if (pn === 2) values.push(decodePropertyValue(pr.readBytes()));
          else return false;
          return true;
        });
        m.properties = Object.fromEntries(keys.map((k, i) => [k, values[i]!]));
        return true;
      }
      case 10: m.intValue = r.readUint32(); return true;
      case 11: m.longValue = r.readUint64String(); return true;
      case 12: m.floatValue = r.readFloat(); return true;
      case 13: m.doubleValue = r.readDouble(); return true;
      case 14: m.booleanValue = r.readBool(); return true;
      case 15: m.stringValue = r.readString(); return true;
      default: return false;
    }
  });
  return m;
}

export function decodeSparkplug(bytes: Uint8Array): HostPayload {
  const p: HostPayload = { metrics: [] };
  readFields(bytes, (n, r) => {
    if (n === 1) p.timestamp = Number(r.readUint64String());
    else if (n === 2) p.metrics.push(decodeMetric(r.readBytes()));
    else if (n === 3) p.seq = Number(r.readUint64String());
    else return false;
    return true;
  });
  return p;
}

/** A command payload: timestamp and metrics (by name or alias) with one value each. */
export function encodeSparkplug(payload: { timestamp?: number; metrics: HostMetric[] }): Uint8Array {
  const w = new pb.BinaryWriter();
  w.writeUint64(1, payload.timestamp ?? Date.now());
  for (const m of payload.metrics) {
    const mw = new pb.BinaryWriter();
    if (m.name !== undefined) mw.writeString(1, m.name);
    if (m.alias !== undefined) mw.writeUint64(2, m.alias);
    if (m.timestamp !== undefined) mw.writeUint64(3, m.timestamp);
    if (m.datatype !== undefined) mw.writeUint32(4, m.datatype);
    if (m.isNull !== undefined) mw.writeBool(7, m.isNull);
    if (m.intValue !== undefined) mw.writeUint32(10, m.intValue);
    if (m.longValue !== undefined) mw.writeUint64String(11, m.longValue);
    if (m.floatValue !== undefined) mw.writeFloat(12, m.floatValue);
    if (m.doubleValue !== undefined) mw.writeDouble(13, m.doubleValue);
    if (m.booleanValue !== undefined) mw.writeBool(14, m.booleanValue);
    if (m.stringValue !== undefined) mw.writeString(15, m.stringValue);
    w.writeBytes(2, mw.getResultBuffer());
  }
  return w.getResultBuffer();
}

/** The value of a decoded metric, whichever member carries it (null for is_null). */
export function valueOfMetric(m: HostMetric): unknown {
  if (m.isNull) return null;
  return m.intValue ?? m.longValue ?? m.floatValue ?? m.doubleValue ?? m.booleanValue ?? m.stringValue;
}

export class SparkplugHost {
  readonly messages: SparkplugMessage[] = [];
  private readonly waiters = new Set<() => void>();

  private constructor(
    readonly client: MqttClient,
    readonly groupId: string,
  ) {
    client.on('message', (topic, payload, packet) => {
      const [, , type, edgeNodeId, deviceId] = topic.split('/');
      if (type === undefined || edgeNodeId === undefined) return;
      let decoded: HostPayload = { metrics: [] };
      try {
        if (type !== 'STATE') decoded = decodeSparkplug(payload);
      } catch {
        // not a Sparkplug B payload: kept as an empty one
      }
      this.messages.push({ topic, type, edgeNodeId, ...(deviceId !== undefined ? { deviceId } : {}), payload: decoded, index: this.messages.length, retain: packet.retain, qos: packet.qos });
      for (const w of [...this.waiters]) w();
    });
  }

  /** Connects to `url` and subscribes to spBv1.0/<groupId>/# (QoS 1). */
  static async connect(url: string, groupId: string, options: IClientOptions = {}): Promise<SparkplugHost> {
    const client = await mqtt.connectAsync(url, { reconnectPeriod: 0, connectTimeout: 5000, ...options });
    const host = new SparkplugHost(client, groupId);
    await client.subscribeAsync(`spBv1.0/${groupId}/#`, { qos: 1 });
    return host;
  }

  of(type: string, deviceId?: string): SparkplugMessage[] {
    return this.messages.filter((m) => m.type === type && (deviceId === undefined || m.deviceId === deviceId));
  }

  /** Resolves the first message (from `from` on) that satisfies pred; bounded. */
  until(pred: (m: SparkplugMessage) => boolean, ms = 10_000, from = 0): Promise<SparkplugMessage> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const found = this.messages.slice(from).find(pred);
        if (!found) return false;
        this.waiters.delete(waiter);
        clearTimeout(timer);
        resolve(found);
        return true;
      };
      const waiter = () => void check();
      const timer = setTimeout(() => {
        this.waiters.delete(waiter);
        reject(new Error(`no matching Sparkplug message within ${ms} ms; seen: ${this.messages.map((m) => m.topic).join(', ')}`));
      }, ms);
      this.waiters.add(waiter);
      check();
    });
  }

  async command(topic: string, metrics: HostMetric[]): Promise<void> {
    await this.client.publishAsync(topic, Buffer.from(encodeSparkplug({ metrics })), { qos: 0 });
  }

  rebirth(edgeNodeId: string): Promise<void> {
    return this.command(`spBv1.0/${this.groupId}/NCMD/${edgeNodeId}`, [{ name: 'Node Control/Rebirth', datatype: 11, booleanValue: true }]);
  }

  async end(): Promise<void> {
    await this.client.endAsync(true);
  }
}

const SEQUENCED = new Set(['NBIRTH', 'NDATA', 'DBIRTH', 'DDATA', 'DDEATH']);

/** The seq numbers of what an edge node published from `from` on (NDEATH carries none; commands are the hosts'). */
export function seqsOf(messages: SparkplugMessage[], edgeNodeId: string, from = 0): number[] {
  return messages.filter((m) => m.index >= from && m.edgeNodeId === edgeNodeId && SEQUENCED.has(m.type)).map((m) => m.payload.seq!);
}
