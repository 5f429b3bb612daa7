// Bridge benchmark (`npm run bench -- bridge`): gatewayd's bridge beside a Mosquitto 2 bridge doing
// the same work in the same run. Both forward `bench/#` (QoS 1, out) to one upstream Mosquitto
// through a TCP proxy each (outages are made there); gatewayd runs as shipped (the daemon process
// with npm start's Node flags), Mosquitto with `persistence true` and its default autosave.
//  (a) messages/s through the bridge at QoS 1 and the broker's CPU per forwarded message (the
//      process's utime + stime, everything it did for the local publish and the forward);
//  (b) drain rate of a backlog built during an outage (BENCH_BRIDGE_BACKLOG, default 100,000), and
//      the broker's RSS before and with that backlog queued;
//  (c) what each loses of BENCH_BRIDGE_KILL (2,000) QoS 1 messages it acknowledged during an
//      outage when it is killed with SIGKILL before the link comes back.
// Bounded: fixed counts, every wait has a deadline, every process is stopped at the end.
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import mqtt, { type MqttClient } from 'mqtt';
import { startMosquitto, type Mosquitto } from '../test/support/mosquitto.js';
import { startTcpProxy, type TcpProxy } from '../test/support/tcp-proxy.js';
import { shippedNodeFlags, startDaemonAt } from './bench-footprint.js';

const ADMIN_PASSWORD = 'Bench-Passw0rd!';
const MESSAGES = Number(process.env.BENCH_BRIDGE_MESSAGES ?? 20_000);
const BACKLOG = Number(process.env.BENCH_BRIDGE_BACKLOG ?? 100_000);
const KILL = Number(process.env.BENCH_BRIDGE_KILL ?? 2000);
const WINDOW = 100;
const PAYLOAD = Buffer.alloc(64, 'x');
const CLK_TCK = 100;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const fmt = (n: number, digits = 0) => n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / CLK_TCK; // utime, stime (fields 14 and 15)
}
/** Resident memory in MiB: all of it, anonymous (heap, malloc) and file-backed (mapped files: the LMDB map, the binary). */
function rss(pid: number): { total: number; anon: number; file: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (key: string) => Number(new RegExp(`${key}:\\s+(\\d+)`).exec(status)?.[1] ?? 0) / 1024;
  return { total: kib('VmRSS'), anon: kib('RssAnon'), file: kib('RssFile') + kib('RssShmem') };
}

async function until(what: string, pred: () => boolean | Promise<boolean>, ms: number, every = 20): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await pred())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await sleep(every);
  }
}

/** Publishes `count` QoS 1 messages with at most WINDOW unacknowledged; resolves at the last PUBACK. */
function publishAll(client: MqttClient, topic: string, count: number, from = 0): Promise<void> {
  return new Promise((resolve, reject) => {
    let sent = 0;
    let acked = 0;
    const next = () => {
      while (sent < count && sent - acked < WINDOW) {
        const n = from + sent++;
        client.publish(topic, Buffer.concat([Buffer.from(`${n} `), PAYLOAD]), { qos: 1 }, (err) => {
          if (err) return reject(err);
          if (++acked === count) resolve();
          else next();
        });
      }
    };
    next();
  });
}

/** Counts the distinct messages an upstream subscriber receives under `filter`. */
async function upstreamCounter(port: number, filter: string) {
  const client = await mqtt.connectAsync({ host: '127.0.0.1', port, clientId: `bench-up-${filter.replace(/\W/g, '')}`, clean: true, reconnectPeriod: 0 });
  let total = 0;
  client.on('message', () => total++);
  await client.subscribeAsync(filter, { qos: 1 });
  return {
    get total() {
      return total;
    },
    reset: () => (total = 0),
    close: () => client.endAsync(),
  };
}

interface Side {
  name: string;
  pid(): number;
  port(): number;
  /** Waits until the bridge is connected (true) or not (false). */
  linked(up: boolean): Promise<void>;
  kill(): Promise<void>;
  restart(): Promise<void>;
  stop(): Promise<void>;
}

