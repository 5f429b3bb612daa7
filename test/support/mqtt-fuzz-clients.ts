// MQTT beside the hostile devices: clients that send mutated packets to the broker, and a
// legitimate QoS 1 publisher/subscriber pair whose messages must all arrive.
// - Fuzz clients: each connection sends a CONNECT (valid, with the admin's credentials, or
//   mutated), then 1 to 8 packets that mqtt-packet generates (PUBLISH of each QoS, SUBSCRIBE,
//   UNSUBSCRIBE, PUBREL, PINGREQ, DISCONNECT), most of them mutated (test/fuzz/support/
//   mutators.ts: the 16-bit length after the fixed header set to 0/1/max/±1, the remaining
//   length's first byte, flips, truncation, splicing), sometimes cut into small writes, then
//   waits for the broker to close it (at most 300 ms). `concurrency` connections at a time.
// - The pair: the subscriber (QoS 1, clean session) on legit/#; the publisher sends QoS 1
//   messages with a sequence number, each acknowledged before the next.
import net from 'node:net';
import mqtt, { type MqttClient } from 'mqtt';
import mqttPacket from 'mqtt-packet';
import { applyMutations, randomMutations, type WireField } from '../fuzz/support/mutators.js';
import { seededRandom, type Random } from '../fuzz/support/random.js';

/** The 16-bit length after a packet's fixed header (topic, protocol name or packet id). */
function mqttFields(packet: Buffer): WireField[] {
  let at = 1;
  while (at < packet.length && at < 5 && packet[at]! & 0x80) at++;
  return at + 3 <= packet.length ? [{ at: at + 1, size: 2, endian: 'BE' }] : [];
}

function packets(rng: Random, credentials: { username: string; password: string }): { connect: Buffer; rest: Buffer[] } {
  const topic = rng.pick(['legit/x', 'fuzz/a', 'services/hostile/level', '$SYS/x', 'a/+/b', '#', '']);
  const gen = (p: Record<string, unknown>) => mqttPacket.generate(p as unknown as mqttPacket.Packet);
  const connect = gen({ cmd: 'connect', protocolId: 'MQTT', protocolVersion: rng.pick([4, 5]), clean: true, clientId: `fuzz-${rng.int(0, 1e9)}`, keepalive: 5, username: credentials.username, password: Buffer.from(credentials.password) });
  const rest: Buffer[] = [];
  for (let i = rng.int(1, 8); i > 0; i--) {
    rest.push(
      rng.pick([
        () => gen({ cmd: 'publish', topic, payload: rng.bytes(rng.int(0, 64)), qos: rng.int(0, 2), messageId: rng.int(1, 65535), retain: false, dup: false }),
        () => gen({ cmd: 'subscribe', messageId: rng.int(1, 65535), subscriptions: [{ topic: topic || 'x', qos: rng.int(0, 2) }] }),
        () => gen({ cmd: 'unsubscribe', messageId: rng.int(1, 65535), unsubscriptions: [topic || 'x'] }),
        () => gen({ cmd: 'pubrel', messageId: rng.int(1, 65535) }),
        () => gen({ cmd: 'pingreq' }),
        () => gen({ cmd: 'disconnect' }),
      ])(),
    );
  }
  return { connect, rest };
}

export interface MqttFuzz {
  /** Connections opened and packets sent so far. */
  readonly counts: { connections: number; packets: number; mutated: number };
  stop(): Promise<void>;
}

/**
 * Starts `concurrency` fuzz connections at a time against the broker on `port`, until stop().
 * `localAddress`: the loopback address they come from (another than the watchers', so the login
 * throttle's per-address lock that their mutated passwords earn does not lock the watchers out).
 */
export function startMqttFuzz(port: number, options: { seed: number; concurrency: number; credentials: { username: string; password: string }; localAddress?: string }): MqttFuzz {
  const rng = seededRandom(options.seed);
  const counts = { connections: 0, packets: 0, mutated: 0 };
  let running = true;
  const recent: Buffer[] = [];
  const mutate = (p: Buffer) => {
    recent.push(p);
    if (recent.length > 16) recent.shift();
    if (!rng.chance(0.7)) return p;
    counts.mutated++;
    return applyMutations(p, mqttFields(p), randomMutations(rng, recent));
  };
  const one = () =>
    new Promise<void>((resolve) => {
      counts.connections++;
      const socket = net.connect({ host: '127.0.0.1', port, ...(options.localAddress ? { localAddress: options.localAddress } : {}) });
      const done = () => {
        clearTimeout(timer);
        socket.destroy();
        resolve();
      };
      const timer = setTimeout(done, 300 + rng.int(0, 200));
      socket.on('error', done);
      socket.on('close', done);
      socket.on('data', () => undefined);
      socket.once('connect', () => {
        const { connect, rest } = packets(rng, options.credentials);
        const wire = [rng.chance(0.6) ? connect : mutate(connect), ...rest.map(mutate)];
        counts.packets += wire.length;
        const bytes = Buffer.concat(wire);
        if (rng.chance(0.3)) {
          // In small writes, as a slow or fragmenting network delivers them.
          for (let at = 0; at < bytes.length; at += 7) socket.write(bytes.subarray(at, at + 7));
        } else socket.write(bytes);
      });
    });
  const loops = Array.from({ length: options.concurrency }, async () => {
    while (running) await one();
  });
  return {
    counts,
    async stop() {
      running = false;
      await Promise.all(loops);
    },
  };
}

export interface LegitPair {
  /** Sequence numbers published (acknowledged) and received. */
  readonly sent: number;
  readonly received: Set<number>;
  /** Stops publishing, then waits (at most `ms`) for the last messages; returns the numbers lost. */
  stop(ms?: number): Promise<number[]>;
}

/** The legitimate QoS 1 pair on legit/#, `rate` messages a second. */
export async function startLegitPair(port: number, credentials: { username: string; password: string }, rate = 20): Promise<LegitPair> {
  const options = { host: '127.0.0.1', port, username: credentials.username, password: credentials.password, reconnectPeriod: 1000, connectTimeout: 5000 };
  const sub: MqttClient = await mqtt.connectAsync({ ...options, clientId: 'legit-sub', clean: true });
  const received = new Set<number>();
  sub.on('message', (_t, payload) => received.add(Number(payload.toString())));
  await sub.subscribeAsync('legit/#', { qos: 1 });
  const pub: MqttClient = await mqtt.connectAsync({ ...options, clientId: 'legit-pub' });
  let sent = 0;
  let running = true;
  const loop = (async () => {
    for (let n = 1; running; n++) {
      const next = Date.now() + 1000 / rate;
      await pub.publishAsync('legit/seq', String(n), { qos: 1 });
      sent = n;
      await new Promise((r) => setTimeout(r, Math.max(0, next - Date.now())));
    }
  })();
  return {
    get sent() {
      return sent;
    },
    received,
    async stop(ms = 5000) {
      running = false;
      await loop;
      const deadline = Date.now() + ms;
      while (received.size < sent && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      await Promise.all([pub.endAsync(), sub.endAsync()]);
      return Array.from({ length: sent }, (_v, i) => i + 1).filter((n) => !received.has(n));
    },
  };
}
