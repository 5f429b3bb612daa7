// Fuzz target: what a Logix controller answers over EtherNet/IP. Two modes:
// - stream: encapsulation packets cut at random split points, reassembled as the session does
//   (splitPackets), each one's Common Packet Format data item, its Message Router reply, and for
//   a Multiple Service Packet the replies at their offsets (multipleServiceReplies);
// - read: a tag read (readTag: Read Tag, then Read Tag Fragmented while the controller answers
//   partial transfer, status 0x06) against a session that answers with the case's replies.
// Cases: valid replies from our encoders (test/fuzz/wire/cip-wire.ts), 0-3 mutations, raw bytes.
// Oracles: only ProtocolError (and, for reads, DeviceError: a refusal) escapes; a valid case
// decodes exactly; the stream reassembly holds at most one packet of the most a reply carries;
// a read asks at most one fragment per 32 bytes of the tag, plus two.
import fc from 'fast-check';
import { ProtocolError } from '../../../src/errors/errors.js';
import { AtomicTypes, cpfDataItem, ENCAP_HEADER, MAX_ENCAP_DATA, multipleServiceReplies, parseReply, splitPackets, type MessageReply } from '../../../src/mapping/drivers/cip.js';
import { readTag } from '../../../src/mapping/drivers/ethernet-ip.js';
import { ETHERNET_IP_TYPES } from '../../../src/mapping/drivers/ethernet-ip-schemas.js';
import { DeviceError } from '../../../src/mapping/drivers/types.js';
import { CaseReader, CaseWriter } from '../support/fuzz-case.js';
import { OracleError, onlyTyped, onlyTypedAsync, type FuzzTarget } from '../support/fuzz-target.js';
import { withCorpus } from '../support/corpus.js';
import { allocatedNow } from '../support/oracles.js';
import { applyMutations, chunksAt, mutationsArbitrary, splitPointsArbitrary, type Mutation } from '../support/mutators.js';
import { cipFields, connectedReply, messageReply, multipleServiceData } from '../wire/cip-wire.js';

/** The allocation a request/reply exchange of a tag read may cost (measured about 3 KiB). */
const EXCHANGE_COST = 8 * 1024;

/** What the case's session answers when its replies run out (a timeout, in the driver). */
class CaseEnded extends Error {}

const TYPES = [...ETHERNET_IP_TYPES, undefined] as const;

// ---- stream mode -------------------------------------------------------------------------

interface StreamCase {
  /** 0: one reply per packet; n > 0: each packet a Multiple Service Packet reply of n. */
  asked: number;
  /** The replies (their data) the packets carry, valid. */
  datas: Buffer[];
  splits: number[];
  stream: Uint8Array;
}

function validStream(c: Pick<StreamCase, 'asked' | 'datas'>): Buffer {
  if (c.asked === 0) return Buffer.concat(c.datas.map((d, i) => connectedReply(i + 1, messageReply(0x4c, 0, d))));
  const replies = Array.from({ length: c.asked }, (_v, i) => messageReply(0x4c, 0, c.datas[i % Math.max(1, c.datas.length)] ?? Buffer.alloc(0)));
  return connectedReply(1, messageReply(0x0a, 0, multipleServiceData(replies)));
}

function readStream(r: CaseReader): Omit<StreamCase, "stream"> & { stream: Buffer; valid: boolean } {
  const asked = r.u8() % 12;
  const datas = Array.from({ length: 1 + (r.u8() % 4) }, () => r.bytes());
  const splits = Array.from({ length: r.u8() % 9 }, () => r.u16());
  const stream = r.rest();
  const expected = validStream({ asked, datas });
  const valid = stream.equals(expected) && (asked === 0 ? datas.every((d) => d.length <= 490) : expected.length - ENCAP_HEADER <= MAX_ENCAP_DATA);
  return { asked, datas, splits, stream, valid };
}

