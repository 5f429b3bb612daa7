// Helpers for the broker tests (test/mqtt-*.test.ts): a broker on 127.0.0.1 port 0 with a
// captured log, mqtt.js connection helpers, the mosquitto CLI clients and openssl-made certs.

import { execFile, spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { promisify } from 'node:util';
import mqtt, { type IClientOptions, type IConnackPacket, type IPublishPacket, type MqttClient } from 'mqtt';
import mqttPacket from 'mqtt-packet';
import { loadConfig } from '../../src/config/index.js';
import type { GatewayConfig } from '../../src/config/config-schema.js';
import { createLogger } from '../../src/log/logger.js';
import { createBroker, type Broker, type BrokerOptions } from '../../src/mqtt/index.js';
import { openStore } from '../../src/store/index.js';
import type { StaticMqttAccess } from './static-mqtt-access.js';

const run = promisify(execFile);

/** The daemon's defaults on free ports, with a publish rate the functional tests never reach. */
export function mqttConfig(overrides: Partial<GatewayConfig['mqtt']> = {}): GatewayConfig['mqtt'] {
  return {
    ...loadConfig({ env: {} }).mqtt,
    port: 0,
    tlsPort: 0,
    maxPublishesPerSecond: 100000,
    ...overrides,
  };
}

export interface Certs {
  dir: string;
  caCert: string;
  serverKey: string;
  serverCert: string;
  clientKey: string;
  clientCert: string;
  /** SHA-256 of the client certificate's DER, lowercase hex without colons. */
  clientFingerprint: string;
  /** A second CA, not trusted at first, and a client certificate CN=device-02 it signed. */
  otherCaCert: string;
  otherClientKey: string;
  otherClientCert: string;
  paths: Record<'caCert' | 'clientKey' | 'clientCert' | 'otherCaCert' | 'otherClientKey' | 'otherClientCert', string>;
  cleanup(): Promise<void>;
}

/** CA, server certificate (SAN 127.0.0.1, localhost) and client certificates made with openssl. */
export async function makeCerts(): Promise<Certs> {
  const dir = await mkdtemp(path.join(tmpdir(), 'gatewayd-mqtt-certs-'));
  const f = (name: string) => path.join(dir, name);
  const ssl = (...args: string[]) => run('openssl', args, { cwd: dir });
  const days = ['-days', '2'];
  await writeFile(f('server.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
  await writeFile(f('client.ext'), 'extendedKeyUsage=clientAuth\n');
  for (const ca of ['ca', 'other-ca']) {
    await ssl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', f(`${ca}.key`), '-out', f(`${ca}.pem`), ...days, '-subj', `/CN=test ${ca}`);
  }
  const leaf = async (name: string, cn: string, ca: string, ext: string) => {
    await ssl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', f(`${name}.key`), '-out', f(`${name}.csr`), '-subj', `/CN=${cn}`);
    await ssl('x509', '-req', '-in', f(`${name}.csr`), '-CA', f(`${ca}.pem`), '-CAkey', f(`${ca}.key`), '-CAcreateserial', '-out', f(`${name}.pem`), ...days, '-extfile', f(ext));
  };
  await leaf('server', 'localhost', 'ca', 'server.ext');
  await leaf('client', 'device-01', 'ca', 'client.ext');
  await leaf('other-client', 'device-02', 'other-ca', 'client.ext');
  const fp = await ssl('x509', '-in', f('client.pem'), '-noout', '-fingerprint', '-sha256');
  const clientFingerprint = fp.stdout.trim().split('=')[1]!.replaceAll(':', '').toLowerCase();
  const read = (name: string) => readFile(f(name), 'utf8');
  return {
    dir,
    caCert: await read('ca.pem'),
    serverKey: await read('server.key'),
    serverCert: await read('server.pem'),
    clientKey: await read('client.key'),
    clientCert: await read('client.pem'),
    clientFingerprint,
    otherCaCert: await read('other-ca.pem'),
    otherClientKey: await read('other-client.key'),
    otherClientCert: await read('other-client.pem'),
    paths: {
      caCert: f('ca.pem'),
      clientKey: f('client.key'),
      clientCert: f('client.pem'),
      otherCaCert: f('other-ca.pem'),
      otherClientKey: f('other-client.key'),
      otherClientCert: f('other-client.pem'),
    },
    cleanup: () => rm(dir, { recursive: true, force: true }),
  };
}

export interface TestBroker {
  broker: Broker;
  port: number;
  tlsPort: number;
  httpServer: http.Server;
  httpPort: number;
  /** Parsed JSON log lines written so far. */
  logs: Array<Record<string, unknown>>;
  /** Raw log text, to check that no secret was written. */
  logText(): string;
  /** Resolves with the first log line (already written or future) matching `pred`. */
  waitForLog(pred: (line: Record<string, unknown>) => boolean, ms?: number): Promise<Record<string, unknown>>;
  /** Trusted CA list returned by ca(); tests may change it and call broker.refreshTls(). */
  trusted: string[];
  stop(): Promise<void>;
}

/** Parsed JSON log lines as they are written, and a wait for one of them (already written or future). */
export interface LogRecorder {
  entries: Array<Record<string, unknown>>;
  add(entry: Record<string, unknown>): void;
  /** Resolves with the first line matching `pred`; `pred` is asked again at every new line. */
  waitFor(pred: (line: Record<string, unknown>) => boolean, ms?: number): Promise<Record<string, unknown>>;
}

export function recordLogs(): LogRecorder {
  const entries: Array<Record<string, unknown>> = [];
  const waiters = new Set<{ pred: (line: Record<string, unknown>) => boolean; resolve: (line: Record<string, unknown>) => void }>();
  return {
    entries,
    add(entry) {
      entries.push(entry);
      for (const w of waiters) {
        if (w.pred(entry)) {
          waiters.delete(w);
          w.resolve(entry);
        }
      }
    },
    waitFor(pred, ms = 5000) {
      const seen = entries.find(pred);
      if (seen) return Promise.resolve(seen);
      let waiter!: { pred: typeof pred; resolve: (line: Record<string, unknown>) => void };
      const found = new Promise<Record<string, unknown>>((resolve) => {
        waiter = { pred, resolve };
        waiters.add(waiter);
      });
      return withTimeout(found, ms, 'log line not written').finally(() => waiters.delete(waiter));
    },
  };
}

export async function startBroker(
  access: StaticMqttAccess,
  certs: Certs,
  config: Partial<GatewayConfig['mqtt']> = {},
  extra: Partial<BrokerOptions> = {},
): Promise<TestBroker> {
  const lines: string[] = [];
  const recorder = recordLogs();
  const logs = recorder.entries;
  const stream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const line of chunk.toString('utf8').split('\n')) {
        if (!line) continue;
        lines.push(line);
        try {
          recorder.add(JSON.parse(line) as Record<string, unknown>);
        } catch {
          // not JSON: kept in the text only
        }
      }
      cb();
    },
  });
  const trusted = [certs.caCert];
  const log = createLogger({ level: 'debug', stream });
  const broker = createBroker({
    config: mqttConfig(config),
    host: '127.0.0.1',
    log,
    access,
    tls: { key: certs.serverKey, cert: certs.serverCert, ca: () => [...trusted] },
    ...extra,
  });
  const { port, tlsPort } = await broker.start();
  const httpServer = http.createServer((_req, res) => {
    res.statusCode = 404;
    res.end();
  });
  broker.handleUpgrade(httpServer);
  await new Promise<void>((resolve) => httpServer.listen(0, '127.0.0.1', resolve));
  const httpPort = (httpServer.address() as AddressInfo).port;
  return {
    broker,
    port,
    tlsPort,
    httpServer,
    httpPort,
    logs,
    logText: () => lines.join('\n'),
    waitForLog: recorder.waitFor,
    trusted,
    async stop() {
      await broker.stop();
      httpServer.closeAllConnections();
      await new Promise<void>((resolve) => httpServer.close(() => resolve()));
    },
  };
}

