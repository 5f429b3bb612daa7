// What the upgrade test (upgrade-from-releases.test.ts) gives an earlier release to keep, and how it
// checks that this build still has it and that it works: users with their passwords, a role, MFA,
// a token, a persistent session with 50 queued QoS 1 messages, a retained message, a bridge
// queueing for an upstream Mosquitto that is down, service files, Sparkplug history (kept while the
// host is away) and audit events. Everything through the releases' public surface (REST, MQTT),
// as a plant's clients would use it; what a release does not have yet (told by its files) is left out.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import mqtt, { type MqttClient } from 'mqtt';
import { stringify } from 'yaml';
import { startModbusServer, type ModbusTestServer } from './mapping-support.js';
import { edgePermissions, GROUP, pressService } from './sparkplug-support.js';
import { startMosquitto, type Mosquitto } from './support/mosquitto.js';
import type { ReleaseDaemon } from './support/release-daemon.js';
import { SparkplugHost } from './support/sparkplug-host.js';

const run = promisify(execFile);

export const ADMIN_PASSWORD = 'Upgrade-Admin-Passw0rd!';
const PASSWORDS = { alice: 'Alice-Passw0rd!', bob: 'Bob-Passw0rd!!', carol: 'Carol-Passw0rd!', bridge: 'Bridge-Passw0rd!', edge: 'Edge-Passw0rd!!', scada: 'Scada-Passw0rd!' };
const QUEUED = 50;
const BRIDGED = 20;
const KEPT_READINGS = [201, 202, 203, 204, 205];
const NODE = 'gw1';
const HOST_PERMISSIONS = [
  { context: 'mqtt', operation: 'read', resource: 'spBv1.0/#' },
  { context: 'mqtt', operation: 'write', resource: `spBv1.0/${GROUP}/NCMD/#` },
  { context: 'mqtt', operation: 'write', resource: 'spBv1.0/STATE/#' },
];

/** What a release can keep, told by the files of its build. */
export interface ReleaseFeatures {
  /** Retained messages and persistent sessions on disk (0.2.0 on; 0.1.0 kept them in memory). */
  brokerState: boolean;
  /** Service files through /api/services (0.2.0 on; 0.1.0 read the directory at start). */
  servicesApi: boolean;
  bridges: boolean;
  audit: boolean;
  sparkplug: boolean;
  sparkplugHistory: boolean;
}

export function featuresOf(releaseDir: string): ReleaseFeatures {
  const has = (path: string) => existsSync(join(releaseDir, 'dist/src', path));
  return {
    brokerState: has('mqtt/persistence'),
    servicesApi: has('mapping/service-catalog.js'),
    bridges: has('bridges'),
    audit: has('audit'),
    sparkplug: has('sparkplug'),
    sparkplugHistory: has('sparkplug/node-history.js'),
  };
}

/** A service file every release reads from its services directory: a Modbus connection to the PLC and a polled register. */
export function lineService(plcPort: number): string {
  return `description: line 1
resources:
  plc:
    type: Connection
    properties: {protocol: Modbus, configuration: {host: 127.0.0.1, port: ${plcPort}, unitId: 1, timeoutMs: 500}}
  counter:
    type: Endpoint
    properties: {connection: !ref plc, operation: read, address: {table: holding, address: 10, quantity: 1}, pollIntervalMs: 200}
`;
}

/** The peers of one release's run: the PLC of the Sparkplug node, the upstream broker of the bridge (persistent, so its subscriber's session outlives its stop). */
export interface Peers {
  plc: ModbusTestServer;
  upstream: Mosquitto;
}

export async function startPeers(): Promise<Peers> {
  const plc = await startModbusServer();
  plc.holding[5] = 215;
  plc.holding[10] = 50;
  const upstream = await startMosquitto({ persistence: true });
  // The site's subscriber upstream: a persistent session, so what the bridge forwards while it is
  // away waits for it.
  const sub = await mqtt.connectAsync({ host: '127.0.0.1', port: upstream.port, clientId: 'site-historian', clean: false, reconnectPeriod: 0 });
  await sub.subscribeAsync('site/#', { qos: 1 });
  await sub.endAsync();
  return { plc, upstream };
}

