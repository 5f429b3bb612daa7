// Transport and hardening tests of the broker: TLS (client certificates), WebSocket, MQTT 5,
// packet size, publish rate, authentication storms, slow consumers, queue bounds, stop().

import { expect } from 'chai';
import { once } from 'node:events';
import net from 'node:net';
import type { MqttClient } from 'mqtt';
import { WebSocket } from 'ws';
import {
  closed,
  collect,
  connackCode,
  connect,
  connectUrl,
  connectWithInbox,
  endAllClients,
  makeCerts,
  mqttConfig,
  runCli,
  startBroker,
  subscribe,
  withTimeout,
  type Certs,
  type TestBroker,
} from './support/mqtt-test-kit.js';
import { StaticMqttAccess } from './support/static-mqtt-access.js';

describe('mqtt broker transports and limits', function () {
  let certs: Certs;
  let access: StaticMqttAccess;
  let tb: TestBroker | undefined;

  before(async function () {
    certs = await makeCerts();
  });
  after(async function () {
    await certs?.cleanup();
  });
  beforeEach(function () {
    access = new StaticMqttAccess([
      { username: 'writer', password: 'writer-pw', permissions: [{ resource: 'data/#', operation: 'write' }] },
      { username: 'reader', password: 'reader-pw', permissions: [{ resource: 'data/#', operation: 'read' }] },
      { username: 'device-01', certificateFingerprints: [certs.clientFingerprint], permissions: [{ resource: 'data/device-01/#', operation: 'write' }] },
      { username: 'device-02', certificateByCommonName: true, permissions: [{ resource: 'data/device-02/#', operation: 'write' }] },
      { username: 'banned', password: 'banned-pw', forbidden: true },
    ]);
  });
  afterEach(async function () {
    await endAllClients();
    await tb?.stop();
    tb = undefined;
  });

  const login = (username: string, password: string, extra: object = {}) => ({ username, password, ...extra });
  const tlsOptions = (port: number, extra: object = {}) => ({ protocol: 'mqtts' as const, port, ca: certs.caCert, servername: 'localhost', ...extra });

  describe('TLS', function () {
    it('accepts password clients that present no certificate', async function () {
      tb = await startBroker(access, certs);
      const c = await connect(tb.tlsPort, tlsOptions(tb.tlsPort, login('writer', 'writer-pw')));
      expect(c.connected).to.equal(true);
      expect(access.credentialsSeen.at(-1)?.certificate).to.equal(undefined);
    });

    it('authenticates a trusted client certificate by fingerprint and passes its CN', async function () {
      tb = await startBroker(access, certs);
      const sub = await connect(tb.port, login('reader', 'reader-pw'));
      const inbox = collect(sub);
      await subscribe(sub, 'data/#', 1);
      const dev = await connect(tb.tlsPort, tlsOptions(tb.tlsPort, { key: certs.clientKey, cert: certs.clientCert }));
      expect(access.credentialsSeen.at(-1)).to.deep.include({ certificate: { fingerprint256: certs.clientFingerprint, commonName: 'device-01' } });
      await dev.publishAsync('data/device-01/temp', '21.5', { qos: 1 });
      expect(await inbox.until(() => true)).to.deep.equal({ topic: 'data/device-01/temp', payload: '21.5' });
      const gone = closed(dev);
      dev.publish('data/device-02/temp', 'not mine');
      await gone;
    });

    it('ignores a certificate from an untrusted CA until the trusted list is refreshed', async function () {
      tb = await startBroker(access, certs);
      const other = { key: certs.otherClientKey, cert: certs.otherClientCert };
      // The certificate does not verify: treated as no certificate, i.e. anonymous -> 4.
      expect(await connackCode(tb.tlsPort, tlsOptions(tb.tlsPort, other))).to.equal(4);
      expect(access.authCalls).to.equal(0);
      tb.trusted.push(certs.otherCaCert);
      tb.broker.refreshTls();
      expect(await connackCode(tb.tlsPort, tlsOptions(tb.tlsPort, other))).to.equal(0);
      expect(access.credentialsSeen.at(-1)?.certificate?.commonName).to.equal('device-02');
    });

    it('works with mosquitto_pub and a client certificate', async function () {
      tb = await startBroker(access, certs);
      const sub = await connect(tb.port, login('reader', 'reader-pw'));
      const inbox = collect(sub);
      await subscribe(sub, 'data/#', 1);
      const out = await runCli('mosquitto_pub', [
        '-h', '127.0.0.1', '-p', String(tb.tlsPort), '--cafile', certs.paths.caCert, '--cert', certs.paths.clientCert,
        '--key', certs.paths.clientKey, '-t', 'data/device-01/cli', '-m', 'over-tls', '-q', '1',
      ]);
      expect(out.code, out.stderr).to.equal(0);
      expect(await inbox.until(() => true)).to.deep.equal({ topic: 'data/device-01/cli', payload: 'over-tls' });
    });
  });

  describe('WebSocket', function () {
    it('reads a packet that arrives in several WebSocket messages (the CONNACK comes)', async function () {
      tb = await startBroker(access, certs);
      const ws = new WebSocket(`ws://127.0.0.1:${tb.httpPort}/mqtt`, 'mqtt');
      await once(ws, 'open');
      // CONNECT (MQTT 3.1.1, clean session, keepalive 60, client id "ws") without credentials, in three messages.
      const connect = Buffer.from([0x10, 0x0e, 0x00, 0x04, 0x4d, 0x51, 0x54, 0x54, 0x04, 0x02, 0x00, 0x3c, 0x00, 0x02, 0x77, 0x73]);
      const reply = withTimeout(once(ws, 'message') as Promise<[Buffer]>, 3000, 'no CONNACK');
      for (const part of [connect.subarray(0, 1), connect.subarray(1, 2), connect.subarray(2)]) ws.send(part);
      const [first] = await reply;
      expect(first[0]).to.equal(0x20);
      ws.terminate();
    });

    it('serves MQTT at ws://127.0.0.1:PORT/mqtt with the same rules', async function () {
      tb = await startBroker(access, certs);
      const url = `ws://127.0.0.1:${tb.httpPort}/mqtt`;
      const sub = await connectUrl(url, { ...login('reader', 'reader-pw'), reconnectPeriod: 0, protocolVersion: 4, clientId: 'ws-sub' });
      const inbox = collect(sub);
      expect(await subscribe(sub, ['data/#', 'other/#'], 1)).to.deep.equal([1, 128]);
      const pub = await connect(tb.port, login('writer', 'writer-pw'));
      await pub.publishAsync('data/ws', 'via-ws', { qos: 1 });
      expect(await inbox.until(() => true)).to.deep.equal({ topic: 'data/ws', payload: 'via-ws' });
      let refused: unknown;
      await connectUrl(url, { ...login('reader', 'bad'), reconnectPeriod: 0, protocolVersion: 4 }).catch((err: unknown) => (refused = err));
      expect((refused as { code?: number }).code).to.equal(4);
    });

    it('leaves upgrades of other paths to other listeners', async function () {
      tb = await startBroker(access, certs);
      tb.httpServer.on('upgrade', (req, socket) => {
        if (req.url === '/other') socket.end('HTTP/1.1 418 I am a teapot\r\nConnection: close\r\n\r\n');
      });
      const s = net.connect(tb.httpPort, '127.0.0.1');
      s.write('GET /other HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n');
      let text = '';
      s.on('data', (d: Buffer) => (text += d.toString()));
      await withTimeout(once(s, 'close'), 2000, 'no answer');
      expect(text).to.match(/^HTTP\/1.1 418/);
    });
  });

  describe('protocol versions and limits', function () {
    it('speaks MQTT 5: CONNACK 0 announcing the configured limits, 0x86 / 0x87 refusals', async function () {
      tb = await startBroker(access, certs);
      const c = await connect(tb.port, login('writer', 'writer-pw', { protocolVersion: 5 }));
      const props = (c as unknown as { connackPacket?: { properties?: Record<string, unknown> } }).connackPacket?.properties ?? {};
      const cfg = mqttConfig();
      expect(props).to.include({ receiveMaximum: cfg.maxInflightMessages, maximumPacketSize: cfg.maxPacketSizeBytes, topicAliasMaximum: cfg.topicAliasMaximum });
      expect(await connackCode(tb.port, login('writer', 'wrong', { protocolVersion: 5 }))).to.equal(0x86);
      expect(await connackCode(tb.port, login('nobody', 'x', { protocolVersion: 5 }))).to.equal(0x86);
      expect(await connackCode(tb.port, login('banned', 'banned-pw', { protocolVersion: 5 }))).to.equal(0x87);
      expect(await connackCode(tb.port, login('banned', 'banned-pw', { protocolVersion: 4 }))).to.equal(5);
    });

    it('MQTT 5: a publisher uses topic aliases up to the announced maximum, checked and delivered under the full topic', async function () {
      tb = await startBroker(access, certs, { topicAliasMaximum: 4 });
      const sub = await connect(tb.port, login('reader', 'reader-pw'));
      const inbox = collect(sub);
      await subscribe(sub, 'data/#', 1);
      const pub = await connect(tb.port, login('writer', 'writer-pw', { protocolVersion: 5 }));
      const announced = (pub as unknown as { connackPacket: { properties?: { topicAliasMaximum?: number } } }).connackPacket.properties?.topicAliasMaximum;
      expect(announced).to.equal(4);
      await pub.publishAsync('data/line-7/press/temperature', 'set', { qos: 1, properties: { topicAlias: 4 } });
      await pub.publishAsync('', 'by alias', { qos: 1, properties: { topicAlias: 4 } });
      await inbox.until((m) => m.payload === 'by alias');
      expect(inbox.messages).to.deep.equal([
        { topic: 'data/line-7/press/temperature', payload: 'set' },
        { topic: 'data/line-7/press/temperature', payload: 'by alias' },
      ]);
      // An alias naming a topic the client may not write is refused like the topic itself.
      const err = await pub.publishAsync('elsewhere/x', 'no', { qos: 1, properties: { topicAlias: 1 } }).then(() => undefined, (e: { code?: number }) => e);
      expect(err?.code).to.equal(0x87);
    });

    it('MQTT 5: a forbidden QoS 1 publish gets PUBACK 0x87 and the client stays connected; MQTT 3.1.1 is disconnected', async function () {
      tb = await startBroker(access, certs);
      const v5 = await connect(tb.port, login('writer', 'writer-pw', { protocolVersion: 5 }));
      const refused = await v5.publishAsync('elsewhere/x', 'no', { qos: 1 }).then(
        () => undefined,
        (err: { code?: number }) => err,
      );
      expect(refused?.code).to.equal(0x87);
      expect(v5.connected).to.equal(true);
      await v5.publishAsync('data/ok', 'yes', { qos: 1 });
      const v4 = await connect(tb.port, login('writer', 'writer-pw'));
      const gone = closed(v4, 2000);
      v4.publish('elsewhere/x', 'no', { qos: 1 });
      await gone;
    });

    it('refuses an unknown protocol version with return code 1, logs and counts it', async function () {
      tb = await startBroker(access, certs);
      const socket = net.connect(tb.port, '127.0.0.1');
      await once(socket, 'connect');
      // CONNECT, protocol name MQTT, level 7, clean session, keepalive 60, client id "v7".
      socket.write(Buffer.from([0x10, 0x0e, 0x00, 0x04, 0x4d, 0x51, 0x54, 0x54, 0x07, 0x02, 0x00, 0x3c, 0x00, 0x02, 0x76, 0x37]));
      const [reply] = (await withTimeout(once(socket, 'data'), 2000, 'no CONNACK')) as [Buffer];
      expect([...reply.subarray(0, 4)]).to.deep.equal([0x20, 0x02, 0x00, 0x01]);
      socket.destroy();
      expect(tb.broker.stats().connectsRefusedByReason.unsupported_version).to.equal(1);
      expect(access.authCalls).to.equal(0);
    });

    it('accepts MQTT 3.1 (MQIsdp)', async function () {
      tb = await startBroker(access, certs);
      expect(await connackCode(tb.port, login('writer', 'writer-pw', { protocolVersion: 3, protocolId: 'MQIsdp', clientId: 'short-v31' }))).to.equal(0);
    });

    it('disconnects a client sending a packet above maxPacketSizeBytes', async function () {
      tb = await startBroker(access, certs, { maxPacketSizeBytes: 1024 });
      const ok = await connect(tb.port, login('writer', 'writer-pw'));
      await ok.publishAsync('data/small', Buffer.alloc(900), { qos: 1 });
      const gone = closed(ok);
      ok.publish('data/big', Buffer.alloc(2000), { qos: 1 });
      await gone;
      expect(tb.broker.stats().oversizeDisconnects).to.equal(1);
    });

    it('refuses an oversize packet from its header, without waiting for the body', async function () {
      tb = await startBroker(access, certs, { maxPacketSizeBytes: 1024 });
      const c = await connect(tb.port, login('writer', 'writer-pw'));
      const gone = closed(c);
      // PUBLISH announcing 268,435,455 bytes; the body never comes.
      (c as unknown as { stream: net.Socket }).stream.write(Buffer.from([0x30, 0xff, 0xff, 0xff, 0x7f]));
      await gone;
      await tb.waitForLog((l) => l.message === 'mqtt packet too large, disconnecting' && l.bytes === 268435460);
    });

    it('closes a connection that sends no CONNECT within connectTimeoutMs', async function () {
      tb = await startBroker(access, certs, { connectTimeoutMs: 200 });
      const s = net.connect(tb.port, '127.0.0.1');
      s.on('error', () => {});
      const started = Date.now();
      await withTimeout(once(s, 'close'), 2000, 'idle connection not closed');
      expect(Date.now() - started).to.be.within(150, 2000);
    });

    it('slows a publisher over maxPublishesPerSecond down, losing nothing and keeping it connected', async function () {
      tb = await startBroker(access, certs, { maxPublishesPerSecond: 50, rateLimitGraceSeconds: 30 });
      const sub = await connect(tb.port, login('reader', 'reader-pw'));
      const inbox = collect(sub);
      await subscribe(sub, 'data/#', 1);
      const burst = await connect(tb.port, login('writer', 'writer-pw'));
      // A burst of twice the allowance: the first 50 go at once, the rest as tokens come.
      for (let i = 0; i < 100; i++) burst.publish('data/burst', String(i), { qos: 1 });
      await inbox.until((m) => m.topic === 'data/burst' && m.payload === '99', 10_000);
      expect(inbox.messages.filter((m) => m.topic === 'data/burst')).to.have.length(100);
      expect(burst.connected).to.equal(true);
      expect(tb.broker.stats().rateLimitPauses).to.be.at.least(1);
      expect(tb.broker.stats().rateLimitDisconnects).to.equal(0);
    });

    it('keeps reading a publisher slowed in the middle of a batch: every publish of a window of 20 in flight is acknowledged, in order', async function () {
      // Over the allowance with many packets in one read: each must finish and let aedes read on
      // (an aedes pause() there lost the count of the batch's packets and stalled the client for good).
      this.timeout(40_000);
      tb = await startBroker(access, certs, { maxPublishesPerSecond: 200, rateLimitGraceSeconds: 30 });
      const sub = await connect(tb.port, login('reader', 'reader-pw'));
      const inbox = collect(sub);
      await subscribe(sub, 'data/#', 1);
      const publisher = await connect(tb.port, login('writer', 'writer-pw'));
      const COUNT = 1000;
      let sent = 0;
      let acked = 0;
      await withTimeout(
        new Promise<void>((resolve, reject) => {
          const next = () => {
            while (sent < COUNT && sent - acked < 20) {
              publisher.publish('data/window', String(sent++), { qos: 1 }, (err) => {
                if (err) return reject(err);
                if (++acked === COUNT) resolve();
                else next();
              });
            }
          };
          next();
        }),
        20_000,
        'acknowledgements stopped',
      ).catch((err: Error) => {
        throw new Error(`${err.message} (acknowledged ${acked} of ${COUNT})`);
      });
      await inbox.until((m) => m.topic === 'data/window' && m.payload === String(COUNT - 1), 10_000);
      expect(inbox.messages.filter((m) => m.topic === 'data/window').map((m) => Number(m.payload))).to.deep.equal(Array.from({ length: COUNT }, (_, i) => i));
      expect(tb.broker.stats().rateLimitPauses).to.be.at.least(1);
      expect(publisher.connected).to.equal(true);
    });

    for (const protocolVersion of [4, 5] as const) {
      it(`disconnects a publisher that stays over its allowance past rateLimitGraceSeconds, while other clients keep working (MQTT ${protocolVersion === 5 ? '5: DISCONNECT 0x96' : '3.1.1'})`, async function () {
        tb = await startBroker(access, certs, { maxPublishesPerSecond: 50, rateLimitGraceSeconds: 0 });
        const sub = await connect(tb.port, login('reader', 'reader-pw'));
        const inbox = collect(sub);
        await subscribe(sub, 'data/#', 1);
        const flooder = await connect(tb.port, login('writer', 'writer-pw', { protocolVersion }));
        const told = new Promise<number | undefined>((resolve) => flooder.once('disconnect', (packet) => resolve(packet.reasonCode)));
        const gone = closed(flooder, 2000);
        for (let i = 0; i < 500; i++) flooder.publish('data/flood', String(i));
        await gone;
        if (protocolVersion === 5) expect(await withTimeout(told, 100, 'no DISCONNECT')).to.equal(0x96);
        expect(tb.broker.stats().rateLimitDisconnects).to.equal(1);
        expect(inbox.messages.length).to.be.at.most(51);
        const calm = await connect(tb.port, login('writer', 'writer-pw', { protocolVersion }));
        await calm.publishAsync('data/calm', 'fine', { qos: 1 });
        await inbox.until((m) => m.topic === 'data/calm');
        expect(tb.logs.some((l) => l.message === 'mqtt publish rate limit exceeded, disconnecting')).to.equal(true);
      });
    }

    it('lets a reboot storm of 1,000 clients all in, with at most maxConcurrentAuth checks at once', async function () {
      this.timeout(60_000);
      tb = await startBroker(access, certs, { maxConcurrentAuth: 8 });
      // Each check takes long enough that the 1,000 arrivals fill every slot while it runs.
      access.authDelayMs = 20;
      const port = tb.port;
      const clients = await Promise.all(
        Array.from({ length: 1000 }, (_, i) => connect(port, login('writer', 'writer-pw', { clientId: `storm-${i}`, connectTimeout: 30_000 }))),
      );
      expect(clients.every((c) => c.connected)).to.equal(true);
      expect(tb.broker.stats().clients).to.equal(1000);
      expect(access.maxAuthActive).to.be.at.most(8);
      expect(access.maxAuthActive).to.equal(8);
    });

    it('disconnects a subscriber that stops reading (slow consumer) after the drain timeout', async function () {
      this.timeout(20_000);
      tb = await startBroker(access, certs, { maxPacketSizeBytes: 1_048_576, drainTimeoutMs: 300 });
      const slow = await connect(tb.port, login('reader', 'reader-pw', { clientId: 'slow-consumer' }));
      await subscribe(slow, 'data/#');
      const healthy = await connect(tb.port, login('reader', 'reader-pw'));
      const inbox = collect(healthy);
      await subscribe(healthy, 'data/#');
      (slow as unknown as { stream: net.Socket }).stream.pause(); // never reads again
      const pub = await connect(tb.port, login('writer', 'writer-pw'));
      const payload = Buffer.alloc(512 * 1024, 1);
      const dropped = tb.waitForLog((l) => l.message === 'mqtt client disconnected' && l.clientId === 'slow-consumer', 15_000);
      let gone = false;
      void dropped.then(() => (gone = true), () => undefined);
      // Bounded: at most 200 x 512 KiB, stops as soon as the slow consumer was dropped.
      for (let i = 0; i < 200 && !gone; i++) await pub.publishAsync('data/bulk', payload, { qos: 1 });
      await dropped;
      await pub.publishAsync('data/after', 'still flowing', { qos: 1 });
      await inbox.until((m) => m.topic === 'data/after', 10_000);
    });

    it('bounds the offline queue of a persistent session to maxQueuedMessages', async function () {
      tb = await startBroker(access, certs, { maxQueuedMessages: 10 });
      const persistent = await connect(tb.port, login('reader', 'reader-pw', { clientId: 'persistent-1', clean: false }));
      await subscribe(persistent, 'data/q/#', 1);
      await persistent.endAsync();
      const barrier = await connect(tb.port, login('reader', 'reader-pw'));
      const seen = collect(barrier);
      await subscribe(barrier, 'data/q/#', 1);
      const pub = await connect(tb.port, login('writer', 'writer-pw'));
      for (let i = 1; i <= 30; i++) await pub.publishAsync(`data/q/${i}`, String(i), { qos: 1 });
      await seen.until((m) => m.payload === '30');
      expect(tb.broker.stats().queueDrops).to.equal(20);
      const back = await connectWithInbox(tb.port, login('reader', 'reader-pw', { clientId: 'persistent-1', clean: false }));
      await back.inbox.until((m) => m.payload === '10');
      expect(back.inbox.messages.map((m) => m.payload)).to.deep.equal(['1', '2', '3', '4', '5', '6', '7', '8', '9', '10']);
    });
  });

  describe('stop()', function () {
    it('disconnects TCP, TLS and WebSocket clients and half-open sockets, in bounded time', async function () {
      tb = await startBroker(access, certs);
      const clients: MqttClient[] = [
        await connect(tb.port, login('writer', 'writer-pw')),
        await connect(tb.tlsPort, tlsOptions(tb.tlsPort, login('writer', 'writer-pw'))),
        await connectUrl(`ws://127.0.0.1:${tb.httpPort}/mqtt`, { ...login('writer', 'writer-pw'), reconnectPeriod: 0, protocolVersion: 4 }),
      ];
      const idle = net.connect(tb.port, '127.0.0.1');
      idle.on('error', () => {});
      await once(idle, 'connect');
      const allClosed = Promise.all([...clients.map((c) => closed(c, 5000)), withTimeout(once(idle, 'close'), 5000, 'idle socket open')]);
      const started = Date.now();
      await tb.broker.stop();
      await allClosed;
      expect(Date.now() - started).to.be.below(5000);
      expect(tb.broker.stats().clients).to.equal(0);
    });
  });
});
