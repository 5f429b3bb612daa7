// Values of S7 endpoints: the bytes of the CPU's memory (big-endian) as JSON numbers, booleans
// and strings, and back. A value that does not fit its type is refused with the reason, before
// anything is sent.
import type { S7Address } from './s7-schemas.js';
import { DeviceError } from './types.js';

const INTEGER_RANGES = { BYTE: [0, 0xff], WORD: [0, 0xffff], DWORD: [0, 0xffffffff], INT: [-0x8000, 0x7fff], DINT: [-0x80000000, 0x7fffffff] } as const;
const FLOAT32_MAX = 3.4028234663852886e38;

/**
 * A REAL as the shortest decimal that reads back as the same 32-bit float (3.3, not
 * 3.299999952316284): what the CPU's own tools show.
 */
export function float32Value(f: number): number {
  for (let digits = 6; digits < 9; digits++) {
    const shorter = Number(f.toPrecision(digits));
    if (Math.fround(shorter) === f) return shorter;
  }
  return f;
}

/** The value of `bytes` (the address's bytes, or the byte holding its bit). */
export function decodeS7(a: S7Address, bytes: Buffer): unknown {
  switch (a.type) {
    case 'BOOL':
      return ((bytes[0]! >> (a.bit ?? 0)) & 1) === 1;
    case 'BYTE':
      return bytes.readUInt8(0);
    case 'WORD':
      return bytes.readUInt16BE(0);
    case 'DWORD':
      return bytes.readUInt32BE(0);
    case 'INT':
      return bytes.readInt16BE(0);
    case 'DINT':
      return bytes.readInt32BE(0);
    case 'REAL': {
      const f = bytes.readFloatBE(0);
      if (!Number.isFinite(f)) throw new DeviceError(`the REAL holds ${f} (no JSON number)`);
      return float32Value(f);
    }
    case 'STRING': {
      // Header: declared length, current length; then the characters (one byte each).
      const count = Math.min(bytes[1]!, a.length!, bytes.length - 2);
      return bytes.toString('latin1', 2, 2 + count);
    }
  }
}

/** The bytes to write for `value` (a BOOL: one byte, 0 or 1, written as a single bit). */
export function encodeS7(a: S7Address, value: unknown): Buffer {
  switch (a.type) {
    case 'BOOL':
      if (value === true || value === 1) return Buffer.from([1]);
      if (value === false || value === 0) return Buffer.from([0]);
      throw new DeviceError('a BOOL takes true or false (or 1/0)');
    case 'REAL': {
      if (typeof value !== 'number' || !Number.isFinite(value) || Math.abs(value) > FLOAT32_MAX) throw new DeviceError(`a REAL takes numbers from -${FLOAT32_MAX} to ${FLOAT32_MAX}`);
      const b = Buffer.alloc(4);
      b.writeFloatBE(value, 0);
      return b;
    }
    case 'STRING': {
      const max = a.length!;
      if (typeof value !== 'string') throw new DeviceError(`a STRING[${max}] takes text`);
      if (value.length > max) throw new DeviceError(`the text has ${value.length} characters; the STRING holds ${max}`);
      if (/[^\u0000-\u00ff]/.test(value)) throw new DeviceError('an S7 STRING holds Latin-1 characters only');
      const b = Buffer.alloc(2 + max);
      b[0] = max;
      b[1] = value.length;
      b.write(value, 2, 'latin1');
      return b;
    }
    default: {
      const [min, max] = INTEGER_RANGES[a.type];
      if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) throw new DeviceError(`${a.type === 'INT' ? 'an' : 'a'} ${a.type} takes integers from ${min} to ${max}`);
      const b = Buffer.alloc(a.type === 'BYTE' ? 1 : a.type === 'WORD' || a.type === 'INT' ? 2 : 4);
      if (min < 0) b.writeIntBE(value, 0, b.length);
      else b.writeUIntBE(value, 0, b.length);
      return b;
    }
  }
}