const openClients = new Set<MqttClient>();

/** Ends every client opened by connect()/tryConnect() (call in afterEach). */
export async function endAllClients(): Promise<void> {
  const clients = [...openClients];
  openClients.clear();
  await Promise.all(clients.map((c) => c.endAsync(true).catch(() => undefined)));
}

export function clientOptions(port: number, options: IClientOptions = {}): IClientOptions {
  return {
    host: '127.0.0.1',
    port,
    protocolVersion: 4,
    reconnectPeriod: 0,
    connectTimeout: 10_000,
    clientId: `t-${Math.random().toString(16).slice(2, 12)}`,
    ...options,
  };
}

/** Connects; resolves with the connected client or rejects with the CONNACK error. */
export function connect(port: number, options: IClientOptions = {}): Promise<MqttClient> {
  return connectUrl(undefined, clientOptions(port, options));
}

/** The CONNACK that accepted a client of connect()/connectUrl(). */
const connacks = new WeakMap<MqttClient, IConnackPacket>();

export function connackPacket(client: MqttClient): IConnackPacket | undefined {
  return connacks.get(client);
}

export function connectUrl(url: string | undefined, options: IClientOptions): Promise<MqttClient> {
  const client = url ? mqtt.connect(url, options) : mqtt.connect(options);
  openClients.add(client);
  client.once('connect', (packet: IConnackPacket) => connacks.set(client, packet));
  return new Promise((resolve, reject) => {
    const onError = (err: Error) => {
      cleanup();
      client.end(true);
      reject(err);
    };
    const onClose = () => {
      cleanup();
      reject(new Error('closed before CONNACK'));
    };
    const onConnect = () => {
      cleanup();
      resolve(client);
    };
    const cleanup = () => {
      client.removeListener('error', onError);
      client.removeListener('close', onClose);
      client.removeListener('connect', onConnect);
    };
    client.on('error', onError);
    client.on('close', onClose);
    client.on('connect', onConnect);
  });
}

