// Fuzz target: Sparkplug B DCMD payloads and the writes they trigger. The bytes go the way an
// edge node takes a DCMD (edge-session.ts): the payload codec decodes them (a payload it cannot
// decode is refused), then DeviceCommands.handle checks each metric against the DBIRTH and
// writes through its endpoint (a publish on the endpoint's <topic>/set, recorded here). A
// born device has a writable metric of every datatype and a read-only one; another device is
// not born. Cases: valid DCMDs built with our codec (by name, alias or both; values of the
// metric's type in range), semantic mutations (another alias, a name that is not the alias's
// metric, another datatype, historical, null, out of range, NaN, the wrong value member), then
// 0-3 byte mutations; and raw bytes (MQTT-Explorer#792: foreign protobuf decodes "fine").
// Oracle: the writes are exactly those an independent reading of the decoded command allows —
// a malformed or semantically invalid DCMD writes nothing; no error escapes the handling.
import { PassThrough } from 'node:stream';
import fc from 'fast-check';
import { createLogger } from '../../../src/log/index.js';
import { SPARKPLUG_DATATYPES, type DatatypeName, type SparkplugDeviceDef } from '../../../src/mapping/sparkplug-file.js';
import { realTimers } from '../../../src/mapping/drivers/types.js';
import type { DataPlane } from '../../../src/mqtt/index.js';
import { DeviceCommands } from '../../../src/sparkplug/device-commands.js';
import { EdgeDevices } from '../../../src/sparkplug/edge-devices.js';
import { DATATYPES } from '../../../src/sparkplug/metric-values.js';
import { createPayloadCodec, type MetricMessage, type PayloadMessage } from '../../../src/sparkplug/payload-codec.js';
import { CaseReader, CaseWriter } from '../support/fuzz-case.js';
import { OracleError, type FuzzTarget } from '../support/fuzz-target.js';
import { applyMutations, mutationsArbitrary, type Mutation } from '../support/mutators.js';

const codec = createPayloadCodec();
/** What handling one metric of a command may allocate (measured about 6 KiB with its write). */
const METRIC_COST = 12 * 1024;
const log = createLogger({ level: 'error', stream: new PassThrough() });
const DEVICES = ['press', 'oven', 'ghost'] as const;
const defs: SparkplugDeviceDef[] = [
  { deviceId: 'press', metrics: [...SPARKPLUG_DATATYPES.map((t) => ({ name: `w/${t}`, datatype: t, writeEndpoint: `svc.${t}` })), { name: 'r/Int32', datatype: 'Int32', readEndpoint: 'svc.read' }] },
  { deviceId: 'oven', metrics: [{ name: 'w/Int32', datatype: 'Int32', writeEndpoint: 'svc.oven' }] },
];
const devices = new EdgeDevices(defs, { nodeBorn: () => true, awayFromHost: () => false, send: () => true }, realTimers, { birthWaitMs: 0, aggregateMs: 0, maxMessagesPerSecond: 1000, datatypeInData: false });
devices.byId.get('press')!.born = true; // the oven is not born: nothing may be written to it
const press = devices.byId.get('press')!;
const topicOf = (endpointId: string) => `t/${endpointId}`;

// ---- the independent reading of what a command may write --------------------------------

const INT: Partial<Record<DatatypeName, [number, number]>> = { Int8: [-128, 127], Int16: [-32768, 32767], Int32: [-2147483648, 2147483647], UInt8: [0, 255], UInt16: [0, 65535], UInt32: [0, 4294967295] };
const SIGNED = new Set<DatatypeName>(['Int8', 'Int16', 'Int32']);

