// Builds the real gateway per scenario: real LMDB in a temp dir, real HTTP (and broker) on
// 127.0.0.1 port 0, the real OpenAPI validation with response validation switched on.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';
import { loadConfig, type GatewayConfig } from '../../src/config/index.js';
import { createLogger } from '../../src/log/index.js';
import { createDaemon } from '../../src/daemon.js';
import { wireGateway, type Gateway } from '../../src/wiring.js';
import { recordLogs } from './mqtt-test-kit.js';

export const ADMIN_PASSWORD = 'Admin-Passw0rd!';
/** A password that satisfies the default policy. */
export const GOOD_PASSWORD = 'Str0ng-Password';

export interface ApiResponse<T = any> {
  status: number;
  body: T;
  headers: Headers;
}

export interface TestGateway {
  baseUrl: string;
  /** https://127.0.0.1:<HTTPS port> (an address the gateway CA's server certificate names). */
  httpsUrl: string;
  /** The gateway CA's certificate, data/pki/ca.cert.pem: what a client trusts for HTTPS and MQTTS. */
  caFile: string;
  config: GatewayConfig;
  dataDir: string;
  services: Gateway['services'];
  /** The protocol-mapping service (its runtime's waitFor, for state changes). */
  mapping: Gateway['mapping'];
  ports: ReturnType<Gateway['ports']>;
  /** Every JSON log line written so far. */
  logs: () => Record<string, unknown>[];
  /** The first log line matching `pred`, already written or when it is (asked again at every line). */
  waitForLog(pred: (line: Record<string, unknown>) => boolean, ms?: number): Promise<Record<string, unknown>>;
  api<T = any>(method: string, path: string, options?: { token?: string; body?: unknown; headers?: Record<string, string>; raw?: string | Buffer | FormData }): Promise<ApiResponse<T>>;
  login(username?: string, password?: string): Promise<string>;
  /** Creates a user holding exactly these permissions (as direct permissions) and returns its token. */
  userWith(permissions: { resource: string; operation: 'read' | 'write' | 'readWrite'; context: 'mqtt' | 'http' }[], username?: string): Promise<{ id: string; username: string; token: string }>;
  stop(): Promise<void>;
}

let counter = 0;

export function tempDir(prefix = 'gatewayd-test-'): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

export function testConfig(dataDir: string, overrides: Record<string, unknown> = {}): GatewayConfig {
  return loadConfig({
    env: {},
    overrides: deepMerge(
      {
        dataDir,
        host: '127.0.0.1',
        log: { level: 'debug', requests: true },
        http: { port: 0, tlsPort: 0, shutdownTimeoutMs: 2000 },
        mqtt: { port: 0, tlsPort: 0 },
        auth: { adminPassword: ADMIN_PASSWORD, passwordHashCost: 10 },
        mapping: { servicesDir: join(dataDir, 'services') },
      },
      overrides,
    ),
  });
}

function deepMerge(a: Record<string, any>, b: Record<string, any>): Record<string, any> {
  const out = { ...a };
  for (const [k, v] of Object.entries(b)) {
    out[k] = v && typeof v === 'object' && !Array.isArray(v) && typeof out[k] === 'object' ? deepMerge(out[k], v) : v;
  }
  return out;
}

