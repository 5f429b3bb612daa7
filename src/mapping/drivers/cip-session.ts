// One EtherNet/IP session with a Logix controller: TCP, Register Session, a class 3 connection
// (Forward Open through the backplane to the CPU in `slot`), then CIP requests on it one at a
// time. Requests queued while one is in flight that fit together go out as one Multiple
// Service Packet (a 100-tag poll is a few round trips, not 100). A request unanswered in
// timeoutMs, a socket that closes, an encapsulation error, a packet for another session or a
// malformed reply (ProtocolError: the stream is not trusted any more) lose the session: every
// pending request fails and onLost is told; the caller (the runtime's backoff) opens a new one.
import net from 'node:net';
import { randomInt } from 'node:crypto';
import {
  Command,
  CONNECTION_MANAGER,
  connectedData,
  cpfDataItem,
  encapsulate,
  messageRequest,
  MSP_ITEM_OVERHEAD,
  multipleServiceReplies,
  multipleServiceRequest,
  parseReply,
  registerSessionData,
  Service,
  splitPackets,
  Status,
  statusText,
  unconnectedData,
  type EncapPacket,
  type MessageReply,
} from './cip.js';
import { DeviceError } from './types.js';
import { ProtocolError } from '../../errors/errors.js';

export interface CipSessionOptions {
  host: string;
  port: number;
  slot: number;
  timeoutMs: number;
  /** After this long without a request, a small one keeps the connection (default 60 s). */
  keepAliveMs?: number;
  /** Opens the TCP connection (tests: a socket of their own); default net.connect within timeoutMs. */
  dial?: (opts: CipSessionOptions) => Promise<CipSocket>;
}

/** What the session needs of its socket. */
export type CipSocket = Pick<net.Socket, 'write' | 'destroy' | 'end' | 'on' | 'once' | 'destroyed'>;

export interface CipSession {
  /**
   * Sends a Message Router request on the connection and resolves its reply, whatever its
   * status. `replyBytes` is the most the reply can take; `batchable` requests may share a
   * Multiple Service Packet.
   */
  request(message: Buffer, replyBytes: number, batchable: boolean): Promise<MessageReply>;
  /** The largest request or reply the connection carries (bytes of a Message Router message). */
  readonly messageLimit: number;
  onLost(listener: (reason: string) => void): void;
  /** Forward Close, Unregister Session, socket closed; never rejects. */
  close(): Promise<void>;
}

/** Connection size asked in Forward Open: the classic limit every Logix accepts. */
const CONNECTION_BYTES = 500;
/** A connected message carries its 2-byte sequence count in the connection's data. */
const MESSAGE_LIMIT = CONNECTION_BYTES - 2;
/** Bytes of a Multiple Service Packet request besides its items: service, path size, path, count. */
const MSP_REQUEST_OVERHEAD = 8;
/** ... and of its reply: the reply header and the count. */
const MSP_REPLY_OVERHEAD = 6;
/** Items in one Multiple Service Packet, at most. */
const MSP_MAX_ITEMS = 100;
/** The vendor id gatewayd announces in Forward Open (any value a controller accepts). */
const VENDOR_ID = 0x1234;
/**
 * Requested packet interval of the explicit connection (µs) and its timeout multiplier (×512):
 * the controller drops the connection after about 17 minutes without a request, so an idle
 * session (write endpoints only) sends a small request every KEEP_ALIVE_MS.
 */
const RPI_US = 2_000_000;
const TIMEOUT_MULTIPLIER = 7;
const KEEP_ALIVE_MS = 60_000;
/** Get Attributes All of the Identity object: the keep-alive request. */
const IDENTITY_REQUEST = Buffer.from([0x01, 0x02, 0x20, 0x01, 0x24, 0x01]);

interface Queued {
  message: Buffer;
  replyBytes: number;
  batchable: boolean;
  resolve(reply: MessageReply): void;
  reject(err: Error): void;
}

