// The test kit's Logix controller: an EtherNet/IP server (TCP) answering what a CIP explicit
// messaging client of a ControlLogix sends, as Rockwell's Logix 5000 data access manual
// (1756-PM020) and the ODVA encapsulation describe it: Register/Unregister Session, ListIdentity,
// SendRRData (Forward Open/Close, Unconnected Send through the Connection Manager, Get Attributes
// All of the Identity), SendUnitData on the connection it opened, and in both: Read Tag (0x4C),
// Read Tag Fragmented (0x52), Write Tag (0x4D), Write Tag Fragmented (0x53), Read Modify Write
// Tag (0x4E) and Multiple Service Packet (0x0A). Errors as a controller answers them: no such tag
// 0x05, a malformed path 0x04, beyond the end 0xFF/0x2105, type mismatch 0xFF/0x2107, read-only
// 0x0F, short data 0x13, an unknown service 0x08. Written on its own (it shares no code with the
// gateway's client) and compared byte for byte with a capture of a real controller.
import { EventEmitter, once } from 'node:events';
import net from 'node:net';

export type CipTypeName = 'BOOL' | 'SINT' | 'INT' | 'DINT' | 'LINT' | 'REAL' | 'LREAL';
const TYPES: Record<CipTypeName | 'DWORD', [code: number, size: number]> = {
  BOOL: [0xc1, 1],
  SINT: [0xc2, 1],
  INT: [0xc3, 2],
  DINT: [0xc4, 4],
  LINT: [0xc5, 8],
  REAL: [0xca, 4],
  LREAL: [0xcb, 8],
  DWORD: [0xd3, 4],
};

/**
 * A tag of the test controller. `length`: an array of that many elements (BOOL arrays: bits, a
 * multiple of 32, stored as 32-bit words as Logix does). Names may carry members and inner
 * indices (`Line.Motor[2].Speed`, `Program:Main.Speed`); only the last level's index addresses
 * elements.
 */
export interface CipTagSpec {
  type: CipTypeName;
  length?: number;
  value?: number | boolean | bigint | Array<number | boolean | bigint>;
  readOnly?: boolean;
}

interface StoredTag {
  name: string;
  code: number;
  size: number;
  count: number;
  bytes: Buffer;
  readOnly: boolean;
  boolArray: boolean;
}

export interface CipTestServer {
  host: string;
  port: number;
  /** The tag's value now (arrays as arrays; LINT as bigint). */
  get(name: string): unknown;
  set(name: string, value: CipTagSpec['value']): void;
  define(name: string, spec: CipTagSpec): void;
  /** Message Router services handled (inside Multiple Service Packets too), and packets. */
  readonly counts: { sessions: number; forwardOpens: number; forwardCloses: number; unconnectedSends: number; multipleServicePackets: number; services: number; packets: number };
  /** 'service' (code, tag name) for every tag service handled. */
  readonly events: EventEmitter;
  /** While true, nothing is answered (a controller that stopped talking). */
  silent: boolean;
  /** Open TCP connections. */
  readonly open: number;
  stop(): Promise<void>;
}

export interface CipServerOptions {
  host?: string;
  port?: number;
  /** The CPU's slot in the chassis: Forward Open and Unconnected Send must route to it. */
  slot?: number;
  tags?: Record<string, CipTagSpec>;
}

const keyOf = (name: string) => name.toLowerCase();

