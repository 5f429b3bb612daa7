// One ISO-on-TCP connection to an S7 CPU (s7-protocol.ts for the bytes): the COTP connection
// and PDU negotiation, then jobs matched to their answers by PDU reference, at most as many at
// once as the CPU granted. Reads and writes of any number of items are packed into as few
// requests as the negotiated PDU allows (at most 20 items each); an item longer than a PDU is
// read or written in parts. A job the CPU does not answer within timeoutMs, a malformed answer,
// or the socket closing ends the session: every pending job fails and onClosed is told why.
// The session is handed out only when it is open and has not ended; an end during the handshake
// fails the attempt (a ProtocolError when the PLC's bytes ended it).
import net from 'node:net';
import { ProtocolError } from '../../errors/errors.js';
import {
  S7ProtocolError,
  answerRoom,
  connectRequest,
  FrameReader,
  isConnectConfirm,
  MAX_ITEMS_PER_REQUEST,
  maxReadLength,
  maxWriteLength,
  parseAnswer,
  parseReadAnswer,
  parseSetupAnswer,
  parseWriteAnswer,
  readCost,
  readRequest,
  requestRoom,
  setupRequest,
  writeCost,
  writeRequest,
  type S7Answer,
  type S7ItemResult,
  type S7Range,
} from './s7-protocol.js';

export interface S7Target {
  host: string;
  port: number;
  rack: number;
  slot: number;
  timeoutMs: number;
}

export type S7WriteResult = { ok: true } | { ok: false; reason: string };

export interface S7Session {
  /** The PDU length the CPU granted. */
  readonly pduLength: number;
  /** Jobs the CPU takes at once. */
  readonly jobs: number;
  /** Reads byte ranges; one result per range, in order. */
  read(ranges: S7Range[]): Promise<S7ItemResult[]>;
  /** Writes byte ranges (or single bits); one result per item, in order. */
  write(items: Array<{ range: S7Range; data: Buffer }>): Promise<S7WriteResult[]>;
  /** Ends the connection; pending jobs fail. onClosed is not called. */
  close(): void;
  /** Called once when the connection ends by itself (the CPU, the network, a timeout). */
  onClosed(listener: (reason: string) => void): void;
}

/** The PDU length asked for (S7-1500 grants 960, S7-300 240) and the parallel jobs. */
const WANTED_PDU = 960;
const WANTED_JOBS = 8;

interface Job {
  send: (ref: number) => Buffer;
  take: (answer: S7Answer) => void;
  fail: (err: Error) => void;
}

/**
 * The connection's life: `handshake` until openS7Session hands the session out, then `open`,
 * then `ended` (once). Which one it is decides whom an end concerns: during the handshake the
 * attempt fails (openS7Session rejects, also when the handshake's last answer already arrived
 * and the rest of the same TCP chunk was malformed); once open, onClosed's listener is told.
 */
type Phase = 'handshake' | 'open' | 'ended';

class Connection {
  pduLength = 240;
  jobs = 1;
  private readonly pending = new Map<number, { job: Job; timer: NodeJS.Timeout }>();
  private readonly waiting: Job[] = [];
  private nextRef = 1;
  private phase: Phase = 'handshake';
  /** Why it ended (set once). */
  endReason: string | undefined;
  /** It ended on bytes from the PLC that are not S7 (a ProtocolError), not on the network or a timeout. */
  private endedMalformed = false;
  private closedListener: ((reason: string) => void) | undefined;
  /** During the handshake: where the next COTP unit or S7 answer goes. */
  private handshake: { cotp: (u: Buffer) => void; pdu: (a: S7Answer) => void } | undefined;
  /** During the handshake: rejects the step in progress when the connection ends. */
  private failStep: ((err: Error) => void) | undefined;
  private readonly reader: FrameReader;

  constructor(
    private readonly socket: net.Socket,
    private readonly timeoutMs: number,
  ) {
    this.reader = new FrameReader(
      (pdu) => this.answer(parseAnswer(pdu)),
      (cotp) => this.handshake?.cotp(cotp),
      WANTED_PDU,
    );
    socket.on('data', (chunk: Buffer) => {
      if (this.phase === 'ended') return;
      try {
        this.reader.push(chunk);
      } catch (err) {
        this.end(err as Error);
      }
    });
    socket.on('error', (err) => this.end(err.message));
    socket.on('close', () => this.end('connection closed by the PLC'));
  }