export async function openCipSession(opts: CipSessionOptions): Promise<CipSession> {
  const socket = await (opts.dial ?? dial)(opts);
  let buffered: Buffer = Buffer.alloc(0);
  let session = 0;
  let contextCounter = 0n;
  let waiting: { match: (p: EncapPacket) => boolean; resolve(p: EncapPacket): void; reject(err: Error): void; timer: NodeJS.Timeout } | undefined;
  let lost: string | undefined;
  let lostListener: (reason: string) => void = () => {};
  let established = false;
  let keepAlive: NodeJS.Timeout | undefined;
  const queue: Queued[] = [];

  /** Loses the session once (`cause`: its reason, or the error that lost it: a ProtocolError stays one for what was waiting). */
  const fail = (cause: string | Error) => {
    if (lost !== undefined) return;
    const reason = typeof cause === 'string' ? cause : cause.message;
    const error = () => (cause instanceof ProtocolError ? new ProtocolError('EtherNet/IP', reason) : new Error(reason));
    lost = reason;
    socket.destroy();
    // The keep-alive timer holds the session: it goes with it, not at its next tick (30 s later).
    if (keepAlive) clearInterval(keepAlive);
    const w = waiting;
    waiting = undefined;
    if (w) {
      clearTimeout(w.timer);
      w.reject(error());
    }
    for (const q of queue.splice(0)) q.reject(error());
    if (established) lostListener(reason);
  };
  socket.on('data', (chunk: Buffer) => {
    if (lost !== undefined) return;
    buffered = buffered.length ? Buffer.concat([buffered, chunk]) : chunk;
    let packets: EncapPacket[];
    try {
      ({ packets, rest: buffered } = splitPackets(buffered));
    } catch (err) {
      return fail(err as Error);
    }
    for (const p of packets) {
      if (lost !== undefined) return;
      // Once registered, every packet carries our session handle: another one is a device out of step.
      if (session !== 0 && p.session !== session) return fail(new ProtocolError('EtherNet/IP', `the device answered for session 0x${p.session.toString(16)}, ours is 0x${session.toString(16)}`));
      const w = waiting;
      if (!w || !w.match(p)) continue; // a late answer to a request given up on
      waiting = undefined;
      clearTimeout(w.timer);
      w.resolve(p);
    }
  });
  socket.on('error', (err) => fail(`connection error: ${err.message}`));
  socket.on('close', () => fail('connection closed by the device'));

  /** Sends one encapsulation packet and waits for the one that answers it. */
  const exchange = (command: number, data: Buffer, match?: (p: EncapPacket) => boolean): Promise<EncapPacket> => {
    if (lost !== undefined) return Promise.reject(new Error(lost));
    const context = Buffer.alloc(8);
    context.writeBigUInt64LE(++contextCounter);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => fail(`no answer within ${opts.timeoutMs} ms`), opts.timeoutMs);
      waiting = { match: match ?? ((p) => p.command === command && p.context.equals(context)), resolve, reject, timer };
      socket.write(encapsulate(command, session, context, data));
    }).then((p) => {
      const packet = p as EncapPacket;
      if (packet.status !== 0) {
        const reason = `the device refused the EtherNet/IP command 0x${command.toString(16)} (encapsulation status 0x${packet.status.toString(16)})`;
        fail(reason);
        throw new Error(reason);
      }
      return packet;
    });
  };
  const unconnected = async (message: Buffer): Promise<MessageReply> => parseReply(cpfDataItem((await exchange(Command.SendRRData, unconnectedData(message, 10))).data));

  let otConnection = 0;
  let sequence = 0;
  const connected = async (message: Buffer): Promise<MessageReply> => {
    sequence = (sequence + 1) & 0xffff;
    const expected = sequence;
    const packet = await exchange(Command.SendUnitData, connectedData(otConnection, expected, message), (p) => p.command === Command.SendUnitData && sequenceOf(p) === expected);
    return replyTo(message, parseReply(cpfDataItem(packet.data).subarray(2)));
  };

  const serial = randomInt(1, 0xffff);
  const originatorSerial = randomInt(1, 0x7fffffff);
  const routeToCpu = Buffer.from([0x01, opts.slot, 0x20, 0x02, 0x24, 0x01]); // backplane port, slot; Message Router

  try {
    const registered = await exchange(Command.RegisterSession, registerSessionData());
    session = registered.session;
    const open = await unconnected(messageRequest(Service.ForwardOpen, CONNECTION_MANAGER, forwardOpenData(serial, originatorSerial, routeToCpu)));
    if (open.status !== Status.Success) throw new DeviceError(`the controller refused the connection (Forward Open): ${statusText(open.status, open.extended)}`);
    if (open.data.length < 4) throw new ProtocolError('EtherNet/IP', 'Forward Open reply without a connection id');
    otConnection = open.data.readUInt32LE(0);
  } catch (err) {
    fail(err instanceof Error ? err : String(err));
    throw err;
  }
  established = true;
  let lastRequest = Date.now();
  const keepAliveMs = opts.keepAliveMs ?? KEEP_ALIVE_MS;
  keepAlive = setInterval(() => {
    if (lost !== undefined) return clearInterval(keepAlive);
    if (busy || queue.length > 0 || Date.now() - lastRequest < keepAliveMs) return;
    void request(IDENTITY_REQUEST, 64, false).catch(() => undefined); // a failure loses the session (fail)
  }, Math.max(10, Math.floor(keepAliveMs / 2)));
  keepAlive.unref();

  let busy = false;
  const pump = () => {
    if (busy || lost !== undefined || queue.length === 0) return;
    busy = true;
    const batch = takeBatch(queue);
    const done = () => {
      busy = false;
      pump();
    };
    // A malformed reply: the stream is not trusted any more (the session is lost, its requests fail).
    const malformed = (err: Error) => {
      if (err instanceof ProtocolError) fail(err);
      throw err;
    };
    if (batch.length === 1) {
      const [one] = batch as [Queued];
      connected(one.message).catch(malformed).then(one.resolve, one.reject).finally(done);
      return;
    }
    connected(multipleServiceRequest(batch.map((q) => q.message)))
      .then((reply) => {
        if (reply.status !== Status.Success && reply.status !== Status.EmbeddedServiceError) throw new DeviceError(statusText(reply.status, reply.extended));
        const replies = multipleServiceReplies(reply.data, batch.length).map((r, i) => replyTo(batch[i]!.message, r));
        batch.forEach((q, i) => q.resolve(replies[i]!));
      })
      .catch(malformed)
      .catch((err: Error) => {
        for (const q of batch) q.reject(err);
      })
      .finally(done);
  };

  function request(message: Buffer, replyBytes: number, batchable: boolean): Promise<MessageReply> {
    if (lost !== undefined) return Promise.reject(new Error(lost));
    lastRequest = Date.now();
    return new Promise((resolve, reject) => {
      queue.push({ message, replyBytes, batchable, resolve, reject });
      pump();
    });
  }

  return {
    messageLimit: MESSAGE_LIMIT,
    request,
    onLost(listener) {
      lostListener = listener;
    },
    async close() {
      established = false;
      clearInterval(keepAlive);
      for (const q of queue.splice(0)) q.reject(new Error('disconnected'));
      if (lost === undefined) {
        await unconnected(messageRequest(Service.ForwardClose, CONNECTION_MANAGER, forwardCloseData(serial, originatorSerial, routeToCpu))).catch(() => undefined);
        if (lost === undefined) socket.write(encapsulate(Command.UnregisterSession, session, Buffer.alloc(8), Buffer.alloc(0)));
      }
      await new Promise<void>((resolve) => {
        if (socket.destroyed) return resolve();
        const timer = setTimeout(() => socket.destroy(), 1000);
        socket.once('close', () => {
          clearTimeout(timer);
          resolve();
        });
        socket.end();
      });
      fail('disconnected');
    },
  };
}

