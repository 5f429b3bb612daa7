// Mutations of a valid frame, the same for the in-process fuzz targets (drawn by fast-check, so
// a failure shrinks and replays) and for the mutating proxy of the hostile-peer harness (drawn
// from a seeded random source): bit flips, length and count fields set to 0/1/max/±1 or 0xFFFF,
// interesting byte values, truncation, extension with garbage, another frame spliced in or
// glued after, the frame twice. A frame's length and count fields come from its protocol's
// wire description (test/fuzz/wire/*.ts), read from the valid frame before it is mutated.
import fc from 'fast-check';
import type { Random } from './random.js';

/** A length or count field of a frame: its offset, width and byte order. */
export interface WireField {
  at: number;
  size: 1 | 2 | 4;
  endian: 'BE' | 'LE';
}

/** What a length or count field is set to: relative to its value, or an extreme. */
export type FieldValue = 'zero' | 'one' | 'max' | 'plus1' | 'minus1' | 'ffff' | 'half' | 'double';
const FIELD_VALUES: readonly FieldValue[] = ['zero', 'one', 'max', 'plus1', 'minus1', 'ffff', 'half', 'double'];
/** Byte values that sit on boundaries (sign bits, all ones). */
const INTERESTING_BYTES = [0x00, 0x01, 0x02, 0x7f, 0x80, 0xfe, 0xff] as const;

/** One mutation. Offsets are any unsigned integer, taken modulo the frame's length when applied. */
export type Mutation =
  | { op: 'flip'; at: number; bit: number }
  | { op: 'field'; field: number; value: FieldValue }
  | { op: 'byte'; at: number; value: number }
  | { op: 'truncate'; at: number }
  | { op: 'extend'; bytes: Uint8Array }
  | { op: 'splice'; at: number; other: Uint8Array }
  | { op: 'concat'; other: Uint8Array }
  | { op: 'duplicate' };

function readField(b: Buffer, f: WireField): number {
  if (f.size === 1) return b[f.at]!;
  if (f.size === 2) return f.endian === 'BE' ? b.readUInt16BE(f.at) : b.readUInt16LE(f.at);
  return f.endian === 'BE' ? b.readUInt32BE(f.at) : b.readUInt32LE(f.at);
}

function writeField(b: Buffer, f: WireField, value: number): void {
  const max = f.size === 4 ? 0xffffffff : f.size === 2 ? 0xffff : 0xff;
  const v = ((value % (max + 1)) + (max + 1)) % (max + 1);
  if (f.size === 1) b[f.at] = v;
  else if (f.size === 2) f.endian === 'BE' ? b.writeUInt16BE(v, f.at) : b.writeUInt16LE(v, f.at);
  else f.endian === 'BE' ? b.writeUInt32BE(v, f.at) : b.writeUInt32LE(v, f.at);
}

function fieldValue(current: number, f: WireField, value: FieldValue): number {
  const max = f.size === 4 ? 0xffffffff : f.size === 2 ? 0xffff : 0xff;
  switch (value) {
    case 'zero':
      return 0;
    case 'one':
      return 1;
    case 'max':
      return max;
    case 'plus1':
      return current + 1;
    case 'minus1':
      return current - 1;
    case 'ffff':
      return Math.min(0xffff, max);
    case 'half':
      return Math.floor(current / 2);
    case 'double':
      return current * 2;
  }
}

/** The frame with the mutations applied in order (the input is not changed). */
export function applyMutations(frame: Uint8Array, fields: readonly WireField[], mutations: readonly Mutation[]): Buffer {
  let b = Buffer.from(frame);
  for (const m of mutations) {
    switch (m.op) {
      case 'flip':
        if (b.length) b[m.at % b.length]! ^= 1 << (m.bit & 7);
        break;
      case 'field': {
        if (!fields.length) break;
        const f = fields[m.field % fields.length]!;
        if (f.at + f.size <= b.length) writeField(b, f, fieldValue(readField(b, f), f, m.value));
        break;
      }
      case 'byte':
        if (b.length) b[m.at % b.length] = m.value & 0xff;
        break;
      case 'truncate':
        b = b.subarray(0, b.length ? m.at % b.length : 0);
        break;
      case 'extend':
        b = Buffer.concat([b, m.bytes]);
        break;
      case 'splice': {
        const at = b.length ? m.at % (b.length + 1) : 0;
        b = Buffer.concat([b.subarray(0, at), m.other, b.subarray(at)]);
        break;
      }
      case 'concat':
        b = Buffer.concat([b, m.other]);
        break;
      case 'duplicate':
        b = Buffer.concat([b, b]);
        break;
    }
  }
  return b;
}