export async function startCipServer(options: CipServerOptions = {}): Promise<CipTestServer> {
  const tags = new Map<string, StoredTag>();
  const sockets = new Set<net.Socket>();
  const events = new EventEmitter();
  const counts = { sessions: 0, forwardOpens: 0, forwardCloses: 0, unconnectedSends: 0, multipleServicePackets: 0, services: 0, packets: 0 };
  const slot = options.slot ?? 0;
  let nextSession = 0x11021e01;

  const define = (name: string, spec: CipTagSpec) => {
    const boolArray = spec.type === 'BOOL' && spec.length !== undefined;
    const [code, size] = boolArray ? TYPES.DWORD : TYPES[spec.type];
    const count = boolArray ? Math.ceil(spec.length! / 32) : (spec.length ?? 1);
    const tag: StoredTag = { name, code, size, count, bytes: Buffer.alloc(count * size), readOnly: spec.readOnly ?? false, boolArray };
    tags.set(keyOf(name), tag);
    if (spec.value !== undefined) store(tag, spec.value);
  };
  for (const [name, spec] of Object.entries(options.tags ?? {})) define(name, spec);

  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    const conn: ConnState = { session: 0, connections: new Map() };
    let pending = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      while (pending.length >= 24 && pending.length >= 24 + pending.readUInt16LE(2)) {
        const packet = pending.subarray(0, 24 + pending.readUInt16LE(2));
        pending = pending.subarray(packet.length);
        counts.packets++;
        if (state.silent) continue;
        const answer = handlePacket(packet, conn);
        if (answer === 'close') socket.end();
        else if (answer) socket.write(answer);
      }
    });
  });

  interface ConnState {
    session: number;
    /** O->T connection id (ours) → T->O id (the client's) and the connection's message limit. */
    connections: Map<number, { toId: number; limit: number; serial: number }>;
  }

  function reply(head: Buffer, data: Buffer, status = 0, session = head.readUInt32LE(4)): Buffer {
    const out = Buffer.alloc(24);
    head.copy(out, 0, 0, 24);
    out.writeUInt16LE(data.length, 2);
    out.writeUInt32LE(session, 4);
    out.writeUInt32LE(status, 8);
    return Buffer.concat([out, data]);
  }

  function handlePacket(packet: Buffer, conn: ConnState): Buffer | 'close' | undefined {
    const command = packet.readUInt16LE(0);
    const session = packet.readUInt32LE(4);
    const body = packet.subarray(24);
    switch (command) {
      case 0x65: // RegisterSession
        if (body.length < 4 || body.readUInt16LE(0) !== 1) return reply(packet, body, 0x69); // unsupported protocol revision
        conn.session = nextSession++;
        counts.sessions++;
        return reply(packet, body, 0, conn.session);
      case 0x66: // UnregisterSession: no answer, the socket closes
        return 'close';
      case 0x63: // ListIdentity
        return reply(packet, listIdentity());
      case 0x6f: // SendRRData
      case 0x70: {
        // SendUnitData
        if (session !== conn.session || conn.session === 0) return reply(packet, Buffer.alloc(0), 0x64); // invalid session handle
        const items = cpfItems(body);
        if (!items) return reply(packet, Buffer.alloc(0), 0x03); // incorrect data
        if (command === 0x6f) {
          const data = items.find((i) => i.type === 0xb2);
          if (!data) return reply(packet, Buffer.alloc(0), 0x03);
          const answer = unconnected(data.data, conn);
          return reply(packet, cpf(body.readUInt16LE(4), [[0x0000, Buffer.alloc(0)], [0x00b2, answer]]));
        }
        const address = items.find((i) => i.type === 0xa1);
        const data = items.find((i) => i.type === 0xb1);
        const connection = address && address.data.length === 4 ? conn.connections.get(address.data.readUInt32LE(0)) : undefined;
        if (!connection || !data || data.data.length < 2) return undefined; // not a connection of ours: dropped, as a controller does
        const answer = route(data.data.subarray(2), connection.limit);
        const toId = Buffer.alloc(4);
        toId.writeUInt32LE(connection.toId);
        return reply(packet, cpf(0, [[0x00a1, toId], [0x00b1, Buffer.concat([data.data.subarray(0, 2), answer])]]));
      }
      default:
        return reply(packet, Buffer.alloc(0), 0x01); // invalid or unsupported command
    }
  }

  /** Unconnected messages: the Connection Manager's services, else the Message Router's. */
  function unconnected(message: Buffer, conn: ConnState): Buffer {
    const service = message[0]!;
    const pathWords = message[1]!;
    const path = message.subarray(2, 2 + pathWords * 2);
    const data = message.subarray(2 + pathWords * 2);
    const connectionManager = path.equals(Buffer.from([0x20, 0x06, 0x24, 0x01]));
    if (connectionManager && service === 0x54) return forwardOpen(data, conn);
    if (connectionManager && service === 0x4e) return forwardClose(data, conn);
    if (connectionManager && service === 0x52) {
      // Unconnected Send: priority/tick, timeout ticks, embedded message (padded), route path.
      counts.unconnectedSends++;
      const size = data.readUInt16LE(2);
      const embedded = data.subarray(4, 4 + size);
      const routeAt = 4 + size + (size % 2);
      const routeWords = data[routeAt]!;
      const routePath = data.subarray(routeAt + 2, routeAt + 2 + routeWords * 2);
      if (!routesToCpu(routePath)) return mrReply(0x52, 0x01, Buffer.alloc(0), [0x0312]);
      return route(embedded, 504);
    }
    return route(message, 504);
  }

  const routesToCpu = (path: Buffer) => path.length >= 2 && path[0] === 0x01 && path[1] === slot;

  function forwardOpen(data: Buffer, conn: ConnState): Buffer {
    counts.forwardOpens++;
    const toId = data.readUInt32LE(6);
    const serial = data.readUInt16LE(10);
    const vendor = data.readUInt16LE(12);
    const originator = data.readUInt32LE(14);
    const otParams = data.readUInt16LE(26);
    const pathWords = data[35]!;
    const path = data.subarray(36, 36 + pathWords * 2);
    const head = Buffer.alloc(10);
    head.writeUInt16LE(serial, 0);
    head.writeUInt16LE(vendor, 2);
    head.writeUInt32LE(originator, 4);
    if (!routesToCpu(path)) return mrReply(0x54, 0x01, Buffer.concat([head, Buffer.from([0, 0])]), [0x0312]);
    if (data[34] !== 0xa3) return mrReply(0x54, 0x01, Buffer.concat([head, Buffer.from([0, 0])]), [0x0108]);
    const otId = 0x7e000000 + counts.forwardOpens;
    conn.connections.set(otId, { toId, limit: (otParams & 0x1ff) - 2, serial });
    const out = Buffer.alloc(26);
    out.writeUInt32LE(otId, 0);
    out.writeUInt32LE(toId, 4);
    head.copy(out, 8);
    out.writeUInt32LE(data.readUInt32LE(22), 18); // O->T API = RPI
    out.writeUInt32LE(data.readUInt32LE(28), 22);
    return mrReply(0x54, 0, Buffer.concat([out, Buffer.from([0, 0])]));
  }

  function forwardClose(data: Buffer, conn: ConnState): Buffer {
    counts.forwardCloses++;
    const serial = data.readUInt16LE(2);
    for (const [id, c] of conn.connections) if (c.serial === serial) conn.connections.delete(id);
    return mrReply(0x4e, 0, Buffer.concat([data.subarray(2, 10), Buffer.from([0, 0])]));
  }

  /** A Message Router request: Multiple Service Packet or one tag service. */
  function route(message: Buffer, limit: number): Buffer {
    const service = message[0]!;
    if (service !== 0x0a) return tagService(message, limit);
    counts.multipleServicePackets++;
    const data = message.subarray(2 + message[1]! * 2);
    const n = data.readUInt16LE(0);
    const starts = Array.from({ length: n }, (_, i) => data.readUInt16LE(2 + 2 * i));
    const answers = starts.map((s, i) => tagService(data.subarray(s, starts[i + 1] ?? data.length), limit));
    const table = Buffer.alloc(2 + 2 * n);
    table.writeUInt16LE(n, 0);
    let at = table.length;
    answers.forEach((a, i) => {
      table.writeUInt16LE(at, 2 + 2 * i);
      at += a.length;
    });
    const failed = answers.some((a) => a[2] !== 0);
    return mrReply(0x0a, failed ? 0x1e : 0, Buffer.concat([table, ...answers]));
  }

  function tagService(message: Buffer, limit: number): Buffer {
    counts.services++;
    const service = message[0]!;
    const path = message.subarray(2, 2 + message[1]! * 2);
    const data = message.subarray(2 + message[1]! * 2);
    if (service === 0x01 && path.equals(Buffer.from([0x20, 0x01, 0x24, 0x01]))) return mrReply(0x01, 0, identity()); // Get Attributes All of the Identity
    if (![0x4c, 0x4d, 0x4e, 0x52, 0x53].includes(service)) return mrReply(service, 0x08, Buffer.alloc(0));
    const target = resolve(path);
    if (typeof target === 'number') return mrReply(service, target, Buffer.alloc(0));
    const { tag, index } = target;
    events.emit('service', service, tag.name);
    const typeHead = Buffer.alloc(2);
    typeHead.writeUInt16LE(tag.code);
    const start = index * tag.size;
    switch (service) {
      case 0x4c:
      case 0x52: {
        if (data.length < (service === 0x4c ? 2 : 6)) return mrReply(service, 0x13, Buffer.alloc(0));
        const elements = data.readUInt16LE(0);
        const offset = service === 0x52 ? data.readUInt32LE(2) : 0;
        const total = elements * tag.size;
        if (index + elements > tag.count) return mrReply(service, 0xff, Buffer.alloc(0), [0x2105]);
        if (offset > total) return mrReply(service, 0xff, Buffer.alloc(0), [0x2104]);
        const room = Math.floor((limit - 6) / tag.size) * tag.size;
        const end = Math.min(total, offset + room);
        const status = end < total ? 0x06 : 0;
        return mrReply(service, status, Buffer.concat([typeHead, tag.bytes.subarray(start + offset, start + end)]));
      }
      case 0x4d:
      case 0x53: {
        const headBytes = service === 0x4d ? 4 : 8;
        if (data.length < headBytes) return mrReply(service, 0x13, Buffer.alloc(0));
        if (data.readUInt16LE(0) !== tag.code) return mrReply(service, 0xff, Buffer.alloc(0), [0x2107]);
        if (tag.readOnly) return mrReply(service, 0x0f, Buffer.alloc(0));
        const elements = data.readUInt16LE(2);
        const offset = service === 0x53 ? data.readUInt32LE(4) : 0;
        const bytes = data.subarray(headBytes);
        if (index + elements > tag.count) return mrReply(service, 0xff, Buffer.alloc(0), [0x2105]);
        if (service === 0x4d && bytes.length < elements * tag.size) return mrReply(service, 0x13, Buffer.alloc(0));
        if (service === 0x4d && bytes.length > elements * tag.size) return mrReply(service, 0x15, Buffer.alloc(0));
        if (offset + bytes.length > elements * tag.size) return mrReply(service, 0xff, Buffer.alloc(0), [0x2104]);
        bytes.copy(tag.bytes, start + offset);
        return mrReply(service, 0, Buffer.alloc(0));
      }
      default: {
        // Read Modify Write: mask size, OR mask, AND mask, of the tag's own size.
        const size = data.length >= 2 ? data.readUInt16LE(0) : 0;
        if (![1, 2, 4, 8].includes(size) || data.length < 2 + 2 * size) return mrReply(service, 0x13, Buffer.alloc(0));
        if (size !== tag.size || ![0xc2, 0xc3, 0xc4, 0xc5, 0xd3].includes(tag.code)) return mrReply(service, 0xff, Buffer.alloc(0), [0x2107]);
        if (tag.readOnly) return mrReply(service, 0x0f, Buffer.alloc(0));
        for (let i = 0; i < size; i++) tag.bytes[start + i] = (tag.bytes[start + i]! | data[2 + i]!) & data[2 + size + i]!;
        return mrReply(service, 0, Buffer.alloc(0));
      }
    }
  }

  /** The tag and element a symbolic path names, or the status that says why not. */
  function resolve(path: Buffer): { tag: StoredTag; index: number } | number {
    const levels: Array<{ name: string; indices: number[] }> = [];
    let at = 0;
    while (at < path.length) {
      const kind = path[at]!;
      if (kind === 0x91) {
        const len = path[at + 1]!;
        levels.push({ name: path.subarray(at + 2, at + 2 + len).toString('latin1'), indices: [] });
        at += 2 + len + (len % 2);
      } else if ((kind === 0x28 || kind === 0x29 || kind === 0x2a) && levels.length) {
        const index = kind === 0x28 ? path[at + 1]! : kind === 0x29 ? path.readUInt16LE(at + 2) : path.readUInt32LE(at + 2);
        levels[levels.length - 1]!.indices.push(index);
        at += kind === 0x28 ? 2 : kind === 0x29 ? 4 : 6;
      } else return 0x04;
    }
    if (!levels.length) return 0x04;
    const last = levels[levels.length - 1]!;
    const name = [...levels.slice(0, -1).map((l) => (l.indices.length ? `${l.name}[${l.indices.join(',')}]` : l.name)), last.name].join('.');
    const tag = tags.get(keyOf(name));
    if (!tag) return 0x05;
    if (last.indices.length > 1) return 0x04; // the test controller's arrays have one dimension
    const index = last.indices[0] ?? 0;
    if (index >= tag.count) return 0x05;
    return { tag, index };
  }

  function mrReply(service: number, status: number, data: Buffer, extended: number[] = []): Buffer {
    const head = Buffer.alloc(4 + 2 * extended.length);
    head[0] = service | 0x80;
    head[2] = status;
    head[3] = extended.length;
    extended.forEach((e, i) => head.writeUInt16LE(e, 4 + 2 * i));
    return Buffer.concat([head, data]);
  }

  const state: CipTestServer = {
    host: options.host ?? '127.0.0.1',
    port: 0,
    counts,
    events,
    silent: false,
    get open() {
      return sockets.size;
    },
    define,
    get: (name) => load(found(name)),
    set: (name, value) => store(found(name), value),
    async stop() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
  const found = (name: string): StoredTag => {
    const tag = tags.get(keyOf(name));
    if (!tag) throw new Error(`no tag ${name} in the test controller`);
    return tag;
  };
  server.listen(options.port ?? 0, state.host);
  await Promise.race([once(server, 'listening'), once(server, 'error').then(([err]) => Promise.reject(err as Error))]);
  state.port = (server.address() as net.AddressInfo).port;
  return state;
}