export async function startGateway(options: { overrides?: Record<string, unknown>; dataDir?: string; keepDataDir?: boolean } = {}): Promise<TestGateway> {
  const dataDir = options.dataDir ?? tempDir();
  const config = testConfig(dataDir, options.overrides);
  const stream = new PassThrough();
  const recorder = recordLogs();
  createInterface({ input: stream }).on('line', (line) => {
    try {
      recorder.add(JSON.parse(line));
    } catch {
      recorder.add({ unparsed: line });
    }
  });
  const log = createLogger({ level: config.log.level, stream });
  const gateway = wireGateway(config, log, { validateResponses: true });
  const daemon = createDaemon({ parts: gateway.parts, log });
  await daemon.start();
  const ports = gateway.ports();
  const baseUrl = `http://127.0.0.1:${ports.http}`;
  const httpsUrl = `https://127.0.0.1:${ports.https}`;

  const api: TestGateway['api'] = async (method, path, opts = {}) => {
    const headers: Record<string, string> = { ...(opts.headers ?? {}) };
    if (opts.token) headers.authorization = `Bearer ${opts.token}`;
    let body: string | Buffer | FormData | undefined;
    if (opts.raw !== undefined) body = opts.raw;
    else if (opts.body !== undefined) {
      body = JSON.stringify(opts.body);
      headers['content-type'] ??= 'application/json';
    }
    const res = await fetch(baseUrl + path, { method, headers, body: body as never, redirect: 'manual' });
    const text = await res.text();
    let parsed: unknown = text;
    if ((res.headers.get('content-type') ?? '').includes('json') && text) parsed = JSON.parse(text);
    return { status: res.status, body: parsed as any, headers: res.headers };
  };

  const login = async (username = 'admin', password = ADMIN_PASSWORD) => {
    const res = await api('POST', '/api/login', { body: { username, password } });
    if (res.status !== 200) throw new Error(`login of ${username} failed: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body.token as string;
  };

  let adminToken: string | undefined;
  const userWith: TestGateway['userWith'] = async (permissions, username) => {
    adminToken ??= await login();
    const name = username ?? `user-${process.pid}-${++counter}`;
    const created = await api('POST', '/api/users', {
      token: adminToken,
      body: { username: name, password: GOOD_PASSWORD, identityProvider: 'local', initialPermissions: permissions },
    });
    if (created.status !== 201) throw new Error(`create ${name}: ${created.status} ${JSON.stringify(created.body)}`);
    return { id: created.body.id, username: name, token: await login(name, GOOD_PASSWORD) };
  };

  return {
    baseUrl,
    httpsUrl,
    caFile: join(dataDir, 'pki', 'ca.cert.pem'),
    config,
    dataDir,
    services: gateway.services,
    mapping: gateway.mapping,
    ports,
    logs: () => recorder.entries,
    waitForLog: (pred, ms = 10_000) => recorder.waitFor(pred, ms),
    api,
    login,
    userWith,
    async stop() {
      await daemon.stop();
      if (!options.keepDataDir && !options.dataDir) rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export const mainScript = fileURLToPath(new URL('../../src/main.js', import.meta.url));

/** The environment of a daemon process under test: data in `dataDir`, loopback, free ports, the test admin password, cheap password hashes. */
export function daemonTestEnv(dataDir: string): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '',
    GATEWAYD_DATA_DIR: dataDir,
    GATEWAYD_HOST: '127.0.0.1',
    GATEWAYD_HTTP_PORT: '0',
    GATEWAYD_HTTPS_PORT: '0',
    GATEWAYD_MQTT_PORT: '0',
    GATEWAYD_MQTTS_PORT: '0',
    GATEWAYD_ADMIN_PASSWORD: ADMIN_PASSWORD,
    GATEWAYD_SET__AUTH__PASSWORD_HASH_COST: '10',
  };
}

/** The daemon as a separate process (for signals and SIGKILL); resolves on its ready line. */
/**
 * The real daemon process on `dataDir`, resolved at its ready line. `as`: another user (tests
 * running as root start an unprivileged daemon); `launcher`: a command that runs node for it
 * (a seccomp filter); `cwd`: its working directory; `script`: another build's dist/src/main.js (benchmarks' before/after).
 */
export async function startDaemonProcess(
  dataDir: string,
  env: Record<string, string> = {},
  as: { uid?: number; gid?: number; launcher?: string[]; cwd?: string; script?: string } = {},
): Promise<{ child: ChildProcess; ready: Record<string, any>; lines: Record<string, any>[]; exited: Promise<number | null> }> {
  const { launcher = [], script = mainScript, ...user } = as;
  const [command, ...prefix] = launcher.length ? launcher : [process.execPath];
  const child = spawn(command!, launcher.length ? [...prefix, process.execPath, script] : [script], {
    env: { ...daemonTestEnv(dataDir), GATEWAYD_SET__LOG__REQUESTS: 'false', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    ...user,
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const lines: Record<string, any>[] = [];
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  const ready = await new Promise<Record<string, any>>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on('line', (line) => {
      try {
        const entry = JSON.parse(line);
        lines.push(entry);
        if (entry.message === 'ready') resolve(entry);
      } catch {
        lines.push({ unparsed: line });
      }
    });
    void exited.then((code) => reject(new Error(`daemon exited with ${code} before ready: ${stderr}${lines.slice(-3).map((l) => `\n${JSON.stringify(l)}`).join("")}`)));
  });
  return { child, ready, lines, exited };
}
