// The hostile-peer harness (issue 35 C; test/hostile-peers.test.ts runs a short burst, npm run
// bench -- hostile a long one): the real daemon process with a service whose S7 (snap7's
// server), EtherNet/IP (the test kit's CIP server) and Modbus (the test kit's server)
// connections each go through a mutating proxy (mutating-proxy.ts), a control Modbus device on
// a clean connection, MQTT fuzz clients and a legitimate QoS 1 pair (mqtt-fuzz-clients.ts).
// Phases: warm-up (every endpoint publishes its true value; baseline RSS and control poll
// rate), the attack (corruptMs: a third of the devices' answers corrupted, MQTT fuzzing), then
// clean: new true values are set in the devices and each endpoint must publish its own, and
// the daemon must come back to its RSS. Everything is watched from outside (daemon-watch.ts).
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import mqtt, { type MqttClient } from 'mqtt';
import { startModbusServer, type ModbusTestServer } from '../mapping-support.js';
import { startCipServer, type CipTestServer } from './cip-server.js';
import { openDaemonInspector, type HeldMemory, type MemoryUsageSample } from './daemon-inspector.js';
import { startDaemonWatch, type ConnectionSample, type DaemonWatch } from './daemon-watch.js';
import { freePort } from './free-port.js';
import { ADMIN_PASSWORD, GOOD_PASSWORD, startDaemonProcess, tempDir } from './harness.js';
import { startMutatingProxy, type MutatingProxy } from './mutating-proxy.js';
import { startLegitPair, startMqttFuzz } from './mqtt-fuzz-clients.js';
import { startSnap7Server, type Snap7Server } from './snap7-server.js';
import { cipFields, encapFraming } from '../fuzz/wire/cip-wire.js';
import { mbapFraming, modbusFields } from '../fuzz/wire/modbus-wire.js';
import { s7Fields, tpktFraming } from '../fuzz/wire/s7-wire.js';

export interface HostileOptions {
  seed: number;
  /** How long the devices' answers are corrupted and the MQTT fuzz clients run. */
  corruptMs: number;
  /** MQTT fuzz connections at a time. */
  mqttConcurrency: number;
  /** Share of the answers corrupted (default 1/3). */
  rate?: number;
  /** How long to wait for the memory to come back after the attack (default 30 s). */
  quietMs?: number;
  log?: (line: string) => void;
  /** More environment for the daemon (e.g. NODE_OPTIONS for a profile). */
  daemonEnv?: Record<string, string>;
  /** Diagnosis: V8's sampling heap profile at the attack's fullest heap is written to this file. */
  heapProfile?: string;
}

export interface HostileReport {
  seed: number;
  corruptSeconds: number;
  /** The daemon's process stayed the same and alive. */
  pidUnchanged: boolean;
  health: { probes: number; unanswered: number; maxMs: number };
  /** The largest event-loop p99 delay of the scrapes during the run (ms). */
  loopP99MaxMs: number;
  /** RSS (MiB): at the start, its peak during the attack, at the end, when it was back within 8 MiB; above the start at each quarter of the attack (a plateau, or growth). */
  rss: { startMiB: number; peakMiB: number; endMiB: number; settledAfterMs: number | undefined; quartersMiB: number[] };
  /**
   * What the daemon holds after a full GC (heap used + external, through its inspector): before
   * the attack, at the end of the quiet, and when it was back within 8 MiB of the start (ms
   * into the quiet; undefined: not within it); its active handles by kind at both points (a
   * socket or timer kept per connection shows here).
   */
  held: { start: HeldMemory; end: HeldMemory; settledAfterMs: number | undefined };
  /** process.memoryUsage() asked every second of the attack without a GC: the sample of the highest RSS, and the highest of each figure. */
  usageDuring: { atPeakRss: MemoryUsageSample | undefined; max: MemoryUsageSample | undefined; samples: number };
  legit: { sent: number; lost: number };
  /** Readings per second of the control device before and during the attack. */
  control: { before: number; during: number; change: number };
  /** Per connection: reads and failures during the attack, reconnections, and the time from clean replies to every endpoint publishing its new true value (ms; undefined: not within 30 s). */
  connections: Record<string, { readsDuringAttack: number; failuresDuringAttack: number; reopened: number; recoveredAfterMs: number | undefined; state: string }>;
  /** Samples where a connection said `connected` and had read nothing for 3 × timeoutMs + 2 s. */
  stuckConnected: string[];
  answers: Record<string, MutatingProxy['counts']>;
  mqttFuzz: { connections: number; packets: number; mutated: number };
  /** The daemon's own figures (/metrics) before the attack and at the end: heap and external memory, MQTT sessions and retained messages kept. */
  start: DaemonFigures;
  end: DaemonFigures;
}

