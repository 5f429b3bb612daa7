// Test support for the protocol-mapping tests: a minimal Modbus TCP server (modbus-serial's
// ServerTCP cannot listen on port 0: it replaces 0 by 502), a Modbus RTU slave on a socat
// pseudo-terminal pair, a bounded event wait, a fake clock.
import { spawn } from 'node:child_process';
import { EventEmitter, once } from 'node:events';
import net from 'node:net';
import { freePort } from './support/free-port.js';

/** The data of one Modbus device, and the answer it gives to a request PDU. */
export interface ModbusTestDevice {
  holding: Uint16Array;
  input: Uint16Array;
  coils: boolean[];
  /** Emits 'write' ({fc, address, values}) after a write request was applied, 'request' (fc) as each answer is sent. */
  events: EventEmitter;
  requests: number;
  /** Set: every request is answered with this exception code (a faulted device; the link stays up). */
  exception?: number;
}

export interface ModbusTestServer extends ModbusTestDevice {
  port: number;
  /** TCP connections accepted so far, and open now. */
  accepted: number;
  open: number;
  /** Closes the listener and every connection. */
  stop(): Promise<void>;
}

const SIZE = 1000;

export function createModbusDevice(): ModbusTestDevice {
  return { holding: new Uint16Array(SIZE), input: new Uint16Array(SIZE), coils: new Array<boolean>(SIZE).fill(false), events: new EventEmitter(), requests: 0 };
}

/** The device's answer PDU to a request PDU (function code first); exceptions for what it cannot do. */
export function answerPdu(device: ModbusTestDevice, pdu: Buffer): Buffer {
  const { events } = device;
  const fc = pdu[0]!;
  const address = pdu.readUInt16BE(1);
  const fail = (code: number) => Buffer.from([fc | 0x80, code]);
  if (device.exception !== undefined) return fail(device.exception);
  switch (fc) {
    case 1:
    case 2: {
      const qty = pdu.readUInt16BE(3);
      if (address + qty > SIZE) return fail(2);
      const bytes = Buffer.alloc(Math.ceil(qty / 8));
      for (let i = 0; i < qty; i++) if (device.coils[address + i]) bytes[i >> 3]! |= 1 << (i & 7);
      return Buffer.concat([Buffer.from([fc, bytes.length]), bytes]);
    }
    case 3:
    case 4: {
      const qty = pdu.readUInt16BE(3);
      if (address + qty > SIZE) return fail(2);
      const table = fc === 3 ? device.holding : device.input;
      const out = Buffer.alloc(2 + qty * 2);
      out[0] = fc;
      out[1] = qty * 2;
      for (let i = 0; i < qty; i++) out.writeUInt16BE(table[address + i]!, 2 + i * 2);
      return out;
    }
    case 5: {
      device.coils[address] = pdu.readUInt16BE(3) === 0xff00;
      events.emit('write', { fc, address, values: [device.coils[address]] });
      return pdu.subarray(0, 5);
    }
    case 6: {
      device.holding[address] = pdu.readUInt16BE(3);
      events.emit('write', { fc, address, values: [device.holding[address]] });
      return pdu.subarray(0, 5);
    }
    case 15: {
      const qty = pdu.readUInt16BE(3);
      if (address + qty > SIZE) return fail(2);
      const values: boolean[] = [];
      for (let i = 0; i < qty; i++) values.push(((pdu[6 + (i >> 3)]! >> (i & 7)) & 1) === 1);
      values.forEach((v, i) => (device.coils[address + i] = v));
      events.emit('write', { fc, address, values });
      return pdu.subarray(0, 5);
    }
    case 16: {
      const qty = pdu.readUInt16BE(3);
      if (address + qty > SIZE) return fail(2);
      const values: number[] = [];
      for (let i = 0; i < qty; i++) values.push(pdu.readUInt16BE(6 + i * 2));
      values.forEach((v, i) => (device.holding[address + i] = v));
      events.emit('write', { fc, address, values });
      return pdu.subarray(0, 5);
    }
    default:
      return fail(1);
  }
}

