// EtherNet/IP connections to Logix controllers (configuration {host, port, slot, timeoutMs}):
// endpoints name a tag and, optionally, its atomic type ({tag, type, elements}); reads are Read
// Tag (0x4C, continued with Read Tag Fragmented when the answer does not fit the connection),
// writes Write Tag (0x4D, Write Tag Fragmented when the request does not fit). Without `type`
// a tag is read as the controller types it (every Read Tag answer carries the type); a write
// then learns the type with a read first, once per session. With `type` the controller's type
// is checked at every read. BOOL arrays live in 32-bit words in a Logix controller: they are
// read by the word and written bit by bit with Read Modify Write Tag (0x4E), so the other bits
// of the word are never overwritten. Values are JSON booleans and numbers; LINT beyond
// ±(2^53-1) is a decimal string. A tag the controller refuses or does not know, or a value that
// does not fit, is the endpoint's error (DeviceError); the connection and its other endpoints
// go on. A malformed answer (ProtocolError) loses the connection. The session and its batching:
// cip-session.ts.
import type { EndpointDef } from '../service-files.js';
import { AtomicTypes, parseTagName, Service, Status, statusText, tagPath, typeName, messageRequest, type AtomicType, type MessageReply } from './cip.js';
import { openCipSession, type CipSession } from './cip-session.js';
import type { EtherNetIpType } from './ethernet-ip-schemas.js';
import { DeviceError, RefusedWriteError, type ConnectionDriver } from './types.js';
import { ProtocolError } from '../../errors/errors.js';
import { wireLength } from './wire-length.js';

export interface EtherNetIpConfiguration {
  host: string;
  port: number;
  slot: number;
  timeoutMs: number;
}

/** What an endpoint's address asks of the controller, worked out once. */
interface TagPlan {
  tag: string;
  /** The endpoint's type; undefined: the controller's (from its answers). */
  type: EtherNetIpType | undefined;
  elements: number;
  path: Buffer;
  /** The type code the controller must answer (DWORD for BOOL arrays); undefined: any atomic type. */
  code: number | undefined;
  /** Elements on the wire (32-bit words for a BOOL array). */
  wireElements: number;
  /** A BOOL array: the first bit's position in the first word. */
  firstBit?: number;
  /** Untyped write endpoints: the type the controller answered, learned once per session. */
  learned?: { session: CipSession; type: AtomicType };
}

const plans = new WeakMap<EndpointDef, TagPlan>();
/** The largest atomic element (LINT, LREAL): what an untyped read's answer is budgeted at. */
const MAX_ATOMIC_SIZE = 8;
/**
 * A fragmented read takes at most this many fragments per this many bytes of the tag: a
 * controller fills each fragment to the connection (hundreds of bytes); one that sends a few
 * bytes at a time, or partial transfers forever, loses the connection.
 */
const MIN_FRAGMENT_BYTES = 32;

/** An endpoint's address as the driver reads it. */
export interface EtherNetIpAddress {
  tag: string;
  type?: EtherNetIpType;
  elements?: number;
}

function planOf(ep: EndpointDef): TagPlan {
  const known = plans.get(ep);
  if (known) return known;
  const plan = planFor(ep.address as unknown as EtherNetIpAddress);
  plans.set(ep, plan);
  return plan;
}

function planFor(address: EtherNetIpAddress): TagPlan {
  const { tag, type, elements = 1 } = address;
  const levels = parseTagName(tag);
  const last = levels[levels.length - 1]!;
  let plan: TagPlan;
  if (type === 'BOOL' && last.indices.length === 1) {
    // Element n of a BOOL array is bit n % 32 of word n / 32.
    const n = last.indices[0]!;
    const wordLevels = [...levels.slice(0, -1), { name: last.name, indices: [Math.floor(n / 32)] }];
    const firstBit = n % 32;
    plan = { tag, type, elements, path: tagPath(wordLevels), code: AtomicTypes.DWORD.code, wireElements: Math.floor((firstBit + elements - 1) / 32) + 1, firstBit };
  } else {
    plan = { tag, type, elements, path: tagPath(levels), code: type === undefined ? undefined : AtomicTypes[type].code, wireElements: elements };
  }
  return plan;
}

const refused = (plan: TagPlan, reply: MessageReply) => new DeviceError(`${plan.tag}: ${statusText(reply.status, reply.extended)}`);
const malformed = (plan: TagPlan, what: string) => new ProtocolError('EtherNet/IP', `${plan.tag}: ${what}`);