/** The JSON value written for metric `m` of a metric of `type`, or undefined: nothing may be written. */
function allowedValue(type: DatatypeName, m: MetricMessage): unknown {
  if (m.isNull || m.isHistorical) return undefined;
  switch (type) {
    case 'Boolean':
      return m.booleanValue;
    case 'Float':
    case 'Double': {
      const n = m.floatValue ?? m.doubleValue;
      if (n === undefined || !Number.isFinite(n) || (type === 'Float' && Math.abs(n) > 3.4028234663852886e38)) return undefined;
      return n;
    }
    case 'String':
    case 'Text':
    case 'UUID':
      return m.stringValue;
    case 'Int64':
    case 'UInt64':
    case 'DateTime': {
      let b: bigint | undefined;
      if (m.longValue !== undefined) b = type === 'Int64' ? BigInt.asIntN(64, BigInt(String(m.longValue))) : BigInt.asUintN(64, BigInt(String(m.longValue)));
      else if (m.intValue !== undefined) b = BigInt(m.intValue);
      if (b === undefined) return undefined;
      if (type === 'DateTime') return Math.round(Number(b));
      const min = type === 'Int64' ? -(2n ** 63n) : 0n;
      const max = type === 'Int64' ? 2n ** 63n - 1n : 2n ** 64n - 1n;
      if (b < min || b > max) return undefined;
      return b >= BigInt(Number.MIN_SAFE_INTEGER) && b <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(b) : b.toString();
    }
    default: {
      let n: number | undefined;
      if (m.intValue !== undefined) n = SIGNED.has(type) ? m.intValue | 0 : m.intValue;
      else if (m.longValue !== undefined) n = Number(BigInt.asIntN(64, BigInt(String(m.longValue))));
      const [min, max] = INT[type]!;
      return n === undefined || n < min || n > max ? undefined : n;
    }
  }
}

/** The writes (endpoint topic, JSON value) a decoded DCMD for `deviceId` may make, in order. */
function allowedWrites(deviceId: string, payload: PayloadMessage): Array<{ topic: string; value: unknown }> {
  const device = devices.byId.get(deviceId);
  if (!device?.born) return [];
  const out: Array<{ topic: string; value: unknown }> = [];
  for (const m of payload.metrics) {
    const slot = m.alias !== undefined ? device.metrics.find((s) => s.alias === m.alias) : device.metrics.find((s) => s.def.name === m.name);
    if (!slot || !slot.def.writeEndpoint) continue;
    if (m.alias !== undefined && m.name !== undefined && m.name !== '' && m.name !== slot.def.name) continue;
    if (m.datatype !== undefined && m.datatype !== 0 && m.datatype !== DATATYPES[slot.type]) continue;
    const value = allowedValue(slot.type, m);
    if (value !== undefined) out.push({ topic: `${topicOf(slot.def.writeEndpoint)}/set`, value });
  }
  return out;
}

// ---- one case ------------------------------------------------------------------------------

/** The writes of the case running: what the commands publish on endpoints' <topic>/set. */
let writes: Array<{ topic: string; value: unknown }> = [];
const dataPlane = {
  publish: (topic: string, body: Buffer) => {
    writes.push({ topic, value: JSON.parse(body.toString()) });
    return Promise.resolve();
  },
  subscribe: () => () => {},
  tap: () => () => {},
} as unknown as DataPlane;
// One for every case: stop() after each drops what it waits for (acknowledgements never come here).
const commands = new DeviceCommands({ devices, dataPlane, topicOf, mayPublish: () => true, origin: () => ({ username: 'host' }), counters: { accepted: 0, refused: 0, failed: 0 }, timeoutMs: 600_000, log });

function run(bytes: Uint8Array): void {
  const r = new CaseReader(bytes);
  const deviceId = DEVICES[r.u8() % DEVICES.length]!;
  const payload = r.rest();
  writes = [];
  let decoded: PayloadMessage | undefined;
  try {
    decoded = codec.decode(payload);
  } catch {
    // Not a Sparkplug B payload: refused by the edge node before anything else (edge-session.ts).
  }
  try {
    if (decoded) commands.handle(deviceId, decoded);
  } catch (err) {
    throw new OracleError('escaped', `${(err as Error).name} escaped the DCMD handling: ${(err as Error).message}`);
  } finally {
    commands.stop();
  }
  const allowed = decoded ? allowedWrites(deviceId, decoded) : [];
  if (JSON.stringify(writes) !== JSON.stringify(allowed)) throw new OracleError('unsafe', `writes ${JSON.stringify(writes).slice(0, 160)}; allowed ${JSON.stringify(allowed).slice(0, 160)}`);
}

// ---- cases -----------------------------------------------------------------------------------

const typeOf = (slotIndex: number) => press.metrics[slotIndex % press.metrics.length]!;

/** A value member of the right kind for a metric of `type` (in range). */
function valueFor(type: DatatypeName): fc.Arbitrary<Partial<MetricMessage>> {
  switch (type) {
    case 'Boolean':
      return fc.boolean().map((booleanValue) => ({ booleanValue }));
    case 'Float':
      return fc.float({ noNaN: true, noDefaultInfinity: true }).map((floatValue) => ({ floatValue }));
    case 'Double':
      return fc.double({ noNaN: true, noDefaultInfinity: true }).map((doubleValue) => ({ doubleValue }));
    case 'String':
    case 'Text':
    case 'UUID':
      return fc.string({ maxLength: 20 }).map((stringValue) => ({ stringValue }));
    case 'Int64':
    case 'UInt64':
    case 'DateTime':
      return fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }).map((b) => ({ longValue: b.toString() }));
    default: {
      const [min, max] = INT[type]!;
      return fc.integer({ min, max }).map((n) => ({ intValue: n >>> 0 }));
    }
  }
}

