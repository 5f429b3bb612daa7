// A real S7 peer for the tests: snap7's S7 server (node-snap7) in a child process on a free
// loopback port, with data blocks and I/Q/M areas the tests fill and change through the child
// (snap7-server-child.ts; the addon is built per Node ABI by snap7-addon.ts). kill() is the CPU
// losing power; a new server on the same port is the CPU coming back.
//
// With `observe`, the port the tests are given belongs to a relay in the test process that counts
// the jobs clients send (function, items): what proves reads are packed into few requests. With
// `fragment` the relay also hands the server's answers on in pieces of a few bytes (TCP may cut
// a frame anywhere).
import { spawn, type ChildProcess } from 'node:child_process';
import { EventEmitter, once } from 'node:events';
import net from 'node:net';
import { freePort } from './free-port.js';
import { snap7Addon, snap7ServerChild } from './snap7-addon.js';

export type S7TestArea = 'DB' | 'I' | 'Q' | 'M';

export interface Snap7Options {
  /** Listen here (a restarted CPU); default a free port. */
  port?: number;
  /** Data blocks: number → size in bytes. */
  dbs?: Record<number, number>;
  /** Sizes of the input, output and memory areas (bytes; default 64 each). */
  I?: number;
  Q?: number;
  M?: number;
  /** Count the jobs clients send (a relay in front of the server). */
  observe?: boolean;
  /** The relay passes the server's answers on in pieces of 1 to 5 bytes (implies observe). */
  fragment?: boolean;
  /** The PDU length the server imposes (snap7 grants the client's proposal otherwise). */
  pduLength?: number;
}

/** One S7 job a client sent: Read Var ('read'), Write Var ('write') or another function, and its items. */
export interface ObservedJob {
  fn: 'read' | 'write' | 'other';
  items: number;
}

export interface Snap7Server {
  /** Where clients connect. */
  port: number;
  /** The server's own port (the relay's upstream when observing; else the same as port). */
  serverPort: number;
  set(area: S7TestArea, db: number, offset: number, bytes: Buffer): Promise<void>;
  get(area: S7TestArea, db: number, offset: number, length: number): Promise<Buffer>;
  /** Emits 'write' ({area, db, start, size}) after a client's write was applied. */
  readonly events: EventEmitter;
  /** Jobs seen by the relay (observe only). */
  readonly jobs: ObservedJob[];
  /** The CPU loses power: SIGKILL, no goodbye to the clients. */
  kill(): Promise<void>;
  stop(): Promise<void>;
}

async function startChild(port: number, options: Snap7Options): Promise<{ child: ChildProcess; call: (cmd: string, args?: Record<string, unknown>) => Promise<unknown>; events: EventEmitter }> {
  const addon = await snap7Addon();
  const child = spawn(process.execPath, [snap7ServerChild, addon], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const events = new EventEmitter();
  const waiting = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  let next = 1;
  child.on('message', (m: { id?: number; ok?: boolean; result?: unknown; error?: string; event?: string }) => {
    if (m.event) return void events.emit(m.event, m);
    const w = waiting.get(m.id!);
    waiting.delete(m.id!);
    if (m.ok) w?.resolve(m.result);
    else w?.reject(new Error(m.error));
  });
  child.on('exit', () => {
    for (const w of waiting.values()) w.reject(new Error('the snap7 server process exited'));
    waiting.clear();
  });
  const call = (cmd: string, args: Record<string, unknown> = {}) =>
    new Promise<unknown>((resolve, reject) => {
      if (child.exitCode !== null || child.signalCode !== null) return reject(new Error('the snap7 server process exited'));
      const id = next++;
      waiting.set(id, { resolve, reject });
      child.send({ id, cmd, ...args });
    });
  try {
    await call('start', { port, dbs: options.dbs ?? { 1: 256 }, I: options.I ?? 64, Q: options.Q ?? 64, M: options.M ?? 64, pduLength: options.pduLength });
  } catch (err) {
    child.kill('SIGKILL');
    throw err;
  }
  return { child, call, events };
}

/** A relay on a free port to `upstream` that records the S7 jobs going up. */
async function startObserver(upstream: number, jobs: ObservedJob[], fragment: boolean): Promise<net.Server> {
  const server = net.createServer((down) => {
    const up = net.connect(upstream, '127.0.0.1');
    down.setNoDelay(true);
    down.on('error', () => up.destroy());
    up.on('error', () => down.destroy());
    down.on('close', () => up.destroy());
    up.on('close', () => down.destroy());
    // In pieces: each written on its own turn of the event loop, in order.
    let pieces = Promise.resolve();
    up.on('data', (chunk: Buffer) => {
      if (!fragment) return void down.write(chunk);
      for (let at = 0; at < chunk.length; ) {
        const piece = chunk.subarray(at, at + 1 + (at % 5));
        at += piece.length;
        pieces = pieces.then(() => new Promise<void>((resolve) => setImmediate(() => (down.destroyed ? resolve() : down.write(piece, () => resolve())))));
      }
    });
    let buffered = Buffer.alloc(0);
    down.on('data', (chunk: Buffer) => {
      up.write(chunk);
      buffered = Buffer.concat([buffered, chunk]);
      while (buffered.length >= 4 && buffered.length >= buffered.readUInt16BE(2)) {
        const frame = buffered.subarray(0, buffered.readUInt16BE(2));
        buffered = buffered.subarray(frame.length);
        // TPKT (4) + COTP data (3) + S7 job header (10): then the function and its item count.
        if (frame.length >= 19 && frame[5] === 0xf0 && frame[7] === 0x32 && frame[8] === 0x01) {
          const fn = frame[17] === 0x04 ? 'read' : frame[17] === 0x05 ? 'write' : 'other';
          jobs.push({ fn, items: fn === 'other' ? 0 : frame[18]! });
        }
      }
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return server;
}

export async function startSnap7Server(options: Snap7Options = {}): Promise<Snap7Server> {
  // A free port is free until someone takes it: a few tries.
  let started: Awaited<ReturnType<typeof startChild>> | undefined;
  let serverPort = 0;
  for (let attempt = 0; !started; attempt++) {
    serverPort = options.port ?? (await freePort());
    try {
      started = await startChild(serverPort, options);
    } catch (err) {
      if (options.port !== undefined || attempt >= 4) throw err;
    }
  }
  const { child, call, events } = started;
  const jobs: ObservedJob[] = [];
  const observer = options.observe || options.fragment ? await startObserver(serverPort, jobs, options.fragment ?? false) : undefined;
  const exited = once(child, 'exit');
  const closeObserver = () => new Promise<void>((resolve) => (observer ? observer.close(() => resolve()) : resolve()));
  return {
    port: observer ? (observer.address() as net.AddressInfo).port : serverPort,
    serverPort,
    set: async (area, db, offset, bytes) => void (await call('set', { area, db, offset, hex: bytes.toString('hex') })),
    get: async (area, db, offset, length) => Buffer.from((await call('get', { area, db, offset, length })) as string, 'hex'),
    events,
    jobs,
    async kill() {
      child.kill('SIGKILL');
      await exited;
      await closeObserver();
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        await call('stop').catch(() => undefined);
        const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
        await exited;
        clearTimeout(timer);
      }
      await closeObserver();
    },
  };
}
