// The broker's clients, sessions and retained messages through REST (docs/mqtt-broker.md "Broker clients
// and sessions") on the real gateway with real MQTT clients (mqtt.js, mosquitto_sub): pages by
// client id and topic with cursors, filters, one client's subscriptions, a kicked mosquitto_sub
// that exits, an MQTT 5 client told 0x98, a deleted offline session (its queue gone, no session
// present on return), a cleared retained message; 400, 401, 403, 404, 409; audited.
import { expect } from 'chai';
import type { MqttClient } from 'mqtt';
import { setTimeout as delay } from 'node:timers/promises';
import { SortedIds } from '../src/mqtt/sorted-ids.js';
import { ADMIN_PASSWORD, GOOD_PASSWORD, startGateway, type TestGateway } from './support/harness.js';
import { collect, connect, connackOf, endAllClients, startMosquittoSub, subscribe } from './support/mqtt-test-kit.js';

interface PageBody<T> {
  items: T[];
  nextCursor?: string;
}
interface ClientItem {
  clientId: string;
  username?: string;
  address: string;
  transport: string;
  protocolVersion: number;
  clean: boolean;
  connectedSince: string;
  subscriptions: number;
  queued: number;
  inflight: number;
}

describe('sorted client ids', () => {
  it('pages by id after a cursor and within a prefix, whatever the order they came in', () => {
    const ids = new SortedIds();
    for (const id of ['m', 'dev-2', 'a', 'dev-10', 'dev-1', 'z', 'dev-2']) ids.add(id);
    expect(ids.size).to.equal(6);
    expect(ids.page(undefined, '', 3)).to.deep.equal(['a', 'dev-1', 'dev-10']);
    expect(ids.page('dev-10', '', 3)).to.deep.equal(['dev-2', 'm', 'z']);
    expect(ids.page(undefined, 'dev-', 10)).to.deep.equal(['dev-1', 'dev-10', 'dev-2']);
    expect(ids.page('dev-1', 'dev-', 10)).to.deep.equal(['dev-10', 'dev-2']);
    expect(ids.page('b', 'dev-', 10)).to.deep.equal(['dev-1', 'dev-10', 'dev-2']);
    ids.delete('dev-10');
    ids.delete('nothing');
    expect(ids.page(undefined, 'dev-', 10)).to.deep.equal(['dev-1', 'dev-2']);
  });
});

