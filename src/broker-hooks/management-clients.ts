import type { GatewayConfig } from '../config/index.js';
import type { ClusterKind } from './cluster-sessions.js';

/** One cluster's management API, as far as revocation needs it. */
export interface ManagementClient {
  kind: ClusterKind;
  /**
   * Drops the user's sessions: those of the listed client ids, or all of them. Resolves how many
   * it closed; rejects when the cluster cannot be reached or refuses (the caller retries).
   */
  disconnect(username: string, clientIds: readonly string[] | 'all', options: { cleanup: boolean }): Promise<number>;
}

/** A failed management call; `unreachable`: the network or a 5xx, worth retrying soon. */
export class ManagementError extends Error {
  constructor(
    message: string,
    readonly unreachable: boolean,
  ) {
    super(message);
  }
}

interface Caller {
  /** JSON (or nothing) of a 2xx answer; undefined for a 404. */
  call(method: string, path: string, headers?: Record<string, string>): Promise<unknown>;
}

/** fetch with a timeout, Basic credentials and error classes; the credentials are never in a message. */
function caller(baseUrl: string, authorization: string, timeoutMs: number): Caller {
  const base = baseUrl.replace(/\/+$/, '');
  return {
    async call(method, path, headers = {}) {
      let res: Response;
      try {
        res = await fetch(base + path, { method, headers: { authorization, accept: 'application/json', ...headers }, signal: AbortSignal.timeout(timeoutMs) });
      } catch (err) {
        throw new ManagementError(`${method} ${path}: ${(err as Error).name === 'TimeoutError' ? `no answer within ${timeoutMs} ms` : ((err as Error & { cause?: Error }).cause?.message ?? (err as Error).message)}`, true);
      }
      const text = await res.text().catch(() => '');
      if (res.status === 404) return undefined;
      if (!res.ok) throw new ManagementError(`${method} ${path}: ${res.status} ${text.slice(0, 200)}`, res.status >= 500);
      if (!text) return null;
      try {
        return JSON.parse(text) as unknown;
      } catch {
        return null;
      }
    },
  };
}

const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
const enc = encodeURIComponent;

/**
 * RabbitMQ management HTTP API. All of a user's connections, cluster-wide and at once:
 * `DELETE /api/connections/username/{user}` (connection tracking). Single connections
 * (`DELETE /api/connections/{name}`, their client id in `client_properties.client_id`) only once
 * the management statistics list them (collect_statistics_interval, 5 s by default); a
 * connection not listed yet cannot be told apart, so then all of the user's connections go.
 */
export function rabbitmqManagement(cfg: GatewayConfig['brokerHooks']['rabbitmq'], timeoutMs: number): ManagementClient {
  const api = caller(cfg.managementUrl, basic(cfg.username, cfg.password), timeoutMs);
  const reason = { 'x-reason': 'gatewayd: credentials or permissions revoked' };
  return {
    kind: 'rabbitmq',
    async disconnect(username, clientIds) {
      const tracked = ((await api.call('GET', `/api/connections/username/${enc(username)}`)) ?? []) as { name: string }[];
      const names = Array.isArray(tracked) ? tracked.map((c) => c.name) : [];
      if (names.length === 0) return 0;
      const closeAll = async () => {
        await api.call('DELETE', `/api/connections/username/${enc(username)}`, reason);
        return names.length;
      };
      if (clientIds === 'all') return closeAll();
      const wanted = new Set(clientIds);
      const targets: string[] = [];
      for (const name of names) {
        const details = (await api.call('GET', `/api/connections/${enc(name)}`)) as { client_properties?: { client_id?: string } } | undefined;
        if (!details) return closeAll(); // not in the statistics yet
        if (wanted.has(details.client_properties?.client_id ?? '')) targets.push(name);
      }
      for (const name of targets) if ((await api.call('DELETE', `/api/connections/${enc(name)}`, reason)) === undefined) return closeAll();
      return targets.length;
    },
  };
}

/** EMQX 5 REST API (API key and secret as Basic credentials): `DELETE /api/v5/clients/{clientid}`. */
export function emqxManagement(cfg: GatewayConfig['brokerHooks']['emqx'], timeoutMs: number): ManagementClient {
  const api = caller(cfg.managementUrl, basic(cfg.apiKey, cfg.apiSecret), timeoutMs);
  return {
    kind: 'emqx',
    async disconnect(username, clientIds) {
      let ids: string[];
      if (clientIds === 'all') {
        ids = [];
        // Bounded: a user with more than 100 pages of sessions is not a device.
        for (let page = 1; page <= 100; page++) {
          const res = (await api.call('GET', `/api/v5/clients?username=${enc(username)}&limit=100&page=${page}`)) as { data?: { clientid: string }[]; meta?: { hasnext?: boolean } } | undefined;
          ids.push(...(res?.data ?? []).map((c) => c.clientid));
          if (!res?.meta?.hasnext) break;
        }
      } else {
        ids = [...clientIds];
      }
      let closed = 0;
      for (const id of ids) if ((await api.call('DELETE', `/api/v5/clients/${enc(id)}`)) !== undefined) closed++;
      return closed;
    },
  };
}

/**
 * VerneMQ HTTP API (vmq-admin over HTTP, the API key as the Basic username):
 * `GET /api/v1/session/show?--user=<user>&--client_id&--mountpoint` and
 * `GET /api/v1/session/disconnect?client-id=<id>` (`--cleanup` for a deleted user: its stored
 * messages and subscriptions go too).
 */
export function vernemqManagement(cfg: GatewayConfig['brokerHooks']['vernemq'], timeoutMs: number): ManagementClient {
  const api = caller(cfg.managementUrl, basic(cfg.apiKey, ''), timeoutMs);
  return {
    kind: 'vernemq',
    async disconnect(username, clientIds, options) {
      let ids: string[];
      if (clientIds === 'all') {
        const res = (await api.call('GET', `/api/v1/session/show?--user=${enc(username)}&--client_id&--mountpoint`)) as { table?: { client_id: string; mountpoint?: string }[] } | undefined;
        ids = (res?.table ?? []).filter((s) => !s.mountpoint).map((s) => s.client_id);
      } else {
        ids = [...clientIds];
      }
      let closed = 0;
      // vmq-admin puts the client id into a query of its own between double quotes.
      for (const id of ids.filter((i) => !i.includes('"'))) {
        await api.call('GET', `/api/v1/session/disconnect?client-id=${enc(id)}${options.cleanup ? '&--cleanup' : ''}`);
        closed++;
      }
      return closed;
    },
  };
}

/** The clients of the clusters whose management API is configured. */
export function managementClients(cfg: GatewayConfig['brokerHooks']): ManagementClient[] {
  const out: ManagementClient[] = [];
  if (cfg.rabbitmq.managementUrl) out.push(rabbitmqManagement(cfg.rabbitmq, cfg.managementTimeoutMs));
  if (cfg.vernemq.managementUrl) out.push(vernemqManagement(cfg.vernemq, cfg.managementTimeoutMs));
  if (cfg.emqx.managementUrl) out.push(emqxManagement(cfg.emqx, cfg.managementTimeoutMs));
  return out;
}
