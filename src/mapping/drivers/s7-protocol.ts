// S7comm over ISO-on-TCP (RFC 1006), the subset a gateway needs: the COTP connection, PDU-size
// negotiation ("setup communication"), Read Var and Write Var with several items per request.
// Pure encoding and decoding: no I/O (the session is s7-session.ts). Every length read from the
// wire is checked before use; a malformed answer throws S7ProtocolError (the session then drops
// the connection) and never reads out of bounds.
import { ProtocolError } from '../../errors/errors.js';
import { wireLength } from './wire-length.js';

/** An answer the client cannot make sense of: the connection is not usable any more. */
export class S7ProtocolError extends ProtocolError {
  constructor(message: string) {
    super('S7', message);
  }
}

/** Memory areas by their S7 code. */
export const AREA_CODES = { I: 0x81, Q: 0x82, M: 0x83, DB: 0x84 } as const;

/** Items one Read Var or Write Var request may carry: S7-300/400 CPUs and snap7 take at most 20. */
export const MAX_ITEMS_PER_REQUEST = 20;
/** Bytes of a job request before its items: S7 header (10) and function + item count (2). */
const REQUEST_HEAD = 12;
/** Bytes of an ack-data answer before its data: S7 header with error (12) and function + count (2). */
const ANSWER_HEAD = 14;
/** One item's address in a request. */
const ITEM_SPEC = 12;
/** One item's header in the data part (return code, transport size, length). */
const ITEM_DATA_HEAD = 4;

const TPKT_HEAD = 4;
const COTP_DT = Buffer.from([0x02, 0xf0, 0x80]);

/** A byte range of a memory area (a Read Var item); `bit` set: one bit (a Write Var of a BOOL). */
export interface S7Range {
  area: number;
  db: number;
  start: number;
  length: number;
  bit?: number;
}

/** What the PLC answered for one item. */
export type S7ItemResult = { ok: true; data: Buffer } | { ok: false; reason: string };

const RETURN_CODES: Record<number, string> = {
  0x01: 'hardware fault',
  0x03: 'access to the object not allowed',
  0x05: 'address out of range',
  0x06: 'data type not supported',
  0x07: 'data type inconsistent',
  0x0a: 'object does not exist',
};

/** The meaning of an item's return code (0xff is success). */
export function returnCodeText(code: number): string {
  return `${RETURN_CODES[code] ?? 'refused'} (return code 0x${code.toString(16).padStart(2, '0')})`;
}

const ERROR_CLASSES: Record<number, string> = {
  0x81: 'application relationship error',
  0x82: 'object definition error',
  0x83: 'no resources available',
  0x84: 'error on service processing',
  0x85: 'error on supplies',
  0x87: 'access error',
};

function headerErrorText(errorClass: number, errorCode: number): string {
  return `${ERROR_CLASSES[errorClass] ?? 'error'} (class 0x${errorClass.toString(16)}, code 0x${errorCode.toString(16).padStart(2, '0')})`;
}

const tpkt = (body: Buffer): Buffer => {
  const head = Buffer.from([0x03, 0x00, 0, 0]);
  head.writeUInt16BE(TPKT_HEAD + body.length, 2);
  return Buffer.concat([head, body]);
};

/**
 * The COTP connection request. The remote TSAP names the CPU: connection type PG (0x01) in its
 * high byte, rack * 32 + slot in its low byte; TPDU size 1024.
 */
export function connectRequest(rack: number, slot: number): Buffer {
  return tpkt(Buffer.from([0x11, 0xe0, 0x00, 0x00, 0x00, 0x01, 0x00, 0xc0, 0x01, 0x0a, 0xc1, 0x02, 0x01, 0x00, 0xc2, 0x02, 0x01, rack * 32 + slot]));
}

/** The COTP answer to the connection request: true for a connection confirm, false for anything else. */
export function isConnectConfirm(payload: Buffer): boolean {
  return payload.length >= 2 && payload[1] === 0xd0;
}