describe('broker clients, sessions and retained messages (REST)', function () {
  this.timeout(30_000);
  let gw: TestGateway;
  let admin: string;
  before(async () => {
    gw = await startGateway();
    admin = await gw.login();
  });
  after(async () => {
    await endAllClients();
    await gw.stop();
  });
  afterEach(() => endAllClients());

  const asAdmin = { username: 'admin', password: ADMIN_PASSWORD };
  const get = <T>(path: string, token = admin) => gw.api<T>('GET', path, { token });
  const enc = encodeURIComponent;

  describe('clients', () => {
    it('pages the connected clients by id, filters by prefix and user, and shows one with its subscriptions', async () => {
      await gw.userWith([{ context: 'mqtt', resource: 'sensors/#', operation: 'readWrite' }], 'sensor-user');
      const c = await Promise.all(['dev-b', 'dev-a', 'other/1', 'dev-c'].map((clientId) => connect(gw.ports.mqtt, { ...asAdmin, clientId })));
      const mine = await connect(gw.ports.mqtt, { username: 'sensor-user', password: GOOD_PASSWORD, clientId: 'sensor-1', protocolVersion: 5 });
      await subscribe(c[1]!, ['plant/#', 'line/+/state'], 1);

      const first = await get<PageBody<ClientItem>>('/api/broker/clients?limit=2');
      expect(first.status).to.equal(200);
      expect(first.body.items.map((i) => i.clientId)).to.deep.equal(['dev-a', 'dev-b']);
      const second = await get<PageBody<ClientItem>>(`/api/broker/clients?limit=2&cursor=${first.body.nextCursor!}`);
      expect(second.body.items.map((i) => i.clientId)).to.deep.equal(['dev-c', 'other/1']);
      const third = await get<PageBody<ClientItem>>(`/api/broker/clients?limit=2&cursor=${second.body.nextCursor!}`);
      expect(third.body.items.map((i) => i.clientId)).to.deep.equal(['sensor-1']);
      expect(third.body.nextCursor).to.equal(undefined);

      expect((await get<PageBody<ClientItem>>('/api/broker/clients?prefix=dev-')).body.items.map((i) => i.clientId)).to.deep.equal(['dev-a', 'dev-b', 'dev-c']);
      const byUser = await get<PageBody<ClientItem>>('/api/broker/clients?username=sensor-user');
      expect(byUser.body.items).to.have.length(1);
      expect(byUser.body.items[0]).to.include({ clientId: 'sensor-1', username: 'sensor-user', address: '127.0.0.1', transport: 'tcp', protocolVersion: 5, clean: true });
      expect(Date.parse(byUser.body.items[0]!.connectedSince)).to.be.closeTo(Date.now(), 20_000);

      const one = await get<ClientItem & { subscriptionList: unknown[] }>(`/api/broker/clients/${enc("dev-a")}`);
      expect(one.status).to.equal(200);
      expect(one.body).to.include({ clientId: 'dev-a', username: 'admin', subscriptions: 2, protocolVersion: 4 });
      expect(one.body.subscriptionList).to.deep.equal([
        { topic: 'line/+/state', qos: 1 },
        { topic: 'plant/#', qos: 1 },
      ]);
      // A client id with a slash, URL-encoded.
      expect((await get<ClientItem>(`/api/broker/clients/${enc('other/1')}`)).body.clientId).to.equal('other/1');
      expect((await get('/api/broker/clients/nobody-here')).status).to.equal(404);

      // A client that left is not listed.
      await mine.endAsync();
      await waitFor(async () => (await get<PageBody<ClientItem>>('/api/broker/clients?username=sensor-user')).body.items.length === 0);
    });

    it('disconnects a mosquitto_sub: it exits, it is gone from the list, and the disconnect is audited with who did it', async () => {
      // MQTT 5: told 0x98, mosquitto_sub exits (an MQTT 3.1.1 one would reconnect: it cannot be told why).
      const sub = await startMosquittoSub(['-V', '5', '-h', '127.0.0.1', '-p', String(gw.ports.mqtt), '-u', 'admin', '-P', ADMIN_PASSWORD, '-i', 'kick-me', '-t', 'plant/#', '-q', '1']);
      try {
        expect((await get('/api/broker/clients/kick-me')).status).to.equal(200);
        const res = await gw.api('DELETE', '/api/broker/clients/kick-me', { token: admin });
        expect(res.status).to.equal(204);
        const exit = await sub.result;
        expect(exit.code).to.equal(0);
        expect(exit.stdout).to.include('Received DISCONNECT (152)');
        expect((await get('/api/broker/clients/kick-me')).status).to.equal(404);
        expect((await gw.api('DELETE', '/api/broker/clients/kick-me', { token: admin })).status).to.equal(404);
        await gw.services.audit.settled();
        const audit = await get<PageBody<{ action: string; actor?: { username: string }; details: Record<string, unknown> }>>('/api/audit?action=mqtt%20client%20disconnected');
        expect(audit.body.items[0]!.actor?.username).to.equal('admin');
        expect(audit.body.items[0]!.details).to.include({ clientId: 'kick-me', reason: 'administrative action' });
      } finally {
        sub.kill();
      }
    });

    it('tells an MQTT 5 client why: DISCONNECT with reason code 0x98 (administrative action)', async () => {
      const client = await connect(gw.ports.mqtt, { ...asAdmin, clientId: 'v5-client', protocolVersion: 5 });
      const reason = new Promise<number | undefined>((resolve) => client.once('disconnect', (packet) => resolve(packet.reasonCode)));
      expect((await gw.api('DELETE', '/api/broker/clients/v5-client', { token: admin })).status).to.equal(204);
      expect(await reason).to.equal(0x98);
    });
  });

  describe('sessions', () => {
    async function persistentClient(clientId: string): Promise<MqttClient> {
      const client = await connect(gw.ports.mqtt, { ...asAdmin, clientId, clean: false });
      await subscribe(client, 'queued/#', 1);
      return client;
    }

    it('lists offline sessions with their queue and expiry, deletes one (its queue is gone), refuses one whose client is online', async () => {
      const away = await persistentClient('away-1');
      await away.endAsync();
      const online = await persistentClient('online-1');
      const publisher = await connect(gw.ports.mqtt, asAdmin);
      for (let i = 0; i < 3; i++) await publisher.publishAsync('queued/x', `m${i}`, { qos: 1 });

      let session: { clientId: string; queued: number; connected: boolean; username?: string; expiresAt: string | null; subscriptions: number } | undefined;
      await waitFor(async () => {
        const page = await get<PageBody<NonNullable<typeof session>>>('/api/broker/sessions?connected=false&prefix=away-');
        session = page.body.items[0];
        return session?.queued === 3;
      });
      expect(session).to.include({ clientId: 'away-1', connected: false, username: 'admin', subscriptions: 1 });
      expect(Date.parse(session!.expiresAt!)).to.be.above(Date.now());
      const onlinePage = await get<PageBody<{ clientId: string; connected: boolean; expiresAt: string | null }>>('/api/broker/sessions?connected=true&prefix=online-');
      expect(onlinePage.body.items).to.deep.include({ ...onlinePage.body.items[0], clientId: 'online-1', connected: true, expiresAt: null });

      expect((await gw.api('DELETE', '/api/broker/sessions/online-1', { token: admin })).status).to.equal(409);
      expect((await gw.api('DELETE', '/api/broker/sessions/away-1', { token: admin })).status).to.equal(204);
      expect((await get<PageBody<unknown>>('/api/broker/sessions?prefix=away-')).body.items).to.deep.equal([]);
      expect((await gw.api('DELETE', '/api/broker/sessions/away-1', { token: admin })).status).to.equal(404);
      // Back again: no session, and none of the queued messages.
      const connack = await connackOf(gw.ports.mqtt, { ...asAdmin, clientId: 'away-1', clean: false });
      expect(connack).to.include({ code: 0, sessionPresent: false });
      await online.endAsync();
    });

    it('pages sessions by client id with a cursor', async () => {
      for (const id of ['pg-3', 'pg-1', 'pg-2']) await (await persistentClient(id)).endAsync();
      // Pages read what the store committed: a session of the last milliseconds may not be there yet.
      await waitFor(async () => (await get<PageBody<{ clientId: string }>>('/api/broker/sessions?prefix=pg-')).body.items.length === 3);
      const first = await get<PageBody<{ clientId: string }>>('/api/broker/sessions?prefix=pg-&limit=2');
      expect(first.body.items.map((s) => s.clientId)).to.deep.equal(['pg-1', 'pg-2']);
      const rest = await get<PageBody<{ clientId: string }>>(`/api/broker/sessions?prefix=pg-&limit=2&cursor=${first.body.nextCursor!}`);
      expect(rest.body.items.map((s) => s.clientId)).to.deep.equal(['pg-3']);
    });
  });

  describe('retained messages', () => {
    it('lists by filter in topic order with a cursor, previews text and binary, clears one', async () => {
      const publisher = await connect(gw.ports.mqtt, asAdmin);
      await publisher.publishAsync('site/b/temp', '22.5', { qos: 1, retain: true });
      await publisher.publishAsync('site/a/temp', '21.5', { qos: 1, retain: true });
      await publisher.publishAsync('site/a/raw', Buffer.from([0, 1, 2, 255]), { qos: 0, retain: true });
      await publisher.publishAsync('elsewhere/x', 'no', { qos: 0, retain: true });
      type Retained = { topic: string; payload: string; encoding: string; bytes: number; qos: number };
      let page: PageBody<Retained> | undefined;
      // Pages read what the store committed (QoS 0 publishes are not waited for): wait for all of them.
      await waitFor(async () => (await get<PageBody<Retained>>(`/api/broker/retained?filter=${enc('#')}`)).body.items.length === 4);
      page = (await get<PageBody<Retained>>(`/api/broker/retained?filter=${enc('site/+/temp')}`)).body;
      expect(page!.items.map((m) => [m.topic, m.payload, m.encoding, m.qos])).to.deep.equal([
        ['site/a/temp', '21.5', 'utf8', 1],
        ['site/b/temp', '22.5', 'utf8', 1],
      ]);
      const all = await get<PageBody<Retained>>(`/api/broker/retained?filter=${enc('site/#')}&limit=2`);
      expect(all.body.items.map((m) => m.topic)).to.deep.equal(['site/a/raw', 'site/a/temp']);
      expect(all.body.items[0]).to.include({ encoding: 'base64', payload: Buffer.from([0, 1, 2, 255]).toString('base64'), bytes: 4 });
      const next = await get<PageBody<Retained>>(`/api/broker/retained?filter=${enc('site/#')}&limit=2&cursor=${all.body.nextCursor!}`);
      expect(next.body.items.map((m) => m.topic)).to.deep.equal(['site/b/temp']);

      expect((await gw.api('DELETE', `/api/broker/retained?topic=${enc('site/a/temp')}`, { token: admin })).status).to.equal(204);
      expect((await get<PageBody<Retained>>(`/api/broker/retained?filter=${enc('site/+/temp')}`)).body.items.map((m) => m.topic)).to.deep.equal(['site/b/temp']);
      // A new subscriber gets no retained message for it any more.
      const subscriber = await connect(gw.ports.mqtt, asAdmin);
      const inbox = collect(subscriber);
      await subscribe(subscriber, 'site/+/temp', 1);
      await inbox.until((m) => m.topic === 'site/b/temp');
      await delay(100);
      expect(inbox.messages.map((m) => m.topic)).to.deep.equal(['site/b/temp']);
      expect((await gw.api('DELETE', `/api/broker/retained?topic=${enc('site/a/temp')}`, { token: admin })).status).to.equal(404);
      await gw.services.audit.settled();
      expect((await get<PageBody<{ details: { topic: string } }>>('/api/audit?action=mqtt%20retained%20message%20cleared')).body.items[0]!.details.topic).to.equal('site/a/temp');
    });
  });

  describe('bad input and permissions', () => {
    it('answers 400 to bad filters, topics, limits and cursors', async () => {
      for (const path of [
        `/api/broker/retained?filter=${enc('a/#/b')}`,
        `/api/broker/retained?filter=${enc('a/b+')}`,
        '/api/broker/retained?limit=101',
        '/api/broker/clients?limit=0',
        '/api/broker/clients?cursor=%2F%2F',
        '/api/broker/clients?cursor=QQ==',
        '/api/broker/sessions?connected=maybe',
        '/api/broker/clients?colour=red',
      ]) {
        expect((await get(path)).status, path).to.equal(400);
      }
      expect((await gw.api('DELETE', `/api/broker/retained?topic=${enc('a/+/b')}`, { token: admin })).status).to.equal(400);
      expect((await gw.api('DELETE', '/api/broker/retained', { token: admin })).status).to.equal(400);
    });

    it('needs a permission on each path: 401 without credential, 403 without it, read does not give write', async () => {
      expect((await gw.api('GET', '/api/broker/clients')).status).to.equal(401);
      const nobody = await gw.userWith([], 'broker-nobody');
      for (const path of ['/api/broker/clients', '/api/broker/sessions', '/api/broker/retained']) expect((await get(path, nobody.token)).status, path).to.equal(403);
      const viewer = await gw.userWith([{ context: 'http', resource: '/api/broker/#', operation: 'read' }], 'broker-viewer');
      expect((await get('/api/broker/clients', viewer.token)).status).to.equal(200);
      await connect(gw.ports.mqtt, { ...asAdmin, clientId: 'protected' });
      expect((await gw.api('DELETE', '/api/broker/clients/protected', { token: viewer.token })).status).to.equal(403);
      expect((await get('/api/broker/clients/protected')).status).to.equal(200);
    });
  });
});

describe('broker clients and sessions without stored state', function () {
  this.timeout(20_000);
  it('answers 409 for sessions and retained messages when mqtt.persistence.enabled is false, and lists clients', async () => {
    const gw = await startGateway({ overrides: { mqtt: { persistence: { enabled: false } } } });
    try {
      const admin = await gw.login();
      expect((await gw.api('GET', '/api/broker/sessions', { token: admin })).status).to.equal(409);
      expect((await gw.api('GET', '/api/broker/retained', { token: admin })).status).to.equal(409);
      expect((await gw.api('GET', '/api/broker/clients', { token: admin })).status).to.equal(200);
    } finally {
      await gw.stop();
    }
  });
});

async function waitFor(check: () => Promise<boolean>, ms = 5000): Promise<void> {
  for (let waited = 0; waited < ms; waited += 25) {
    if (await check()) return;
    await delay(25);
  }
  throw new Error('condition not met in time');
}