/** What breaks a command's meaning (or nothing). */
const semantic = fc.constantFrom('none', 'none', 'none', 'alias', 'name-vs-alias', 'datatype', 'historical', 'null', 'range', 'nan', 'member') as fc.Arbitrary<string>;

const metricArb: fc.Arbitrary<MetricMessage> = fc
  .record({ slot: fc.nat(), naming: fc.constantFrom('name', 'alias', 'both'), withType: fc.boolean(), broken: semantic, other: fc.nat() })
  .chain(({ slot: i, naming, withType, broken, other }) => {
    const slot = typeOf(i);
    return valueFor(slot.type).map((value): MetricMessage => {
      const m: MetricMessage = { ...value };
      if (naming !== 'alias') m.name = slot.def.name;
      if (naming !== 'name') m.alias = slot.alias;
      if (withType) m.datatype = DATATYPES[slot.type];
      const otherSlot = typeOf(other);
      switch (broken) {
        case 'alias':
          m.alias = 1000 + (other % 100);
          break;
        case 'name-vs-alias':
          m.alias = slot.alias;
          m.name = otherSlot.def.name === slot.def.name ? 'w/none' : otherSlot.def.name;
          break;
        case 'datatype':
          m.datatype = (DATATYPES[slot.type] % 15) + 1;
          break;
        case 'historical':
          m.isHistorical = true;
          break;
        case 'null':
          m.isNull = true;
          break;
        case 'range':
          if (m.intValue !== undefined) m.intValue = 0xffffffff;
          if (m.floatValue !== undefined) m.doubleValue = 1e300;
          break;
        case 'nan':
          m.doubleValue = Number.NaN;
          break;
        case 'member':
          for (const k of Object.keys(value)) delete (m as Record<string, unknown>)[k];
          Object.assign(m, other % 2 ? { stringValue: '1' } : { booleanValue: true });
          break;
      }
      return m;
    });
  });

const dcmd = fc.record({ device: fc.nat({ max: 2 }), metrics: fc.array(metricArb, { minLength: 1, maxLength: 4 }), timestamp: fc.option(fc.nat(), { nil: undefined }) });
const encoded = dcmd.map((d) => codec.encode({ metrics: d.metrics, ...(d.timestamp !== undefined ? { timestamp: d.timestamp } : {}) }) as Uint8Array);
const structured = fc
  .record({ d: dcmd, mutations: fc.oneof({ weight: 3, arbitrary: fc.constant([] as Mutation[]) }, { weight: 2, arbitrary: mutationsArbitrary(encoded) }) })
  .map(({ d, mutations }) => {
    const payload = codec.encode({ metrics: d.metrics, ...(d.timestamp !== undefined ? { timestamp: d.timestamp } : {}) });
    return new CaseWriter().u8(d.device).rest(applyMutations(payload, [], mutations));
  });

export const target: FuzzTarget = {
  name: 'sparkplug-dcmd',
  description: 'Sparkplug B DCMD payloads through the codec and DeviceCommands to the endpoint writes: valid commands from our codec with semantic mutations and 0-3 byte mutations, and raw bytes; the writes must be exactly those the command allows',
  // Each metric of a command is handled on its own (checked, maybe written: a publish, a timer, a log line): a fixed cost each, not sized by the wire.
  allowance: (bytes) => {
    let metrics = 0;
    try {
      metrics = codec.decode(Buffer.from(bytes.subarray(1))).metrics.length;
    } catch {
      // not a payload: nothing handled
    }
    return 16 * bytes.length + 64 * 1024 + METRIC_COST * metrics;
  },
  // Valid: a command that writes something (the generator must keep making them).
  valid: (bytes) => {
    try {
      return allowedWrites(DEVICES[bytes[0]! % DEVICES.length]!, codec.decode(Buffer.from(bytes.subarray(1)))).length > 0;
    } catch {
      return false;
    }
  },
  cases: fc.oneof({ weight: 6, arbitrary: structured }, { weight: 1, arbitrary: fc.uint8Array({ maxLength: 512 }) }),
  run,
};