/** An S7 job (ROSCTR 1) in a COTP data frame. */
function job(ref: number, params: Buffer, data: Buffer): Buffer {
  const head = Buffer.from([0x32, 0x01, 0x00, 0x00, 0, 0, 0, 0, 0, 0]);
  head.writeUInt16BE(ref, 4);
  head.writeUInt16BE(params.length, 6);
  head.writeUInt16BE(data.length, 8);
  return tpkt(Buffer.concat([COTP_DT, head, params, data]));
}

/** The parameters of setup communication, asked and granted alike: `jobs` each way, `pduLength`. */
export function setupParams(pduLength: number, jobs: number): Buffer {
  const p = Buffer.from([0xf0, 0x00, 0, 0, 0, 0, 0, 0]);
  p.writeUInt16BE(jobs, 2);
  p.writeUInt16BE(jobs, 4);
  p.writeUInt16BE(pduLength, 6);
  return p;
}

/** Setup communication: asks for `pduLength` and `jobs` parallel jobs each way. */
export const setupRequest = (ref: number, pduLength: number, jobs: number): Buffer => job(ref, setupParams(pduLength, jobs), Buffer.alloc(0));

/** An S7 answer, its header checked: the reference it answers, its parameters and data. */
export interface S7Answer {
  ref: number;
  /** Set when the PLC refused the whole job (header error class and code). */
  error?: string;
  params: Buffer;
  data: Buffer;
}

/** Decodes the S7 PDU of a COTP data frame (the bytes after the COTP header). */
export function parseAnswer(pdu: Buffer): S7Answer {
  if (pdu.length < 10 || pdu[0] !== 0x32) throw new S7ProtocolError('not an S7 PDU');
  const type = pdu[1]!;
  if (type !== 0x02 && type !== 0x03) throw new S7ProtocolError(`unexpected S7 PDU type ${type}`);
  const headLength = 12;
  if (pdu.length < headLength) throw new S7ProtocolError('S7 answer too short');
  const ref = pdu.readUInt16BE(4);
  const paramLength = pdu.readUInt16BE(6);
  const dataLength = pdu.readUInt16BE(8);
  wireLength('S7', 'S7 parameter and data length', paramLength + dataLength, { cap: pdu.length - headLength, available: pdu.length - headLength });
  const errorClass = pdu[10]!;
  const errorCode = pdu[11]!;
  const answer: S7Answer = { ref, params: pdu.subarray(headLength, headLength + paramLength), data: pdu.subarray(headLength + paramLength, headLength + paramLength + dataLength) };
  if (errorClass !== 0 || errorCode !== 0) answer.error = headerErrorText(errorClass, errorCode);
  return answer;
}

/** The PDU length and parallel jobs the PLC granted (setup communication answer). */
export function parseSetupAnswer(answer: S7Answer): { pduLength: number; jobs: number } {
  if (answer.error) throw new S7ProtocolError(`the PLC refused the communication setup: ${answer.error}`);
  const p = answer.params;
  if (p.length < 8 || p[0] !== 0xf0) throw new S7ProtocolError('malformed setup communication answer');
  const jobs = Math.max(1, Math.min(p.readUInt16BE(2), p.readUInt16BE(4)));
  const pduLength = p.readUInt16BE(6);
  if (pduLength < 64) throw new S7ProtocolError(`the PLC granted a PDU of ${pduLength} bytes`);
  return { pduLength, jobs };
}

function itemSpec(r: S7Range, bitTransport: boolean): Buffer {
  const b = Buffer.alloc(ITEM_SPEC);
  b[0] = 0x12;
  b[1] = 0x0a;
  b[2] = 0x10; // S7ANY addressing
  b[3] = bitTransport ? 0x01 : 0x02; // BIT or BYTE
  b.writeUInt16BE(bitTransport ? 1 : r.length, 4);
  b.writeUInt16BE(r.area === AREA_CODES.DB ? r.db : 0, 6);
  b[8] = r.area;
  const address = r.start * 8 + (bitTransport ? (r.bit ?? 0) : 0);
  b[9] = (address >> 16) & 0xff;
  b.writeUInt16BE(address & 0xffff, 10);
  return b;
}

