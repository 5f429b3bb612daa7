// Fuzz target: MQTT ingress (issue 35 B). The real broker of src/mqtt (aedes 2, mqtt-packet, every
// gatewayd hook, the LMDB persistence on a temp store) serves in-process byte streams
// (Broker.acceptStream): each input is one connection's bytes — a valid or mutated CONNECT of
// MQTT 3.1.1 or 5, then valid and mutated packets of every type (test/fuzz/wire/mqtt-corpus.ts), some
// garbage — written in one to four chunks, then the stream ends. Oracles, per input: nothing
// thrown out of the broker (an uncaught exception fails the run), no error logged, the
// connection closed after its stream ended, no live client left behind, within 50 ms of CPU for an
// input ≤ 64 KiB, buffers allocated ≤ 16 × input + 1 MiB, the broker's answer starts with its one CONNACK; every 250 inputs a legitimate QoS 1
// publisher/subscriber pair on their own streams still gets its message through.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Duplex, Writable } from 'node:stream';
import fc from 'fast-check';
import mqttPacket from 'mqtt-packet';
import { loadConfig } from '../../../src/config/index.js';
import { createLogger } from '../../../src/log/logger.js';
import { createBroker, type Broker } from '../../../src/mqtt/index.js';
import { createStoragePolicy } from '../../../src/storage/index.js';
import { openStore, type Store } from '../../../src/store/index.js';
import { makeCerts } from '../../support/mqtt-test-kit.js';
import { StaticMqttAccess } from '../../support/static-mqtt-access.js';
import { FUZZ_USER, mutate, seedFromBytes, seeds, type Mutation, type MqttVersion } from '../wire/mqtt-corpus.js';
import { FuzzFinding, typedTarget, type TypedTarget } from '../support/typed-target.js';

/** Two ends of an in-memory connection: what one writes the other reads; destroying one closes both. */
export function streamPair(): [Duplex, Duplex] {
  const sides: Duplex[] = [];
  const make = (other: () => Duplex) =>
    new Duplex({
      read() {},
      write(chunk: Buffer, _enc, cb) {
        const peer = other();
        if (!peer.destroyed) peer.push(chunk);
        cb();
      },
      final(cb) {
        const peer = other();
        if (!peer.destroyed) peer.push(null);
        cb();
      },
      destroy(err, cb) {
        const peer = other();
        if (!peer.destroyed) {
          peer.push(null);
          peer.destroy();
        }
        cb(err);
      },
    });
  sides.push(make(() => sides[1]!), make(() => sides[0]!));
  return [sides[0]!, sides[1]!];
}

/** A client speaking through a stream pair with mqtt-packet (the legitimate pair of the liveness check). */
class PacketClient {
  private readonly parser: ReturnType<typeof mqttPacket.parser>;
  private readonly waiters: Array<{ pred: (p: mqttPacket.Packet) => boolean; resolve: (p: mqttPacket.Packet) => void }> = [];
  readonly stream: Duplex;

  constructor(broker: Broker, version: MqttVersion) {
    const [client, server] = streamPair();
    this.stream = client;
    this.parser = mqttPacket.parser({ protocolVersion: version });
    this.parser.on('packet', (packet: mqttPacket.Packet) => {
      const i = this.waiters.findIndex((w) => w.pred(packet));
      if (i >= 0) this.waiters.splice(i, 1)[0]!.resolve(packet);
    });
    client.on('data', (chunk: Buffer) => this.parser.parse(chunk));
    client.on('error', () => {});
    broker.acceptStream(server, '127.0.0.2');
  }

  send(packet: mqttPacket.Packet, version: MqttVersion = 4): void {
    this.stream.write(mqttPacket.generate(packet, { protocolVersion: version }));
  }

  next(pred: (p: mqttPacket.Packet) => boolean, what: string, ms = 2000): Promise<mqttPacket.Packet> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new FuzzFinding(`the broker stopped serving a legitimate client: no ${what} within ${ms} ms`)), ms);
      this.waiters.push({ pred, resolve: (p) => (clearTimeout(timer), resolve(p)) });
    });
  }
}

const LEGIT = { username: 'legit', password: 'Legit-Passw0rd!' };

export interface MqttIngressState {
  broker: Broker;
  store: Store;
  dir: string;
  errors: string[];
  publisher: PacketClient;
  subscriber: PacketClient;
  baselineClients: number;
  inputs: number;
  sequence: number;
  cleanupCerts(): Promise<void>;
}

