// Users of a site and the MQTT load of the site tests and `npm run bench -- site`: a steady rate
// of new connects through RabbitMQ (whose hooks reach the centrals through haproxy) beside
// established clients that keep publishing, with a fault injected in the middle; what is
// measured is when connects were refused and whether an established client was dropped.
import mqtt, { type MqttClient } from 'mqtt';
import { GOOD_PASSWORD } from './harness.js';
import type { SiteKit, SiteNode } from './site-kit.js';

export type Grant = { resource: string; operation: 'read' | 'write' | 'readWrite'; context: 'mqtt' | 'http' };

export interface SiteUser {
  id: string;
  username: string;
  /** A session token (720 h) issued at the central: a site record, valid on every gateway. */
  token: string;
  n: number;
}

let batch = 0;

/** `count` users created at `central` in one change (one batch), each with a token of its own. */
export async function siteUsers(central: SiteNode, count: number, grants: (n: number) => Grant[], options: { tokens?: boolean } = {}): Promise<SiteUser[]> {
  const prefix = `site-${process.pid}-${++batch}`;
  const admin = await central.adminToken();
  const body = Array.from({ length: count }, (_, n) => ({ username: `${prefix}-${n}`, password: GOOD_PASSWORD, identityProvider: 'local', initialPermissions: grants(n) }));
  const created = await central.api('POST', '/api/users/batch', { token: admin, body, timeoutMs: 60_000 });
  if (created.status !== 201) throw new Error(`batch of ${count} users: ${created.status} ${JSON.stringify(created.body)}`);
  const ids = created.body as string[];
  const users: SiteUser[] = body.map((b, n) => ({ id: ids[n]!, username: b.username, token: '', n }));
  if (options.tokens === false) return users;
  // Four logins at a time (each a scrypt and a change of the site).
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(4, count) }, async () => {
      for (let n = next++; n < count; n = next++) {
        const login = await central.api('POST', '/api/login', { body: { username: users[n]!.username, password: GOOD_PASSWORD, expireTimeInHours: 720 } });
        if (login.status !== 200) throw new Error(`login ${users[n]!.username}: ${login.status} ${JSON.stringify(login.body)}`);
        users[n]!.token = login.body.token;
      }
    }),
  );
  return users;
}

export interface LoadTrial {
  connects: number;
  refused: number;
  /** From the first refused connect to the last (0: none or one). */
  refusedWindowMs: number;
  /** Established clients whose connection closed during the trial. */
  dropped: number;
}

function tryConnect(port: number, username: string, password: string, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const client = mqtt.connect({ host: '127.0.0.1', port, username, password, protocolVersion: 4, reconnectPeriod: 0, connectTimeout: timeoutMs, clientId: `load-${Math.random().toString(16).slice(2, 12)}` });
    const done = (ok: boolean) => {
      client.removeAllListeners();
      client.on('error', () => undefined);
      client.end(true);
      resolve(ok);
    };
    client.once('connect', () => done(true));
    client.once('error', () => done(false));
    client.once('close', () => done(false));
  });
}

/**
 * Devices as docs/scaling-out.md has them: session tokens as their MQTT passwords (a connect
 * costs the hooks a hash lookup, not a scrypt: a central that takes over the other's share is not
 * flooded with password derivations). `users` beyond the established ones are cycled through by
 * the trial's connects; more than 5 s of them (RabbitMQ's auth cache here) so every connect asks
 * the hooks.
 */
export async function createSiteLoad(deps: { kit: SiteKit; users: number; established?: number }) {
  const { kit } = deps;
  const port = kit.rabbit!.node.mqttPort;
  const count = deps.established ?? 20;
  const users = await siteUsers(kit.centrals[0]!, deps.users, (n) => [{ resource: `load/${n}/#`, operation: 'readWrite', context: 'mqtt' }]);
  await kit.converged(15_000);
  const established: MqttClient[] = [];
  let dropped = 0;
  let counting = false;
  for (const u of users.slice(0, count)) {
    const client = await new Promise<MqttClient>((resolve, reject) => {
      const c = mqtt.connect({ host: '127.0.0.1', port, username: u.username, password: u.token, protocolVersion: 4, reconnectPeriod: 0, connectTimeout: 10_000, clientId: `est-${u.n}-${process.pid}` });
      c.once('connect', () => resolve(c));
      c.once('error', reject);
    });
    client.on('error', () => undefined);
    client.on('close', () => void (counting && dropped++));
    established.push(client);
  }
  // Established clients keep publishing on their topic (RabbitMQ keeps its decision per connection).
  const publishing = setInterval(() => {
    established.forEach((c, i) => c.connected && c.publish(`load/${users[i]!.n}/e`, 'x', { qos: 1 }));
  }, 250);
  const fresh = users.slice(count);
  let next = 0;

  return {
    users,
    async trial(t: { connectsPerSecond: number; warmupMs: number; afterMs: number; fault: () => Promise<void> }): Promise<LoadTrial> {
      dropped = 0;
      counting = true;
      const attempts: Promise<{ at: number; ok: boolean }>[] = [];
      const started = Date.now();
      const total = t.warmupMs + t.afterMs;
      let faulted = false;
      for (let i = 0; Date.now() - started < total; i++) {
        const due = started + (i * 1000) / t.connectsPerSecond;
        if (due > Date.now()) await new Promise((r) => setTimeout(r, due - Date.now()));
        if (!faulted && Date.now() - started >= t.warmupMs) {
          faulted = true;
          void t.fault();
        }
        const u = fresh[next++ % fresh.length]!;
        const at = Date.now();
        attempts.push(tryConnect(port, u.username, u.token, 10_000).then((ok) => ({ at, ok })));
      }
      const results = await Promise.all(attempts);
      counting = false;
      const refused = results.filter((r) => !r.ok).map((r) => r.at);
      return { connects: results.length, refused: refused.length, refusedWindowMs: refused.length > 1 ? Math.max(...refused) - Math.min(...refused) : 0, dropped };
    },
    async close(): Promise<void> {
      clearInterval(publishing);
      await Promise.all(established.map((c) => c.endAsync(true).catch(() => undefined)));
    },
  };
}