export interface DaemonFigures {
  heapUsedMiB: number;
  externalMiB: number;
  mqttSessions: number;
  retainedMessages: number;
}

/** The daemon's memory and MQTT state as its /metrics tell them. */
async function figuresOf(base: string, authorization: string): Promise<DaemonFigures> {
  const text = await (await fetch(`${base}/metrics`, { headers: { authorization } })).text();
  const metric = (name: string) => Number(new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.e+-]+)$`, 'm').exec(text)?.[1] ?? NaN);
  return { heapUsedMiB: metric('gatewayd_nodejs_heap_size_used_bytes') / 2 ** 20, externalMiB: metric('gatewayd_nodejs_external_memory_bytes') / 2 ** 20, mqttSessions: metric('gatewayd_mqtt_sessions'), retainedMessages: metric('gatewayd_mqtt_retained_messages') };
}

const TIMEOUT_MS = 1000;
const POLL_MS = 100;
/** A connected connection must read something within its liveness window (plus a poll and slack). */
const STUCK_MS = 3 * TIMEOUT_MS + 2000;
const RECOVERY_WAIT_MS = 30_000;

function serviceYaml(p: { s7: number; cip: number; modbus: number; control: number }): string {
  const ep = (conn: string, address: string) => `{type: Endpoint, properties: {connection: !ref ${conn}, operation: read, address: ${address}, pollIntervalMs: ${POLL_MS}}}`;
  return `description: hostile peers (test/support/hostile-harness.ts)
resources:
  s7: {type: Connection, properties: {protocol: S7, configuration: {host: 127.0.0.1, port: ${p.s7}, rack: 0, slot: 1, timeoutMs: ${TIMEOUT_MS}}}}
  s7Int: ${ep('s7', '{area: DB, dbNumber: 1, offset: 0, type: INT}')}
  s7Real: ${ep('s7', '{area: DB, dbNumber: 1, offset: 2, type: REAL}')}
  s7Dint: ${ep('s7', '{area: DB, dbNumber: 1, offset: 6, type: DINT}')}
  cip: {type: Connection, properties: {protocol: EtherNetIp, configuration: {host: 127.0.0.1, port: ${p.cip}, slot: 0, timeoutMs: ${TIMEOUT_MS}}}}
  cipSpeed: ${ep('cip', '{tag: Speed}')}
  cipTemp: ${ep('cip', '{tag: Temp, type: REAL}')}
  cipLevels: ${ep('cip', '{tag: "Levels[1]", type: INT, elements: 3}')}
  modbus: {type: Connection, properties: {protocol: Modbus, configuration: {host: 127.0.0.1, port: ${p.modbus}, timeoutMs: ${TIMEOUT_MS}}}}
  mbOne: ${ep('modbus', '{table: holding, address: 0}')}
  mbTwo: ${ep('modbus', '{table: holding, address: 1, quantity: 2}')}
  control: {type: Connection, properties: {protocol: Modbus, configuration: {host: 127.0.0.1, port: ${p.control}, timeoutMs: ${TIMEOUT_MS}}}}
  controlLevel: ${ep('control', '{table: holding, address: 0}')}
