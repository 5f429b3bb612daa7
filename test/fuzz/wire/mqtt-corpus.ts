// Our own recordings of MQTT: every packet type of MQTT 3.1.1 and 5 as mqtt-packet generates it
// (the encoder of the clients the gateway meets most), each with the offsets of its length fields
// (remaining length, property lengths, string and binary lengths), and the mutations hostile
// clients make of them (issue 35 B): a length field set to 0, 1, its maximum or one off, a 5-byte
// or non-minimal variable byte integer, truncation, splicing, garbage, flipped bits. Used by the
// in-process fuzz target (targets/mqtt-ingress.ts) and by the malformed-client load against the
// daemon (test/mqtt-malformed-memory.test.ts, npm run bench -- mqtt-malformed). No third-party
// vectors: the library rule (docs/testing.md).
import { createRequire } from 'node:module';
import mqttPacket from 'mqtt-packet';

const constants = createRequire(import.meta.url)('mqtt-packet/constants.js') as {
  propertiesCodes: Record<number, string>;
  propertiesTypes: Record<string, string>;
};

export type MqttVersion = 4 | 5;
export type FieldKind = 'vbi' | 'u16' | 'u32';

export interface LengthField {
  offset: number;
  kind: FieldKind;
  /** Bytes the field takes (a VBI: 1 to 4). */
  size: number;
  value: number;
}

export interface Seed {
  name: string;
  version: MqttVersion;
  bytes: Buffer;
  fields: LengthField[];
}

/** The first credentials of a seed CONNECT: the fuzz harness and the load give them a user. */
export const FUZZ_USER = { username: 'fuzz', password: 'Fuzz-Passw0rd!' };

const u = (s: string) => s;
const props5 = {
  publish: { payloadFormatIndicator: true, messageExpiryInterval: 60, topicAlias: 3, responseTopic: 'r/t', correlationData: Buffer.from('cd'), userProperties: { a: 'b', c: ['d', 'e'] }, contentType: 'text/plain' },
  connect: { sessionExpiryInterval: 30, receiveMaximum: 20, maximumPacketSize: 65536, topicAliasMaximum: 10, requestResponseInformation: true, requestProblemInformation: true, userProperties: { k: 'v' } },
  will: { willDelayInterval: 1, payloadFormatIndicator: false, messageExpiryInterval: 10, contentType: 'x', responseTopic: 'w/r', correlationData: Buffer.from('w'), userProperties: { w: 'x' } },
  ack: { reasonString: 'why', userProperties: { a: 'b' } },
};

