// Http polling connection (fetch): read endpoints GET <baseUrl><path> and see the JSON body;
// write endpoints POST the JSON value. Connecting probes the base URL: any HTTP answer means
// reachable; a network failure (or a later one while polling) is a connection failure.
import type { EndpointDef } from '../service-files.js';
import { DeviceError, type ConnectionDriver } from './types.js';

export interface HttpConfiguration {
  baseUrl: string;
  headers?: Record<string, string>;
  timeoutMs: number;
}

/** Bodies larger than this are refused (the gateway has little RAM). */
const MAX_BODY_BYTES = 1024 * 1024;

export function createHttpDriver(cfg: HttpConfiguration): ConnectionDriver {
  let connected = false;
  let lostListener: (reason: string) => void = () => {};
  const base = cfg.baseUrl.replace(/\/+$/, '');

  async function request(method: 'GET' | 'POST', path: string, body?: unknown): Promise<Response> {
    try {
      return await fetch(base + path, {
        method,
        headers: { accept: 'application/json', ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...(cfg.headers ?? {}) },
        body: body !== undefined ? JSON.stringify(body) : null,
        signal: AbortSignal.timeout(cfg.timeoutMs),
        redirect: 'error',
      });
    } catch (err) {
      if (connected) {
        connected = false;
        lostListener(`request failed: ${(err as Error).message}`);
      }
      throw err;
    }
  }

  return {
    async connect() {
      const res = await fetch(base + '/', { method: 'GET', headers: cfg.headers ?? {}, signal: AbortSignal.timeout(cfg.timeoutMs), redirect: 'manual' });
      await res.body?.cancel();
      connected = true;
    },
    async disconnect() {
      connected = false;
    },
    onLost(listener) {
      lostListener = listener;
    },
    async read(ep: EndpointDef) {
      const res = await request('GET', ep.address.path as string);
      const text = await res.text();
      if (Buffer.byteLength(text) > MAX_BODY_BYTES) throw new DeviceError(`response larger than ${MAX_BODY_BYTES} bytes`);
      if (!res.ok) throw new DeviceError(`HTTP ${res.status}`);
      try {
        return JSON.parse(text) as unknown;
      } catch {
        throw new DeviceError('response is not JSON');
      }
    },
    async write(ep: EndpointDef, value: unknown) {
      const res = await request('POST', ep.address.path as string, value ?? null);
      await res.body?.cancel();
      if (!res.ok) throw new DeviceError(`HTTP ${res.status}`);
    },
  };
}