  /** Waits for one handshake step; the connection ending meanwhile rejects it with `prefix` before the reason. */
  private step<T>(prefix: string, run: (resolve: (v: T) => void, reject: (err: Error) => void) => void): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      if (this.endReason !== undefined) return reject(this.failure(prefix + this.endReason));
      this.failStep = (err) => reject(this.failure(prefix + err.message));
      run(resolve, reject);
    });
  }

  /** Waits for the TCP connection. */
  connected(): Promise<void> {
    return this.step('', (resolve) => this.socket.once('connect', () => resolve()));
  }

  /** Runs the COTP connection and the communication setup; rejects when the CPU refuses or the connection ends. */
  async open(rack: number, slot: number): Promise<void> {
    const refused = `the PLC refused the connection to rack ${rack}, slot ${slot}`;
    await this.step<void>(`${refused}: `, (resolve, reject) => {
      this.handshake = {
        cotp: (unit) => (isConnectConfirm(unit) ? resolve() : reject(new Error(refused))),
        pdu: () => reject(new S7ProtocolError('unexpected S7 answer before the connection was confirmed')),
      };
      this.socket.write(connectRequest(rack, slot));
    });
    const granted = await this.step<{ pduLength: number; jobs: number }>('', (resolve, reject) => {
      this.handshake = {
        cotp: () => reject(new S7ProtocolError('unexpected COTP unit during the communication setup')),
        pdu: (answer) => {
          try {
            resolve(parseSetupAnswer(answer));
          } catch (err) {
            reject(err as Error);
          }
        },
      };
      this.socket.write(setupRequest(0, WANTED_PDU, WANTED_JOBS));
    });
    this.handshake = undefined;
    this.pduLength = Math.min(granted.pduLength, WANTED_PDU);
    this.jobs = Math.min(granted.jobs, WANTED_JOBS);
    this.reader.limitPdu(this.pduLength);
    // Bytes that followed the setup answer in the same chunk were read before this line runs:
    // if they ended the connection, the attempt fails here instead of handing out a dead session.
    if (this.endReason !== undefined) throw this.failure(this.endReason);
    this.failStep = undefined;
    this.phase = 'open';
  }

  onClosed(listener: (reason: string) => void): void {
    this.closedListener = listener;
    const reason = this.endReason;
    if (reason !== undefined) queueMicrotask(() => listener(reason));
  }

  private answer(a: S7Answer): void {
    if (this.handshake) return this.handshake.pdu(a);
    const p = this.pending.get(a.ref);
    if (!p) return; // not a job in flight (an answer repeated by the network): ignored; the job it stands for times out
    this.pending.delete(a.ref);
    clearTimeout(p.timer);
    try {
      p.job.take(a);
    } catch (err) {
      // A malformed answer: the stream cannot be trusted any more.
      p.job.fail(err as Error);
      this.end(err as Error);
      return;
    }
    this.pump();
  }

  /** Sends one job (now, or once fewer than `jobs` are out); its answer goes to `parse`. */
  exchange<T>(request: (ref: number) => Buffer, parse: (answer: S7Answer) => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      if (this.endReason !== undefined) return reject(new Error(this.endReason));
      this.waiting.push({ send: request, take: (a) => resolve(parse(a)), fail: reject });
      this.pump();
    });
  }

  private pump(): void {
    while (this.phase === 'open' && this.pending.size < this.jobs && this.waiting.length) {
      const job = this.waiting.shift()!;
      const ref = this.nextRef;
      this.nextRef = this.nextRef === 0xffff ? 1 : this.nextRef + 1;
      const timer = setTimeout(() => this.end(`the PLC did not answer within ${this.timeoutMs} ms`), this.timeoutMs);
      this.pending.set(ref, { job, timer });
      this.socket.write(job.send(ref));
    }
  }

  /** The error a failed handshake step rejects with: a ProtocolError when the PLC's bytes ended it (the runtime retries those without growing its backoff). */
  private failure(message: string): Error {
    return this.endedMalformed ? new S7ProtocolError(message) : new Error(message);
  }

  /** Ends the connection once (`cause`: its reason, or the error that ended it): pending and waiting jobs fail; `quietly`: onClosed is not told (closed by the caller). */
  end(cause: string | Error, quietly = false): void {
    if (this.phase === 'ended') return;
    const was = this.phase;
    const reason = typeof cause === 'string' ? cause : cause.message;
    this.phase = 'ended';
    this.endReason = reason;
    this.endedMalformed = cause instanceof ProtocolError;
    this.socket.destroy();
    const err = new Error(reason);
    for (const { job, timer } of this.pending.values()) {
      clearTimeout(timer);
      job.fail(err);
    }
    this.pending.clear();
    for (const job of this.waiting.splice(0)) job.fail(err);
    if (was === 'handshake') this.failStep?.(err);
    else if (!quietly) this.closedListener?.(reason);
  }
}