/** The valid packets (objects) of one protocol version, by name. */
function packetObjects(v: MqttVersion): Record<string, mqttPacket.Packet> {
  const five = v === 5;
  const p = <T extends object>(o: T, extra: object) => (five ? { ...o, ...extra } : o);
  const connect = (name: string, extra: Partial<mqttPacket.IConnectPacket>): mqttPacket.IConnectPacket => ({
    cmd: 'connect',
    protocolId: 'MQTT',
    protocolVersion: v,
    clean: true,
    clientId: `fuzz-${name}`,
    keepalive: 30,
    ...(five ? { properties: props5.connect } : {}),
    ...extra,
  });
  return {
    connect: connect('c', { ...FUZZ_USER, password: Buffer.from(FUZZ_USER.password) }),
    'connect-will': connect('w', {
      ...FUZZ_USER,
      password: Buffer.from(FUZZ_USER.password),
      clean: false,
      will: { topic: 'fuzz/will', payload: Buffer.from('gone'), qos: 1, retain: false, ...(five ? { properties: props5.will } : {}) } as mqttPacket.IConnectPacket['will'],
    }),
    'connect-anonymous': connect('a', { clientId: '' }),
    // Ids that name Object members: aedes' client registry was a plain object.
    'connect-proto': connect('p', { ...FUZZ_USER, password: Buffer.from(FUZZ_USER.password), clientId: 'constructor' }),
    connack: p({ cmd: 'connack', returnCode: 0, sessionPresent: false }, { reasonCode: 0, properties: { maximumPacketSize: 1024, topicAliasMaximum: 4, assignedClientIdentifier: 'x' } }) as mqttPacket.Packet,
    'publish-0': p({ cmd: 'publish', topic: u('fuzz/a'), payload: Buffer.from('zero'), qos: 0, retain: false, dup: false }, { properties: props5.publish }) as mqttPacket.Packet,
    'publish-1': p({ cmd: 'publish', topic: u('fuzz/b'), payload: Buffer.from('one'), qos: 1, messageId: 7, retain: true, dup: false }, { properties: props5.publish }) as mqttPacket.Packet,
    'publish-2': p({ cmd: 'publish', topic: u('fuzz/c'), payload: Buffer.alloc(300, 0x41), qos: 2, messageId: 8, retain: false, dup: true }, { properties: props5.publish }) as mqttPacket.Packet,
    puback: p({ cmd: 'puback', messageId: 7 }, { reasonCode: 16, properties: props5.ack }) as mqttPacket.Packet,
    pubrec: p({ cmd: 'pubrec', messageId: 8 }, { reasonCode: 0, properties: props5.ack }) as mqttPacket.Packet,
    pubrel: p({ cmd: 'pubrel', messageId: 8 }, { reasonCode: 0, properties: props5.ack }) as mqttPacket.Packet,
    pubcomp: p({ cmd: 'pubcomp', messageId: 8 }, { reasonCode: 0, properties: props5.ack }) as mqttPacket.Packet,
    subscribe: p(
      { cmd: 'subscribe', messageId: 9, subscriptions: [{ topic: 'fuzz/#', qos: 1 }, { topic: '$share/g/fuzz/+', qos: 2 }, { topic: 'fuzz/x', qos: 0 }] },
      { subscriptions: [{ topic: 'fuzz/#', qos: 1, nl: true, rap: true, rh: 1 }, { topic: '$share/g/fuzz/+', qos: 2 }, { topic: 'fuzz/x', qos: 0, rh: 2 }], properties: { subscriptionIdentifier: 5, userProperties: { s: 't' } } },
    ) as mqttPacket.Packet,
    suback: p({ cmd: 'suback', messageId: 9, granted: [0, 1, 2, 128] }, { properties: props5.ack }) as mqttPacket.Packet,
    unsubscribe: p({ cmd: 'unsubscribe', messageId: 10, unsubscriptions: ['fuzz/#', 'fuzz/x'] }, { properties: { userProperties: { u: 'v' } } }) as mqttPacket.Packet,
    unsuback: p({ cmd: 'unsuback', messageId: 10 }, { granted: [0, 17], properties: props5.ack }) as mqttPacket.Packet,
    pingreq: { cmd: 'pingreq' },
    pingresp: { cmd: 'pingresp' },
    disconnect: p({ cmd: 'disconnect' }, { reasonCode: 0, properties: { sessionExpiryInterval: 0, reasonString: 'bye', userProperties: { d: 'e' } } }) as mqttPacket.Packet,
    ...(five ? { auth: { cmd: 'auth', reasonCode: 0x18, properties: { authenticationMethod: 'm', authenticationData: Buffer.from('d'), reasonString: 'r' } } as mqttPacket.Packet } : {}),
  };
}

/** Reads the fields of a packet we generated (valid by construction), offset by offset. */
class FieldWalker {
  readonly fields: LengthField[] = [];
  pos = 0;
  constructor(private readonly buf: Buffer) {}

  vbi(): number {
    const start = this.pos;
    let value = 0;
    let mul = 1;
    for (;;) {
      const b = this.buf[this.pos++]!;
      value += (b & 0x7f) * mul;
      mul *= 128;
      if ((b & 0x80) === 0) break;
    }
    this.fields.push({ offset: start, kind: 'vbi', size: this.pos - start, value });
    return value;
  }

  u16Length(): number {
    const value = this.buf.readUInt16BE(this.pos);
    this.fields.push({ offset: this.pos, kind: 'u16', size: 2, value });
    this.pos += 2 + value;
    return value;
  }

  skip(n: number): void {
    this.pos += n;
  }

  properties(): void {
    const length = this.vbi();
    const end = this.pos + length;
    while (this.pos < end) {
      const name = constants.propertiesCodes[this.buf[this.pos++]!]!;
      switch (constants.propertiesTypes[name]) {
        case 'byte':
        case 'int8':
          this.skip(1);
          break;
        case 'int16':
          this.skip(2);
          break;
        case 'int32':
          this.fields.push({ offset: this.pos, kind: 'u32', size: 4, value: this.buf.readUInt32BE(this.pos) });
          this.skip(4);
          break;
        case 'var':
          this.vbi();
          break;
        case 'pair':
          this.u16Length();
          this.u16Length();
          break;
        default:
          this.u16Length();
      }
    }
  }
}

