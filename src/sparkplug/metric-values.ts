// Metric values: the Sparkplug B datatypes gatewayd reports (the basic types of the
// specification's "Datatype Details"), how an endpoint's reading (JSON) becomes a value of the
// metric's type, and how a value sits in a Metric message and comes out of a command's.
// Encoding follows Sparkplug 3.0: Int8/16/32 as uint32 (two's complement), UInt8/16/32 as uint32,
// Int64/UInt64/DateTime as uint64, Float, Double, Boolean, String/Text/UUID in their own fields.
import type { DatatypeName } from '../mapping/service-files.js';
import type { MetricMessage } from './payload-codec.js';

export type { DatatypeName } from '../mapping/service-files.js';

/** Each datatype's number on the wire (Sparkplug 3.0 DataType enum). */
export const DATATYPES: Record<DatatypeName, number> = {
  Int8: 1,
  Int16: 2,
  Int32: 3,
  Int64: 4,
  UInt8: 5,
  UInt16: 6,
  UInt32: 7,
  UInt64: 8,
  Float: 9,
  Double: 10,
  Boolean: 11,
  String: 12,
  DateTime: 13,
  Text: 14,
  UUID: 15,
};

/** A metric's value in memory: 64-bit integers beyond 2^53 as bigint; null when unknown. */
export type MetricValue = number | bigint | boolean | string | null;

/** Sparkplug quality codes (the 'Quality' property). */
export const QUALITY = { BAD: 0, GOOD: 192, STALE: 500 } as const;

/** The 'Quality' property of a metric: an Int32 (datatype 3) quality code. */
export const qualityProperty = (code: number) => ({ keys: ['Quality'], values: [{ type: 3, intValue: code }] });

const INT_RANGE: Partial<Record<DatatypeName, [number, number]>> = {
  Int8: [-128, 127],
  Int16: [-32768, 32767],
  Int32: [-2147483648, 2147483647],
  UInt8: [0, 255],
  UInt16: [0, 65535],
  UInt32: [0, 4294967295],
};
const BIG_RANGE: Partial<Record<DatatypeName, [bigint, bigint]>> = {
  Int64: [-(2n ** 63n), 2n ** 63n - 1n],
  UInt64: [0n, 2n ** 64n - 1n],
};

export class ValueError extends Error {}

/** The largest finite 32-bit float. */
const FLOAT32_MAX = 3.4028234663852886e38;

/** A safe integer as a number, a larger one as a bigint. */
const compact = (b: bigint): number | bigint => (b >= BigInt(Number.MIN_SAFE_INTEGER) && b <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(b) : b);

function toNumber(reading: unknown, type: DatatypeName): number {
  if (typeof reading === 'number' && Number.isFinite(reading)) return reading;
  if (typeof reading === 'bigint') return Number(reading);
  if (typeof reading === 'boolean') return reading ? 1 : 0;
  if (typeof reading === 'string' && reading.trim() !== '' && Number.isFinite(Number(reading))) return Number(reading);
  throw new ValueError(`${JSON.stringify(reading)?.slice(0, 64)} is not a ${type}`);
}

/**
 * The value of a reading as a metric of `type`; throws ValueError when it is none. A
 * one-element array counts as its element (a Modbus read of one register is [value]); numbers
 * are rounded to integer types; null stays null.
 */