function runStream(r: CaseReader): void {
  const { asked, datas, splits, stream, valid } = readStream(r);
  const got: MessageReply[][] = [];
  let buffered: Buffer = Buffer.alloc(0);
  const outcome = onlyTyped([ProtocolError], () => {
    for (const chunk of chunksAt(stream, splits)) {
      buffered = buffered.length ? Buffer.concat([buffered, chunk]) : chunk;
      const { packets, rest } = splitPackets(buffered);
      buffered = rest;
      if (buffered.length > ENCAP_HEADER + MAX_ENCAP_DATA) throw new OracleError('memory', `${buffered.length} bytes held after the complete packets`);
      for (const p of packets) {
        const reply = parseReply(cpfDataItem(p.data).subarray(2));
        got.push(asked === 0 ? [reply] : multipleServiceReplies(reply.data, asked));
      }
    }
  });
  if (!valid) return;
  if ('refused' in outcome) throw new OracleError('wrong', `valid replies were refused: ${outcome.refused.message}`);
  const flat = got.flat();
  const want = asked === 0 ? datas : Array.from({ length: asked }, (_v, i) => datas[i % datas.length]!);
  if (flat.length !== want.length || flat.some((g, i) => g.status !== 0 || !g.data.equals(want[i]!))) throw new OracleError('wrong', 'valid replies decoded to other replies');
}

const streamShape = fc.record({
  asked: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 11 })),
  datas: fc.array(fc.uint8Array({ maxLength: 40 }).map((d) => Buffer.from(d)), { minLength: 1, maxLength: 4 }),
});
const anyPacket = streamShape.map((c) => validStream(c) as Uint8Array);

function streamCase(c: { asked: number; datas: Buffer[] }, mutations: Mutation[], splits: number[]): Uint8Array {
  const valid = validStream(c);
  const w = new CaseWriter().u8(0).u8(c.asked).u8(c.datas.length - 1);
  for (const d of c.datas) w.bytes(d);
  w.u8(splits.length);
  for (const s of splits) w.u16(s);
  return w.rest(applyMutations(valid, cipFields(valid), mutations));
}

// ---- read mode ---------------------------------------------------------------------------

interface ReadCase {
  type: (typeof TYPES)[number];
  /** The type the controller answers. */
  answered: keyof typeof AtomicTypes;
  elements: number;
  /** The tag's bytes. */
  data: Buffer;
  /** Bytes per fragment. */
  fragment: number;
}

/** The controller's replies to a read: Read Tag, then Read Tag Fragmented, status 0x06 until the last. */
function validReplies(c: ReadCase): Buffer[] {
  const code = Buffer.alloc(2);
  code.writeUInt16LE(AtomicTypes[c.answered].code);
  const out: Buffer[] = [];
  for (let at = 0; at === 0 || at < c.data.length; at += c.fragment) {
    const last = at + c.fragment >= c.data.length;
    out.push(messageReply(at === 0 ? 0x4c : 0x52, last ? 0x00 : 0x06, Buffer.concat([code, c.data.subarray(at, at + c.fragment)])));
  }
  return out;
}

/** An independent reading of the tag's bytes: what a correct read returns. */
function expectedValues(c: ReadCase): unknown {
  const size = AtomicTypes[c.answered].size;
  const values = Array.from({ length: c.elements }, (_v, i) => {
    const at = i * size;
    switch (c.answered) {
      case 'BOOL':
        return c.data[at] !== 0;
      case 'SINT':
        return c.data.readInt8(at);
      case 'INT':
        return c.data.readInt16LE(at);
      case 'DINT':
        return c.data.readInt32LE(at);
      case 'DWORD':
        return c.data.readUInt32LE(at);
      case 'REAL':
        return c.data.readFloatLE(at);
      case 'LREAL':
        return c.data.readDoubleLE(at);
      case 'LINT': {
        const v = c.data.readBigInt64LE(at);
        return v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v.toString();
      }
    }
  });
  return c.elements === 1 ? values[0] : values;
}

/** A tag read may allocate 16 x the case + 64 KiB, and each request/reply exchange's fixed cost. */
const readAllowance = (caseBytes: number, exchanges: number) => 16 * caseBytes + 64 * 1024 + EXCHANGE_COST * exchanges;