/** CONNACK return code of a connection attempt: 0 when accepted, else the refusal code. */
export async function connackCode(port: number, options: IClientOptions = {}): Promise<number> {
  try {
    const client = await connect(port, options);
    await client.endAsync(true);
    return 0;
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    if (typeof code === 'number') return code;
    throw err;
  }
}

/** Resolves when the client's connection closes; rejects after `ms`. */
export function closed(client: MqttClient, ms = 1000): Promise<number> {
  const started = Date.now();
  if (!client.connected && client.disconnected) return Promise.resolve(0);
  return withTimeout(new Promise<number>((resolve) => client.once('close', () => resolve(Date.now() - started))), ms, 'connection still open');
}

export function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout;
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what} after ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

export interface Received {
  topic: string;
  payload: string;
}

/** Collects messages; `next(n)` waits for the n-th message in total (1-based). */
export function collect(client: MqttClient): { messages: Received[]; until(pred: (m: Received) => boolean, ms?: number): Promise<Received> } {
  const messages: Received[] = [];
  const waiters: Array<{ pred: (m: Received) => boolean; resolve: (m: Received) => void }> = [];
  client.on('message', (topic, payload) => {
    const m = { topic, payload: payload.toString('utf8') };
    messages.push(m);
    for (let i = waiters.length - 1; i >= 0; i--) {
      if (waiters[i]!.pred(m)) {
        waiters[i]!.resolve(m);
        waiters.splice(i, 1);
      }
    }
  });
  return {
    messages,
    until(pred, ms = 5000) {
      const seen = messages.find(pred);
      if (seen) return Promise.resolve(seen);
      return withTimeout(new Promise<Received>((resolve) => waiters.push({ pred, resolve })), ms, 'message not received');
    },
  };
}