function lengthFields(buf: Buffer, version: MqttVersion): LengthField[] {
  const w = new FieldWalker(buf);
  const type = buf[0]! >> 4;
  const qos = (buf[0]! >> 1) & 3;
  w.skip(1);
  const end = w.vbi() + w.pos;
  const five = version === 5;
  const more = () => w.pos < end;
  switch (type) {
    case 1: {
      w.u16Length();
      w.skip(1);
      const flags = buf[w.pos]!;
      w.skip(3);
      if (five) w.properties();
      w.u16Length();
      if (flags & 0x04) {
        if (five) w.properties();
        w.u16Length();
        w.u16Length();
      }
      if (flags & 0x80) w.u16Length();
      if (flags & 0x40) w.u16Length();
      break;
    }
    case 2:
      w.skip(2);
      if (five) w.properties();
      break;
    case 3:
      w.u16Length();
      if (qos > 0) w.skip(2);
      if (five) w.properties();
      break;
    case 4:
    case 5:
    case 6:
    case 7:
      w.skip(2);
      if (five && more()) w.skip(1);
      if (five && more()) w.properties();
      break;
    case 8:
    case 10:
      w.skip(2);
      if (five) w.properties();
      while (more()) {
        w.u16Length();
        if (type === 8) w.skip(1);
      }
      break;
    case 9:
    case 11:
      w.skip(2);
      if (five) w.properties();
      break;
    case 14:
    case 15:
      if (five && more()) w.skip(1);
      if (five && more()) w.properties();
      break;
  }
  return w.fields;
}

let cached: Seed[] | undefined;

/** Every seed packet of MQTT 3.1.1 and 5 with its length fields. */
export function seeds(): Seed[] {
  if (cached) return cached;
  const out: Seed[] = [];
  for (const version of [4, 5] as const) {
    for (const [name, packet] of Object.entries(packetObjects(version))) {
      const bytes = mqttPacket.generate(packet, { protocolVersion: version });
      out.push({ name: `${name}-v${version}`, version, bytes, fields: lengthFields(bytes, version) });
    }
  }
  cached = out;
  return out;
}

/** A seed of our own bytes (a packet generated on the fly), with its length fields. */
export function seedFromBytes(name: string, version: MqttVersion, bytes: Buffer): Seed {
  return { name, version, bytes, fields: lengthFields(bytes, version) };
}

export function seedNamed(name: string): Seed {
  const seed = seeds().find((s) => s.name === name);
  if (!seed) throw new Error(`no seed ${name}`);
  return seed;
}

/** The largest value a variable byte integer of 4 bytes holds (MQTT's largest remaining length). */
export const VBI_MAX = 268_435_455;

export function encodeVbi(value: number): Buffer {
  const out: number[] = [];
  do {
    let b = value % 128;
    value = Math.floor(value / 128);
    if (value > 0) b |= 0x80;
    out.push(b);
  } while (value > 0 && out.length < 4);
  return Buffer.from(out);
}

const fieldMax: Record<FieldKind, number> = { vbi: VBI_MAX, u16: 0xffff, u32: 0xffffffff };

/** One change to a packet. Field mutations address a field of the seed; the others any byte. */
export type Mutation =
  | { kind: 'field'; field: number; to: 'zero' | 'one' | 'max' | 'minus-one' | 'plus-one' | 'value'; value?: number }
  | { kind: 'vbi-5-bytes'; field: number }
  | { kind: 'vbi-non-minimal'; field: number }
  | { kind: 'truncate'; at: number }
  | { kind: 'flip'; at: number; bit: number }
  | { kind: 'set-byte'; at: number; value: number }
  | { kind: 'insert'; at: number; bytes: Uint8Array }
  | { kind: 'splice'; at: number; other: number; from: number }
  | { kind: 'duplicate'; from: number; length: number };

function replaceAt(buf: Buffer, offset: number, size: number, bytes: Buffer): Buffer {
  return Buffer.concat([buf.subarray(0, offset), bytes, buf.subarray(offset + size)]);
}

function encodeField(kind: FieldKind, value: number): Buffer {
  if (kind === 'vbi') return encodeVbi(value);
  const b = Buffer.alloc(kind === 'u16' ? 2 : 4);
  if (kind === 'u16') b.writeUInt16BE(value & 0xffff);
  else b.writeUInt32BE(value >>> 0);
  return b;
}