/** The atomic type the controller answered, checked against the endpoint's. */
function answeredType(plan: TagPlan, code: number): AtomicType {
  if (plan.code !== undefined && code !== plan.code) {
    const says = plan.firstBit !== undefined ? 'an element of a BOOL array' : plan.type;
    const is = code === AtomicTypes.DWORD.code ? 'a BOOL array (or DWORD)' : typeName(code);
    throw new DeviceError(`${plan.tag} is ${is} in the controller, the endpoint says ${says}`);
  }
  const type = (Object.keys(AtomicTypes) as AtomicType[]).find((t) => AtomicTypes[t].code === code);
  if (!type) throw new DeviceError(`${plan.tag} is ${typeName(code)} in the controller: only atomic types are read (address its atomic members)`);
  return type;
}

/** One reading of a tag through a session (the driver's read; the fuzz target feeds it a session of its own). */
export const readTag = (session: Pick<CipSession, 'request' | 'messageLimit'>, address: EtherNetIpAddress): Promise<unknown> => read(session as CipSession, planFor(address));

async function read(session: CipSession, plan: TagPlan): Promise<unknown> {
  const { type, data } = await readWire(session, plan);
  const values = decode(plan, type, data);
  return plan.elements === 1 ? values[0] : values;
}

/** Read Tag (and Read Tag Fragmented): the type the controller answered and exactly the tag's bytes. */
async function readWire(session: CipSession, plan: TagPlan): Promise<{ type: AtomicType; data: Buffer }> {
  const count = Buffer.alloc(2);
  count.writeUInt16LE(plan.wireElements);
  const replyBytes = 4 + 2 + plan.wireElements * (plan.code === undefined ? MAX_ATOMIC_SIZE : AtomicTypes[answeredTypeOf(plan)].size);
  let reply = await session.request(messageRequest(Service.ReadTag, plan.path, count), replyBytes, replyBytes <= session.messageLimit);
  if (reply.status !== Status.Success && reply.status !== Status.PartialTransfer) throw refused(plan, reply);
  if (reply.data.length < 2) throw malformed(plan, 'Read Tag answer without a type');
  const code = reply.data.readUInt16LE(0);
  const type = answeredType(plan, code);
  const total = plan.wireElements * AtomicTypes[type].size;
  const maxFragments = Math.ceil(total / MIN_FRAGMENT_BYTES) + 1;
  const chunks = [reply.data.subarray(2)];
  let received = wireLength('EtherNet/IP', `${plan.tag} data`, chunks[0]!.length, { cap: total });
  // An answer too large for the connection comes in fragments (1756-PM020: Read Tag Fragmented).
  while (reply.status === Status.PartialTransfer) {
    if (chunks[chunks.length - 1]!.length === 0 || received >= total) throw malformed(plan, 'partial transfer without data, or beyond the tag');
    if (chunks.length >= maxFragments) throw malformed(plan, `more than ${maxFragments} fragments for ${total} bytes`);
    const next = Buffer.alloc(6);
    next.writeUInt16LE(plan.wireElements, 0);
    next.writeUInt32LE(received, 2);
    reply = await session.request(messageRequest(Service.ReadTagFragmented, plan.path, next), session.messageLimit, false);
    if (reply.status !== Status.Success && reply.status !== Status.PartialTransfer) throw refused(plan, reply);
    if (reply.data.length < 2 || reply.data.readUInt16LE(0) !== code) throw malformed(plan, 'a fragment of another type');
    const chunk = reply.data.subarray(2);
    received = wireLength('EtherNet/IP', `${plan.tag} data`, received + chunk.length, { cap: total });
    chunks.push(chunk);
  }
  if (received !== total) throw malformed(plan, `the controller answered ${received} bytes, ${total} expected`);
  return { type, data: chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks) };
}

/** The type a typed plan expects on the wire. */
const answeredTypeOf = (plan: TagPlan): AtomicType => (plan.firstBit !== undefined ? 'DWORD' : plan.type!);