/** Cuts ranges longer than `max` bytes into parts: [range index, offset in it, part]. */
function partsOf(ranges: S7Range[], max: number): Array<{ index: number; offset: number; range: S7Range }> {
  const parts: Array<{ index: number; offset: number; range: S7Range }> = [];
  ranges.forEach((r, index) => {
    for (let offset = 0; offset < r.length; offset += max) parts.push({ index, offset, range: { ...r, start: r.start + offset, length: Math.min(max, r.length - offset) } });
  });
  return parts;
}

/** Groups items in order into requests: at most 20 each, within the request and answer room. */
function pack<T>(items: T[], cost: (item: T) => { request: number; answer: number }, pduLength: number): T[][] {
  const groups: T[][] = [];
  let group: T[] = [];
  let request = 0;
  let answer = 0;
  for (const item of items) {
    const c = cost(item);
    if (group.length && (group.length === MAX_ITEMS_PER_REQUEST || request + c.request > requestRoom(pduLength) || answer + c.answer > answerRoom(pduLength))) {
      groups.push(group);
      group = [];
      request = 0;
      answer = 0;
    }
    group.push(item);
    request += c.request;
    answer += c.answer;
  }
  if (group.length) groups.push(group);
  return groups;
}

export async function openS7Session(target: S7Target): Promise<S7Session> {
  const socket = net.connect({ host: target.host, port: target.port });
  socket.setNoDelay(true);
  const conn = new Connection(socket, target.timeoutMs);
  const deadline = setTimeout(() => conn.end(`no S7 connection to ${target.host}:${target.port} within ${target.timeoutMs} ms`), target.timeoutMs);
  try {
    await conn.connected();
    await conn.open(target.rack, target.slot);
  } catch (err) {
    conn.end((err as Error).message, true);
    throw err;
  } finally {
    clearTimeout(deadline);
  }

  return {
    get pduLength() {
      return conn.pduLength;
    },
    get jobs() {
      return conn.jobs;
    },
    async read(ranges) {
      const parts = partsOf(ranges, maxReadLength(conn.pduLength));
      const requests = pack(parts, (p) => readCost(p.range), conn.pduLength);
      const answers = await Promise.all(
        requests.map((group) => {
          const wire = group.map((p) => p.range);
          return conn.exchange((ref) => readRequest(ref, wire), (a) => parseReadAnswer(a, wire));
        }),
      );
      // Parts back into their ranges: the first failed part is the range's result.
      const data = ranges.map((r) => Buffer.alloc(r.length));
      const failed: Array<string | undefined> = ranges.map(() => undefined);
      requests.forEach((group, g) =>
        group.forEach((p, i) => {
          const result = answers[g]![i]!;
          if (!result.ok) failed[p.index] ??= result.reason;
          else result.data.copy(data[p.index]!, p.offset);
        }),
      );
      return ranges.map((_r, i) => (failed[i] === undefined ? { ok: true, data: data[i]! } : { ok: false, reason: failed[i] }));
    },
    async write(items) {
      const max = maxWriteLength(conn.pduLength);
      const parts = items.flatMap((item, index) =>
        item.range.bit !== undefined ? [{ index, range: item.range, data: item.data }] : partsOf([item.range], max).map((p) => ({ index, range: p.range, data: item.data.subarray(p.offset, p.offset + p.range.length) })),
      );
      const requests = pack(parts, (p) => ({ request: writeCost(p.data), answer: 1 }), conn.pduLength);
      const answers = await Promise.all(requests.map((group) => conn.exchange((ref) => writeRequest(ref, group), (a) => parseWriteAnswer(a, group.length))));
      const results: S7WriteResult[] = items.map(() => ({ ok: true }));
      requests.forEach((group, g) =>
        group.forEach((p, i) => {
          const r = answers[g]![i]!;
          if (!r.ok && results[p.index]!.ok) results[p.index] = r;
        }),
      );
      return results;
    },
    close: () => conn.end('closed', true),
    onClosed: (listener) => conn.onClosed(listener),
  };
}
