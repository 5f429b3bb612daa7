// What an S7 CPU sends, for the fuzz targets and the mutating proxy: valid answers built the way
// snap7 and real CPUs frame them (TPKT, COTP data unit, S7 ack-data), their length and count
// fields, and the TPKT framing (a reply is one TPKT frame).
import type { WireField } from '../support/mutators.js';
import { setupParams, type S7Range } from '../../../src/mapping/drivers/s7-protocol.js';

/** TPKT framing: 4-byte header, total length big-endian at 2. */
export const tpktFraming = { name: 'tpkt', headerLength: 4, frameLength: (head: Buffer) => head.readUInt16BE(2) } as const;

const tpkt = (body: Buffer): Buffer => {
  const head = Buffer.from([0x03, 0x00, 0, 0]);
  head.writeUInt16BE(4 + body.length, 2);
  return Buffer.concat([head, body]);
};

/** COTP connection confirm (what a CPU answers a connection request with). */
export const connectConfirm = (): Buffer => tpkt(Buffer.from([0x11, 0xd0, 0x00, 0x01, 0x00, 0x02, 0x00, 0xc0, 0x01, 0x0a, 0xc1, 0x02, 0x01, 0x00, 0xc2, 0x02, 0x01, 0x01]));

/** An S7 ack-data (ROSCTR 3) PDU in one COTP data unit, or split over several (`units` > 1: the last with EOT). */
export function ackData(ref: number, params: Buffer, data: Buffer, error: [number, number] = [0, 0], units = 1): Buffer {
  const head = Buffer.from([0x32, 0x03, 0x00, 0x00, 0, 0, 0, 0, 0, 0, error[0], error[1]]);
  head.writeUInt16BE(ref, 4);
  head.writeUInt16BE(params.length, 6);
  head.writeUInt16BE(data.length, 8);
  const pdu = Buffer.concat([head, params, data]);
  if (units <= 1) return tpkt(Buffer.concat([Buffer.from([0x02, 0xf0, 0x80]), pdu]));
  const step = Math.ceil(pdu.length / units);
  const frames: Buffer[] = [];
  for (let at = 0; at < pdu.length; at += step) {
    const last = at + step >= pdu.length;
    frames.push(tpkt(Buffer.concat([Buffer.from([0x02, 0xf0, last ? 0x80 : 0x00]), pdu.subarray(at, at + step)])));
  }
  return Buffer.concat(frames);
}

/** The setup communication answer: `jobs` each way, `pduLength`. */
export const setupAnswer = (ref: number, pduLength: number, jobs: number): Buffer => ackData(ref, setupParams(pduLength, jobs), Buffer.alloc(0));

/** One item of a Read Var answer: its data, or a return code other than 0xff (refused). */
export type ReadItem = { data: Buffer } | { code: number };

/** A Read Var answer with these items (byte transport, lengths in bits, fill bytes after odd data). */
export function readAnswer(ref: number, items: readonly ReadItem[], units = 1): Buffer {
  const parts: Buffer[] = [];
  items.forEach((item, i) => {
    if ('code' in item) {
      parts.push(Buffer.from([item.code, 0x00, 0x00, 0x00]));
      return;
    }
    const head = Buffer.from([0xff, 0x04, 0, 0]);
    head.writeUInt16BE(item.data.length * 8, 2);
    parts.push(head, item.data);
    if (item.data.length % 2 === 1 && i < items.length - 1) parts.push(Buffer.alloc(1));
  });
  return ackData(ref, Buffer.from([0x04, items.length]), Buffer.concat(parts), [0, 0], units);
}

/** A Write Var answer: one return code per item (0xff: written). */
export const writeAnswer = (ref: number, codes: readonly number[]): Buffer => ackData(ref, Buffer.from([0x05, codes.length]), Buffer.from(codes));

/** A job the CPU refused as a whole (header error class and code). */
export const refusedJob = (ref: number, errorClass: number, errorCode: number): Buffer => ackData(ref, Buffer.alloc(0), Buffer.alloc(0), [errorClass, errorCode]);

/** The ranges a Read Var of these items asks for (what a parser is given beside the answer). */
export const rangesOf = (items: readonly ReadItem[]): S7Range[] => items.map((it, i) => ({ area: 0x84, db: 1, start: i * 16, length: 'data' in it ? it.data.length : 2 }));

/**
 * The length and count fields of the TPKT frames in `bytes`: TPKT length, COTP length indicator,
 * the S7 parameter and data lengths, the item count, the jobs and PDU length of a setup answer,
 * each Read Var item's length.
 */
export function s7Fields(bytes: Buffer): WireField[] {
  const fields: WireField[] = [];
  let at = 0;
  while (at + 4 <= bytes.length) {
    const length = bytes.readUInt16BE(at + 2);
    fields.push({ at: at + 2, size: 2, endian: 'BE' }, { at: at + 4, size: 1, endian: 'BE' });
    const s7 = at + 7;
    if (bytes[at + 5] === 0xf0 && bytes[s7] === 0x32 && s7 + 12 <= bytes.length) {
      const paramLength = bytes.readUInt16BE(s7 + 6);
      fields.push({ at: s7 + 4, size: 2, endian: 'BE' }, { at: s7 + 6, size: 2, endian: 'BE' }, { at: s7 + 8, size: 2, endian: 'BE' });
      const p = s7 + 12;
      if (bytes[p] === 0xf0 && p + 8 <= bytes.length) fields.push({ at: p + 2, size: 2, endian: 'BE' }, { at: p + 4, size: 2, endian: 'BE' }, { at: p + 6, size: 2, endian: 'BE' });
      if ((bytes[p] === 0x04 || bytes[p] === 0x05) && p + 2 <= bytes.length) fields.push({ at: p + 1, size: 1, endian: 'BE' });
      if (bytes[p] === 0x04) {
        let d = p + paramLength;
        for (let n = 0; n < bytes[p + 1]! && d + 4 <= bytes.length; n++) {
          fields.push({ at: d + 2, size: 2, endian: 'BE' });
          const count = bytes.readUInt16BE(d + 2);
          const size = bytes[d] === 0xff ? (bytes[d + 1] === 0x04 || bytes[d + 1] === 0x03 || bytes[d + 1] === 0x05 ? Math.ceil(count / 8) : count) : 0;
          d += 4 + size + (size % 2);
        }
      }
    }
    if (length < 4) break;
    at += length;
  }
  return fields;
}