function cpfItems(body: Buffer): Array<{ type: number; data: Buffer }> | undefined {
  if (body.length < 8) return undefined;
  const n = body.readUInt16LE(6);
  const items: Array<{ type: number; data: Buffer }> = [];
  let at = 8;
  for (let i = 0; i < n; i++) {
    if (body.length < at + 4) return undefined;
    const len = body.readUInt16LE(at + 2);
    items.push({ type: body.readUInt16LE(at), data: body.subarray(at + 4, at + 4 + len) });
    at += 4 + len;
  }
  return items;
}

function cpf(timeout: number, items: Array<[number, Buffer]>): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt16LE(timeout, 4);
  head.writeUInt16LE(items.length, 6);
  return Buffer.concat([head, ...items.flatMap(([type, data]) => [Buffer.from([type & 0xff, type >> 8, data.length & 0xff, data.length >> 8]), data])]);
}

const PRODUCT = 'gatewayd test Logix';
/** Identity object attributes (Get Attributes All): vendor, device type, product code, revision, status, serial, name. */
function identity(): Buffer {
  const b = Buffer.alloc(15);
  b.writeUInt16LE(1, 0); // vendor: Rockwell
  b.writeUInt16LE(0x0e, 2); // programmable logic controller
  b.writeUInt16LE(0x36, 4);
  b[6] = 20;
  b[7] = 11;
  b.writeUInt16LE(0x3060, 8); // run mode
  b.writeUInt32LE(0x00c0ffee, 10);
  b[14] = PRODUCT.length;
  return Buffer.concat([b, Buffer.from(PRODUCT, 'latin1')]);
}