/** Read Var of byte ranges. */
export function readRequest(ref: number, ranges: S7Range[]): Buffer {
  return job(ref, Buffer.concat([Buffer.from([0x04, ranges.length]), ...ranges.map((r) => itemSpec(r, false))]), Buffer.alloc(0));
}

/** The items of a Read Var answer, in request order. */
export function parseReadAnswer(answer: S7Answer, ranges: S7Range[]): S7ItemResult[] {
  if (answer.error) return ranges.map(() => ({ ok: false, reason: answer.error! }));
  if (answer.params.length < 2 || answer.params[0] !== 0x04) throw new S7ProtocolError('malformed Read Var answer');
  if (answer.params[1] !== ranges.length) throw new S7ProtocolError(`the PLC answered ${answer.params[1]} of ${ranges.length} items`);
  const d = answer.data;
  const out: S7ItemResult[] = [];
  let at = 0;
  for (const r of ranges) {
    if (at + ITEM_DATA_HEAD > d.length) throw new S7ProtocolError('Read Var answer ends early');
    const code = d[at]!;
    const transport = d[at + 1]!;
    const count = d.readUInt16BE(at + 2);
    // Transport sizes 0x03 (bit), 0x04 (byte/word/dword) and 0x05 (integer) count bits; the others bytes.
    const bytes = transport === 0x03 || transport === 0x04 || transport === 0x05 ? Math.ceil(count / 8) : count;
    at += ITEM_DATA_HEAD;
    // A refused item is its header alone, whatever its length field says (snap7 puts 4 there).
    if (code !== 0xff) {
      out.push({ ok: false, reason: returnCodeText(code) });
      continue;
    }
    wireLength('S7', 'Read Var item length', bytes, { cap: d.length - at, available: d.length - at });
    out.push(bytes === r.length ? { ok: true, data: Buffer.from(d.subarray(at, at + bytes)) } : { ok: false, reason: `the PLC answered ${bytes} bytes for ${r.length}` });
    at += bytes + (bytes % 2 === 1 && at + bytes < d.length ? 1 : 0); // a fill byte after odd data
  }
  return out;
}

/** Write Var: byte ranges, or single bits (`bit` set, data one byte 0 or 1). */
export function writeRequest(ref: number, items: Array<{ range: S7Range; data: Buffer }>): Buffer {
  const params = Buffer.concat([Buffer.from([0x05, items.length]), ...items.map((i) => itemSpec(i.range, i.range.bit !== undefined))]);
  const data: Buffer[] = [];
  items.forEach((item, n) => {
    const bit = item.range.bit !== undefined;
    const head = Buffer.from([0x00, bit ? 0x03 : 0x04, 0, 0]);
    head.writeUInt16BE(bit ? 1 : item.data.length * 8, 2);
    data.push(head, item.data);
    if (item.data.length % 2 === 1 && n < items.length - 1) data.push(Buffer.alloc(1));
  });
  return job(ref, params, Buffer.concat(data));
}

/** The item results of a Write Var answer (ok, or the PLC's reason). */
export function parseWriteAnswer(answer: S7Answer, count: number): Array<{ ok: true } | { ok: false; reason: string }> {
  if (answer.error) return Array.from({ length: count }, () => ({ ok: false as const, reason: answer.error! }));
  if (answer.params.length < 2 || answer.params[0] !== 0x05) throw new S7ProtocolError('malformed Write Var answer');
  if (answer.params[1] !== count || answer.data.length < count) throw new S7ProtocolError(`the PLC answered ${answer.params[1]} of ${count} write items`);
  return Array.from({ length: count }, (_v, i) => (answer.data[i] === 0xff ? { ok: true as const } : { ok: false as const, reason: returnCodeText(answer.data[i]!) }));
}