export async function startIngressBroker(): Promise<MqttIngressState> {
  // On tmpfs when there is one, committed every few ms: a held PUBACK (or the PINGRESP behind it)
  // waits for a commit, and the daemon's 500 ms window would make most inputs wait for it.
  const dir = mkdtempSync(join(existsSync('/dev/shm') ? '/dev/shm' : tmpdir(), 'gatewayd-fuzz-mqtt-'));
  const store = openStore({ dir });
  const storage = createStoragePolicy({ store, timings: { holdMs: 2, commitIntervalMs: 2, backgroundCommitMs: 200 } });
  const certs = await makeCerts();
  const errors: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      const text = chunk.toString('utf8');
      if (text.includes('"level":"error"')) errors.push(text.slice(0, 500));
      cb();
    },
  });
  const access = new StaticMqttAccess([
    { ...FUZZ_USER, permissions: [{ resource: 'fuzz/#', operation: 'readWrite' }] },
    { ...LEGIT, permissions: [{ resource: 'legit/#', operation: 'readWrite' }] },
  ]);
  const broker = createBroker({
    // The fuzz user's persistent sessions keep what it publishes to itself: a small queue keeps
    // each reconnect's replay (aedes handles packets sent with a CONNECT after it) short.
    config: { ...loadConfig({ env: {} }).mqtt, port: 0, tlsPort: 0, maxPublishesPerSecond: 1_000_000, sysIntervalSeconds: 0, maxQueuedMessages: 10 },
    host: '127.0.0.1',
    log: createLogger({ level: 'error', stream: sink }),
    access,
    tls: { key: certs.serverKey, cert: certs.serverCert, ca: () => [certs.caCert] },
    store,
    storage,
  });
  await broker.start();
  const subscriber = new PacketClient(broker, 4);
  subscriber.send({ cmd: 'connect', protocolId: 'MQTT', protocolVersion: 4, clean: true, clientId: 'legit-sub', keepalive: 0, ...LEGIT, password: Buffer.from(LEGIT.password) });
  await subscriber.next((p) => p.cmd === 'connack', 'CONNACK');
  subscriber.send({ cmd: 'subscribe', messageId: 1, subscriptions: [{ topic: 'legit/#', qos: 1 }] });
  await subscriber.next((p) => p.cmd === 'suback', 'SUBACK');
  const publisher = new PacketClient(broker, 4);
  publisher.send({ cmd: 'connect', protocolId: 'MQTT', protocolVersion: 4, clean: true, clientId: 'legit-pub', keepalive: 0, ...LEGIT, password: Buffer.from(LEGIT.password) });
  await publisher.next((p) => p.cmd === 'connack', 'CONNACK');
  const state: MqttIngressState = { broker, store, dir, errors, publisher, subscriber, baselineClients: broker.stats().clients, inputs: 0, sequence: 0, cleanupCerts: certs.cleanup };
  await checkLegitimatePair(state); // also warms mqtt-packet's number cache (65,536 small buffers, once per process)
  return state;
}

export async function stopIngressBroker(state: MqttIngressState): Promise<void> {
  state.publisher.stream.destroy();
  state.subscriber.stream.destroy();
  await state.broker.stop();
  await state.store.close();
  rmSync(state.dir, { recursive: true, force: true });
  await state.cleanupCerts();
}

/** The legitimate publisher's QoS 1 message reaches the legitimate subscriber, acknowledged. */
export async function checkLegitimatePair(state: MqttIngressState): Promise<void> {
  const n = ++state.sequence;
  const messageId = (n % 65535) + 1;
  const payload = `seq-${n}`;
  const delivered = state.subscriber.next((p) => p.cmd === 'publish' && (p as mqttPacket.IPublishPacket).payload.toString() === payload, `delivery of ${payload}`);
  const acked = state.publisher.next((p) => p.cmd === 'puback' && (p as mqttPacket.IPubackPacket).messageId === messageId, `PUBACK ${messageId}`);
  state.publisher.send({ cmd: 'publish', topic: 'legit/seq', payload: Buffer.from(payload), qos: 1, messageId, retain: false, dup: false });
  await acked;
  const message = (await delivered) as mqttPacket.IPublishPacket;
  if (message.messageId !== undefined) state.subscriber.send({ cmd: 'puback', messageId: message.messageId });
}