/**
 * Connects with a message collector attached before the CONNACK, so messages replayed from a
 * persistent session's queue right after connecting are not missed.
 */
export async function connectWithInbox(port: number, options: IClientOptions): Promise<{ client: MqttClient; inbox: ReturnType<typeof collect> }> {
  const client = mqtt.connect(clientOptions(port, options));
  openClients.add(client);
  const inbox = collect(client);
  await withTimeout(
    new Promise<void>((resolve, reject) => {
      client.once('connect', () => resolve());
      client.once('error', reject);
    }),
    5000,
    'not connected',
  );
  return { client, inbox };
}

/** Granted QoS list of a SUBSCRIBE (128 = refused). */
export async function subscribe(client: MqttClient, filter: string | string[], qos: 0 | 1 | 2 = 0): Promise<number[]> {
  return new Promise((resolve, reject) => {
    client.subscribe(filter, { qos }, (err, granted) => {
      // mqtt.js reports a SUBACK holding 0x80 as an error that carries the packet.
      const suback = (err as { packet?: { cmd?: string; granted?: number[] } } | null)?.packet;
      if (suback?.cmd === 'suback' && suback.granted) resolve(suback.granted);
      else if (err) reject(err);
      else if (granted) resolve(granted.map((g) => g.qos));
      else reject(new Error('no SUBACK'));
    });
  });
}

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a CLI program to completion (bounded by `ms`). */
export function runCli(cmd: string, args: string[], ms = 10_000): Promise<CliResult> {
  const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const done = new Promise<CliResult>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
  return withTimeout(done, ms, `${cmd} did not finish`).catch((err: unknown) => {
    child.kill('SIGKILL');
    throw err;
  });
}

/**
 * Starts `mosquitto_sub -d ...` and resolves once its SUBACK arrived and was printed; `result` completes when
 * the process exits (use -C n so it exits after n messages).
 */
