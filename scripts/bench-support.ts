// Pieces every benchmark shares: the real gateway in-process on 127.0.0.1:0, a keep-alive
// HTTP call, percentiles.
import { mkdtempSync, rmSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../src/config/index.js';
import { createDaemon } from '../src/daemon.js';
import { createSilentLogger, type Logger } from '../src/log/index.js';
import { wireGateway, type Gateway } from '../src/wiring.js';

export const now = () => performance.now();

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

export interface HttpResult {
  status: number;
  body: Buffer;
}

/** One request over a keep-alive agent. A string body is sent as JSON. */
export function httpCall(agent: Agent, port: number, method: string, path: string, headers: Record<string, string>, body?: string | Buffer, timeoutMs = 60_000): Promise<HttpResult> {
  const payload = typeof body === 'string' ? Buffer.from(body) : body;
  const sent = payload
    ? { ...(typeof body === 'string' ? { 'content-type': 'application/json' } : {}), ...headers, 'content-length': String(payload.length) }
    : headers;
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method, path, agent, headers: sent }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`${method} ${path} timed out`)));
    req.end(payload);
  });
}

export interface BenchGateway {
  gateway: Gateway;
  port: number;
  dataDir: string;
  /** Stops the gateway and removes its data directory unless told to keep it. */
  stop(options?: { keepDataDir?: boolean }): Promise<void>;
}

/** The real gateway with silent logs and no response validation, in a temp data dir. */
export interface BenchGatewayOptions {
  adminPassword: string;
  passwordHashCost: number;
  prefix: string;
  auth?: Record<string, unknown>;
  /** The daemon's logger; silent by default (what a benchmark measures is rarely the log). */
  log?: Logger;
  /** Prepares the fresh data dir (e.g. writes service files) and returns more config overrides. */
  prepare?: (dataDir: string) => Record<string, unknown>;
}

export async function startBenchGateway(options: BenchGatewayOptions): Promise<BenchGateway> {
  const dataDir = mkdtempSync(join(tmpdir(), options.prefix));
  const extra = options.prepare?.(dataDir) ?? {};
  const config = loadConfig({
    env: {},
    overrides: {
      dataDir,
      host: '127.0.0.1',
      log: { level: 'error', requests: false },
      http: { port: 0, tlsPort: 0 },
      mqtt: { port: 0, tlsPort: 0 },
      auth: { adminPassword: options.adminPassword, passwordHashCost: options.passwordHashCost, ...(options.auth ?? {}) },
      mapping: { servicesDir: join(dataDir, 'services') },
      ...extra,
    },
  });
  const log = options.log ?? createSilentLogger();
  const gateway = wireGateway(config, log, { validateResponses: false });
  const daemon = createDaemon({ parts: gateway.parts, log });
  try {
    await daemon.start();
  } catch (err) {
    rmSync(dataDir, { recursive: true, force: true });
    throw err;
  }
  return {
    gateway,
    port: gateway.ports().http,
    dataDir,
    async stop(options?: { keepDataDir?: boolean }) {
      await daemon.stop();
      if (!options?.keepDataDir) rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** The environment of a daemon process on `dataDir` for a benchmark: loopback, free ports, that admin password. */
export function daemonEnv(dataDir: string, adminPassword: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '',
    GATEWAYD_DATA_DIR: dataDir,
    GATEWAYD_HOST: '127.0.0.1',
    GATEWAYD_HTTP_PORT: '0',
    GATEWAYD_HTTPS_PORT: '0',
    GATEWAYD_MQTT_PORT: '0',
    GATEWAYD_MQTTS_PORT: '0',
    GATEWAYD_ADMIN_PASSWORD: adminPassword,
    GATEWAYD_SET__MAPPING__SERVICESDIR: join(dataDir, 'services'),
    ...extra,
  };
}
