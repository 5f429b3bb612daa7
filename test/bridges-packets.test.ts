// What a bridge writes upstream, checked at a real Mosquitto 2 (its own ACL) by its subscribers:
// the bridge encodes its PUBLISH packets itself (src/bridges/publish-packet.ts), so every field a
// message keeps must arrive as the local publisher sent it — MQTT 5 properties, QoS 0/1/2, the
// retained flag, long and non-ASCII topics, empty and large payloads; and a PUBACK that refuses a
// message (reason code 0x87) drops that one message without holding up the next.
import { expect } from 'chai';
import type { IPublishPacket } from 'mqtt';
import { connect, endAllClients } from './support/mqtt-test-kit.js';
import { ADMIN_PASSWORD, startGateway, tempDir, type TestGateway } from './support/harness.js';
import { startMosquitto, type Mosquitto } from './support/mosquitto.js';
import { startBareBroker } from './support/bare-aedes.js';
import { bridgeService, bridgeState, putService } from './bridges-support.js';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

describe('bridge packets at an upstream Mosquitto', function () {
  this.timeout(60_000);
  let mosquitto: Mosquitto;
  let gw: TestGateway;
  let admin: string;
  let aclDir: string;

  before(async () => {
    aclDir = tempDir('gatewayd-mosquitto-acl-');
    // Anonymous clients (the bridge, the test's subscribers) may write everything but denied/#.
    writeFileSync(join(aclDir, 'acl'), 'topic readwrite #\ntopic read denied/#\n');
    mosquitto = await startMosquitto({ config: [`acl_file ${join(aclDir, 'acl')}`] });
    gw = await startGateway();
    admin = await gw.login();
    await gw.userWith([{ context: 'mqtt', operation: 'read', resource: '#' }], 'bridge-up');
  });
  after(async () => {
    await endAllClients();
    await gw?.stop();
    await mosquitto?.close();
    rmSync(aclDir, { recursive: true, force: true });
  });

  /** Every PUBLISH an upstream subscriber of `filter` gets, as parsed by mqtt.js. */
  const upstream = async (filter: string, protocolVersion: 4 | 5) => {
    const client = await connect(mosquitto.port, { protocolVersion, reconnectPeriod: 0 });
    const got: IPublishPacket[] = [];
    client.on('message', (_t, _p, packet) => got.push(packet));
    await client.subscribeAsync(filter, { qos: 2, ...(protocolVersion === 5 ? { rap: true } : {}) });
    return got;
  };
  const until = async (what: string, pred: () => boolean, ms = 10_000) => {
    const deadline = Date.now() + ms;
    while (!pred()) {
      if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };

  it('MQTT 5: the properties a message keeps arrive as published (user properties with repeated names, binary correlation data, expiry, format, content type, response topic)', async () => {
    await putService(gw, admin, 'v5', bridgeService('b', { urls: [`mqtt://127.0.0.1:${mosquitto.port}`], runAs: 'bridge-up', protocolVersion: 5, clientId: 'gw-v5', topics: [{ pattern: 'v5/#', direction: 'out', qos: 2, remotePrefix: 'up/' }] }));
    await bridgeState(gw, 'v5.b');
    const got = await upstream('up/v5/#', 5);
    const device = await connect(gw.ports.mqtt, { username: 'admin', password: ADMIN_PASSWORD, protocolVersion: 5 });
    const properties = {
      payloadFormatIndicator: true,
      messageExpiryInterval: 3600,
      contentType: 'application/json; charset=utf-8',
      responseTopic: 'v5/reply/é',
      correlationData: Buffer.from([0, 1, 2, 0xfe, 0xff]),
      userProperties: { site: 'a', line: ['1', '2'], 'ключ': 'значение' },
    };
    await device.publishAsync('v5/line-1/temp', '{"t": 21.5}', { qos: 1, properties });
    await device.publishAsync('v5/plain', Buffer.alloc(0), { qos: 2, retain: true });
    await until('both upstream', () => got.length === 2);
    const [first, second] = got;
    expect(first!.topic).to.equal('up/v5/line-1/temp');
    expect(first!.payload.toString()).to.equal('{"t": 21.5}');
    expect(first!.qos).to.equal(1);
    expect(first!.properties).to.deep.include({ payloadFormatIndicator: true, contentType: properties.contentType, responseTopic: properties.responseTopic, userProperties: properties.userProperties });
    expect(first!.properties!.correlationData).to.deep.equal(properties.correlationData);
    // The expiry left, counted down by Mosquitto: at most what was sent.
    expect(first!.properties!.messageExpiryInterval).to.be.within(3590, 3600);
    expect(second!.topic).to.equal('up/v5/plain');
    expect(second!.payload.length).to.equal(0);
    expect(second!.qos).to.equal(2);
    expect(second!.retain).to.equal(true);
    await device.publishAsync('v5/plain', Buffer.alloc(0), { qos: 1, retain: true }); // clears the retained message upstream
  });

  it('MQTT 3.1.1: QoS 0, 1 and 2 rules, the retained flag, a non-ASCII topic of 60,000 bytes and a 150 KiB payload (a 3-byte remaining length) arrive unchanged', async () => {
    await putService(gw, admin, 'v4', bridgeService('b', {
      urls: [`mqtt://127.0.0.1:${mosquitto.port}`],
      runAs: 'bridge-up',
      clientId: 'gw-v4',
      topics: [0, 1, 2].map((qos) => ({ pattern: `q${qos}/#`, direction: 'out', qos, remotePrefix: 'up4/' })),
    }));
    await bridgeState(gw, 'v4.b');
    const got = await upstream('up4/#', 4);
    const device = await connect(gw.ports.mqtt, { username: 'admin', password: ADMIN_PASSWORD });
    const long = `q2/${'ü'.repeat(30_000)}`; // 60,003 bytes of UTF-8, with up4/ below 65,535
    const big = Buffer.alloc(150 * 1024, 7); // with the topic below the gateway's maxPacketSizeBytes (256 KiB)
    await device.publishAsync('q0/a', 'zero', { qos: 0 });
    await device.publishAsync('q1/b', 'one', { qos: 1, retain: true });
    await device.publishAsync(long, big, { qos: 2 });
    await until('three upstream', () => got.length === 3);
    const byTopic = new Map(got.map((p) => [p.topic, p]));
    expect(byTopic.get('up4/q0/a')).to.deep.include({ qos: 0, retain: false });
    expect(byTopic.get('up4/q0/a')!.payload.toString()).to.equal('zero');
    expect(byTopic.get('up4/q1/b')!.qos).to.equal(1);
    // A 3.1.1 broker sets the flag only on retained copies: a subscriber that comes later gets one.
    const late = await upstream('up4/q1/b', 4);
    await until('the retained copy', () => late.length === 1);
    expect(late[0]).to.deep.include({ retain: true, qos: 1 });
    const large = byTopic.get(`up4/${long}`)!;
    expect(large.qos).to.equal(2);
    expect(Buffer.compare(large.payload as Buffer, big)).to.equal(0);
    await device.publishAsync('q1/b', '', { qos: 1, retain: true });
  });

  it('a PUBACK that refuses a message (MQTT 5 reason code 0x87) drops it as rejectedUpstream; the next one goes through the freed slot', async () => {
    // Mosquitto 2.0 answers a publish its ACL denies with "no matching subscribers" (0x10); aedes
    // (the test kit's bare broker) refuses it with 0x87, as EMQX and HiveMQ do.
    const refusing = await startBareBroker({ aedes: { authorizePublish: (_client, packet, callback) => callback(packet.topic.startsWith('denied/') ? new Error('not allowed') : null) } });
    try {
      const got: string[] = [];
      refusing.aedes.subscribe('allowed/#', (packet, callback) => {
        got.push(packet.topic);
        callback();
      }, () => {});
      await putService(gw, admin, 'acl', bridgeService('b', {
        urls: [`mqtt://127.0.0.1:${refusing.port}`],
        runAs: 'bridge-up',
        protocolVersion: 5,
        clientId: 'gw-acl',
        // One message in flight at a time: a refusal that kept its slot would stop the bridge.
        remote: { maxInflight: 1 },
        topics: [
          { pattern: 'secret/#', direction: 'out', qos: 1, remotePrefix: 'denied/' },
          { pattern: 'plant/#', direction: 'out', qos: 1, remotePrefix: 'allowed/' },
        ],
      }));
      await bridgeState(gw, 'acl.b');
      const device = await connect(gw.ports.mqtt, { username: 'admin', password: ADMIN_PASSWORD });
      await device.publishAsync('secret/recipe', 'x', { qos: 1 });
      await device.publishAsync('secret/recipe', 'y', { qos: 1 });
      await device.publishAsync('plant/temp', '21', { qos: 1 });
      await until('the allowed one upstream', () => got.length === 1);
      expect(got).to.deep.equal(['allowed/plant/temp']);
      const view = await bridgeState(gw, 'acl.b', (v) => v.queue.messages === 0);
      expect(view.queue.dropped.rejectedUpstream).to.equal(2);
      expect(view.counters.forwarded).to.equal(1);
      expect(view.currentState).to.equal('connected');
    } finally {
      await gw.api('DELETE', '/api/services/acl', { token: admin });
      await refusing.close();
    }
  });
});