function readRead(r: CaseReader): { c: ReadCase; replies: Buffer[]; total: number; valid: boolean } {
  const type = TYPES[r.u8() % TYPES.length];
  const answered = (Object.keys(AtomicTypes) as Array<keyof typeof AtomicTypes>)[r.u8() % 8]!;
  const elements = 1 + (r.u16() % 1000);
  const fragment = Math.max(1, r.u16());
  const data = r.bytes();
  const replies = Array.from({ length: r.u8() % 64 }, () => r.bytes());
  const c: ReadCase = { type, answered, elements, data, fragment };
  const total = elements * AtomicTypes[answered].size;
  const fitting = (type === undefined || AtomicTypes[type].code === AtomicTypes[answered].code) && data.length === total && (fragment >= 32 || fragment >= total);
  const expected = fitting ? validReplies(c) : [];
  const valid = fitting && expected.length === replies.length && expected.every((v, i) => v.equals(replies[i]!));
  return { c, replies, total, valid };
}

async function runRead(r: CaseReader, caseBytes: number): Promise<void> {
  const { c, replies, total, valid } = readRead(r);
  const { type, elements } = c;
  let asked = 0;
  const session = {
    messageLimit: 498,
    async request() {
      const raw = replies[asked++];
      if (!raw) throw new CaseEnded('the case has no more replies');
      return parseReply(raw);
    },
  };
  // The read alone is held to the allocation bound (the oracle's own decoding below is not the driver's).
  const before = allocatedNow();
  const outcome = await onlyTypedAsync([ProtocolError, DeviceError, CaseEnded], () => readTag(session, { tag: 'Fuzz', ...(type ? { type } : {}), elements }));
  const used = allocatedNow() - before;
  const bound = readAllowance(caseBytes, replies.length);
  if (used > bound) throw new OracleError('memory', `a read of ${caseBytes} bytes in ${replies.length} replies allocated ${used} bytes (at most ${bound})`);
  // An untyped read's tag is as long as the type the controller answers: at most 8 bytes an element.
  const most = type === undefined ? elements * 8 : total;
  const maxFragments = Math.ceil(most / 32) + 2;
  if (asked > maxFragments) throw new OracleError('unsafe', `a read of at most ${most} bytes made ${asked} requests (at most ${maxFragments})`);
  if (!valid) return;
  if ('refused' in outcome) throw new OracleError('wrong', `a valid read was refused: ${outcome.refused.message}`);
  const want = expectedValues(c);
  if (JSON.stringify(outcome.value) !== JSON.stringify(want)) throw new OracleError('wrong', `a valid read decoded to ${JSON.stringify(outcome.value)?.slice(0, 80)}`);
}

const readShape = fc
  .record({
    type: fc.constantFrom(...TYPES),
    elements: fc.oneof(fc.integer({ min: 1, max: 4 }), fc.integer({ min: 1, max: 300 })),
    fragment: fc.oneof(fc.integer({ min: 32, max: 490 }), fc.integer({ min: 1, max: 31 })),
    seed: fc.nat(),
  })
  .chain((s) => {
    const answered = s.type ?? (['SINT', 'INT', 'DINT', 'REAL', 'LREAL', 'LINT', 'BOOL', 'DWORD'] as const)[s.seed % 8]!;
    return fc.uint8Array({ minLength: s.elements * AtomicTypes[answered].size, maxLength: s.elements * AtomicTypes[answered].size }).map((d): ReadCase => ({ type: s.type, answered, elements: s.elements, fragment: s.fragment, data: Buffer.from(d) }));
  });

function readCase(c: ReadCase, replies: Buffer[]): Uint8Array {
  const w = new CaseWriter()
    .u8(1)
    .u8(TYPES.indexOf(c.type))
    .u8(Object.keys(AtomicTypes).indexOf(c.answered))
    .u16(c.elements - 1)
    .u16(c.fragment)
    .bytes(c.data)
    .u8(replies.length);
  for (const reply of replies) w.bytes(reply);
  return w.rest(new Uint8Array());
}

