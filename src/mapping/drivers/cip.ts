// The bytes of EtherNet/IP explicit messaging to Logix controllers, as the client side needs
// them: the encapsulation header (ODVA Vol. 2 §2-3), Common Packet Format items, Message Router
// requests and replies (Vol. 1 §2-4), Logix symbolic tag paths and atomic data types (Rockwell
// 1756-PM020 "Logix 5000 Data Access"). Checked against a capture of a real ControlLogix.
// Every length and count read from the wire goes through wireLength (bounded by what arrived
// and by what a 500-byte connection can carry); bad bytes raise ProtocolError, nothing else.
import { ProtocolError } from '../../errors/errors.js';
import { wireLength } from './wire-length.js';

const malformed = (message: string) => new ProtocolError('EtherNet/IP', message);

export const ENCAP_HEADER = 24;
export const Command = { ListIdentity: 0x63, RegisterSession: 0x65, UnregisterSession: 0x66, SendRRData: 0x6f, SendUnitData: 0x70 } as const;
export const Service = {
  MultipleServicePacket: 0x0a,
  ReadTag: 0x4c,
  WriteTag: 0x4d,
  ReadModifyWriteTag: 0x4e,
  ForwardClose: 0x4e,
  ReadTagFragmented: 0x52,
  WriteTagFragmented: 0x53,
  ForwardOpen: 0x54,
} as const;
/** General status codes a driver reacts to (Vol. 1 Appendix B). */
export const Status = { Success: 0x00, PartialTransfer: 0x06, EmbeddedServiceError: 0x1e } as const;

/** One encapsulation packet: the header's fields and its data. */
export interface EncapPacket {
  command: number;
  session: number;
  status: number;
  context: Buffer;
  data: Buffer;
}

export function encapsulate(command: number, session: number, context: Buffer, data: Buffer): Buffer {
  const head = Buffer.alloc(ENCAP_HEADER);
  head.writeUInt16LE(command, 0);
  head.writeUInt16LE(data.length, 2);
  head.writeUInt32LE(session >>> 0, 4);
  context.copy(head, 12, 0, 8);
  return Buffer.concat([head, data]);
}

/**
 * The most data an encapsulation packet from the controller carries here: the largest reply
 * gatewayd asks for is an unconnected message of 504 bytes (Forward Open and Close) or a
 * connected one of 500 (the connection size), inside its Common Packet Format (8 bytes of head,
 * an address item of at most 8 and the data item's 4): 524 bytes, and room for one more item.
 */
export const MAX_ENCAP_DATA = 600;

/**
 * Splits a TCP stream into packets: the complete ones, and what is left of the next one. A
 * header that declares more than MAX_ENCAP_DATA is refused at once (ProtocolError), before its
 * bytes are waited for.
 */
export function splitPackets(buffer: Buffer): { packets: EncapPacket[]; rest: Buffer } {
  const packets: EncapPacket[] = [];
  let at = 0;
  while (buffer.length - at >= ENCAP_HEADER) {
    const length = wireLength('EtherNet/IP', 'encapsulation length', buffer.readUInt16LE(at + 2), { cap: MAX_ENCAP_DATA });
    if (buffer.length - at < ENCAP_HEADER + length) break;
    packets.push({
      command: buffer.readUInt16LE(at),
      session: buffer.readUInt32LE(at + 4),
      status: buffer.readUInt32LE(at + 8),
      context: buffer.subarray(at + 12, at + 20),
      data: buffer.subarray(at + ENCAP_HEADER, at + ENCAP_HEADER + length),
    });
    at += ENCAP_HEADER + length;
  }
  return { packets, rest: buffer.subarray(at) };
}

/** RegisterSession's data: protocol version 1, no options. */
export const registerSessionData = (): Buffer => Buffer.from([1, 0, 0, 0]);

const CPF_NULL_ADDRESS = 0x0000;
const CPF_CONNECTED_ADDRESS = 0x00a1;
const CPF_CONNECTED_DATA = 0x00b1;
const CPF_UNCONNECTED_DATA = 0x00b2;

function cpf(items: Array<[type: number, data: Buffer]>, timeoutSeconds: number): Buffer {
  const parts: Buffer[] = [];
  const head = Buffer.alloc(8);
  head.writeUInt32LE(0, 0); // interface handle: CIP
  head.writeUInt16LE(timeoutSeconds, 4);
  head.writeUInt16LE(items.length, 6);
  parts.push(head);
  for (const [type, data] of items) {
    const h = Buffer.alloc(4);
    h.writeUInt16LE(type, 0);
    h.writeUInt16LE(data.length, 2);
    parts.push(h, data);
  }
  return Buffer.concat(parts);
}

/** SendRRData's data: an unconnected message (here: Forward Open and Close). */
export const unconnectedData = (message: Buffer, timeoutSeconds: number): Buffer => cpf([[CPF_NULL_ADDRESS, Buffer.alloc(0)], [CPF_UNCONNECTED_DATA, message]], timeoutSeconds);