function listIdentity(): Buffer {
  const socketAddress = Buffer.alloc(16);
  socketAddress.writeUInt16BE(2, 0);
  socketAddress.writeUInt16BE(44818, 2);
  const item = Buffer.concat([Buffer.from([1, 0]), socketAddress, identity(), Buffer.from([3])]);
  return cpf(0, [[0x0c, item]]).subarray(6); // ListIdentity: item count then items, no interface/timeout
}

function load(tag: StoredTag): unknown {
  const out: unknown[] = [];
  if (tag.boolArray) {
    for (let i = 0; i < tag.count * 32; i++) out.push(((tag.bytes.readUInt32LE(Math.floor(i / 32) * 4) >>> i % 32) & 1) === 1);
    return out;
  }
  for (let i = 0; i < tag.count; i++) {
    const at = i * tag.size;
    switch (tag.code) {
      case 0xc1:
        out.push(tag.bytes[at] !== 0);
        break;
      case 0xc2:
        out.push(tag.bytes.readInt8(at));
        break;
      case 0xc3:
        out.push(tag.bytes.readInt16LE(at));
        break;
      case 0xc4:
        out.push(tag.bytes.readInt32LE(at));
        break;
      case 0xc5:
        out.push(tag.bytes.readBigInt64LE(at));
        break;
      case 0xca:
        out.push(tag.bytes.readFloatLE(at));
        break;
      default:
        out.push(tag.bytes.readDoubleLE(at));
    }
  }
  return tag.count === 1 ? out[0] : out;
}

function store(tag: StoredTag, value: CipTagSpec['value']): void {
  const values = Array.isArray(value) ? value : [value];
  if (tag.boolArray) {
    tag.bytes.fill(0);
    values.forEach((v, i) => {
      if (v) tag.bytes.writeUInt32LE((tag.bytes.readUInt32LE(Math.floor(i / 32) * 4) | (1 << i % 32)) >>> 0, Math.floor(i / 32) * 4);
    });
    return;
  }
  values.forEach((v, i) => {
    const at = i * tag.size;
    switch (tag.code) {
      case 0xc1:
        tag.bytes[at] = v ? 1 : 0;
        break;
      case 0xc2:
        tag.bytes.writeInt8(Number(v), at);
        break;
      case 0xc3:
        tag.bytes.writeInt16LE(Number(v), at);
        break;
      case 0xc4:
        tag.bytes.writeInt32LE(Number(v), at);
        break;
      case 0xc5:
        tag.bytes.writeBigInt64LE(BigInt(v as number | bigint), at);
        break;
      case 0xca:
        tag.bytes.writeFloatLE(Number(v), at);
        break;
      default:
        tag.bytes.writeDoubleLE(Number(v), at);
    }
  });
}