/** The gatewayd daemon as shipped, with a bridge `bench/# out 1` to `proxy`. */
async function gatewaydSide(proxy: TcpProxy): Promise<Side> {
  const dataDir = mkdtempSync(join(tmpdir(), 'gatewayd-bench-bridge-'));
  mkdirSync(join(dataDir, 'services'));
  let child: ChildProcess;
  let ports = { http: 0, mqtt: 0 };
  const start = async () => {
    // One publisher sends as fast as it can: above the per-client default of 1,000/s.
    const d = await startDaemonAt(dataDir, shippedNodeFlags(), { GATEWAYD_SET__MQTT__MAXPUBLISHESPERSECOND: '10000000' });
    child = d.child;
    ports = { http: d.ready.http as number, mqtt: d.ready.mqtt as number };
  };
  const api = async (method: string, path: string, token?: string, body?: unknown, yaml?: string) => {
    const headers: Record<string, string> = { ...(token ? { authorization: `Bearer ${token}` } : {}) };
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (yaml !== undefined) headers['content-type'] = 'application/yaml';
    const res = await fetch(`http://127.0.0.1:${ports.http}${path}`, { method, headers, body: yaml ?? (body === undefined ? undefined : JSON.stringify(body)) });
    return (await res.json()) as any;
  };
  await start();
  let token: string = (await api('POST', '/api/login', undefined, { username: 'admin', password: ADMIN_PASSWORD })).token;
  await api('POST', '/api/users', token, { username: 'bench-bridge', password: 'Bench-Bridge-1', identityProvider: 'local', initialPermissions: [{ context: 'mqtt', resource: 'bench/#', operation: 'read' }] });
  const service = [
    'resources:',
    '  uplink:',
    '    type: Bridge',
    '    properties:',
    `      remote: {urls: ["mqtt://127.0.0.1:${proxy.port}"], clientId: gatewayd-bridge, keepaliveSeconds: 5, reconnectMaxSeconds: 1}`,
    '      runAs: bench-bridge',
    '      topics: [{pattern: "bench/#", direction: out, qos: 1, remotePrefix: "site-gw/"}]',
    `      queue: {maxMessages: ${Math.max(BACKLOG, 100_000) * 2}, maxBytes: 1073741824}`,
    '',
  ].join('\n');
  await api('PUT', '/api/services/bench', token, undefined, service);
  const state = async () => (await api('GET', '/api/bridges/bench.uplink', token)).currentState as string;
  return {
    name: 'gatewayd',
    pid: () => child.pid!,
    port: () => ports.mqtt,
    linked: (up) => until(`gatewayd bridge ${up ? 'connected' : 'down'}`, async () => (await state()) === 'connected' === up, 30_000, 50),
    async kill() {
      child.kill('SIGKILL');
      await new Promise((r) => (child.exitCode !== null || child.signalCode !== null ? r(undefined) : child.once('exit', r)));
    },
    async restart() {
      await start();
      token = (await api('POST', '/api/login', undefined, { username: 'admin', password: ADMIN_PASSWORD })).token;
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        await new Promise((r) => child.once('exit', r));
      }
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** Mosquitto 2 with a `connection` block doing the same: topic bench/# out 1 "" site-mq/, persistence true. */
async function mosquittoSide(proxy: TcpProxy): Promise<Side> {
  const m: Mosquitto = await startMosquitto({
    persistence: true,
    config: [
      'connection bench',
      `address 127.0.0.1:${proxy.port}`,
      'topic bench/# out 1 "" site-mq/',
      'cleansession false',
      'clientid mosquitto-bridge',
      'bridge_protocol_version mqttv311',
      'keepalive_interval 5',
      'restart_timeout 1 1',
    ],
  });
  const local = await mqtt.connectAsync({ host: '127.0.0.1', port: m.port, clientId: 'bench-sys', reconnectPeriod: 1000 });
  let state = '0';
  local.on('message', (_t, p) => (state = p.toString()));
  await local.subscribeAsync('$SYS/broker/connection/+/state', { qos: 0 }); // notifications: $SYS/broker/connection/<clientid>/state
  return {
    name: 'mosquitto',
    pid: () => m.pid()!,
    port: () => m.port,
    linked: (up) => until(`mosquitto bridge ${up ? 'connected' : 'down'}`, () => state === (up ? '1' : '0'), 30_000),
    async kill() {
      await m.kill();
    },
    async restart() {
      state = '0';
      await m.start();
    },
    async stop() {
      local.end(true);
      await m.close();
    },
  };
}

async function publisherOf(side: Side, clientId: string): Promise<MqttClient> {
  const auth = side.name === 'gatewayd' ? { username: 'admin', password: ADMIN_PASSWORD } : {};
  return mqtt.connectAsync({ host: '127.0.0.1', port: side.port(), clientId, reconnectPeriod: 0, ...auth });
}

/** (a) QoS 1 through the bridge: messages/s end to end and broker CPU per forwarded message. */
async function throughput(side: Side, up: Awaited<ReturnType<typeof upstreamCounter>>) {
  const pub = await publisherOf(side, `bench-pub-${side.name}`);
  await publishAll(pub, 'bench/warmup', 2000);
  await until('warm-up forwarded', () => up.total >= 2000, 60_000);
  up.reset();
  const cpu0 = cpuSeconds(side.pid());
  const t0 = performance.now();
  await publishAll(pub, 'bench/line-1/temp', MESSAGES);
  await until('all forwarded', () => up.total >= MESSAGES, 120_000, 5);
  const seconds = (performance.now() - t0) / 1000;
  const cpu = cpuSeconds(side.pid()) - cpu0;
  await pub.endAsync();
  return { perSecond: MESSAGES / seconds, cpuUsPerMessage: (cpu * 1e6) / MESSAGES };
}

/** (b) a backlog built during an outage: RSS before and with it, then its drain rate. */
async function backlog(side: Side, proxy: TcpProxy, up: Awaited<ReturnType<typeof upstreamCounter>>) {
  proxy.cut();
  await side.linked(false);
  const rssBefore = rss(side.pid());
  const pub = await publisherOf(side, `bench-backlog-${side.name}`);
  const t0 = performance.now();
  await publishAll(pub, 'bench/backlog', BACKLOG);
  const queuedPerSecond = BACKLOG / ((performance.now() - t0) / 1000);
  await pub.endAsync();
  await sleep(2000); // what the process keeps, not what it is in the middle of
  const rssFull = rss(side.pid());
  up.reset();
  const t1 = performance.now();
  proxy.restore();
  await until('backlog drained', () => up.total >= BACKLOG, 600_000, 5);
  return { rssBefore, rssFull, queuedPerSecond, drainPerSecond: BACKLOG / ((performance.now() - t1) / 1000) };
}

/** (c) KILL messages acknowledged during an outage, SIGKILL, restart, link back: how many arrive. */
async function killDuringOutage(side: Side, proxy: TcpProxy, up: Awaited<ReturnType<typeof upstreamCounter>>) {
  proxy.cut();
  await side.linked(false);
  const pub = await publisherOf(side, `bench-kill-${side.name}`);
  await publishAll(pub, 'bench/kill', KILL);
  await side.kill();
  pub.end(true);
  up.reset();
  await side.restart();
  proxy.restore();
  await side.linked(true);
  // Whatever survived arrives within moments of the link; wait until nothing more comes for 3 s.
  let last = -1;
  await until('upstream quiet', () => {
    const quiet = up.total === last;
    last = up.total;
    return quiet || up.total >= KILL;
  }, 120_000, 3000);
  return { arrived: Math.min(up.total, KILL), lost: Math.max(0, KILL - up.total) };
}

export async function benchBridge(): Promise<Record<string, number>> {
  const upstream = await startMosquitto();
  const proxies = { gatewayd: await startTcpProxy({ port: upstream.port }), mosquitto: await startTcpProxy({ port: upstream.port }) };
  const sides: Side[] = [];
  const results: Record<string, number> = {};
  try {
    sides.push(await gatewaydSide(proxies.gatewayd), await mosquittoSide(proxies.mosquitto));
    for (const side of sides) {
      await side.linked(true);
      const proxy = proxies[side.name as keyof typeof proxies];
      const up = await upstreamCounter(upstream.port, side.name === 'gatewayd' ? 'site-gw/#' : 'site-mq/#');
      const t = await throughput(side, up);
      console.log(`bridge ${side.name}: ${fmt(t.perSecond)} msg/s at QoS 1, ${fmt(t.cpuUsPerMessage, 1)} µs broker CPU per forwarded message`);
      const b = await backlog(side, proxy, up);
      console.log(
        `bridge ${side.name}: backlog of ${fmt(BACKLOG)} queued at ${fmt(b.queuedPerSecond)} msg/s, drained at ${fmt(b.drainPerSecond)} msg/s; ` +
          `RSS ${fmt(b.rssBefore.total, 1)} MiB before (anonymous ${fmt(b.rssBefore.anon, 1)}, file-backed ${fmt(b.rssBefore.file, 1)}), ` +
          `${fmt(b.rssFull.total, 1)} MiB with the backlog (anonymous ${fmt(b.rssFull.anon, 1)}, file-backed ${fmt(b.rssFull.file, 1)})`,
      );
      const k = await killDuringOutage(side, proxy, up);
      console.log(`bridge ${side.name}: kill -9 during an outage: ${fmt(k.arrived)} of ${fmt(KILL)} acknowledged messages arrived, ${fmt(k.lost)} lost`);
      await up.close();
      Object.assign(results, {
        [`${side.name}_msgs_per_s`]: t.perSecond,
        [`${side.name}_cpu_us_per_msg`]: t.cpuUsPerMessage,
        [`${side.name}_backlog_drain_per_s`]: b.drainPerSecond,
        [`${side.name}_backlog_queue_per_s`]: b.queuedPerSecond,
        [`${side.name}_rss_mib_before`]: b.rssBefore.total,
        [`${side.name}_rss_mib_backlog`]: b.rssFull.total,
        [`${side.name}_rss_anon_mib_before`]: b.rssBefore.anon,
        [`${side.name}_rss_anon_mib_backlog`]: b.rssFull.anon,
        [`${side.name}_kill_lost`]: k.lost,
      });
    }
    return results;
  } finally {
    for (const s of sides) await s.stop().catch(() => undefined);
    for (const p of Object.values(proxies)) await p.close();
    await upstream.close();
  }
}