/** Fields of a Message Router reply: its extended status size. */
const replyFields = () => [{ at: 3, size: 1 as const, endian: 'LE' as const }];

const readCases = fc
  .record({
    c: readShape,
    // Which replies to mutate (index modulo their number), how, and replies repeated (status 0x06 forever).
    mutate: fc.array(fc.tuple(fc.nat(), mutationsArbitrary(fc.uint8Array({ maxLength: 16 }), 2)), { maxLength: 2 }),
    repeat: fc.oneof({ weight: 4, arbitrary: fc.constant(0) }, { weight: 1, arbitrary: fc.integer({ min: 1, max: 60 }) }),
  })
  .map(({ c, mutate, repeat }) => {
    const replies = validReplies(c);
    for (const [i, m] of mutate) replies[i % replies.length] = applyMutations(replies[i % replies.length]!, replyFields(), m);
    if (repeat && replies.length) for (let i = 0; i < repeat; i++) replies.splice(1, 0, messageReply(0x52, 0x06, replies[0]!.subarray(4)));
    return readCase(c, replies.slice(0, 63));
  });

/** The replies a read case gives its session (0 for the stream mode). */
function exchangesOf(bytes: Uint8Array): number {
  const r = new CaseReader(bytes);
  if (r.u8() % 2 === 0) return 0;
  r.u8();
  r.u8();
  r.u16();
  r.u16();
  r.bytes();
  return r.u8() % 64;
}

/** A recorded reply (an encapsulation packet from the test kit's CIP server) as a stream case. */
export function caseFromRecording(frame: Buffer): Uint8Array | undefined {
  try {
    const { packets } = splitPackets(frame);
    if (packets.length !== 1 || packets[0]!.command !== 0x70) return undefined;
    const reply = parseReply(cpfDataItem(packets[0]!.data).subarray(2));
    const asked = reply.service === 0x8a ? reply.data.readUInt16LE(0) : 0;
    if (asked > 11) return undefined;
    return rewriteStream(asked, [reply.data], frame);
  } catch {
    return undefined;
  }
}

/** A stream case whose stream is `frame` as recorded. */
function rewriteStream(asked: number, datas: Buffer[], frame: Buffer): Uint8Array {
  const w = new CaseWriter().u8(0).u8(asked).u8(datas.length - 1);
  for (const d of datas) w.bytes(d);
  return w.u8(0).rest(frame);
}

// ---- the target ----------------------------------------------------------------------------

const streamCases = fc
  .record({ shape: streamShape, mutations: fc.oneof({ weight: 1, arbitrary: fc.constant([] as Mutation[]) }, { weight: 6, arbitrary: mutationsArbitrary(anyPacket) }), splits: splitPointsArbitrary })
  .map(({ shape, mutations, splits }) => streamCase(shape, mutations, splits));

export const target: FuzzTarget = {
  name: 'cip-replies',
  description: 'EtherNet/IP replies: encapsulation reassembly at random split points, CPF items, Message Router and Multiple Service Packet replies; tag reads with fragments (status 0x06) from a session answering the case; valid replies from our encoders with 0-3 mutations, and raw bytes',
  async: true,
  valid: (bytes) => {
    const r = new CaseReader(bytes);
    return r.u8() % 2 === 0 ? readStream(r).valid : readRead(r).valid;
  },
  // A read holds its readTag call to readAllowance itself; the whole case also decodes the
  // expected values and compares them as JSON (the oracle's work, about 32 bytes a byte of tag).
  allowance: (bytes) => readAllowance(bytes.length, exchangesOf(bytes)) + 32 * bytes.length,
  cases: withCorpus('cip-replies', fc.oneof({ weight: 4, arbitrary: streamCases }, { weight: 4, arbitrary: readCases }, { weight: 1, arbitrary: fc.uint8Array({ maxLength: 2048 }) })),
  async run(bytes) {
    const r = new CaseReader(bytes);
    if (r.u8() % 2 === 0) runStream(r);
    else await runRead(r, bytes.length);
  },
};