/** fast-check: 1 to 3 mutations; `others` gives the frames spliced in or glued after (valid frames of the same protocol). */
export function mutationsArbitrary(others: fc.Arbitrary<Uint8Array>, maxLength = 3): fc.Arbitrary<Mutation[]> {
  const offset = fc.nat({ max: 0xffff });
  const mutation: fc.Arbitrary<Mutation> = fc.oneof(
    { weight: 3, arbitrary: fc.record({ op: fc.constant('flip' as const), at: offset, bit: fc.nat({ max: 7 }) }) },
    { weight: 4, arbitrary: fc.record({ op: fc.constant('field' as const), field: fc.nat({ max: 63 }), value: fc.constantFrom(...FIELD_VALUES) }) },
    { weight: 2, arbitrary: fc.record({ op: fc.constant('byte' as const), at: offset, value: fc.constantFrom(...INTERESTING_BYTES) }) },
    { weight: 2, arbitrary: fc.record({ op: fc.constant('truncate' as const), at: offset }) },
    { weight: 1, arbitrary: fc.record({ op: fc.constant('extend' as const), bytes: fc.uint8Array({ minLength: 1, maxLength: 64 }) }) },
    { weight: 1, arbitrary: fc.record({ op: fc.constant('splice' as const), at: offset, other: others }) },
    { weight: 1, arbitrary: fc.record({ op: fc.constant('concat' as const), other: others }) },
    { weight: 1, arbitrary: fc.constant({ op: 'duplicate' as const }) },
  );
  return fc.array(mutation, { minLength: 1, maxLength });
}

/** The seeded equivalent for the proxy: 1 to 3 mutations of `frame`, others taken from `recent`. */
export function randomMutations(rng: Random, recent: readonly Buffer[]): Mutation[] {
  const out: Mutation[] = [];
  const n = rng.int(1, 3);
  for (let i = 0; i < n; i++) {
    const other = recent.length ? rng.pick(recent) : rng.bytes(rng.int(1, 16));
    const at = rng.int(0, 0xffff);
    out.push(
      rng.pick<Mutation>([
        { op: 'flip', at, bit: rng.int(0, 7) },
        { op: 'field', field: rng.int(0, 63), value: rng.pick(FIELD_VALUES) },
        { op: 'field', field: rng.int(0, 63), value: rng.pick(FIELD_VALUES) },
        { op: 'byte', at, value: rng.pick(INTERESTING_BYTES) },
        { op: 'truncate', at },
        { op: 'extend', bytes: rng.bytes(rng.int(1, 64)) },
        { op: 'splice', at, other },
        { op: 'concat', other },
        { op: 'duplicate' },
      ]),
    );
  }
  return out;
}

/** fast-check: where a byte stream is cut into the chunks a socket delivers (offsets, any order). */
export const splitPointsArbitrary = fc.array(fc.nat({ max: 0xffff }), { maxLength: 8 });

/** Cuts `bytes` at the given points (modulo its length): the chunks, in order, none empty. */
export function chunksAt(bytes: Buffer, points: readonly number[]): Buffer[] {
  if (!bytes.length) return [];
  const cuts = [...new Set(points.map((p) => p % bytes.length).filter((p) => p > 0))].sort((a, b) => a - b);
  const out: Buffer[] = [];
  let from = 0;
  for (const c of cuts) {
    out.push(bytes.subarray(from, c));
    from = c;
  }
  out.push(bytes.subarray(from));
  return out;
}
