// Malformed MQTT clients against a running broker, beside a legitimate QoS 1 pair, with the
// broker process's RSS watched from /proc (issue 35 point 3 and C). Each malformed client is a
// short TCP connection that sends mutated packets of test/fuzz/wire/mqtt-corpus.ts: a mutated CONNECT,
// or a valid CONNECT then mutated packets, or garbage; it leaves when the broker closes the
// connection or after a short linger. Used by test/mqtt-malformed-memory.test.ts and by
// `npm run bench -- mqtt-malformed`. Bounded: a fixed number of connections, every wait has a
// deadline.
import { readFileSync } from 'node:fs';
import net from 'node:net';
import type { MqttClient } from 'mqtt';
import { seededRandom } from '../fuzz/support/random.js';
import { mutate, randomMutations, seeds, type MqttVersion, type Seed } from '../fuzz/wire/mqtt-corpus.js';
import { connect } from './mqtt-test-kit.js';

/** VmRSS of a process in bytes (0 once it is gone). */
export function rssBytes(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

export interface RssWatch {
  /** The highest RSS seen so far. */
  peak(): number;
  samples: Array<{ at: number; rss: number }>;
  stop(): void;
}

/** Samples a process's RSS every `everyMs`. */
export function watchRss(pid: number, everyMs = 50): RssWatch {
  const samples: Array<{ at: number; rss: number }> = [];
  let peak = 0;
  const sample = () => {
    const rss = rssBytes(pid);
    peak = Math.max(peak, rss);
    samples.push({ at: Date.now(), rss });
  };
  sample();
  const timer = setInterval(sample, everyMs);
  return { peak: () => peak, samples, stop: () => clearInterval(timer) };
}

/** The bytes one malformed client sends, drawn from `rand`, in one to three writes. */
export function malformedSession(rand: () => number): Buffer[] {
  const all = seeds();
  const version: MqttVersion = rand() < 0.5 ? 4 : 5;
  const ofVersion = all.filter((s) => s.version === version);
  const connects = ofVersion.filter((s) => s.name.startsWith('connect'));
  const pick = <T>(list: T[]) => list[Math.floor(rand() * list.length)]!;
  const parts: Buffer[] = [];
  const kind = rand();
  if (kind < 0.4) {
    parts.push(mutate(pick(connects), randomMutations(rand)));
  } else if (kind < 0.9) {
    parts.push(connects[0]!.bytes);
    const n = 1 + Math.floor(rand() * 3);
    for (let i = 0; i < n; i++) {
      const seed: Seed = pick(ofVersion);
      parts.push(rand() < 0.25 ? seed.bytes : mutate(seed, randomMutations(rand)));
    }
  } else {
    parts.push(Buffer.from(Array.from({ length: 1 + Math.floor(rand() * 512) }, () => Math.floor(rand() * 256))));
  }
  return parts;
}

/** One short connection: writes its parts (the first at once, the others a tick apart), then lingers up to `lingerMs`. */
function malformedClient(port: number, parts: Buffer[], lingerMs: number): Promise<void> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.setNoDelay(true);
    let timer: NodeJS.Timeout | undefined;
    const done = () => {
      clearTimeout(timer);
      socket.destroy();
      resolve();
    };
    socket.on('error', done);
    socket.on('close', done);
    socket.on('data', () => {});
    socket.once('connect', () => {
      if (parts.length === 0) {
        timer = setTimeout(done, lingerMs);
        return;
      }
      let i = 0;
      const next = () => {
        if (socket.destroyed) return;
        if (i < parts.length) {
          socket.write(parts[i++]!);
          setImmediate(next);
        } else timer = setTimeout(done, lingerMs);
      };
      next();
    });
  });
}

export interface MalformedLoadResult {
  connections: number;
  ms: number;
}

/** What each short connection sends: mutated packets, or (for comparison) a valid CONNECT and DISCONNECT, or nothing. */
export type ClientKind = 'mutated' | 'valid' | 'silent';

function validSession(): Buffer[] {
  const all = seeds();
  return [all.find((s) => s.name === 'connect-v4')!.bytes, all.find((s) => s.name === 'disconnect-v4')!.bytes];
}

/** `total` short clients (malformed unless told), `concurrency` at a time. */
export async function runMalformedClients(port: number, options: { total: number; concurrency: number; seed: number; lingerMs?: number; kind?: ClientKind }): Promise<MalformedLoadResult> {
  const rand = seededRandom(options.seed).next;
  const session = options.kind === 'valid' ? validSession : options.kind === 'silent' ? () => [] : () => malformedSession(rand);
  const started = Date.now();
  let next = 0;
  const worker = async () => {
    while (next < options.total) {
      next++;
      await malformedClient(port, session(), options.lingerMs ?? 50);
    }
  };
  await Promise.all(Array.from({ length: options.concurrency }, worker));
  return { connections: options.total, ms: Date.now() - started };
}

export interface LegitimatePair {
  /** Stops publishing and resolves once every PUBACK came and the subscriber got every message (or `ms` passed). */
  finish(ms?: number): Promise<{ published: number; received: number; duplicates: number; outOfOrder: number }>;
}

/** A QoS 1 publisher sending `legit/seq` every `everyMs` and a QoS 1 subscriber counting what arrives. */
export async function startLegitimatePair(port: number, credentials: { username: string; password: string }, everyMs = 10): Promise<LegitimatePair> {
  const subscriber: MqttClient = await connect(port, { ...credentials, clientId: 'legit-sub', keepalive: 30 });
  const seen = new Set<number>();
  let duplicates = 0;
  let outOfOrder = 0;
  let last = -1;
  subscriber.on('message', (_topic, payload) => {
    const n = Number(payload.toString());
    if (seen.has(n)) duplicates++;
    if (n < last) outOfOrder++;
    last = Math.max(last, n);
    seen.add(n);
  });
  await subscriber.subscribeAsync('legit/#', { qos: 1 });
  const publisher: MqttClient = await connect(port, { ...credentials, clientId: 'legit-pub', keepalive: 30 });
  let published = 0;
  let acked = 0;
  let stopped = false;
  const timer = setInterval(() => {
    if (stopped) return;
    const n = published++;
    publisher.publish('legit/seq', String(n), { qos: 1 }, (err) => {
      if (!err) acked++;
    });
  }, everyMs);
  return {
    async finish(ms = 10_000) {
      stopped = true;
      clearInterval(timer);
      const deadline = Date.now() + ms;
      while ((acked < published || seen.size < published) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      const result = { published, received: seen.size, duplicates, outOfOrder };
      await Promise.all([publisher.endAsync(true), subscriber.endAsync(true)]);
      return result;
    },
  };
}