function dial(opts: CipSessionOptions): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: opts.host, port: opts.port });
    socket.setNoDelay(true);
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`connect timed out after ${opts.timeoutMs} ms`));
    }, opts.timeoutMs);
    socket.once('connect', () => {
      clearTimeout(timer);
      socket.removeAllListeners('error');
      resolve(socket);
    });
    socket.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}

/** The reply, when it answers the request's service (its code | 0x80); a ProtocolError otherwise. */
function replyTo(request: Buffer, reply: MessageReply): MessageReply {
  if (reply.service !== (request[0]! | 0x80)) throw new ProtocolError('EtherNet/IP', `reply of service 0x${reply.service.toString(16)} to a request of service 0x${request[0]!.toString(16)}`);
  return reply;
}

/** The sequence count of a connected reply (-1 when it has none). */
function sequenceOf(p: EncapPacket): number {
  try {
    return cpfDataItem(p.data).readUInt16LE(0);
  } catch {
    return -1;
  }
}

/** The next request, or the longest run of batchable requests that fits one Multiple Service Packet. */
function takeBatch(queue: Queued[]): Queued[] {
  const first = queue.shift()!;
  if (!first.batchable) return [first];
  const batch = [first];
  let requestBytes = MSP_REQUEST_OVERHEAD + MSP_ITEM_OVERHEAD + first.message.length;
  let replyBytes = MSP_REPLY_OVERHEAD + MSP_ITEM_OVERHEAD + first.replyBytes;
  while (batch.length < MSP_MAX_ITEMS && queue.length > 0 && queue[0]!.batchable) {
    const next = queue[0]!;
    const request = requestBytes + MSP_ITEM_OVERHEAD + next.message.length;
    const reply = replyBytes + MSP_ITEM_OVERHEAD + next.replyBytes;
    if (request > MESSAGE_LIMIT || reply > MESSAGE_LIMIT) break;
    batch.push(queue.shift()!);
    requestBytes = request;
    replyBytes = reply;
  }
  return batch;
}

