// Memory per idle connection (issue 32): CLIENTS clients log in with a password (the bench
// user's; its password verified once, then answered by the verified-password cache), subscribe
// to one topic each (QoS 1, clean session, keepalive 300 s) and stay idle. Each broker runs alone
// in its own process (the daemon exactly as `npm start` starts it; bare aedes 1.2 and 2 beta for
// comparison), one after the other so they do not share the machine's memory pressure. Measured:
// the broker's RSS before the clients (IDLE_BEFORE_MS after ready), with all of them connected,
// SOON_MS and IDLE_AFTER_MS after the last SUBACK (by then the daemon's idle collections have
// run, and V8's own memory reduction in the bare brokers, which have none: it waits for a quiet
// 5 s window it checks every 8 s), and the difference per client. Clients are raw sockets (mqtt-packet) so the bench process stays
// small. Bounded: fixed counts, every wait has a deadline.
//
// Run: npm run bench -- idle-clients   (GATEWAYD_BENCH_IDLE_CLIENTS=5000,
// GATEWAYD_BENCH_SHIPPED_KINDS=gatewayd,aedes-1.2,aedes-2,gatewayd-before with GATEWAYD_BENCH_BEFORE=<checkout>;
// GATEWAYD_BENCH_HEAP_SNAPSHOTS=<dir>: the daemon writes a heap snapshot before and after the
// clients there, for docs/footprint.md's accounting by constructor).
import net from 'node:net';
import mqttPacket from 'mqtt-packet';
import { CREDS, startBroker, type BrokerProcess, type Kind } from './bench-mqtt-shipped.js';

const CLIENTS = Number(process.env.GATEWAYD_BENCH_IDLE_CLIENTS ?? 5000);
const IN_FLIGHT = 100;
const IDLE_BEFORE_MS = 8000;
const SOON_MS = 5000;
const IDLE_AFTER_MS = Number(process.env.GATEWAYD_BENCH_IDLE_AFTER_MS ?? 45_000);
const STEP_TIMEOUT_MS = 30_000;

/** One idle client: connected, subscribed, then only holding its socket. */
function idleClient(port: number, i: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.setNoDelay(true);
    const parser = mqttPacket.parser({ protocolVersion: 4 });
    const timer = setTimeout(() => fail(new Error(`client ${i}: no CONNACK/SUBACK within ${STEP_TIMEOUT_MS} ms`)), STEP_TIMEOUT_MS);
    const fail = (err: Error) => {
      clearTimeout(timer);
      socket.destroy();
      reject(err);
    };
    socket.once('error', fail);
    parser.on('packet', (packet) => {
      if (packet.cmd === 'connack') {
        if (packet.returnCode !== 0) return fail(new Error(`client ${i}: CONNACK ${packet.returnCode}`));
        socket.write(mqttPacket.generate({ cmd: 'subscribe', messageId: 1, subscriptions: [{ topic: `bench/idle/${i}`, qos: 1 }] }));
      } else if (packet.cmd === 'suback') {
        clearTimeout(timer);
        socket.removeListener('error', fail);
        socket.on('error', () => {});
        resolve(socket);
      }
    });
    socket.on('data', (chunk: Buffer) => parser.parse(chunk));
    socket.once('connect', () =>
      socket.write(
        mqttPacket.generate({ cmd: 'connect', protocolId: 'MQTT', protocolVersion: 4, clean: true, keepalive: 300, clientId: `idle-${i}`, username: CREDS.username, password: Buffer.from(CREDS.password) }),
      ),
    );
  });
}

async function openClients(port: number, count: number): Promise<net.Socket[]> {
  const sockets: net.Socket[] = [];
  let next = 0;
  const worker = async () => {
    while (next < count) sockets.push(await idleClient(port, next++));
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
  return sockets;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export interface IdleClientsFigures {
  rssBeforeMiB: number;
  /** SOON_MS after the last client subscribed. */
  rssSoonMiB: number;
  rssAfterMiB: number;
  perClientSoonKiB: number;
  perClientKiB: number;
}

/** One broker of `kind`: started, measured with `clients` idle clients, stopped. */
export async function measureIdleClients(kind: Kind, clients = CLIENTS, broker?: BrokerProcess): Promise<IdleClientsFigures> {
  const b = broker ?? (await startBroker(kind));
  let sockets: net.Socket[] = [];
  try {
    await sleep(IDLE_BEFORE_MS);
    await b.prepare?.();
    // The bench user's password verified once (as a device's first connect after a reboot).
    (await idleClient(b.port, -1)).destroy();
    await sleep(2000);
    const rssBeforeMiB = b.rssMiB();
    await b.snapshot?.('before');
    sockets = await openClients(b.port, clients);
    await sleep(SOON_MS);
    const rssSoonMiB = b.rssMiB();
    await sleep(IDLE_AFTER_MS - SOON_MS);
    const rssAfterMiB = b.rssMiB();
    await b.snapshot?.('after');
    const perClient = (mib: number) => ((mib - rssBeforeMiB) * 1024) / clients;
    return { rssBeforeMiB, rssSoonMiB, rssAfterMiB, perClientSoonKiB: perClient(rssSoonMiB), perClientKiB: perClient(rssAfterMiB) };
  } finally {
    for (const s of sockets) s.destroy();
    if (!broker) await b.stop();
  }
}

export async function benchIdleClients(): Promise<Record<string, number>> {
  const kinds = (process.env.GATEWAYD_BENCH_SHIPPED_KINDS?.split(',') as Kind[] | undefined) ?? (['gatewayd', 'aedes-1.2', 'aedes-2'] as Kind[]);
  const results: Record<string, number> = {};
  console.log(`idle clients: ${CLIENTS} password clients, one QoS 1 subscription each; broker RSS (MiB) before / ${SOON_MS / 1000} s / ${IDLE_AFTER_MS / 1000} s after the last one, per client (KiB)`);
  for (const kind of kinds) {
    const f = await measureIdleClients(kind);
    const key = kind.replace(/[.-]/g, '_');
    results[`${key}_rss_before_mib`] = f.rssBeforeMiB;
    results[`${key}_rss_soon_mib`] = f.rssSoonMiB;
    results[`${key}_rss_after_mib`] = f.rssAfterMiB;
    results[`${key}_per_client_soon_kib`] = f.perClientSoonKiB;
    results[`${key}_per_client_kib`] = f.perClientKiB;
    console.log(`  ${kind.padEnd(16)} ${f.rssBeforeMiB.toFixed(1)} / ${f.rssSoonMiB.toFixed(1)} / ${f.rssAfterMiB.toFixed(1)} MiB; ${f.perClientSoonKiB.toFixed(1)} / ${f.perClientKiB.toFixed(1)} KiB per client`);
  }
  return results;
}