export interface MqttInput {
  bytes: Buffer;
  /** Offsets where a new write starts (sorted, within bytes). */
  cuts: number[];
}

/** The end of the complete frame starting at `i`; 0 when it is incomplete, -1 when its header is malformed. */
function frameAt(bytes: Buffer, i: number): number {
  let length = 0;
  let mul = 1;
  let j = i + 1;
  for (let k = 0; ; k++) {
    if (k === 4) return -1;
    if (j >= bytes.length) return 0;
    const b = bytes[j++]!;
    length += (b & 0x7f) * mul;
    mul *= 128;
    if ((b & 0x80) === 0) break;
  }
  return j + length <= bytes.length ? j + length : 0;
}

/** Whether `bytes` is a sequence of complete MQTT frames (by their fixed headers). */
export function wholeFrames(bytes: Buffer): boolean {
  let i = 0;
  while (i < bytes.length) {
    const end = frameAt(bytes, i);
    if (end <= 0) return false;
    i = end;
  }
  return true;
}

const PINGREQ = Buffer.from([0xc0, 0x00]);

/** What aedes' client of a stuck connection was doing (for the finding's message). */
function describeClient(server: Duplex): string {
  const c = (server as unknown as { client?: Record<string, unknown> }).client;
  if (!c) return 'none';
  const parser = c._parser as { _list?: { length: number }; _queue?: unknown[] | null; packet?: { cmd?: string; length?: number } } | undefined;
  return JSON.stringify({
    id: c.id,
    version: c.version,
    connecting: c.connecting,
    connected: c.connected,
    connackSent: c.connackSent,
    closed: c.closed,
    paused: c._paused,
    parsingBatch: c._parsingBatch,
    buffered: parser?._list?.length,
    queued: parser?._queue?.length,
    pending: parser?.packet ? `${parser.packet.cmd}/${parser.packet.length}` : undefined,
    quota: (() => {
      const q = (c.gatewayd as { mqtt5?: { quota?: { max: number; unacknowledged: number; queued: number; replayWaiter?: unknown } } } | undefined)?.mqtt5?.quota;
      return q ? { max: q.max, unacknowledged: q.unacknowledged, queued: q.queued, replayHeld: q.replayWaiter !== undefined } : undefined;
    })(),
  });
}

/**
 * One connection's bytes through the broker; resolves once the broker closed it. When the bytes
 * end on a packet boundary a PINGREQ follows, and the stream ends only once the PINGRESP came
 * (every packet before it handled) or the broker closed the connection itself: so inputs reach
 * the handlers behind CONNECT, not only the parser.
 */
export async function feedConnection(state: MqttIngressState, input: MqttInput, closeMs = 2000): Promise<{ answered: boolean; answers: number[] }> {
  const [client, server] = streamPair();
  client.on('error', () => {});
  // Only the types of the broker's packets are kept; of its bytes, the tail of a partial frame.
  let tail: Buffer = Buffer.alloc(0);
  let pong: (() => void) | undefined;
  const answers: number[] = [];
  client.on('data', (chunk: Buffer) => {
    // Concatenated only behind a partial frame (the fuzz run meters the buffers it allocates).
    const bytes = tail.length ? Buffer.concat([tail, chunk]) : chunk;
    let at = 0;
    for (let end = frameAt(bytes, at); end > 0; end = frameAt(bytes, at)) {
      answers.push(bytes[at]! >> 4);
      if (bytes[at] === 0xd0) pong?.();
      at = end;
    }
    tail = bytes.subarray(at);
  });
  const closed = new Promise<'closed'>((resolve) => server.once('close', () => resolve('closed')));
  state.broker.acceptStream(server, '127.0.0.3');
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), closeMs)));
  let answered = false;
  try {
    // A cut right after a complete CONNECT waits for its CONNACK (or a close), as most clients
    // do: what follows then meets the handlers of a connected client even when it is malformed.
    // Without that cut the packets come with the CONNECT (pipelined, as others do).
    const connectEnd = input.bytes[0] === 0x10 ? frameAt(input.bytes, 0) : 0;
    let from = 0;
    for (const cut of [...input.cuts, input.bytes.length]) {
      if (cut > from) client.write(input.bytes.subarray(from, cut));
      from = Math.max(from, cut);
      if (cut === connectEnd && connectEnd > 0 && from < input.bytes.length) {
        const connack = new Promise<'connack'>((resolve) => client.once('data', () => resolve('connack')));
        const outcome = await Promise.race([closed, connack, late]);
        if (outcome === 'late') throw new FuzzFinding(`no CONNACK and no close ${closeMs} ms after a complete CONNECT`);
        if (outcome === 'closed') break;
      }
    }
    if (input.bytes.length > 0 && wholeFrames(input.bytes)) {
      const ponged = new Promise<'pong'>((resolve) => (pong = () => resolve('pong')));
      client.write(PINGREQ);
      const first = await Promise.race([closed, ponged, late]);
      if (first === 'late') throw new FuzzFinding(`no PINGRESP and no close ${closeMs} ms after a complete packet sequence`);
      answered = first === 'pong';
    }
    client.end();
    if ((await Promise.race([closed, late])) === 'late') throw new FuzzFinding(`the connection was still open ${closeMs} ms after its stream ended`);
    // What the broker wrote is MQTT too: one CONNACK at most, and first [MQTT-3.2.0-1].
    const connacks = answers.filter((type) => type === 2).length;
    if (connacks > 1 || (answers.length > 0 && answers[0] !== 2)) throw new FuzzFinding(`the broker answered packets of types ${answers.join(',')}: a CONNACK must come first and once`);
  } catch (err) {
    if (err instanceof FuzzFinding) err.message += ` (aedes client: ${describeClient(server)})`;
    server.destroy();
    throw err;
  } finally {
    clearTimeout(timer);
  }
  return { answered, answers };
}