export function valueOf(type: DatatypeName, reading: unknown): MetricValue {
  const v = Array.isArray(reading) && reading.length === 1 ? reading[0] : reading;
  if (v === null || v === undefined) return null;
  switch (type) {
    case 'Boolean':
      if (typeof v === 'boolean') return v;
      if (v === 'true' || v === 'false') return v === 'true';
      return toNumber(v, type) !== 0;
    case 'Float':
    case 'Double':
      return toNumber(v, type);
    case 'String':
    case 'Text':
    case 'UUID':
      return typeof v === 'string' ? v : JSON.stringify(v);
    case 'DateTime': {
      const ms = typeof v === 'string' && Number.isNaN(Number(v)) ? Date.parse(v) : toNumber(v, type);
      if (!Number.isFinite(ms) || ms < 0) throw new ValueError(`${JSON.stringify(v).slice(0, 64)} is not a DateTime`);
      return Math.round(ms);
    }
    case 'Int64':
    case 'UInt64': {
      let b: bigint;
      if (typeof v === 'bigint') b = v;
      else if (typeof v === 'string' && /^-?\d+$/.test(v.trim())) b = BigInt(v.trim());
      else b = BigInt(Math.round(toNumber(v, type)));
      const [min, max] = BIG_RANGE[type]!;
      if (b < min || b > max) throw new ValueError(`${b} is out of the range of ${type}`);
      return compact(b);
    }
    default: {
      const n = Math.round(toNumber(v, type));
      const [min, max] = INT_RANGE[type]!;
      if (n < min || n > max) throw new ValueError(`${n} is out of the range of ${type}`);
      return n;
    }
  }
}

/** Sets the value member of a Metric message (is_null for null). */
export function putValue(metric: MetricMessage, type: DatatypeName, value: MetricValue): void {
  if (value === null) {
    metric.isNull = true;
    return;
  }
  switch (type) {
    case 'Boolean':
      metric.booleanValue = value as boolean;
      return;
    case 'Float':
      metric.floatValue = value as number;
      return;
    case 'Double':
      metric.doubleValue = value as number;
      return;
    case 'String':
    case 'Text':
    case 'UUID':
      metric.stringValue = value as string;
      return;
    case 'Int64':
    case 'UInt64':
    case 'DateTime':
      // uint64 on the wire: negative Int64 values as their two's complement (a decimal string
      // keeps every bit; protobufjs reads it into a Long).
      metric.longValue = typeof value === 'bigint' || (value as number) < 0 ? BigInt.asUintN(64, BigInt(value as number)).toString() : value;
      return;
    default:
      metric.intValue = (value as number) >>> 0;
  }
}

/** The value a command (NCMD/DCMD) carries for a metric of `type`; throws ValueError when it has none that fits. */
export function commandValue(type: DatatypeName, metric: MetricMessage): MetricValue {
  if (metric.isNull) throw new ValueError('the command carries no value (is_null)');
  const { intValue, longValue } = metric;
  switch (type) {
    case 'Boolean':
      if (metric.booleanValue !== undefined) return metric.booleanValue;
      break;
    case 'Float':
    case 'Double': {
      const n = metric.floatValue ?? metric.doubleValue;
      if (n === undefined) break;
      // NaN and infinities have no JSON number: the endpoint would be written null.
      if (!Number.isFinite(n)) throw new ValueError(`${n} is not a ${type} value a device can be written`);
      if (type === 'Float' && Math.abs(n) > FLOAT32_MAX) throw new ValueError(`${n} is out of the range of Float`);
      return n;
    }
    case 'String':
    case 'Text':
    case 'UUID':
      if (metric.stringValue !== undefined) return metric.stringValue;
      break;
    case 'Int64':
    case 'UInt64':
    case 'DateTime':
      if (longValue !== undefined) {
        const raw = BigInt(String(longValue));
        return valueOf(type, type === 'Int64' ? BigInt.asIntN(64, raw) : BigInt.asUintN(64, raw));
      }
      if (intValue !== undefined) return valueOf(type, intValue);
      break;
    default: {
      // Signed types travel as two's complement in 32 bits; UInt32 may come as uint64 (Eclipse Tahu does so).
      const signed = type === 'Int8' || type === 'Int16' || type === 'Int32';
      if (intValue !== undefined) return valueOf(type, signed ? intValue | 0 : intValue);
      if (longValue !== undefined) return valueOf(type, Number(BigInt.asIntN(64, BigInt(String(longValue)))));
    }
  }
  throw new ValueError(`the command carries no ${type} value`);
}

/** A value as JSON (bigints as decimal text): what the REST API shows and endpoints receive. */
export function jsonOf(value: MetricValue): string | number | boolean | null {
  return typeof value === 'bigint' ? value.toString() : value;
}