/** Bytes one range adds to a Read Var request and to its answer. */
export const readCost = (r: S7Range) => ({ request: ITEM_SPEC, answer: ITEM_DATA_HEAD + r.length + (r.length % 2) });
/** Bytes one item adds to a Write Var request. */
export const writeCost = (data: Buffer) => ITEM_SPEC + ITEM_DATA_HEAD + data.length + (data.length % 2);
/** Room for items in a request and in an answer. */
export const requestRoom = (pduLength: number) => pduLength - REQUEST_HEAD;
export const answerRoom = (pduLength: number) => pduLength - ANSWER_HEAD;
/** The longest byte range one item can read (alone in its request) / write. */
export const maxReadLength = (pduLength: number) => answerRoom(pduLength) - ITEM_DATA_HEAD;
export const maxWriteLength = (pduLength: number) => requestRoom(pduLength) - ITEM_SPEC - ITEM_DATA_HEAD;

/** A COTP data unit's header: length indicator, DT code, TPDU number with the EOT bit. */
const COTP_DT_HEAD = 3;

/**
 * Cuts a byte stream into TPKT frames and the frames' COTP data units into S7 PDUs (a PDU may
 * span several data units; the last has the EOT bit). Non-data COTP units (the connection
 * confirm) are handed over as they are. Nothing is buffered beyond what the PDU length allows
 * (the one asked for until the CPU grants one, then the granted one): a frame or a PDU that
 * says it is longer is refused at its header, before its bytes are waited for.
 */
export class FrameReader {
  private buffered: Buffer = Buffer.alloc(0);
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  constructor(
    private readonly onPdu: (pdu: Buffer) => void,
    private readonly onCotp: (cotp: Buffer) => void,
    private pduLimit: number,
  ) {}
  /** The PDU length the CPU granted: from now on no frame or PDU may be longer. */
  limitPdu(pduLength: number): void {
    this.pduLimit = pduLength;
  }
  /** Bytes held: of an incomplete frame, and of the data units of an incomplete PDU. */
  get held(): number {
    return this.buffered.length + this.pendingBytes;
  }
  push(chunk: Buffer): void {
    this.buffered = this.buffered.length ? Buffer.concat([this.buffered, chunk]) : chunk;
    while (this.buffered.length >= TPKT_HEAD) {
      if (this.buffered[0] !== 0x03) throw new S7ProtocolError('not a TPKT frame');
      const length = wireLength('S7', 'TPKT frame length', this.buffered.readUInt16BE(2), { min: TPKT_HEAD + 2, cap: TPKT_HEAD + COTP_DT_HEAD + this.pduLimit });
      if (this.buffered.length < length) return;
      const frame = this.buffered.subarray(TPKT_HEAD, length);
      this.buffered = this.buffered.subarray(length);
      this.frame(frame);
    }
  }
  private frame(cotp: Buffer): void {
    const headLength = cotp[0]! + 1;
    if (headLength > cotp.length) throw new S7ProtocolError('COTP header longer than its frame');
    if (cotp[1] !== 0xf0) return this.onCotp(cotp);
    if (headLength < COTP_DT_HEAD) throw new S7ProtocolError(`COTP data unit with a ${headLength}-byte header`);
    const unit = cotp.subarray(headLength);
    const last = (cotp[2]! & 0x80) !== 0;
    if (!last && unit.length === 0) throw new S7ProtocolError('empty COTP data unit without end of PDU');
    wireLength('S7', 'S7 PDU length', this.pendingBytes + unit.length, { cap: this.pduLimit });
    this.pending.push(unit);
    this.pendingBytes += unit.length;
    if (!last) return; // more data units follow
    const pdu = this.pending.length === 1 ? this.pending[0]! : Buffer.concat(this.pending);
    this.pending = [];
    this.pendingBytes = 0;
    this.onPdu(pdu);
  }
}
