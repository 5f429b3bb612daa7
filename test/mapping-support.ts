// Test support for the protocol-mapping tests: a minimal Modbus TCP server (modbus-serial's
// ServerTCP cannot listen on port 0: it replaces 0 by 502), a bounded event wait, a fake clock.
import { EventEmitter, once } from 'node:events';
import net from 'node:net';

export interface ModbusTestServer {
  port: number;
  holding: Uint16Array;
  input: Uint16Array;
  coils: boolean[];
  /** Emits 'write' ({fc, address, values}) after a write request was applied, 'request' (fc) as each answer is sent. */
  events: EventEmitter;
  requests: number;
  /** Closes the listener and every connection. */
  stop(): Promise<void>;
}

const SIZE = 1000;

export async function startModbusServer(port = 0): Promise<ModbusTestServer> {
  const events = new EventEmitter();
  const sockets = new Set<net.Socket>();
  const state: ModbusTestServer = {
    port: 0,
    holding: new Uint16Array(SIZE),
    input: new Uint16Array(SIZE),
    coils: new Array<boolean>(SIZE).fill(false),
    events,
    requests: 0,
    stop: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  const answer = (pdu: Buffer): Buffer => {
    const fc = pdu[0]!;
    const address = pdu.readUInt16BE(1);
    const fail = (code: number) => Buffer.from([fc | 0x80, code]);
    switch (fc) {
      case 1:
      case 2: {
        const qty = pdu.readUInt16BE(3);
        if (address + qty > SIZE) return fail(2);
        const bytes = Buffer.alloc(Math.ceil(qty / 8));
        for (let i = 0; i < qty; i++) if (state.coils[address + i]) bytes[i >> 3]! |= 1 << (i & 7);
        return Buffer.concat([Buffer.from([fc, bytes.length]), bytes]);
      }
      case 3:
      case 4: {
        const qty = pdu.readUInt16BE(3);
        if (address + qty > SIZE) return fail(2);
        const table = fc === 3 ? state.holding : state.input;
        const out = Buffer.alloc(2 + qty * 2);
        out[0] = fc;
        out[1] = qty * 2;
        for (let i = 0; i < qty; i++) out.writeUInt16BE(table[address + i]!, 2 + i * 2);
        return out;
      }
      case 5: {
        state.coils[address] = pdu.readUInt16BE(3) === 0xff00;
        events.emit('write', { fc, address, values: [state.coils[address]] });
        return pdu.subarray(0, 5);
      }
      case 6: {
        state.holding[address] = pdu.readUInt16BE(3);
        events.emit('write', { fc, address, values: [state.holding[address]] });
        return pdu.subarray(0, 5);
      }
      case 15: {
        const qty = pdu.readUInt16BE(3);
        if (address + qty > SIZE) return fail(2);
        const values: boolean[] = [];
        for (let i = 0; i < qty; i++) values.push(((pdu[6 + (i >> 3)]! >> (i & 7)) & 1) === 1);
        values.forEach((v, i) => (state.coils[address + i] = v));
        events.emit('write', { fc, address, values });
        return pdu.subarray(0, 5);
      }
      case 16: {
        const qty = pdu.readUInt16BE(3);
        if (address + qty > SIZE) return fail(2);
        const values: number[] = [];
        for (let i = 0; i < qty; i++) values.push(pdu.readUInt16BE(6 + i * 2));
        values.forEach((v, i) => (state.holding[address + i] = v));
        events.emit('write', { fc, address, values });
        return pdu.subarray(0, 5);
      }
      default:
        return fail(1);
    }
  };
  const server = net.createServer((socket) => {
    sockets.add(socket);
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
        const pdu = answer(frame.subarray(7));
        events.emit('request', frame[7]);
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

/** A port nothing listens on (bound and released). */
export async function deadPort(): Promise<number> {
  const s = net.createServer();
  s.listen(0, '127.0.0.1');
  await once(s, 'listening');
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

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