export async function startModbusServer(port = 0): Promise<ModbusTestServer> {
  const sockets = new Set<net.Socket>();
  const state: ModbusTestServer = {
    ...createModbusDevice(),
    port: 0,
    accepted: 0,
    get open() {
      return sockets.size;
    },
    stop: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  const server = net.createServer((socket) => {
    sockets.add(socket);
    state.accepted++;
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    let buf = Buffer.alloc(0);
    socket.on('data', (chunk) => {
      buf = Buffer.concat([buf, chunk]);
      while (buf.length >= 7) {
        const len = buf.readUInt16BE(4);
        if (buf.length < 6 + len) break;
        const frame = buf.subarray(0, 6 + len);
        buf = buf.subarray(6 + len);
        state.requests++;
        const pdu = answerPdu(state, frame.subarray(7));
        state.events.emit('request', frame[7]);
        const head = Buffer.alloc(7);
        frame.copy(head, 0, 0, 4); // transaction id, protocol id
        head.writeUInt16BE(pdu.length + 1, 4);
        head[6] = frame[6]!; // unit id
        socket.write(Buffer.concat([head, pdu]));
      }
    });
  });
  server.listen(port, '127.0.0.1');
  await once(server, 'listening');
  state.port = (server.address() as net.AddressInfo).port;
  return state;
}

/** Modbus CRC-16 (polynomial 0xA001, initial 0xFFFF), appended low byte first. */
export function crc16(frame: Buffer): number {
  let crc = 0xffff;
  for (const byte of frame) {
    crc ^= byte;
    for (let i = 0; i < 8; i++) crc = crc & 1 ? (crc >>> 1) ^ 0xa001 : crc >>> 1;
  }
  return crc;
}

/** A pseudo-terminal pair joined by socat: what one end writes the other reads, like a serial cable. */
export interface PtyPair {
  /** The gateway's end and the device's end. */
  gateway: string;
  device: string;
  /** Ends socat (the cable is cut: both ends fail). */
  stop(): Promise<void>;
}

/**
 * `links`: symbolic links socat makes to the two ends (gateway's, device's). A pair started
 * again with the same links is the same adapter plugged back: the device path stays.
 */
export async function startPtyPair(links?: { gateway: string; device: string }): Promise<PtyPair> {
  const end = (link?: string) => `pty,raw,echo=0${link ? `,link=${link}` : ''}`;
  const child = spawn('socat', ['-d', '-d', end(links?.gateway), end(links?.device)], { stdio: ['ignore', 'ignore', 'pipe'] });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let err = '';
  const paths = await new Promise<string[]>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`socat gave no pty pair within 5 s: ${err}`)), 5000);
    child.stderr!.on('data', (d: Buffer) => {
      err += d.toString();
      const found = [...err.matchAll(/PTY is (\S+)/g)].map((m) => m[1]!);
      if (found.length === 2 && /starting data transfer loop/.test(err)) {
        clearTimeout(timer);
        resolve(found);
      }
    });
    child.once('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    void exited.then(() => reject(new Error(`socat ended: ${err}`)));
  });
  return {
    gateway: links?.gateway ?? paths[0]!,
    device: links?.device ?? paths[1]!,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

/** A Modbus RTU slave on the device's end of a serial line, answering for several unit ids. */
export interface ModbusRtuTestServer {
  /** The devices by unit id; other unit ids get no answer (as on a real bus). */
  units: Map<number, ModbusTestDevice>;
  /** Requests that arrived while an earlier one was still unanswered (a master must never do that). */
  overlaps: number;
  /** Requests per unit id, answered or not. */
  seen: Map<number, number>;
  /** Stops answering and closes the port (the cable is pulled); start() opens it again. */
  stop(): Promise<void>;
  start(): Promise<void>;
}

export async function startModbusRtuServer(path: string, unitIds: number[], options: { baudRate?: number; parity?: 'none' | 'even' | 'odd'; answerDelayMs?: number } = {}): Promise<ModbusRtuTestServer> {
  const { SerialPort } = await import('serialport');
  const delay = options.answerDelayMs ?? 5;
  let port: InstanceType<typeof SerialPort> | undefined;
  let busy = false;
  const state: ModbusRtuTestServer = {
    units: new Map(unitIds.map((id) => [id, createModbusDevice()])),
    overlaps: 0,
    seen: new Map(),
    async stop() {
      const p = port;
      port = undefined;
      if (p?.isOpen) await new Promise<void>((resolve) => p.close(() => resolve()));
    },
    async start() {
      const p = new SerialPort({ path, baudRate: options.baudRate ?? 9600, parity: options.parity ?? 'even', dataBits: 8, stopBits: 1, autoOpen: false });
      p.on('error', () => {});
      await new Promise<void>((resolve, reject) => p.open((e) => (e ? reject(e) : resolve())));
      let buf = Buffer.alloc(0);
      p.on('data', (chunk: Buffer) => {
        buf = Buffer.concat([buf, chunk]);
        for (;;) {
          if (buf.length < 8) return;
          const fc = buf[1]!;
          const length = fc === 15 || fc === 16 ? 9 + buf[6]! : 8;
          if (buf.length < length) return;
          const frame = buf.subarray(0, length);
          buf = buf.subarray(length);
          if (crc16(frame.subarray(0, length - 2)) !== frame.readUInt16LE(length - 2)) {
            buf = Buffer.alloc(0); // noise: drop what is buffered
            return;
          }
          handle(p, frame);
        }
      });
      port = p;
    },
  };
  const handle = (p: InstanceType<typeof SerialPort>, frame: Buffer) => {
    const unitId = frame[0]!;
    state.seen.set(unitId, (state.seen.get(unitId) ?? 0) + 1);
    if (busy) state.overlaps++;
    const device = state.units.get(unitId);
    if (!device) return; // nobody at this address: silence
    busy = true;
    device.requests++;
    const pdu = answerPdu(device, frame.subarray(1, frame.length - 2));
    setTimeout(() => {
      busy = false;
      if (port !== p) return; // stopped meanwhile
      const body = Buffer.concat([Buffer.from([unitId]), pdu]);
      const crc = Buffer.alloc(2);
      crc.writeUInt16LE(crc16(body));
      p.write(Buffer.concat([body, crc]));
      device.events.emit('request', pdu[0]);
    }, delay);
  };
  await state.start();
  return state;
}

/** A port nothing listens on (bound and released). */
export const deadPort = freePort;

/** Polls `check` until it returns a value other than undefined (bounded: at most `ms`). */
export async function until<T>(check: () => Promise<T | undefined> | T | undefined, ms = 10_000, what = 'condition'): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`${what} not reached within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A manual clock for the runtime's injectable timers: nothing fires until advance(). */
export class FakeClock {
  now = 0;
  private seq = 0;
  readonly scheduled = new Map<number, { at: number; ms: number; fn: () => void }>();
  /** Every delay ever scheduled, in order. */
  readonly delays: number[] = [];
  readonly timers = {
    setTimeout: (fn: () => void, ms: number): unknown => {
      const id = ++this.seq;
      this.scheduled.set(id, { at: this.now + ms, ms, fn });
      this.delays.push(ms);
      return id;
    },
    clearTimeout: (h: unknown) => {
      this.scheduled.delete(h as number);
    },
  };
  /** Moves time forward, firing due timers in order. */
  advance(ms: number): void {
    const end = this.now + ms;
    for (;;) {
      let next: [number, { at: number; fn: () => void }] | undefined;
      for (const e of this.scheduled) if (e[1].at <= end && (!next || e[1].at < next[1].at)) next = e;
      if (!next) break;
      this.scheduled.delete(next[0]);
      this.now = next[1].at;
      next[1].fn();
    }
    this.now = end;
  }
  pending(): number[] {
    return [...this.scheduled.values()].map((e) => e.at - this.now);
  }
}