function decode(plan: TagPlan, type: AtomicType, data: Buffer): unknown[] {
  const out: unknown[] = [];
  if (plan.firstBit !== undefined) {
    for (let i = 0; i < plan.elements; i++) {
      const bit = plan.firstBit + i;
      out.push(((data.readUInt32LE(Math.floor(bit / 32) * 4) >>> bit % 32) & 1) === 1);
    }
    return out;
  }
  const size = AtomicTypes[type].size;
  for (let i = 0; i < plan.elements; i++) {
    const at = i * size;
    switch (type) {
      case 'BOOL':
        out.push(data[at] !== 0);
        break;
      case 'DWORD':
        out.push(data.readUInt32LE(at));
        break;
      case 'SINT':
        out.push(data.readInt8(at));
        break;
      case 'INT':
        out.push(data.readInt16LE(at));
        break;
      case 'DINT':
        out.push(data.readInt32LE(at));
        break;
      case 'LINT': {
        const v = data.readBigInt64LE(at);
        out.push(v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v.toString());
        break;
      }
      case 'REAL':
        out.push(data.readFloatLE(at));
        break;
      case 'LREAL':
        out.push(data.readDoubleLE(at));
        break;
    }
  }
  return out;
}

const INTEGER_RANGE = { SINT: [-128, 127], INT: [-32768, 32767], DINT: [-2147483648, 2147483647], DWORD: [0, 4294967295] } as const;
const FLOAT32_MAX = 3.4028234663852886e38;
const LINT_MIN = -(2n ** 63n);
const LINT_MAX = 2n ** 63n - 1n;

/** The values a write carries, checked against the endpoint's type and number of elements. */
function valuesOf(plan: TagPlan, value: unknown): unknown[] {
  const type = plan.type ? `${plan.type} ` : '';
  if (plan.elements === 1) {
    if (Array.isArray(value)) throw new RefusedWriteError(`${plan.tag} takes one ${type}value, not an array`);
    return [value];
  }
  if (!Array.isArray(value) || value.length !== plan.elements) throw new RefusedWriteError(`${plan.tag} takes an array of ${plan.elements} ${type}values`);
  return value;
}

function encode(plan: TagPlan, type: AtomicType, values: unknown[]): Buffer {
  const size = AtomicTypes[type].size;
  const data = Buffer.alloc(values.length * size);
  values.forEach((v, i) => {
    const at = i * size;
    const bad = (what: string) => new RefusedWriteError(`${plan.tag}${plan.elements > 1 ? `[element ${i}]` : ''}: ${JSON.stringify(v) ?? String(v)} ${what}`);
    switch (type) {
      case 'BOOL':
        if (v !== true && v !== false && v !== 0 && v !== 1) throw bad('is not a BOOL (true, false, 0 or 1)');
        data[at] = v === true || v === 1 ? 1 : 0;
        break;
      case 'SINT':
      case 'INT':
      case 'DINT':
      case 'DWORD': {
        const [min, max] = INTEGER_RANGE[type];
        if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) throw bad(`does not fit a ${type} (integers ${min}..${max})`);
        if (type === 'SINT') data.writeInt8(v, at);
        else if (type === 'INT') data.writeInt16LE(v, at);
        else if (type === 'DINT') data.writeInt32LE(v, at);
        else data.writeUInt32LE(v, at);
        break;
      }
      case 'LINT': {
        let n: bigint | undefined;
        if (typeof v === 'number' && Number.isSafeInteger(v)) n = BigInt(v);
        else if (typeof v === 'string' && /^-?[0-9]{1,20}$/.test(v)) n = BigInt(v);
        if (n === undefined || n < LINT_MIN || n > LINT_MAX) throw bad('does not fit a LINT (a safe integer, or a decimal string of a 64-bit integer)');
        data.writeBigInt64LE(n, at);
        break;
      }
      case 'REAL':
        if (typeof v !== 'number' || !Number.isFinite(v) || Math.abs(v) > FLOAT32_MAX) throw bad('does not fit a REAL (a number within ±3.4e38)');
        data.writeFloatLE(v, at);
        break;
      case 'LREAL':
        if (typeof v !== 'number' || !Number.isFinite(v)) throw bad('is not an LREAL (a number)');
        data.writeDoubleLE(v, at);
        break;
    }
  });
  return data;
}