export async function startMosquittoSub(args: string[], ms = 10_000): Promise<{ result: Promise<CliResult>; kill(): void; /** the SUBACK's codes as printed (128: refused) */ granted: number[] }> {
  // mosquitto_sub block-buffers stdout into a pipe; stdbuf (coreutils) makes it line-buffered
  // so that the SUBACK line arrives while it runs.
  const child = spawn('stdbuf', ['-oL', 'mosquitto_sub', '-d', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  let subscribed: () => void = () => {};
  let failed: (err: Error) => void = () => {};
  const ready = new Promise<void>((resolve, reject) => {
    subscribed = resolve;
    failed = reject;
  });
  child.stdout.on('data', (d: Buffer) => {
    stdout += d.toString();
    // Ready once the whole 'Subscribed (mid: n): codes' line that follows 'received SUBACK' is in:
    // the two lines can arrive in separate chunks, and a caller may kill the client right away.
    if (/Subscribed \(mid: \d+\):[^\n]*\n/.test(stdout)) subscribed();
    // The broker closed the connection instead of answering the SUBSCRIBE (RabbitMQ 3.10 does
    // for a refused one), and mosquitto_sub is connecting again.
    else if ((stdout.match(/sending CONNECT/g) ?? []).length > 1) failed(new Error(`mosquitto_sub lost its connection before a SUBACK: ${stdout}`));
  });
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const result = new Promise<CliResult>((resolve) => {
    child.once('close', (code) => {
      failed(new Error(`mosquitto_sub exited (${code}) before SUBACK: ${stdout} ${stderr}`));
      resolve({ code, stdout, stderr });
    });
  });
  try {
    await withTimeout(ready, ms, 'mosquitto_sub not subscribed');
  } catch (err) {
    child.kill('SIGKILL');
    throw err;
  }
  const granted = (/Subscribed \(mid: \d+\): ([^\n]*)\n/.exec(stdout)?.[1] ?? '').split(',').map((c) => Number(c.trim()));
  let bounded: Promise<CliResult> | undefined;
  return {
    // Bounded from when the caller first waits for the exit, not from the SUBACK: a test may do
    // much in between (a browser test signs in and clicks through dialogs before the kick).
    get result() {
      return (bounded ??= withTimeout(result, ms, 'mosquitto_sub did not finish'));
    },
    kill: () => child.kill('SIGKILL'),
    granted,
  };
}

/** A CONNACK as a client received it: the session present flag and the return / reason code. */
export interface ConnackSeen {
  sessionPresent: boolean;
  code: number;
}

/**
 * A loopback TCP relay in front of the broker that records the CONNACK of every connection, for
 * clients that do not print it (mosquitto_pub/mosquitto_sub -d show the code, not the flag).
 */
export async function connackRecorder(brokerPort: number): Promise<{ port: number; connacks: ConnackSeen[]; close(): Promise<void> }> {
  const connacks: ConnackSeen[] = [];
  const sockets = new Set<net.Socket>();
  const server = net.createServer((downstream) => {
    const upstream = net.connect(brokerPort, '127.0.0.1');
    for (const s of [downstream, upstream]) {
      sockets.add(s);
      s.once('close', () => sockets.delete(s));
      s.on('error', () => {});
    }
    let head = Buffer.alloc(0);
    upstream.on('data', (chunk: Buffer) => {
      // The CONNACK is the broker's first packet: type 0x20, a one-byte length, flags, code.
      if (head.length < 4) {
        head = Buffer.concat([head, chunk]);
        if (head.length >= 4 && head[0] === 0x20) connacks.push({ sessionPresent: (head[2]! & 1) === 1, code: head[3]! });
      }
    });
    downstream.pipe(upstream).on('error', () => {});
    upstream.pipe(downstream).on('error', () => {});
    downstream.once('close', () => upstream.destroy());
    upstream.once('close', () => downstream.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    connacks,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** The CONNACK a connection attempt got (accepted or refused); the client is closed afterwards. */
export async function connackOf(port: number, options: IClientOptions = {}): Promise<ConnackSeen> {
  const client = mqtt.connect(clientOptions(port, options));
  openClients.add(client);
  try {
    return await withTimeout(
      new Promise<ConnackSeen>((resolve) => {
        client.on('packetreceive', (packet) => {
          if (packet.cmd !== 'connack') return;
          const p = packet as { sessionPresent?: boolean; returnCode?: number; reasonCode?: number };
          resolve({ sessionPresent: p.sessionPresent === true, code: p.reasonCode ?? p.returnCode ?? -1 });
        });
        client.on('error', () => {});
      }),
      5000,
      'no CONNACK',
    );
  } finally {
    await client.endAsync(true).catch(() => undefined);
  }
}

/** A raw MQTT connection (mqtt-packet on a socket): for what mqtt.js would not send or answer by itself. */
export interface RawMqttClient {
  /** Every packet received so far, in order. */
  received: mqttPacket.Packet[];
  send(packet: mqttPacket.Packet): void;
  /** Resolves with the next received packet of this type (already received ones count, once each). */
  next(cmd: mqttPacket.Packet['cmd'], ms?: number): Promise<mqttPacket.Packet>;
  /** Resolves when the broker closed the connection. */
  closed: Promise<void>;
  end(): void;
}

export async function rawClient(port: number, connectPacket: Omit<mqttPacket.IConnectPacket, 'cmd'>): Promise<RawMqttClient> {
  const protocolVersion = connectPacket.protocolVersion ?? 4;
  const socket = net.connect(port, '127.0.0.1');
  socket.setNoDelay(true);
  socket.on('error', () => {});
  const parser = mqttPacket.parser({ protocolVersion });
  const received: mqttPacket.Packet[] = [];
  const taken = new Set<mqttPacket.Packet>();
  const waiters: Array<{ cmd: string; resolve: (p: mqttPacket.Packet) => void }> = [];
  parser.on('packet', (packet) => {
    received.push(packet);
    const i = waiters.findIndex((w) => w.cmd === packet.cmd);
    if (i >= 0) {
      taken.add(packet);
      waiters.splice(i, 1)[0]!.resolve(packet);
    }
  });
  socket.on('data', (chunk: Buffer) => parser.parse(chunk));
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  const client: RawMqttClient = {
    received,
    send: (packet) => {
      socket.write(mqttPacket.generate(packet, { protocolVersion }));
    },
    next(cmd, ms = 5000) {
      const seen = received.find((p) => p.cmd === cmd && !taken.has(p));
      if (seen) {
        taken.add(seen);
        return Promise.resolve(seen);
      }
      return withTimeout(new Promise<mqttPacket.Packet>((resolve) => waiters.push({ cmd, resolve })), ms, `no ${cmd}`);
    },
    closed,
    end: () => socket.destroy(),
  };
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', () => resolve());
    socket.once('error', reject);
  });
  client.send({ cmd: 'connect', protocolId: 'MQTT', clean: true, keepalive: 0, ...connectPacket, protocolVersion } as mqttPacket.IConnectPacket);
  await client.next('connack');
  return client;
}

/** The PUBLISH packets a client received, in order; `until(n)` waits for the n-th in total. */
export function publishInbox(client: MqttClient): { packets: IPublishPacket[]; until(n: number, ms?: number): Promise<void> } {
  const packets: IPublishPacket[] = [];
  const waiters: Array<{ n: number; resolve: () => void }> = [];
  client.on('message', (_topic, _payload, packet) => {
    packets.push(packet);
    for (const w of [...waiters]) if (packets.length >= w.n) waiters.splice(waiters.indexOf(w), 1) && w.resolve();
  });
  return {
    packets,
    until(n, ms = 5000) {
      if (packets.length >= n) return Promise.resolve();
      return withTimeout(new Promise<void>((resolve) => waiters.push({ n, resolve })), ms, `${n} messages not received (${packets.length})`);
    },
  };
}

/**
 * A test broker on a real LMDB store in a fresh temp dir (the daemon's broker state), for one
 * test: `restart()` stops it and starts another on the same store (a new port), `close()` ends
 * the clients, the broker and the store and removes the dir.
 */
export async function brokerOnStore(
  prefix: string,
  access: StaticMqttAccess,
  certs: Certs,
  config: Partial<GatewayConfig['mqtt']> = {},
): Promise<{ tb: TestBroker; restart(): Promise<TestBroker>; close(): Promise<void> }> {
  const dir = await mkdtemp(path.join(tmpdir(), prefix));
  const store = openStore({ dir });
  const fixture = {
    tb: await startBroker(access, certs, config, { store }),
    async restart() {
      await endAllClients();
      await fixture.tb.stop();
      fixture.tb = await startBroker(access, certs, config, { store });
      return fixture.tb;
    },
    async close() {
      await endAllClients();
      await fixture.tb.stop();
      await store.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
  return fixture;
}

/**
 * The mocha hooks of a describe block whose every test gets a fresh broker on a fresh LMDB store
 * (brokerOnStore), the test certificates made once for the block. `tb` is the running test's
 * broker; `restart()` restarts it on the same store.
 */
export function brokerOnStorePerTest(
  prefix: string,
  access: () => StaticMqttAccess,
  config: Partial<GatewayConfig['mqtt']> = {},
): { readonly tb: TestBroker; restart(): Promise<TestBroker> } {
  let certs: Certs | undefined;
  let fixture: Awaited<ReturnType<typeof brokerOnStore>> | undefined;
  before(async () => {
    certs = await makeCerts();
  });
  after(async () => {
    await certs?.cleanup();
  });
  beforeEach(async () => {
    fixture = await brokerOnStore(prefix, access(), certs!, config);
  });
  afterEach(async () => {
    await fixture?.close();
    fixture = undefined;
  });
  const running = () => {
    if (!fixture) throw new Error('the broker runs only during a test');
    return fixture;
  };
  return {
    get tb() {
      return running().tb;
    },
    restart: () => running().restart(),
  };
}
