// MQTT 5 on the broker (issue 12 point 2): properties carried end to end between clients and
// through the daemon's data plane, version interop (3.1.1 ↔ 5), and the permission rules
// (publish prefix, live revocation) for MQTT 5 exactly as for 3.1.1.
import { rmSync } from 'node:fs';
import { expect } from 'chai';
import mqtt, { type IPublishPacket } from 'mqtt';
import { clientOptions, closed, connect, endAllClients, makeCerts, runCli, startBroker, startMosquittoSub, withTimeout, type Certs, type TestBroker } from './support/mqtt-test-kit.js';
import { StaticMqttAccess } from './support/static-mqtt-access.js';
import { openStore } from '../src/store/index.js';
import { tempDir } from './support/harness.js';

describe('MQTT 5', function () {
  let certs: Certs;
  let access: StaticMqttAccess;
  let tb: TestBroker;

  before(async () => {
    certs = await makeCerts();
  });
  after(async () => {
    await certs?.cleanup();
  });
  beforeEach(async () => {
    access = new StaticMqttAccess([
      { username: 'writer', password: 'writer-pw', permissions: [{ resource: 'data/#', operation: 'write' }] },
      { username: 'reader', password: 'reader-pw', permissions: [{ resource: 'data/#', operation: 'read' }] },
      { username: 'prefixed', password: 'prefixed-pw', publishPrefix: 'tenant-a/', permissions: [{ resource: 'tenant-a/#', operation: 'readWrite' }] },
    ]);
    tb = await startBroker(access, certs);
  });
  afterEach(async () => {
    await endAllClients();
    await tb.stop();
  });

  const v5 = (username: string, password: string, extra: object = {}) => ({ username, password, protocolVersion: 5 as const, ...extra });
  const nextMessage = (client: Awaited<ReturnType<typeof connect>>) =>
    withTimeout(
      new Promise<[string, Buffer, IPublishPacket]>((resolve) => client.once('message', (topic, payload, packet) => resolve([topic, payload, packet]))),
      3000,
      'no message',
    );

  it('carries user properties, content type, response topic, correlation data and message expiry between MQTT 5 clients', async () => {
    const reader = await connect(tb.port, v5('reader', 'reader-pw'));
    await reader.subscribeAsync('data/#', { qos: 1 });
    const writer = await connect(tb.port, v5('writer', 'writer-pw'));
    const message = nextMessage(reader);
    await writer.publishAsync('data/cmd', 'go', {
      qos: 1,
      properties: {
        userProperties: { site: 'hall-b', line: ['1', '2'] },
        contentType: 'text/plain',
        responseTopic: 'data/cmd/reply',
        correlationData: Buffer.from('req-42'),
        messageExpiryInterval: 60,
      },
    });
    const [topic, payload, packet] = await message;
    expect(topic).to.equal('data/cmd');
    expect(payload.toString()).to.equal('go');
    expect(packet.properties?.userProperties).to.deep.equal({ site: 'hall-b', line: ['1', '2'] });
    expect(packet.properties?.contentType).to.equal('text/plain');
    expect(packet.properties?.responseTopic).to.equal('data/cmd/reply');
    expect(packet.properties?.correlationData?.toString()).to.equal('req-42');
    expect(packet.properties?.messageExpiryInterval).to.be.within(1, 60);
  });

  it('interoperates: a 3.1.1 publisher reaches an MQTT 5 subscriber and back', async () => {
    const sub5 = await connect(tb.port, v5('reader', 'reader-pw'));
    await sub5.subscribeAsync('data/x', { qos: 1 });
    const sub4 = await connect(tb.port, { username: 'reader', password: 'reader-pw' });
    await sub4.subscribeAsync('data/y', { qos: 1 });
    const pub4 = await connect(tb.port, { username: 'writer', password: 'writer-pw' });
    const pub5 = await connect(tb.port, v5('writer', 'writer-pw'));
    const at5 = nextMessage(sub5);
    await pub4.publishAsync('data/x', 'from 3.1.1', { qos: 1 });
    expect((await at5)[1].toString()).to.equal('from 3.1.1');
    const at4 = nextMessage(sub4);
    await pub5.publishAsync('data/y', 'from 5', { qos: 1, properties: { userProperties: { a: 'b' } } });
    const [, payload, packet] = await at4;
    expect(payload.toString()).to.equal('from 5');
    expect(packet.properties, '3.1.1 has no properties').to.equal(undefined);
  });

  it('interoperates with mosquitto_pub / mosquitto_sub: 3.1.1 → 5 and 5 → 3.1.1, MQTT 5 properties between two MQTT 5 clients', async () => {
    const host = ['-h', '127.0.0.1', '-p', String(tb.port)];
    const format = ['-F', '%t|%p|%C|%R|%P'];
    const sub5 = await startMosquittoSub([...host, '-V', 'mqttv5', '-u', 'reader', '-P', 'reader-pw', '-t', 'data/to5/#', '-q', '1', '-C', '2', ...format]);
    const sub4 = await startMosquittoSub([...host, '-V', 'mqttv311', '-u', 'reader', '-P', 'reader-pw', '-t', 'data/to4/#', '-q', '1', '-C', '1', ...format]);
    try {
      const pub = (version: string, topic: string, extra: string[] = []) =>
        runCli('mosquitto_pub', [...host, '-V', version, '-u', 'writer', '-P', 'writer-pw', '-t', topic, '-m', `from ${version}`, '-q', '1', ...extra]);
      const v5props = ['-D', 'publish', 'content-type', 'text/plain', '-D', 'publish', 'response-topic', 'data/reply', '-D', 'publish', 'user-property', 'site', 'hall-b'];
      for (const result of [await pub('mqttv311', 'data/to5/a'), await pub('mqttv5', 'data/to5/b', v5props), await pub('mqttv5', 'data/to4/c', v5props)]) {
        expect(result.code, result.stderr).to.equal(0);
      }
      const lines = (out: { stdout: string }) => out.stdout.split('\n').filter((l) => l.startsWith('data/'));
      expect(lines(await sub5.result)).to.deep.equal(['data/to5/a|from mqttv311|||', 'data/to5/b|from mqttv5|text/plain|data/reply|site:hall-b']);
      expect(lines(await sub4.result), '3.1.1 carries no properties').to.deep.equal(['data/to4/c|from mqttv5|||']);
    } finally {
      sub5.kill();
      sub4.kill();
    }
  });

  it('message expiry holds in the offline queue and for retained messages, across a broker restart on the store', async () => {
    const dir = tempDir('gatewayd-expiry-');
    let store = openStore({ dir });
    let durable = await startBroker(access, certs, {}, { store });
    try {
      const session = v5('reader', 'reader-pw', { clientId: 'expiring-reader', clean: false, properties: { sessionExpiryInterval: 3600 } });
      const first = await connect(durable.port, session);
      await first.subscribeAsync('data/q/#', { qos: 1 });
      await first.endAsync();
      const writer = await connect(durable.port, v5('writer', 'writer-pw'));
      const publishedAt = Date.now();
      await writer.publishAsync('data/q/short', 'short', { qos: 1, properties: { messageExpiryInterval: 1 } });
      await writer.publishAsync('data/q/long', 'long', { qos: 1, properties: { messageExpiryInterval: 3600 } });
      await writer.publishAsync('data/q/none', 'none', { qos: 1 });
      // Each QoS 1 PUBACK waits for a group commit here (a session away): the retained one's second starts now.
      const retainedShortAt = Date.now();
      await writer.publishAsync('data/r/short', 'short', { qos: 1, retain: true, properties: { messageExpiryInterval: 1 } });
      await writer.publishAsync('data/r/none', 'none', { qos: 1, retain: true });
      await writer.endAsync();
      await durable.stop();
      await store.close();
      // The one-second interval has to pass (no event marks it).
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, Math.max(publishedAt, retainedShortAt) + 1100 - Date.now())));
      store = openStore({ dir });
      durable = await startBroker(access, certs, {}, { store });

      // Listening before the CONNACK: the queue is replayed right after it.
      const back = mqtt.connect(clientOptions(durable.port, session));
      const queued: IPublishPacket[] = [];
      back.on('message', (_t, _p, packet) => queued.push(packet));
      await withTimeout(new Promise((resolve) => back.once('connect', resolve)), 5000, 'not connected');
      const reader = await connect(durable.port, v5('reader', 'reader-pw'));
      const retained: string[] = [];
      reader.on('message', (topic) => retained.push(topic));
      await reader.subscribeAsync('data/r/#', { qos: 1 });
      const writer2 = await connect(durable.port, v5('writer', 'writer-pw'));
      await writer2.publishAsync('data/q/marker', 'marker', { qos: 1 });
      await writer2.publishAsync('data/r/marker', 'marker', { qos: 1 });
      await withTimeout(
        new Promise<void>((resolve) => {
          const check = () => queued.some((p) => p.topic === 'data/q/marker') && retained.includes('data/r/marker') && resolve();
          back.on('message', check);
          reader.on('message', check);
          check();
        }),
        5000,
        'markers not received',
      );
      expect(queued.map((p) => p.topic)).to.deep.equal(['data/q/long', 'data/q/none', 'data/q/marker']);
      expect(queued[0]!.properties?.messageExpiryInterval, 'the remaining lifetime').to.be.within(3590, 3599);
      expect(retained).to.deep.equal(['data/r/none', 'data/r/marker']);
      back.end(true);
    } finally {
      await durable.stop();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('passes properties through the data plane, both ways', async () => {
    const plane = tb.broker.dataPlane();
    const seen = new Promise<unknown>((resolve) => plane.subscribe('data/req', (_t, _p, properties) => resolve(properties)));
    const writer = await connect(tb.port, v5('writer', 'writer-pw'));
    await writer.publishAsync('data/req', '{}', { qos: 1, properties: { correlationData: Buffer.from('c-1'), responseTopic: 'data/res' } });
    const properties = (await withTimeout(seen, 3000, 'no data-plane message')) as { correlationData?: Buffer; responseTopic?: string };
    expect(properties.correlationData?.toString()).to.equal('c-1');
    expect(properties.responseTopic).to.equal('data/res');

    const reader = await connect(tb.port, v5('reader', 'reader-pw'));
    await reader.subscribeAsync('data/res', { qos: 1 });
    const reply = nextMessage(reader);
    await plane.publish('data/res', Buffer.from('ok'), { qos: 1, properties: { correlationData: Buffer.from('c-1') } });
    expect((await reply)[2].properties?.correlationData?.toString()).to.equal('c-1');
  });

  it('applies the publish prefix and live revocation to MQTT 5 clients as to 3.1.1', async () => {
    const watcher = await connect(tb.port, v5('prefixed', 'prefixed-pw', { clientId: 'watcher-5' }));
    await watcher.subscribeAsync('tenant-a/#', { qos: 1 });
    const pub = await connect(tb.port, v5('prefixed', 'prefixed-pw', { clientId: 'pub-5' }));
    const got = nextMessage(watcher);
    await pub.publishAsync('meter/1', '7', { qos: 1 });
    expect((await got)[0]).to.equal('tenant-a/meter/1');

    const gone = closed(pub, 3000);
    access.revoke('prefixed');
    await gone;
  });
});