/** SendUnitData's data: a message on connection `connectionId` with its sequence count. */
export function connectedData(connectionId: number, sequence: number, message: Buffer): Buffer {
  const address = Buffer.alloc(4);
  address.writeUInt32LE(connectionId >>> 0, 0);
  const seq = Buffer.alloc(2);
  seq.writeUInt16LE(sequence, 0);
  return cpf([[CPF_CONNECTED_ADDRESS, address], [CPF_CONNECTED_DATA, Buffer.concat([seq, message])]], 0);
}

/** The data item of a SendRRData or SendUnitData reply (connected: with its sequence count first). */
export function cpfDataItem(data: Buffer): Buffer {
  if (data.length < 8) throw malformed('short common packet format');
  // Each item takes at least its 4-byte head.
  const count = wireLength('EtherNet/IP', 'common packet format item count', data.readUInt16LE(6), { cap: MAX_ENCAP_DATA / 4, available: data.length - 8, unit: 4 });
  let at = 8;
  for (let i = 0; i < count; i++) {
    if (data.length < at + 4) break;
    const type = data.readUInt16LE(at);
    const length = wireLength('EtherNet/IP', 'common packet format item length', data.readUInt16LE(at + 2), { cap: MAX_ENCAP_DATA, available: data.length - at - 4 });
    const body = data.subarray(at + 4, at + 4 + length);
    if (type === CPF_CONNECTED_DATA || type === CPF_UNCONNECTED_DATA) return body;
    at += 4 + length;
  }
  throw malformed('no data item in the reply');
}

/** A Message Router request: service, path (padded EPATH), request data. */
export function messageRequest(service: number, path: Buffer, data: Buffer = Buffer.alloc(0)): Buffer {
  return Buffer.concat([Buffer.from([service, path.length / 2]), path, data]);
}

export interface MessageReply {
  service: number;
  status: number;
  extended: number[];
  data: Buffer;
}

/** A Message Router reply: service (the request's | 0x80), general status, extended status words, data. */
export function parseReply(buf: Buffer): MessageReply {
  if (buf.length < 4) throw malformed('short message router reply');
  if ((buf[0]! & 0x80) === 0) throw malformed(`not a reply (service 0x${buf[0]!.toString(16)})`);
  const words = wireLength('EtherNet/IP', 'extended status size', buf[3]!, { cap: 255, available: buf.length - 4, unit: 2 });
  const extended: number[] = [];
  for (let i = 0; i < words; i++) extended.push(buf.readUInt16LE(4 + 2 * i));
  return { service: buf[0]!, status: buf[2]!, extended, data: buf.subarray(4 + 2 * words) };
}

/** Logical path of class/instance (8-bit segments). */
export const logicalPath = (classId: number, instance: number): Buffer => Buffer.from([0x20, classId, 0x24, instance]);
export const MESSAGE_ROUTER = logicalPath(0x02, 0x01);
export const CONNECTION_MANAGER = logicalPath(0x06, 0x01);

/** A Multiple Service Packet's data, request or reply: the count, each part's offset, the parts. */
export function multipleServiceData(parts: Buffer[]): Buffer {
  const head = Buffer.alloc(2 + 2 * parts.length);
  head.writeUInt16LE(parts.length, 0);
  let offset = head.length;
  parts.forEach((r, i) => {
    head.writeUInt16LE(offset, 2 + 2 * i);
    offset += r.length;
  });
  return Buffer.concat([head, ...parts]);
}

/** Multiple Service Packet (0x0A) to the Message Router: count, offsets, the requests. */
export const multipleServiceRequest = (requests: Buffer[]): Buffer => messageRequest(Service.MultipleServicePacket, MESSAGE_ROUTER, multipleServiceData(requests));

/**
 * The replies inside a Multiple Service Packet reply's data: as many as were asked (`asked`),
 * each at its offset, the offsets rising inside the data after the offset table.
 */
export function multipleServiceReplies(data: Buffer, asked: number): MessageReply[] {
  if (data.length < 2) throw malformed('short Multiple Service Packet reply');
  const count = data.readUInt16LE(0);
  if (count !== asked) throw malformed(`the controller answered ${count} services of a Multiple Service Packet of ${asked}`);
  wireLength('EtherNet/IP', 'Multiple Service Packet reply count', count, { cap: asked, available: data.length - 2, unit: 2 });
  const table = 2 + 2 * count;
  const offsets: number[] = [];
  for (let i = 0; i < count; i++) {
    const offset = data.readUInt16LE(2 + 2 * i);
    if (offset < (offsets[i - 1] ?? table) || offset + 4 > data.length) throw malformed(`Multiple Service Packet reply offset ${offset} outside its data (${data.length} bytes)`);
    offsets.push(offset);
  }
  return offsets.map((start, i) => parseReply(data.subarray(start, offsets[i + 1] ?? data.length)));
}