/** The type an untyped endpoint writes: the controller's, from a Read Tag of one element (once per session). */
async function learnedType(session: CipSession, plan: TagPlan): Promise<AtomicType> {
  if (plan.learned?.session === session) return plan.learned.type;
  const count = Buffer.from([1, 0]);
  const reply = await session.request(messageRequest(Service.ReadTag, plan.path, count), 4 + 2 + MAX_ATOMIC_SIZE, true);
  if (reply.status !== Status.Success && reply.status !== Status.PartialTransfer) throw refused(plan, reply);
  if (reply.data.length < 2) throw malformed(plan, 'Read Tag answer without a type');
  const type = answeredType(plan, reply.data.readUInt16LE(0));
  plan.learned = { session, type };
  return type;
}

async function write(session: CipSession, plan: TagPlan, value: unknown): Promise<void> {
  const values = valuesOf(plan, value);
  if (plan.firstBit !== undefined) return writeBits(session, plan, values);
  const type = plan.type ?? (await learnedType(session, plan));
  const size = AtomicTypes[type].size;
  const data = encode(plan, type, values);
  const head = Buffer.alloc(4);
  head.writeUInt16LE(AtomicTypes[type].code, 0);
  head.writeUInt16LE(plan.elements, 2);
  // Service, path size, path and the type/count head must fit beside the data.
  const room = session.messageLimit - 2 - plan.path.length - 8;
  if (data.length <= room + 4) {
    const reply = await session.request(messageRequest(Service.WriteTag, plan.path, Buffer.concat([head, data])), 4 + 4, false);
    if (reply.status !== Status.Success) throw refused(plan, reply);
    return;
  }
  // Fragments of whole elements, each with its byte offset (Write Tag Fragmented).
  const step = Math.floor(room / size) * size;
  for (let offset = 0; offset < data.length; offset += step) {
    const at = Buffer.alloc(4);
    at.writeUInt32LE(offset);
    const reply = await session.request(messageRequest(Service.WriteTagFragmented, plan.path, Buffer.concat([head, at, data.subarray(offset, offset + step)])), 4 + 4, false);
    if (reply.status !== Status.Success) throw refused(plan, reply);
  }
}

/** BOOL array elements: one Read Modify Write per 32-bit word, setting and clearing only those bits. */
async function writeBits(session: CipSession, plan: TagPlan, values: unknown[]): Promise<void> {
  const bits = values.map((v, i) => {
    if (v !== true && v !== false && v !== 0 && v !== 1) throw new RefusedWriteError(`${plan.tag}${plan.elements > 1 ? `[element ${i}]` : ''}: ${JSON.stringify(v) ?? String(v)} is not a BOOL (true, false, 0 or 1)`);
    return v === true || v === 1;
  });
  const levels = parseTagName(plan.tag);
  const last = levels[levels.length - 1]!;
  const first = last.indices[0]!;
  for (let word = 0; word < plan.wireElements; word++) {
    let or = 0;
    let and = 0xffffffff;
    bits.forEach((on, i) => {
      const bit = plan.firstBit! + i;
      if (Math.floor(bit / 32) !== word) return;
      const mask = (1 << bit % 32) >>> 0;
      if (on) or = (or | mask) >>> 0;
      else and = (and & ~mask) >>> 0;
    });
    const masks = Buffer.alloc(10);
    masks.writeUInt16LE(4, 0);
    masks.writeUInt32LE(or, 2);
    masks.writeUInt32LE(and, 6);
    const path = tagPath([...levels.slice(0, -1), { name: last.name, indices: [Math.floor(first / 32) + word] }]);
    const reply = await session.request(messageRequest(Service.ReadModifyWriteTag, path, masks), 4 + 4, false);
    if (reply.status !== Status.Success) throw refused(plan, reply);
  }
}

export function createEtherNetIpDriver(cfg: EtherNetIpConfiguration, options: { keepAliveMs?: number } = {}): ConnectionDriver {
  let session: CipSession | undefined;
  let lostListener: (reason: string) => void = () => {};
  const current = (): CipSession => {
    if (!session) throw new Error('not connected');
    return session;
  };
  return {
    async connect() {
      const s = await openCipSession({ ...cfg, ...options });
      s.onLost((reason) => {
        if (session !== s) return;
        session = undefined;
        lostListener(reason);
      });
      session = s;
    },
    async disconnect() {
      const s = session;
      session = undefined;
      await s?.close();
    },
    onLost(listener) {
      lostListener = listener;
    },
    read: async (ep) => read(current(), planOf(ep)),
    write: async (ep, value) => write(current(), planOf(ep), value),
  };
}
