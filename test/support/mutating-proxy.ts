// A hostile network between the gateway and a real device (snap7, the test kit's CIP server, a
// Modbus server): a TCP proxy on 127.0.0.1 (port 0) that cuts what the device answers into
// frames (its protocol's framing) and, while corrupting, treats a share of them (default a
// third) one of these ways, chosen by a seeded random source (the same seed, the same choices):
// - mutate: 1 to 3 mutations (test/fuzz/support/mutators.ts: bit flips, length and count fields
//   set to 0/1/max/±1/0xFFFF, truncation, garbage appended, another answer spliced in or glued
//   after, the answer twice);
// - garbage: random bytes instead of the answer; replay: an earlier answer instead;
// - trickle: the answer 1 byte every 200 ms (later answers wait behind it);
// - stall: the header, then nothing of that answer; silence: nothing; reset: the connection reset.
// Requests pass untouched. With corruption off every byte passes as it came.
import net from 'node:net';
import { applyMutations, randomMutations, type WireField } from '../fuzz/support/mutators.js';
import { seededRandom } from '../fuzz/support/random.js';

/** How a protocol's frames are cut from a stream: header length and a frame's total length from it. */
export interface Framing {
  name: string;
  headerLength: number;
  frameLength(head: Buffer): number;
}

export type Hostility = 'mutate' | 'garbage' | 'replay' | 'trickle' | 'stall' | 'silence' | 'reset';
const HOSTILITIES: Array<[Hostility, number]> = [
  ['mutate', 40],
  ['garbage', 8],
  ['replay', 14],
  ['trickle', 6],
  ['stall', 10],
  ['silence', 12],
  ['reset', 10],
];
const TRICKLE_MS = 200;
/** Earlier answers kept for replays and splices. */
const RECENT = 16;

export interface MutatingProxyOptions {
  target: { host?: string; port: number };
  framing: Framing;
  /** The length and count fields of an answer (what `field` mutations change). */
  fields: (frame: Buffer) => WireField[];
  seed: number;
  /** Share of the answers treated while corrupting (0..1; default 1/3). */
  rate?: number;
  /** Only these treatments (default: all). */
  only?: Hostility[];
  /** Told every answer as the device sent it (recording seed cases). */
  onAnswer?: (frame: Buffer) => void;
}

export interface MutatingProxy {
  port: number;
  /** Corrupting or passing everything. */
  corrupt(on: boolean): void;
  /** Answers seen, and how many were treated each way. */
  readonly counts: { answers: number } & Record<Hostility, number>;
  /** Connections accepted so far. */
  readonly accepted: number;
  close(): Promise<void>;
}

export async function startMutatingProxy(options: MutatingProxyOptions): Promise<MutatingProxy> {
  const rng = seededRandom(options.seed);
  const rate = options.rate ?? 1 / 3;
  const kinds = HOSTILITIES.filter(([k]) => !options.only || options.only.includes(k));
  const totalWeight = kinds.reduce((s, [, w]) => s + w, 0);
  const pickKind = (): Hostility => {
    let r = rng.next() * totalWeight;
    for (const [k, w] of kinds) if ((r -= w) < 0) return k;
    return kinds[kinds.length - 1]![0];
  };
  const counts = { answers: 0, mutate: 0, garbage: 0, replay: 0, trickle: 0, stall: 0, silence: 0, reset: 0 };
  const recent: Buffer[] = [];
  let corrupting = false;
  let accepted = 0;
  const sockets = new Set<net.Socket>();

  const server = net.createServer((client) => {
    accepted++;
    client.setNoDelay(true);
    const upstream = net.connect({ host: options.target.host ?? '127.0.0.1', port: options.target.port });
    upstream.setNoDelay(true);
    sockets.add(client).add(upstream);
    const timers = new Set<NodeJS.Timeout>();
    const end = () => {
      for (const t of timers) clearTimeout(t);
      timers.clear();
      sockets.delete(client);
      sockets.delete(upstream);
      client.destroy();
      upstream.destroy();
    };
    for (const s of [client, upstream]) {
      s.on('error', end);
      s.on('close', end);
    }
    client.on('data', (chunk: Buffer) => upstream.write(chunk));

    // Down the line in order: whole buffers at once, trickled ones a byte at a time.
    const out: Array<{ bytes: Buffer; trickle: boolean }> = [];
    let pumping = false;
    const pump = () => {
      if (pumping) return;
      while (out.length && !client.destroyed) {
        const head = out[0]!;
        if (!head.trickle) {
          out.shift();
          client.write(head.bytes);
          continue;
        }
        pumping = true;
        const t = setTimeout(() => {
          timers.delete(t);
          pumping = false;
          if (client.destroyed) return;
          client.write(head.bytes.subarray(0, 1));
          head.bytes = head.bytes.subarray(1);
          if (!head.bytes.length) out.shift();
          pump();
        }, TRICKLE_MS);
        timers.add(t);
        return;
      }
    };
    const send = (bytes: Buffer, trickle = false) => {
      if (bytes.length) out.push({ bytes, trickle });
      pump();
    };

    let buffered = Buffer.alloc(0);
    upstream.on('data', (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      const { headerLength, frameLength } = options.framing;
      while (buffered.length >= headerLength) {
        const length = frameLength(buffered);
        if (length < headerLength) {
          // Not this protocol (never from a real device): passed on as it is.
          send(buffered);
          buffered = Buffer.alloc(0);
          return;
        }
        if (buffered.length < length) return;
        const frame = buffered.subarray(0, length);
        buffered = buffered.subarray(length);
        answer(frame);
      }
    });

    const answer = (frame: Buffer) => {
      counts.answers++;
      options.onAnswer?.(Buffer.from(frame));
      const earlier = recent.length ? rng.pick(recent) : undefined;
      recent.push(frame);
      if (recent.length > RECENT) recent.shift();
      if (!corrupting || !rng.chance(rate)) return send(frame);
      const kind = pickKind();
      counts[kind]++;
      switch (kind) {
        case 'mutate':
          return send(applyMutations(frame, options.fields(frame), randomMutations(rng, recent)));
        case 'garbage':
          return send(rng.bytes(rng.int(1, 300)));
        case 'replay':
          return send(earlier ?? frame);
        case 'trickle':
          return send(frame, true);
        case 'stall':
          return send(frame.subarray(0, options.framing.headerLength));
        case 'silence':
          return;
        case 'reset':
          client.resetAndDestroy();
          upstream.destroy();
          return;
      }
    };
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    corrupt(on) {
      corrupting = on;
    },
    counts,
    get accepted() {
      return accepted;
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