/** Bytes a request adds to a Multiple Service Packet, and a reply to its answer. */
export const MSP_ITEM_OVERHEAD = 2;

/** Logix atomic types (1756-PM020): code and size in bytes. DWORD carries BOOL arrays (32 bits an element). */
export const AtomicTypes = {
  BOOL: { code: 0xc1, size: 1 },
  SINT: { code: 0xc2, size: 1 },
  INT: { code: 0xc3, size: 2 },
  DINT: { code: 0xc4, size: 4 },
  LINT: { code: 0xc5, size: 8 },
  REAL: { code: 0xca, size: 4 },
  LREAL: { code: 0xcb, size: 8 },
  DWORD: { code: 0xd3, size: 4 },
} as const;
export type AtomicType = keyof typeof AtomicTypes;
export const typeName = (code: number): string => (Object.entries(AtomicTypes).find(([, t]) => t.code === code)?.[0] ?? (code === 0x02a0 ? 'a structure' : `type 0x${code.toString(16)}`));

/** One level of a tag name: a symbol and its element indices (`Temps[3]`, `Grid[1,2]`). */
export interface TagLevel {
  name: string;
  indices: number[];
}

const PROGRAM = /^Program:[A-Za-z_][A-Za-z0-9_]*$/;
const LEVEL = /^([A-Za-z_][A-Za-z0-9_]*)(?:\[(\d+(?:,\d+){0,2})\])?$/;

/** Parses `Program:Main.Line[2].Speed` into its levels; throws on what Logix cannot name. */
export function parseTagName(tag: string): TagLevel[] {
  const levels: TagLevel[] = [];
  let rest = tag;
  if (tag.startsWith('Program:')) {
    const dot = tag.indexOf('.');
    if (dot < 0 || !PROGRAM.test(tag.slice(0, dot))) throw new Error(`"${tag}" is not a program tag (Program:<program>.<tag>)`);
    levels.push({ name: tag.slice(0, dot), indices: [] });
    rest = tag.slice(dot + 1);
  }
  for (const part of rest.split('.')) {
    const m = LEVEL.exec(part);
    if (!m) throw new Error(`"${tag}" is not a Logix tag name (at "${part}")`);
    levels.push({ name: m[1]!, indices: m[2] === undefined ? [] : m[2].split(',').map(Number) });
  }
  return levels;
}

/** The symbolic EPATH of a tag: ANSI extended symbol segments (0x91) and element segments (0x28/0x29/0x2A). */
export function tagPath(levels: TagLevel[]): Buffer {
  const parts: Buffer[] = [];
  for (const level of levels) {
    const name = Buffer.from(level.name, 'latin1');
    parts.push(Buffer.from([0x91, name.length]), name);
    if (name.length % 2) parts.push(Buffer.alloc(1));
    for (const index of level.indices) {
      if (index <= 0xff) parts.push(Buffer.from([0x28, index]));
      else if (index <= 0xffff) {
        const b = Buffer.from([0x29, 0, 0, 0]);
        b.writeUInt16LE(index, 2);
        parts.push(b);
      } else {
        const b = Buffer.from([0x2a, 0, 0, 0, 0, 0]);
        b.writeUInt32LE(index, 2);
        parts.push(b);
      }
    }
  }
  return Buffer.concat(parts);
}

const GENERAL_STATUS: Record<number, string> = {
  0x01: 'connection failure',
  0x02: 'resource unavailable',
  0x03: 'invalid parameter value',
  0x04: 'path segment error (no such tag, or a malformed tag name)',
  0x05: 'path destination unknown (no such tag or element)',
  0x06: 'partial transfer',
  0x08: 'service not supported',
  0x09: 'invalid attribute value',
  0x0a: 'attribute list error',
  0x0c: 'object state conflict',
  0x0f: 'privilege violation (the tag is read-only for external access)',
  0x10: 'device state conflict (the controller refuses in its current mode)',
  0x11: 'reply data too large',
  0x13: 'not enough data',
  0x15: 'too much data',
  0x1e: 'embedded service error',
  0x26: 'request path size invalid',
  0xff: 'general error',
};
const EXTENDED_STATUS: Record<number, string> = {
  0x2101: 'keyswitch position does not allow it',
  0x2104: 'offset beyond the end of the tag',
  0x2105: 'beyond the end of the tag (index or number of elements)',
  0x2107: 'data type mismatch',
};

/** What the controller's status means, in words, with the codes. */
export function statusText(status: number, extended: number[] = []): string {
  const ext = extended[0] || undefined; // 0x0000: no extended status (some controllers send it anyway)
  const words = (ext !== undefined && EXTENDED_STATUS[ext]) || GENERAL_STATUS[status] || 'error';
  const codes = `CIP status 0x${status.toString(16).padStart(2, '0')}${ext !== undefined ? `/0x${ext.toString(16).padStart(4, '0')}` : ''}`;
  return `${words} (${codes})`;
}