const INTERESTING = [0, 1, 0x7f, 0x80, 0xff, 0x100, 0xffff, 0x10000, 0x7fffffff, 0xffffffff];

export function mutationArb(): fc.Arbitrary<Mutation> {
  const at = fc.nat(70_000);
  return fc.oneof(
    { weight: 4, arbitrary: fc.record({ kind: fc.constant('field' as const), field: fc.nat(63), to: fc.constantFrom('zero', 'one', 'max', 'minus-one', 'plus-one', 'value') as fc.Arbitrary<'zero'>, value: fc.constantFrom(...INTERESTING) }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constantFrom('vbi-5-bytes' as const, 'vbi-non-minimal' as const), field: fc.nat(63) }) },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant('truncate' as const), at }) },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant('flip' as const), at, bit: fc.nat(7) }) },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant('set-byte' as const), at, value: fc.constantFrom(...INTERESTING.map((v) => v & 0xff), 0x10, 0x30, 0xe0) }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('insert' as const), at, bytes: fc.uint8Array({ maxLength: 64 }) }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('splice' as const), at, other: fc.nat(63), from: at }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('duplicate' as const), from: at, length: fc.nat(70_000) }) },
  );
}

/** Packets a client sends (the others, a server's, close the connection at once). */
const CLIENT_PACKETS = /^(connect|publish|puback|pubrec|pubrel|pubcomp|subscribe|unsubscribe|pingreq|disconnect|auth)/;

/** A packet of the corpus (of the connection's version), kept (a third of them) or mutated. */
function packetArb(version: MqttVersion, only?: (name: string) => boolean): fc.Arbitrary<Buffer> {
  const list = seeds().filter((s) => s.version === version && (!only || only(s.name)));
  const clientOnes = list.filter((s) => CLIENT_PACKETS.test(s.name));
  const pick = fc.oneof({ weight: 4, arbitrary: fc.constantFrom(...clientOnes) }, { weight: 1, arbitrary: fc.constantFrom(...list) });
  const mutations = fc.oneof({ weight: 1, arbitrary: fc.constant([] as Mutation[]) }, { weight: 2, arbitrary: fc.array(mutationArb(), { minLength: 1, maxLength: 3 }) });
  return fc.record({ seed: pick, mutations }).map(({ seed, mutations }) => mutate(seed, mutations));
}

/** A large valid PUBLISH (payload up to 60 KiB), mutated: lengths near the sizes that matter. */
function bigPublishArb(version: MqttVersion): fc.Arbitrary<Buffer> {
  return fc.record({ size: fc.nat(60_000), qos: fc.constantFrom(0, 1, 2) as fc.Arbitrary<0 | 1 | 2>, mutations: fc.array(mutationArb(), { maxLength: 2 }) }).map(({ size, qos, mutations }) => {
    const bytes = mqttPacket.generate({ cmd: 'publish', topic: 'fuzz/big', payload: Buffer.alloc(size, 0x5a), qos, messageId: qos ? 3 : undefined, retain: false, dup: false } as mqttPacket.IPublishPacket, { protocolVersion: version });
    return mutate(seedFromBytes('publish-big', version, bytes), mutations);
  });
}