/**
 * Applies mutations in order. Field mutations apply to the seed's own bytes (the first field
 * mutation only, so its offsets hold); byte mutations to whatever came before. Indices wrap.
 */
export function mutate(seed: Seed, mutations: readonly Mutation[]): Buffer {
  let buf: Buffer = Buffer.from(seed.bytes);
  let fieldsValid = true;
  const all = seeds();
  for (const m of mutations) {
    const at = (n: number) => (buf.length ? n % (buf.length + 1) : 0);
    switch (m.kind) {
      case 'field':
      case 'vbi-5-bytes':
      case 'vbi-non-minimal': {
        if (!fieldsValid || seed.fields.length === 0) break;
        const f = seed.fields[m.field % seed.fields.length]!;
        let bytes: Buffer;
        if (m.kind === 'vbi-5-bytes') bytes = Buffer.from([0xff, 0xff, 0xff, 0xff, 0x7f]);
        else if (m.kind === 'vbi-non-minimal') bytes = f.kind === 'vbi' ? Buffer.from([(f.value & 0x7f) | 0x80, 0x80, 0x00]) : encodeField(f.kind, f.value);
        else {
          const max = fieldMax[f.kind];
          const to = { zero: 0, one: 1, max, 'minus-one': Math.max(0, f.value - 1), 'plus-one': Math.min(max, f.value + 1), value: Math.min(max, m.value ?? 0) }[m.to];
          bytes = encodeField(f.kind, to);
        }
        buf = replaceAt(buf, f.offset, f.size, bytes);
        fieldsValid = false;
        break;
      }
      case 'truncate':
        buf = buf.subarray(0, at(m.at));
        break;
      case 'flip': {
        if (!buf.length) break;
        const i = m.at % buf.length;
        buf[i] = buf[i]! ^ (1 << (m.bit & 7));
        fieldsValid = false;
        break;
      }
      case 'set-byte': {
        if (!buf.length) break;
        buf[m.at % buf.length] = m.value & 0xff;
        fieldsValid = false;
        break;
      }
      case 'insert':
        buf = Buffer.concat([buf.subarray(0, at(m.at)), Buffer.from(m.bytes), buf.subarray(at(m.at))]);
        fieldsValid = false;
        break;
      case 'splice': {
        const other = all[m.other % all.length]!.bytes;
        buf = Buffer.concat([buf.subarray(0, at(m.at)), other.subarray(m.from % (other.length + 1))]);
        fieldsValid = false;
        break;
      }
      case 'duplicate': {
        if (!buf.length) break;
        const from = m.from % buf.length;
        buf = Buffer.concat([buf, buf.subarray(from, from + (m.length % 4096))]);
        break;
      }
    }
  }
  return buf;
}


const INTERESTING = [0, 1, 0x7f, 0x80, 0xff, 0xffff, 0x7fffffff, 0xffffffff];

/** One to three random mutations (the same kinds as the fast-check arbitrary, drawn by `rand`). */
export function randomMutations(rand: () => number): Mutation[] {
  const n = 1 + Math.floor(rand() * 3);
  const int = (k: number) => Math.floor(rand() * k);
  const out: Mutation[] = [];
  const tos = ['zero', 'one', 'max', 'minus-one', 'plus-one', 'value'] as const;
  for (let i = 0; i < n; i++) {
    switch (int(9)) {
      case 0:
      case 1:
        out.push({ kind: 'field', field: int(64), to: tos[int(tos.length)]!, value: INTERESTING[int(INTERESTING.length)]! });
        break;
      case 2:
        out.push(rand() < 0.5 ? { kind: 'vbi-5-bytes', field: int(64) } : { kind: 'vbi-non-minimal', field: int(64) });
        break;
      case 3:
        out.push({ kind: 'truncate', at: int(4096) });
        break;
      case 4:
        out.push({ kind: 'flip', at: int(4096), bit: int(8) });
        break;
      case 5:
        out.push({ kind: 'set-byte', at: int(4096), value: INTERESTING[int(INTERESTING.length)]! & 0xff });
        break;
      case 6:
        out.push({ kind: 'insert', at: int(4096), bytes: Uint8Array.from({ length: 1 + int(64) }, () => int(256)) });
        break;
      case 7:
        out.push({ kind: 'splice', at: int(4096), other: int(64), from: int(4096) });
        break;
      default:
        out.push({ kind: 'duplicate', from: int(4096), length: int(512) });
    }
  }
  return out;
}
