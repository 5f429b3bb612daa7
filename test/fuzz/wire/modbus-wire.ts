// What a Modbus TCP device sends, for the fuzz targets and the mutating proxy: MBAP frames of
// read answers, write echoes and exception responses, their length and count fields, and the
// MBAP framing (6-byte header, big-endian length at 4 counting the unit id and the PDU).
import type { WireField } from '../support/mutators.js';

export const mbapFraming = { name: 'mbap', headerLength: 6, frameLength: (head: Buffer) => 6 + head.readUInt16BE(4) } as const;

/** An MBAP frame around a PDU. */
export function mbap(tid: number, unit: number, pdu: Buffer): Buffer {
  const head = Buffer.alloc(7);
  head.writeUInt16BE(tid, 0);
  head.writeUInt16BE(0, 2);
  head.writeUInt16BE(pdu.length + 1, 4);
  head[6] = unit;
  return Buffer.concat([head, pdu]);
}

/** The answer PDU of a read (FC 1-4): function, byte count, data. */
export const readPdu = (fc: number, data: Buffer): Buffer => Buffer.concat([Buffer.from([fc, data.length]), data]);
/** The echo of a write of `quantity` values at `address` (FC 15, 16). */
export function writeEcho(fc: number, address: number, quantity: number): Buffer {
  const b = Buffer.from([fc, 0, 0, 0, 0]);
  b.writeUInt16BE(address, 1);
  b.writeUInt16BE(quantity, 3);
  return b;
}
/** An exception response. */
export const exceptionPdu = (fc: number, code: number): Buffer => Buffer.from([fc | 0x80, code]);

/** The transaction id, protocol id and length of each frame, and a read answer's byte count. */
export function modbusFields(bytes: Buffer): WireField[] {
  const fields: WireField[] = [];
  let at = 0;
  while (at + 6 <= bytes.length) {
    fields.push({ at, size: 2, endian: 'BE' }, { at: at + 2, size: 2, endian: 'BE' }, { at: at + 4, size: 2, endian: 'BE' });
    if (at + 8 < bytes.length && bytes[at + 7]! >= 1 && bytes[at + 7]! <= 4) fields.push({ at: at + 8, size: 1, endian: 'BE' });
    at += 6 + bytes.readUInt16BE(at + 4);
  }
  return fields;
}