`;
}

/** The true values of every endpoint, as the devices hold them, and how to put them there. */
function truth(generation: number) {
  const g = generation;
  return {
    s7Int: 1000 + g,
    s7Real: 2.5 + g,
    s7Dint: -100_000 - g,
    cipSpeed: 1500 + g,
    cipTemp: 20.5 + g,
    cipLevels: [10 + g, 20 + g, 30 + g],
    mbOne: [11 + g],
    mbTwo: [22 + g, 33 + g],
    controlLevel: [44 + g],
  } as Record<string, unknown>;
}

/** The control device: a Modbus server in a process of its own, so that its answers do not wait for this busy process. */
interface ControlDevice {
  port: number;
  setHolding(address: number, value: number): Promise<void>;
  stop(): Promise<void>;
}

async function startControlDevice(): Promise<ControlDevice> {
  const script = fileURLToPath(new URL('./device-process.js', import.meta.url));
  const child = spawn(process.execPath, [script, 'modbus'], { stdio: ['ignore', 'pipe', 'inherit', 'ipc'] });
  const [line] = (await once(createInterface({ input: child.stdout! }), 'line')) as [string];
  return {
    port: (JSON.parse(line) as { port: number }).port,
    async setHolding(address, value) {
      const done = once(child, 'message');
      child.send({ holding: [address, value] });
      await done;
    },
    async stop() {
      if (child.exitCode !== null) return;
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      await exited;
    },
  };
}

async function setTruth(devices: { plc: Snap7Server; cip: CipTestServer; modbus: ModbusTestServer; control: ControlDevice }, values: Record<string, unknown>): Promise<void> {
  const db = Buffer.alloc(16);
  db.writeInt16BE(values.s7Int as number, 0);
  db.writeFloatBE(values.s7Real as number, 2);
  db.writeInt32BE(values.s7Dint as number, 6);
  await devices.plc.set('DB', 1, 0, db);
  devices.cip.set('Speed', values.cipSpeed as number);
  devices.cip.set('Temp', values.cipTemp as number);
  const levels = devices.cip.get('Levels') as number[];
  (values.cipLevels as number[]).forEach((v, i) => (levels[1 + i] = v));
  devices.cip.set('Levels', levels);
  devices.modbus.holding[0] = (values.mbOne as number[])[0]!;
  (values.mbTwo as number[]).forEach((v, i) => (devices.modbus.holding[1 + i] = v));
  await devices.control.setHolding(0, (values.controlLevel as number[])[0]!);
}

const until = async (check: () => boolean, ms: number, what: string) => {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
};

/** Readings of a connection per second between two times, from the watch's samples. */
function readRate(samples: DaemonWatch['connections'], id: string, from: number, to: number): number {
  const inWindow = samples.filter((s) => s.t >= from && s.t <= to);
  const first = inWindow[0];
  const last = inWindow[inWindow.length - 1];
  if (!first || !last || last.t === first.t) return NaN;
  const reads = (s: { list: ConnectionSample[] }) => s.list.find((c) => c.id === id)?.reads ?? NaN;
  return ((reads(last) - reads(first)) * 1000) / (last.t - first.t);
}

export async function runHostileHarness(options: HostileOptions): Promise<HostileReport> {
  const log = options.log ?? (() => undefined);
  const { seed } = options;
  const cleanups: Array<() => Promise<unknown> | void> = [];
  const dataDir = tempDir('gatewayd-hostile-');
  cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }));
  let daemonChild: ChildProcess | undefined;
  try {
    const plc = await startSnap7Server({ dbs: { 1: 64 } });
    cleanups.push(() => plc.stop());
    const cip = await startCipServer({ tags: { Speed: { type: 'DINT', value: 0 }, Temp: { type: 'REAL', value: 0 }, Levels: { type: 'INT', length: 8, value: [0] } } });
    cleanups.push(() => cip.stop());
    const modbus = await startModbusServer();
    cleanups.push(() => modbus.stop());
    const control = await startControlDevice();
    cleanups.push(() => control.stop());
    const devices = { plc, cip, modbus, control };
    const rate = options.rate ?? 1 / 3;
    const proxies = {
      s7: await startMutatingProxy({ target: { port: plc.port }, framing: tpktFraming, fields: s7Fields, seed, rate }),
      cip: await startMutatingProxy({ target: { port: cip.port }, framing: encapFraming, fields: cipFields, seed: seed + 1, rate }),
      modbus: await startMutatingProxy({ target: { port: modbus.port }, framing: mbapFraming, fields: modbusFields, seed: seed + 2, rate }),
    };
    for (const p of Object.values(proxies)) cleanups.push(() => p.close());
    let values = truth(0);
    await setTruth(devices, values);

    mkdirSync(join(dataDir, 'services'));
    writeFileSync(join(dataDir, 'services', 'hostile.yaml'), serviceYaml({ s7: proxies.s7.port, cip: proxies.cip.port, modbus: proxies.modbus.port, control: control.port }));
    // The inspector on a loopback port: the test asks it for a full GC and what is held then.
    const inspectPort = await freePort();
    const daemonEnv = { ...options.daemonEnv, NODE_OPTIONS: `${options.daemonEnv?.NODE_OPTIONS ?? ''} --inspect=127.0.0.1:${inspectPort}`.trim() };
    const daemon = await startDaemonProcess(dataDir, { GATEWAYD_SET__MAPPING__SERVICES_DIR: join(dataDir, 'services'), GATEWAYD_SET__LOG__LEVEL: 'warn', ...daemonEnv });
    daemonChild = daemon.child;
    const pid = daemon.child.pid!;
    let exited = false;
    void daemon.exited.then(() => (exited = true));
    // The watchers use a token (no password checks to be throttled); the MQTT fuzz clients a user
    // of their own, from 127.0.0.2 (their mutated passwords lock that name and that address only).
    const base = `http://127.0.0.1:${daemon.ready.http}`;
    const login = await (await fetch(`${base}/api/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: 'admin', password: ADMIN_PASSWORD }) })).json();
    const authorization = `Bearer ${(login as { token: string }).token}`;
    const created = await fetch(`${base}/api/users`, {
      method: 'POST',
      headers: { authorization, 'content-type': 'application/json' },
      body: JSON.stringify({ username: 'fuzzer', password: GOOD_PASSWORD, identityProvider: 'local', initialPermissions: [{ resource: '#', operation: 'readWrite', context: 'mqtt' }] }),
    });
    if (created.status !== 201) throw new Error(`the fuzz clients' user: ${created.status} ${await created.text()}`);
    const watch = startDaemonWatch({ pid, httpPort: daemon.ready.http as number, authorization });
    cleanups.push(() => watch.stop());
    const inspector = await openDaemonInspector(inspectPort);
    cleanups.push(() => inspector.close());
    const credentials = { username: 'admin', password: ADMIN_PASSWORD };
    const mqttPort = daemon.ready.mqtt as number;

    // What the endpoints publish, the latest of each with when it arrived.
    const latest = new Map<string, { value: string; at: number }>();
    const sub: MqttClient = await mqtt.connectAsync({ host: '127.0.0.1', port: mqttPort, ...credentials, clientId: 'hostile-watch', reconnectPeriod: 1000 });
    cleanups.push(() => sub.endAsync());
    sub.on('message', (topic, payload) => latest.set(topic.slice('services/hostile/'.length), { value: payload.toString(), at: Date.now() }));
    await sub.subscribeAsync('services/hostile/#', { qos: 0 });
    const publishes = (name: string, value: unknown, since: number) => {
      const l = latest.get(name);
      return !!l && l.at >= since && l.value === JSON.stringify(value);
    };
    const allTrue = (since: number) => Object.entries(values).every(([name, v]) => publishes(name, v, since));

    // Warm-up: every endpoint publishes its true value; then a baseline of RSS and control polls.
    log('warm-up');
    const started = Date.now();
    await until(() => allTrue(started), 60_000, 'every endpoint publishing its true value after start-up').catch((err: Error) => {
      throw new Error(`${err.message}; published: ${JSON.stringify([...latest])}; daemon: ${JSON.stringify(daemon.lines.slice(-5))}`);
    });
    const legit = await startLegitPair(mqttPort, credentials);
    const baselineFrom = Date.now();
    await new Promise((r) => setTimeout(r, 5000));
    const baselineTo = Date.now();
    const startKiB = average(watch.rss.filter((s) => s.t >= baselineFrom).map((s) => s.kib));
    const start = await figuresOf(`http://127.0.0.1:${daemon.ready.http}`, authorization);
    const heldStart = await inspector.held();

    // The attack.
    log(`attack: ${options.corruptMs / 1000} s`);
    for (const p of Object.values(proxies)) p.corrupt(true);
    const fuzz = startMqttFuzz(mqttPort, { seed, concurrency: options.mqttConcurrency, credentials: { username: 'fuzzer', password: GOOD_PASSWORD }, localAddress: '127.0.0.2' });
    const linesBefore = daemon.lines.length;
    const attackFrom = Date.now();
    const before = snapshot(watch);
    if (options.heapProfile) await inspector.startSampling();
    let heapProfileUsedMiB = 0;
    const usageSamples: MemoryUsageSample[] = [];
    let asking = false;
    const usageTimer = setInterval(() => {
      if (asking) return;
      asking = true;
      inspector
        .usage()
        .then((u) => {
          usageSamples.push(u);
          // The profile at the fullest heap of the attack: what was promoted and not yet collected.
          if (options.heapProfile && u.heapUsedMiB > heapProfileUsedMiB) {
            heapProfileUsedMiB = u.heapUsedMiB;
            inspector.samplingProfile().then(
              (p) => writeFileSync(options.heapProfile!, JSON.stringify({ heapUsedMiB: u.heapUsedMiB, profile: p })),
              (err: Error) => log(`heap profile not taken: ${err.message}`),
            );
          }
          if (usageSamples.length % 5 === 0) log(`memory: ${Object.entries(u).map(([k, v]) => `${k.replace(/MiB$/, '')} ${v.toFixed(1)}`).join(', ')} MiB`);
        }, (err: Error) => log(`memory sample not taken: ${err.message}`))
        .finally(() => (asking = false));
    }, 1000);
    await new Promise((r) => setTimeout(r, options.corruptMs));
    clearInterval(usageTimer);
    for (const p of Object.values(proxies)) p.corrupt(false);
    await fuzz.stop();
    const attackTo = Date.now();
    const after = snapshot(watch);

    // Clean replies: new true values, each endpoint must publish its own.
    const attackLines = daemon.lines.slice(linesBefore);
    const byMessage = new Map<string, number>();
    for (const l of attackLines) byMessage.set(String(l.message), (byMessage.get(String(l.message)) ?? 0) + 1);
    log(`clean; the daemon logged ${attackLines.length} lines during the attack: ${JSON.stringify([...byMessage].sort((a, b) => b[1] - a[1]).slice(0, 6))}`);
    values = truth(1);
    await setTruth(devices, values);
    const clean = Date.now();
    const recovered: Record<string, number | undefined> = {};
    const connectionOf = (name: string) => name.replace(/^(s7|cip|mb|control).*$/, (_m, p: string) => (p === 'mb' ? 'modbus' : p));
    // When each endpoint first published its new value (the wait polls every 50 ms).
    const firstSeen: Record<string, number> = {};
    await until(
      () => {
        for (const name of Object.keys(values)) if (publishes(name, values[name], clean)) firstSeen[name] ??= latest.get(name)!.at - clean;
        return allTrue(clean);
      },
      RECOVERY_WAIT_MS,
      'every endpoint publishing its new true value',
    ).catch(() => undefined);
    // A connection has recovered when the last of its endpoints has.
    for (const name of Object.keys(values)) {
      const conn = `hostile.${connectionOf(name)}`;
      const seen = firstSeen[name];
      recovered[conn] = seen === undefined || (conn in recovered && recovered[conn] === undefined) ? undefined : Math.max(recovered[conn] ?? 0, seen);
    }
    log(`new values first seen after (ms): ${JSON.stringify(firstSeen)}`);
    const lost = await legit.stop();

    // Quiet: what the daemon holds after a GC must come back within 8 MiB (asked every 2 s, each
    // time after a full GC). The RSS is watched too, as a figure: after a burst V8 keeps the
    // heap pages it grew to and glibc's malloc the arenas its Buffers used, freed but not given
    // back to the system for a while; that is no leak, and the RSS bound is the attack's peak.
    const ids = ['hostile.s7', 'hostile.cip', 'hostile.modbus', 'hostile.control'];
    const quietFrom = Date.now();
    const quietMs = options.quietMs ?? 30_000;
    const limitKiB = startKiB + 8 * 1024;
    let settledAfterMs: number | undefined;
    let heldSettledAfterMs: number | undefined;
    let heldEnd = await inspector.held();
    for (let round = 0; round < 100; round++) {
      const at = Date.now() - quietFrom;
      if (heldSettledAfterMs === undefined && heldEnd.heldMiB <= heldStart.heldMiB + 8) heldSettledAfterMs = at;
      if (settledAfterMs === undefined && watch.rssKiB() <= limitKiB) settledAfterMs = at;
      // The quiet also lets a connection that the liveness rule reopened after a last trickled
      // answer finish reconnecting: its final state is checked.
      const allConnected = ids.every((id) => watch.connections.at(-1)?.list.find((c) => c.id === id)?.state === 'connected');
      if ((heldSettledAfterMs !== undefined && settledAfterMs !== undefined && allConnected) || at >= quietMs) break;
      await new Promise((r) => setTimeout(r, 2000));
      heldEnd = await inspector.held();
    }

    const end = await figuresOf(`http://127.0.0.1:${daemon.ready.http}`, authorization);
    const rssDuring = watch.rss.filter((s) => s.t >= attackFrom);
    const states = (id: string) => watch.connections.filter((s) => s.t >= attackFrom && s.t <= attackTo).map((s) => s.list.find((c) => c.id === id)?.state);
    const connections: HostileReport['connections'] = {};
    for (const id of ids) {
      const b = before.get(id);
      const a = after.get(id);
      const seq = states(id);
      connections[id] = {
        readsDuringAttack: (a?.reads ?? 0) - (b?.reads ?? 0),
        failuresDuringAttack: (a?.failures ?? 0) - (b?.failures ?? 0),
        reopened: seq.filter((s, i) => s !== 'connected' && seq[i - 1] === 'connected').length,
        recoveredAfterMs: recovered[id],
        state: watch.connections[watch.connections.length - 1]?.list.find((c) => c.id === id)?.state ?? 'unknown',
      };
    }
    const controlBefore = readRate(watch.connections, 'hostile.control', baselineFrom, baselineTo);
    const controlDuring = readRate(watch.connections, 'hostile.control', attackFrom, attackTo);
    return {
      seed,
      corruptSeconds: options.corruptMs / 1000,
      pidUnchanged: !exited && watch.alive() && daemon.child.pid === pid,
      health: { probes: watch.health.length, unanswered: watch.health.filter((h) => h.status !== 200 || h.ms > 500).length, maxMs: Math.max(...watch.health.map((h) => h.ms)) },
      loopP99MaxMs: Math.max(0, ...watch.loopP99.filter((s) => s.t > baselineFrom).map((s) => s.seconds * 1000)),
      rss: {
        startMiB: startKiB / 1024,
        peakMiB: Math.max(...rssDuring.map((s) => s.kib)) / 1024,
        endMiB: watch.rssKiB() / 1024,
        settledAfterMs,
        quartersMiB: [1, 2, 3, 4].map((q) => {
          const at = attackFrom + ((attackTo - attackFrom) * q) / 4;
          const near = watch.rss.filter((s) => s.t <= at).at(-1);
          return near ? (near.kib - startKiB) / 1024 : NaN;
        }),
      },
      held: { start: heldStart, end: heldEnd, settledAfterMs: heldSettledAfterMs },
      usageDuring: {
        atPeakRss: usageSamples.reduce<MemoryUsageSample | undefined>((a, u) => (!a || u.rssMiB > a.rssMiB ? u : a), undefined),
        max: usageSamples.length === 0 ? undefined : (Object.fromEntries(Object.keys(usageSamples[0]!).map((k) => [k, Math.max(...usageSamples.map((u) => u[k as keyof MemoryUsageSample]))])) as unknown as MemoryUsageSample),
        samples: usageSamples.length,
      },
      legit: { sent: legit.sent, lost: lost.length },
      control: { before: controlBefore, during: controlDuring, change: controlDuring / controlBefore - 1 },
      connections,
      stuckConnected: stuck(watch.connections, ids, attackFrom, clean + RECOVERY_WAIT_MS),
      answers: { s7: proxies.s7.counts, cip: proxies.cip.counts, modbus: proxies.modbus.counts },
      mqttFuzz: { ...fuzz.counts },
      start,
      end,
    };
  } finally {
    if (daemonChild && daemonChild.exitCode === null) {
      daemonChild.kill('SIGTERM');
      await new Promise((r) => {
        const t = setTimeout(() => daemonChild!.kill('SIGKILL'), 10_000);
        daemonChild!.once('exit', () => r(clearTimeout(t)));
      });
    }
    for (const c of cleanups.reverse()) await Promise.resolve(c()).catch(() => undefined);
  }
}

const average = (xs: number[]) => xs.reduce((s, x) => s + x, 0) / xs.length;

function snapshot(watch: DaemonWatch): Map<string, ConnectionSample> {
  return new Map((watch.connections[watch.connections.length - 1]?.list ?? []).map((c) => [c.id, c]));
}

/** Where a connection stayed `connected` with no new reading for STUCK_MS (the liveness rule, from outside). */
function stuck(samples: DaemonWatch['connections'], ids: string[], from: number, to: number): string[] {
  const found: string[] = [];
  for (const id of ids) {
    let since: { t: number; reads: number } | undefined;
    for (const s of samples.filter((x) => x.t >= from && x.t <= to)) {
      const c = s.list.find((x) => x.id === id);
      if (!c || c.state !== 'connected') {
        since = undefined;
        continue;
      }
      if (!since || c.reads !== since.reads) since = { t: s.t, reads: c.reads };
      else if (s.t - since.t > STUCK_MS) {
        found.push(`${id}: connected without a reading from ${new Date(since.t).toISOString()} for ${s.t - since.t} ms`);
        since = { t: s.t, reads: c.reads };
      }
    }
  }
  return found;
}
