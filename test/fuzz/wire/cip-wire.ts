// What a Logix controller sends, for the fuzz targets and the mutating proxy: Message Router
// replies, Multiple Service Packet replies, and their encapsulation (SendUnitData on the
// connection, built with our own encoders from src/mapping/drivers/cip.ts), their length and
// count fields, and the encapsulation framing (24-byte header, little-endian length at 2).
import type { WireField } from '../support/mutators.js';
import { Command, connectedData, encapsulate, multipleServiceData as encodeMultipleServiceData } from '../../../src/mapping/drivers/cip.js';

export const encapFraming = { name: 'enip', headerLength: 24, frameLength: (head: Buffer) => 24 + head.readUInt16LE(2) } as const;

/** A Message Router reply: the request's service | 0x80, general status, extended status words, data. */
export function messageReply(service: number, status: number, data: Buffer, extended: number[] = []): Buffer {
  const head = Buffer.from([service | 0x80, 0, status, extended.length]);
  const ext = Buffer.alloc(2 * extended.length);
  extended.forEach((e, i) => ext.writeUInt16LE(e, 2 * i));
  return Buffer.concat([head, ext, data]);
}

/** A Multiple Service Packet reply's data: the count, the offsets, the replies (the request's layout). */
export const multipleServiceData = (replies: Buffer[]): Buffer => encodeMultipleServiceData(replies);

export const SESSION = 0x11021e01;
export const CONNECTION = 0x7f000001;

/** A connected reply as the controller sends it: SendUnitData with the connection's address and the sequence count. */
export const connectedReply = (sequence: number, reply: Buffer): Buffer => encapsulate(Command.SendUnitData, SESSION, Buffer.alloc(8), connectedData(CONNECTION, sequence, reply));

/**
 * The length and count fields of the encapsulation packets in `bytes`: encapsulation length,
 * session handle, status, the CPF item count and item lengths, the Message Router reply's
 * extended status size, and a Multiple Service Packet reply's count and offsets.
 */
export function cipFields(bytes: Buffer): WireField[] {
  const fields: WireField[] = [];
  let at = 0;
  while (at + 24 <= bytes.length) {
    const length = bytes.readUInt16LE(at + 2);
    fields.push({ at: at + 2, size: 2, endian: 'LE' }, { at: at + 4, size: 4, endian: 'LE' }, { at: at + 8, size: 4, endian: 'LE' });
    const cpf = at + 24;
    if (cpf + 8 <= bytes.length) {
      fields.push({ at: cpf + 6, size: 2, endian: 'LE' });
      let item = cpf + 8;
      for (let i = 0; i < bytes.readUInt16LE(cpf + 6) && item + 4 <= bytes.length && i < 4; i++) {
        fields.push({ at: item + 2, size: 2, endian: 'LE' });
        const type = bytes.readUInt16LE(item);
        const len = bytes.readUInt16LE(item + 2);
        // Connected data: sequence count, then the Message Router reply.
        const mr = item + 4 + (type === 0x00b1 ? 2 : 0);
        if ((type === 0x00b1 || type === 0x00b2) && mr + 4 <= bytes.length) {
          fields.push({ at: mr + 3, size: 1, endian: 'LE' });
          const data = mr + 4 + 2 * bytes[mr + 3]!;
          if (bytes[mr] === 0x8a && data + 2 <= bytes.length) {
            fields.push({ at: data, size: 2, endian: 'LE' });
            for (let k = 0; k < bytes.readUInt16LE(data) && data + 4 + 2 * k <= bytes.length && k < 8; k++) fields.push({ at: data + 2 + 2 * k, size: 2, endian: 'LE' });
          }
        }
        item += 4 + len;
      }
    }
    at += 24 + length;
  }
  return fields;
}