export async function stopPeers(peers: Peers | undefined): Promise<void> {
  await peers?.upstream.close();
  await peers?.plc.stop();
}

/** What the earlier release was given, for the checks on this build. */
export interface Planted {
  roleId: string;
  userIds: Record<string, string>;
  bobToken: string;
  carolSecret: string;
  /** Sparkplug values the node kept while the host was away (history releases). */
  kept?: number;
  /** When the earlier release was told to stop (set by the caller): what was read before is its. */
  stoppedAt: number;
}

async function totp(secret: string, stepsAhead = 0): Promise<string> {
  const at = Math.floor(Date.now() / 1000) + stepsAhead * 30;
  const { stdout } = await run('oathtool', ['--totp', '-b', secret, '--now', `@${at}`]);
  return stdout.trim();
}

async function until<T>(what: string, check: () => Promise<T | undefined>, ms = 20_000): Promise<T> {
  const deadline = Date.now() + ms;
  let last: unknown;
  for (;;) {
    const v = await check().catch((err: unknown) => ((last = err), undefined));
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms${last ? ` (${String(last)})` : ''}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function ok(res: { status: number; body: unknown }, statuses: number[], what: string): any {
  expect(statuses, `${what}: ${res.status} ${JSON.stringify(res.body)}`).to.include(res.status);
  return res.body;
}

const mqttOf = (d: ReleaseDaemon, options: mqtt.IClientOptions) => mqtt.connectAsync({ host: '127.0.0.1', port: d.ready.mqtt as number, reconnectPeriod: 0, connectTimeout: 10_000, ...options });

/**
 * A client whose messages are collected from the first packet on: a resumed session's queue can
 * arrive in the same read as the CONNACK, before connectAsync's caller could add a listener.
 */
async function collecting(options: mqtt.IClientOptions): Promise<{ client: MqttClient; received: string[] }> {
  const client = mqtt.connect({ host: '127.0.0.1', reconnectPeriod: 0, connectTimeout: 10_000, ...options });
  const received: string[] = [];
  client.on('message', (_t, payload) => received.push(payload.toString()));
  await new Promise<void>((resolve, reject) => {
    client.once('connect', () => resolve());
    client.once('error', reject);
    client.once('close', () => reject(new Error(`connection to ${options.port} closed before CONNACK`)));
  });
  return { client, received };
}

/**
 * Publishes QoS 1 messages all in flight at once, in order, and waits for every PUBACK: one at a
 * time, each would wait for its own group commit (releases since 0.5.0 acknowledge a copy for an
 * absent subscriber once it is on flash).
 */
async function publishAll(client: MqttClient, topic: string, count: number): Promise<void> {
  await Promise.all(Array.from({ length: count }, (_, i) => client.publishAsync(topic, String(i), { qos: 1 })));
}

function bridgeServiceText(upstreamPort: number): string {
  return stringify({
    resources: {
      cloud: {
        type: 'Bridge',
        properties: {
          remote: { urls: [`mqtt://127.0.0.1:${upstreamPort}`], protocolVersion: 4, keepaliveSeconds: 5, connectTimeoutMs: 1500, reconnectMinSeconds: 1, reconnectMaxSeconds: 1 },
          runAs: 'bridge-cloud',
          topics: [{ pattern: 'site/#', direction: 'out', qos: 1 }],
        },
      },
    },
  });
}

const sparkplugView = async (d: ReleaseDaemon, token: string) => (await d.api('GET', '/api/sparkplug/press.edge', { token })).body as any;

/** Gives the running earlier release everything to keep; the upstream broker is down meanwhile. */
export async function plant(d: ReleaseDaemon, peers: Peers, features: ReleaseFeatures): Promise<Planted> {
  const admin = await d.login('admin', ADMIN_PASSWORD);
  const role = ok(
    await d.api('POST', '/api/roles', {
      token: admin,
      body: { name: 'line-operators', isShared: true, permissions: [{ resource: 'plant/#', operation: 'readWrite', context: 'mqtt' }, { resource: '/api/session', operation: 'read', context: 'http' }] },
    }),
    [200, 201],
    'role',
  );
  const user = async (username: string, password: string, extra: Record<string, unknown>) =>
    ok(await d.api('POST', '/api/users', { token: admin, body: { username, password, identityProvider: 'local', ...extra } }), [201], `user ${username}`).id as string;
  const session = { resource: '/api/session', operation: 'read', context: 'http' };
  const userIds: Record<string, string> = {
    alice: await user('alice', PASSWORDS.alice, { roles: [role.id] }),
    bob: await user('bob', PASSWORDS.bob, { initialPermissions: [{ resource: 'plant/#', operation: 'readWrite', context: 'mqtt' }, { resource: 'site/#', operation: 'write', context: 'mqtt' }, session] }),
    carol: await user('carol', PASSWORDS.carol, { initialPermissions: [session] }),
  };
  const bobToken = ok(await d.api('POST', '/api/login', { body: { username: 'bob', password: PASSWORDS.bob, expireTimeInHours: 48, label: 'line-1 panel' } }), [200], 'bob login').token as string;

  // MFA: carol enrolled with an authenticator.
  const carol = await d.login('carol', PASSWORDS.carol);
  const uri = ok(await d.api('POST', '/api/mfa/enable', { token: carol }), [200], 'mfa enable').uri as string;
  const carolSecret = new URL(uri).searchParams.get('secret')!;
  ok(await d.api('POST', '/api/mfa/validate', { token: carol, body: { otp: await totp(carolSecret) } }), [200], 'mfa validate');

  // A persistent session away, 50 QoS 1 messages queued for it; a retained value.
  const panel = await mqttOf(d, { clientId: 'line1-panel', username: 'bob', password: PASSWORDS.bob });
  if (features.brokerState) {
    const hmi = await mqttOf(d, { clientId: 'line1-hmi', clean: false, username: 'alice', password: PASSWORDS.alice });
    await hmi.subscribeAsync('plant/line1/#', { qos: 1 });
    await hmi.endAsync();
    await publishAll(panel, 'plant/line1/count', QUEUED);
    await panel.publishAsync('plant/retained/setpoint', '42', { qos: 1, retain: true });
  }

  if (features.bridges) {
    ok(await d.api('POST', '/api/users', { token: admin, body: { username: 'bridge-cloud', password: PASSWORDS.bridge, identityProvider: 'local', initialPermissions: [{ resource: 'site/#', operation: 'read', context: 'mqtt' }] } }), [201], 'bridge user');
    await peers.upstream.stop();
    ok(await d.api('PUT', '/api/services/uplink', { token: admin, raw: bridgeServiceText(peers.upstream.port), headers: { 'content-type': 'application/yaml' } }), [200, 201], 'bridge service');
    await until('the bridge runs', async () => ((await d.api('GET', '/api/bridges/uplink.cloud', { token: admin })).status === 200 ? true : undefined));
    await publishAll(panel, 'site/line1/count', BRIDGED);
    await until(`${BRIDGED} messages in the bridge queue`, async () => ((await d.api('GET', '/api/bridges/uplink.cloud', { token: admin })).body.queue?.messages === BRIDGED ? true : undefined));
  }
  await panel.endAsync();

  let kept: number | undefined;
  if (features.sparkplug) {
    ok(await d.api('POST', '/api/users', { token: admin, body: { username: 'edge-gw1', password: PASSWORDS.edge, identityProvider: 'local', initialPermissions: edgePermissions(NODE) } }), [201], 'edge user');
    ok(await d.api('POST', '/api/users', { token: admin, body: { username: 'scada', password: PASSWORDS.scada, identityProvider: 'local', initialPermissions: HOST_PERMISSIONS } }), [201], 'host user');
    // The host is away: its STATE says so (retained), the edge node waits for it.
    const host = await mqttOf(d, { username: 'scada', password: PASSWORDS.scada, clientId: 'scada-host' });
    await host.publishAsync('spBv1.0/STATE/scada', JSON.stringify({ online: false, timestamp: Date.now() }), { qos: 1, retain: true });
    await host.endAsync();
    ok(await d.api('PUT', '/api/services/press', { token: admin, raw: pressService(peers.plc.port, { primaryHostId: 'scada', runAs: 'edge-gw1' }), headers: { 'content-type': 'application/yaml' } }), [200, 201], 'sparkplug service');
    if (features.sparkplugHistory) {
      for (const tenths of KEPT_READINGS) {
        peers.plc.holding[5] = tenths;
        await until(`the node reads ${tenths / 10}`, async () => ((await sparkplugView(d, admin)).devices?.[0]?.metrics?.[0]?.value === tenths / 10 ? true : undefined));
      }
      kept = await until('the readings kept', async () => {
        const h = (await sparkplugView(d, admin)).history;
        return h?.values >= KEPT_READINGS.length ? (h.values as number) : undefined;
      });
    }
  }
  return { roleId: role.id as string, userIds, bobToken, carolSecret, ...(kept !== undefined ? { kept } : {}), stoppedAt: Number.POSITIVE_INFINITY };
}

/** Checks on this build, started on the earlier release's data directory, that everything is there and works. */
export async function checkKept(d: ReleaseDaemon, peers: Peers, features: ReleaseFeatures, planted: Planted): Promise<void> {
  const admin = await d.login('admin', ADMIN_PASSWORD);

  // Sign-ins: passwords, the token, MFA with the authenticator enrolled before.
  await d.login('alice', PASSWORDS.alice);
  const bobSession = ok(await d.api('GET', '/api/session', { token: planted.bobToken }), [200], "bob's token of the earlier release");
  expect(bobSession.username).to.equal('bob');
  const first = ok(await d.api('POST', '/api/login', { body: { username: 'carol', password: PASSWORDS.carol } }), [200], 'carol login');
  expect(first.needsMfa, 'MFA still asked').to.equal(true);
  const second = ok(await d.api('POST', '/api/mfa/login', { body: { username: 'carol', secret: first.secret, otp: await totp(planted.carolSecret, 1) } }), [200], 'carol MFA login (the key sealed by the earlier release)');
  expect(second.token).to.be.a('string');

  // The role and its members.
  const role = ok(await d.api('GET', `/api/roles/${planted.roleId}`, { token: admin }), [200], 'role');
  expect(role.name).to.equal('line-operators');
  expect(role.permissions.map((p: { resource: string }) => p.resource).sort()).to.deep.equal(['/api/session', 'plant/#']);
  const alice = ok(await d.api('GET', `/api/users/${planted.userIds.alice}`, { token: admin }), [200], 'alice');
  expect(alice.roles.map((r: { id: string }) => r.id)).to.include(planted.roleId);

  // The persistent session: the 50 queued messages, in order.
  if (features.brokerState) {
    const { client: hmi, received } = await collecting({ port: d.ready.mqtt as number, clientId: 'line1-hmi', clean: false, username: 'alice', password: PASSWORDS.alice });
    try {
      await until(`${QUEUED} queued messages delivered`, async () => (received.length >= QUEUED ? true : undefined));
      expect(received).to.deep.equal(Array.from({ length: QUEUED }, (_, i) => String(i)));
    } finally {
      await hmi.endAsync();
    }
  }

  // A token as an MQTT password, and the retained value.
  const viewer = await mqttOf(d, { clientId: 'bob-viewer', username: 'bob', password: planted.bobToken });
  try {
    if (features.brokerState) {
      const retained = new Promise<{ payload: string; retain: boolean }>((resolve) => viewer.once('message', (_t, payload, packet) => resolve({ payload: payload.toString(), retain: packet.retain })));
      await viewer.subscribeAsync('plant/retained/#', { qos: 1 });
      expect(await Promise.race([retained, new Promise((r) => setTimeout(() => r('none within 10 s'), 10_000))])).to.deep.equal({ payload: '42', retain: true });
    }
  } finally {
    await viewer.endAsync();
  }

  // Service files: the one every release read from its directory runs (its PLC connected), and those written through the API.
  const services = ok(await d.api('GET', '/api/services', { token: admin }), [200], 'services') as { id: string }[];
  const expected = ['line', ...(features.bridges ? ['uplink'] : []), ...(features.sparkplug ? ['press'] : [])];
  expect(services.map((s) => s.id).sort()).to.include.members(expected);
  await until('the service file\'s PLC connection', async () => ((await d.api('GET', '/api/connections/line.plc', { token: admin })).body.currentState === 'connected' ? true : undefined));

  if (features.bridges) {
    const view = ok(await d.api('GET', '/api/bridges/uplink.cloud', { token: admin }), [200], 'bridge');
    expect(view.queue.messages, 'the bridge queue kept').to.equal(BRIDGED);
    await peers.upstream.start();
    const { client: historian, received: upstream } = await collecting({ port: peers.upstream.port, clientId: 'site-historian', clean: false });
    try {
      await until(`${BRIDGED} bridged messages upstream`, async () => (new Set(upstream).size >= BRIDGED ? true : undefined), 30_000);
      // At least once: a duplicate is allowed, the order is kept.
      expect([...new Set(upstream)]).to.deep.equal(Array.from({ length: BRIDGED }, (_, i) => String(i)));
      await until('the bridge queue drained', async () => ((await d.api('GET', '/api/bridges/uplink.cloud', { token: admin })).body.queue.messages === 0 ? true : undefined));
    } finally {
      await historian.endAsync();
    }
  }

  if (features.sparkplug) {
    const host = await SparkplugHost.connect(`mqtt://127.0.0.1:${d.ready.mqtt as number}`, GROUP, { username: 'scada', password: PASSWORDS.scada, protocolVersion: 4, clientId: 'scada-host' });
    try {
      if (planted.kept !== undefined) {
        // The node waits for the host again; what it kept is all there (this build keeps what it
        // reads meanwhile too: the count can only have grown).
        const kept = await until('the node waits for the host', async () => {
          const v = await sparkplugView(d, admin);
          return v.node?.state === 'waitingForHost' ? (v.history.values as number) : undefined;
        });
        expect(kept, 'the Sparkplug history kept across the upgrade').to.be.at.least(planted.kept);
      }
      const from = host.messages.length;
      await host.client.publishAsync('spBv1.0/STATE/scada', JSON.stringify({ online: true, timestamp: Date.now() }), { qos: 1, retain: true });
      const dbirth = await host.until((m) => m.type === 'DBIRTH' && m.edgeNodeId === NODE, 30_000, from);
      if (planted.kept !== undefined) {
        await until('the kept values delivered', async () => ((await sparkplugView(d, admin)).history.values === 0 ? true : undefined));
        const alias = dbirth.payload.metrics.find((m) => m.name === 'temperature')!.alias!;
        const historical = host.messages
          .filter((m) => m.index > dbirth.index && m.type === 'DDATA' && m.edgeNodeId === NODE)
          .flatMap((m) => m.payload.metrics.filter((x) => x.isHistorical && x.alias === alias));
        // Each value with the time it was read: the earlier release's readings, in order, then this build's.
        const earlier = historical.filter((m) => m.timestamp! <= planted.stoppedAt);
        expect(earlier.slice(-KEPT_READINGS.length).map((m) => Math.round(m.floatValue! * 10)), 'the readings of the earlier release, in order').to.deep.equal(KEPT_READINGS);
        expect(historical.slice(0, earlier.length), 'before anything read after the upgrade').to.deep.equal(earlier);
      }
    } finally {
      await host.client.publishAsync('spBv1.0/STATE/scada', '', { qos: 1, retain: true }).catch(() => undefined);
      await host.end();
    }
  }

  if (features.audit) {
    // Found by category: the index of the records the earlier release wrote is complete.
    const accounts = ok(await d.api('GET', '/api/audit?category=accounts&limit=500', { token: admin }), [200], 'audit by category');
    const created = accounts.items.filter((r: { action: string; user?: string }) => r.action === 'user created').map((r: { user?: string }) => r.user);
    expect(created, 'user created events of the earlier release').to.include.members(['alice', 'bob', 'carol']);
    const signIns = ok(await d.api('GET', '/api/audit?category=sign-in&user=bob&limit=500', { token: admin }), [200], 'audit sign-ins');
    expect(signIns.items.length, "bob's logins").to.be.greaterThan(0);
  }
}
