// A scripted S7 CPU for the tests that need a device to misbehave at an exact moment (snap7 only
// behaves): a TCP server on 127.0.0.1 (port 0) answering the COTP connection request, the
// communication setup and Read Var jobs (from one data block of bytes) with the answers of
// test/fuzz/wire/s7-wire.ts. `script` may replace any answer: other bytes, bytes dripped one at
// a time, or silence.
import net from 'node:net';
import { connectConfirm, readAnswer, setupAnswer, type ReadItem } from '../fuzz/wire/s7-wire.js';

export type S7Step = 'connect' | 'setup' | 'read';
/** What a step sends: bytes, bytes one at a time every `everyMs`, or nothing (undefined). */
export type S7Reply = Buffer | { drip: Buffer; everyMs: number } | undefined;

export interface ScriptedS7 {
  port: number;
  /** The data block every read item is served from (by its start and length). */
  block: Buffer;
  /** Connections accepted so far. */
  readonly accepted: number;
  /** Read Var jobs answered (or given to the script). */
  readonly reads: number;
  stop(): Promise<void>;
}

/**
 * `script(step, connection, answer)`: what to send instead of `answer` (the valid one) for this
 * step of the `connection`-th connection (1-based); undefined sends nothing.
 */
export async function startScriptedS7(options: { block?: Buffer; pduLength?: number; script?: (step: S7Step, connection: number, answer: Buffer) => S7Reply } = {}): Promise<ScriptedS7> {
  const script = options.script ?? ((_s, _c, answer) => answer);
  const sockets = new Set<net.Socket>();
  let accepted = 0;
  let reads = 0;
  const state: ScriptedS7 = {
    port: 0,
    block: options.block ?? Buffer.alloc(256),
    get accepted() {
      return accepted;
    },
    get reads() {
      return reads;
    },
    async stop() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  const server = net.createServer((socket) => {
    const connection = ++accepted;
    sockets.add(socket);
    const drips = new Set<NodeJS.Timeout>();
    socket.on('close', () => {
      sockets.delete(socket);
      for (const t of drips) clearTimeout(t);
    });
    socket.on('error', () => {});
    const drip = (bytes: Buffer, everyMs: number) => {
      const t = setTimeout(() => {
        drips.delete(t);
        if (socket.destroyed || !bytes.length) return;
        socket.write(bytes.subarray(0, 1));
        drip(bytes.subarray(1), everyMs);
      }, everyMs);
      drips.add(t);
    };
    const send = (step: S7Step, answer: Buffer) => {
      const out = script(step, connection, answer);
      if (Buffer.isBuffer(out)) {
        if (out.length) socket.write(out);
      } else if (out) drip(out.drip, out.everyMs);
    };
    let buffered = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      while (buffered.length >= 4 && buffered.length >= buffered.readUInt16BE(2)) {
        const frame = buffered.subarray(0, buffered.readUInt16BE(2));
        buffered = buffered.subarray(frame.length);
        if (frame[5] === 0xe0) send('connect', connectConfirm());
        else if (frame[17] === 0xf0) send('setup', setupAnswer(frame.readUInt16BE(11), options.pduLength ?? 480, 1));
        else if (frame[17] === 0x04) {
          reads++;
          const items: ReadItem[] = [];
          for (let i = 0; i < frame[18]!; i++) {
            const spec = frame.subarray(19 + i * 12, 31 + i * 12);
            const length = spec.readUInt16BE(4);
            const start = ((spec[9]! << 16) | spec.readUInt16BE(10)) >> 3;
            items.push(start + length <= state.block.length ? { data: state.block.subarray(start, start + length) } : { code: 0x05 });
          }
          send('read', readAnswer(frame.readUInt16BE(11), items));
        }
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.port = (server.address() as net.AddressInfo).port;
  return state;
}