function forwardOpenData(serial: number, originatorSerial: number, path: Buffer): Buffer {
  const b = Buffer.alloc(36);
  b.writeUInt8(0x0a, 0); // priority/time tick: 1024 ms ticks
  b.writeUInt8(0x0e, 1); // timeout ticks
  b.writeUInt32LE(0, 2); // O->T connection id: the target picks it
  b.writeUInt32LE(randomInt(1, 0x7fffffff), 6); // T->O connection id
  b.writeUInt16LE(serial, 10);
  b.writeUInt16LE(VENDOR_ID, 12);
  b.writeUInt32LE(originatorSerial, 14);
  b.writeUInt8(TIMEOUT_MULTIPLIER, 18); // then 3 reserved bytes
  const params = 0x4000 | 0x0200 | CONNECTION_BYTES; // point to point, low priority, variable size
  b.writeUInt32LE(RPI_US, 22);
  b.writeUInt16LE(params, 26);
  b.writeUInt32LE(RPI_US, 28);
  b.writeUInt16LE(params, 32);
  b.writeUInt8(0xa3, 34); // transport: class 3, application triggered, server
  b.writeUInt8(path.length / 2, 35);
  return Buffer.concat([b, path]);
}

function forwardCloseData(serial: number, originatorSerial: number, path: Buffer): Buffer {
  const b = Buffer.alloc(12);
  b.writeUInt8(0x0a, 0);
  b.writeUInt8(0x0e, 1);
  b.writeUInt16LE(serial, 2);
  b.writeUInt16LE(VENDOR_ID, 4);
  b.writeUInt32LE(originatorSerial, 6);
  b.writeUInt8(path.length / 2, 10); // then a reserved byte
  return Buffer.concat([b, path]);
}