export function mqttInputArb(): fc.Arbitrary<MqttInput> {
  return fc
    .constantFrom(4 as const, 5 as const)
    .chain((version) =>
      fc.record({
        connect: fc.oneof(
          { weight: 6, arbitrary: fc.constant(seeds().find((s) => s.version === version && s.name.startsWith('connect-v'))!.bytes) },
          { weight: 3, arbitrary: packetArb(version, (n) => n.startsWith('connect')) },
          { weight: 1, arbitrary: fc.constant(Buffer.alloc(0)) },
        ),
        packets: fc.array(fc.oneof({ weight: 8, arbitrary: packetArb(version) }, { weight: 1, arbitrary: bigPublishArb(version) }), { maxLength: 5 }),
        garbage: fc.oneof({ weight: 9, arbitrary: fc.constant(new Uint8Array(0)) }, { weight: 1, arbitrary: fc.uint8Array({ maxLength: 2048 }) }),
        cuts: fc.array(fc.nat(200_000), { maxLength: 3 }),
        waitForConnack: fc.oneof({ weight: 3, arbitrary: fc.constant(true) }, { weight: 1, arbitrary: fc.constant(false) }),
      }),
    )
    .map(({ connect, packets, garbage, cuts, waitForConnack }) => {
      const bytes = Buffer.concat([connect, ...packets, garbage]);
      const at = cuts.map((c) => c % (bytes.length + 1));
      if (waitForConnack) at.push(connect.length);
      return { bytes, cuts: [...new Set(at)].sort((a, b) => a - b) };
    });
}

export const mqttIngressTarget: TypedTarget<MqttInput, MqttIngressState> = {
  name: 'mqtt-ingress',
  description: 'no exception escapes the broker, no error logged, one CONNACK and first, a PINGREQ after complete packets answered or the connection closed, closed after the stream ends with no live client left, ≤ 50 ms of CPU per input ≤ 64 KiB, buffers ≤ 16 × input + 1 MiB; a legitimate QoS 1 pair still served every 250 inputs',
  // A reconnect replays up to 10 stored messages of up to 60 KiB, and the store's encoder grows
  // its buffer now and then: 1 MiB over 16 × the input still catches any declared length that
  // is trusted (up to 256 MiB for a remaining length, 4 GiB for a property).
  allowance: (n) => 16 * n + 1024 * 1024,
  arbitrary: () => mqttInputArb(),
  // "CUTS", their count (u16) and offsets (u32), then the bytes: the chunks are part of a finding.
  encode: (input) => {
    const head = Buffer.alloc(6 + 4 * input.cuts.length);
    head.write('CUTS', 0, 'latin1');
    head.writeUInt16BE(input.cuts.length, 4);
    input.cuts.forEach((cut, i) => head.writeUInt32BE(cut, 6 + 4 * i));
    return Buffer.concat([head, input.bytes]);
  },
  decode: (bytes) => {
    if (bytes.subarray(0, 4).toString('latin1') !== 'CUTS') return { bytes, cuts: [] };
    const n = bytes.readUInt16BE(4);
    return { cuts: Array.from({ length: n }, (_, i) => bytes.readUInt32BE(6 + 4 * i)), bytes: bytes.subarray(6 + 4 * n) };
  },
  setup: startIngressBroker,
  teardown: stopIngressBroker,
  async execute(state, input) {
    const errorsBefore = state.errors.length;
    await feedConnection(state, input);
    if (state.errors.length > errorsBefore) throw new FuzzFinding(`the broker logged an error: ${state.errors[state.errors.length - 1]}`);
    if (state.broker.stats().clients > state.baselineClients) {
      // aedes counts a client out on its close, which may come a tick after the stream's.
      await new Promise((resolve) => setImmediate(resolve));
      const live = state.broker.stats().clients - state.baselineClients;
      if (live > 0) throw new FuzzFinding(`${live} client(s) still live after the connection closed`);
    }
    if (++state.inputs % 250 === 0) await checkLegitimatePair(state);
  },
};

/** The runner's form of it (test/fuzz/support/typed-target.ts). */
export const target = typedTarget(mqttIngressTarget);
