// The Eclipse Paho MQTT 3.1.1 interoperability suite (eclipse/paho.mqtt.testing,
// interoperability/client_test.py), case by case with mqtt.js (MQTT 3.1.1) and raw connections:
// the suite's own Python client is not installable where CI runs. Every `it` names the Paho test
// it comes from. The Python suite passes all but test_subscribe_failure against gatewayd for a
// user holding `#` and `$TopicA/#` (it wants one filter refused inside an allowed `#`, a deny rule
// the permission model does not have): here the user lacks the permission instead.
import { rmSync } from 'node:fs';
import net from 'node:net';
import { expect } from 'chai';
import mqtt, { type IClientOptions, type IPublishPacket, type MqttClient } from 'mqtt';
import { openStore, type Store } from '../src/store/index.js';
import { tempDir } from './support/harness.js';
import { clientOptions, connackOf, connect, endAllClients, makeCerts, rawClient, startBroker, subscribe, withTimeout, type Certs, type TestBroker } from './support/mqtt-test-kit.js';
import { StaticMqttAccess } from './support/static-mqtt-access.js';

const PASSWORD = 'paho-pw';
const topics = ['TopicA', 'TopicA/B', 'Topic/C', 'TopicA/C', '/TopicA'] as const;
const wildtopics = ['TopicA/+', '+/C', '#', '/#', '/+', '+/+', 'TopicA/#'] as const;
const settle = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function inbox(client: MqttClient): { packets: IPublishPacket[]; until(n: number, ms?: number): Promise<void> } {
  const packets: IPublishPacket[] = [];
  const waiters: Array<{ n: number; resolve: () => void }> = [];
  client.on('message', (_topic, _payload, packet) => {
    packets.push(packet);
    for (const w of [...waiters]) if (packets.length >= w.n) waiters.splice(waiters.indexOf(w), 1) && w.resolve();
  });
  return {
    packets,
    until(n, ms = 5000) {
      if (packets.length >= n) return Promise.resolve();
      return withTimeout(new Promise<void>((resolve) => waiters.push({ n, resolve })), ms, `${n} messages not received (${packets.length})`);
    },
  };
}

describe('Paho MQTT 3.1.1 interoperability suite (client_test.py), with mqtt.js', function () {
  this.timeout(30_000);
  let certs: Certs;
  let dir: string;
  let store: Store;
  let tb: TestBroker;

  before(async () => {
    certs = await makeCerts();
  });
  after(async () => {
    await certs?.cleanup();
  });
  beforeEach(async () => {
    dir = tempDir('gatewayd-paho311-');
    store = openStore({ dir });
    const access = new StaticMqttAccess([
      {
        username: 'paho',
        password: PASSWORD,
        permissions: [
          { resource: '#', operation: 'readWrite' },
          { resource: '$TopicA/#', operation: 'readWrite' },
        ],
      },
      { username: 'limited', password: PASSWORD, permissions: [{ resource: 'TopicA/#', operation: 'readWrite' }] },
    ]);
    tb = await startBroker(access, certs, {}, { store });
  });
  afterEach(async () => {
    await endAllClients();
    await tb.stop();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const v4 = (options: IClientOptions = {}): IClientOptions => ({ username: 'paho', password: PASSWORD, protocolVersion: 4, ...options });

  it('testBasic: session present 0, QoS 0, 1 and 2 to itself; a second CONNECT and a wrong protocol name close the connection', async () => {
    expect(await connackOf(tb.port, v4({ clientId: 'myclientid' }))).to.deep.equal({ sessionPresent: false, code: 0 });
    const a = await connect(tb.port, v4({ clientId: 'myclientid' }));
    const box = inbox(a);
    await a.subscribeAsync(topics[0], { qos: 2 });
    for (const qos of [0, 1, 2] as const) await a.publishAsync(topics[0], `qos ${qos}`, { qos });
    await box.until(3);
    expect(box.packets.map((p) => p.qos).sort()).to.deep.equal([0, 1, 2]);

    const twice = await rawClient(tb.port, { clientId: 'twice', protocolVersion: 4, username: 'paho', password: Buffer.from(PASSWORD) });
    twice.send({ cmd: 'connect', protocolId: 'MQTT', protocolVersion: 4, clean: true, keepalive: 0, clientId: 'twice', username: 'paho', password: Buffer.from(PASSWORD) });
    await withTimeout(twice.closed, 3000, 'second CONNECT left the connection open');

    const answer = await new Promise<Buffer>((resolve) => {
      const socket = net.connect(tb.port, '127.0.0.1', () => {
        const body = Buffer.concat([Buffer.from([0, 2]), Buffer.from('hj'), Buffer.from([4, 2, 0, 0, 0, 1]), Buffer.from('x')]);
        socket.write(Buffer.concat([Buffer.from([0x10, body.length]), body]));
      });
      let received = Buffer.alloc(0);
      socket.on('data', (d: Buffer) => (received = Buffer.concat([received, d])));
      socket.on('error', () => {});
      socket.on('close', () => resolve(received));
    });
    expect(answer.length >= 4 && answer[0] === 0x20 && answer[3] === 0, 'wrong protocol name accepted').to.equal(false);
  });

  it('test_retained_messages: retained QoS 0, 1 and 2 come back on a wildcard subscription; empty ones clear them', async () => {
    const a = await connect(tb.port, v4());
    for (const [i, qos] of [[1, 0], [2, 1], [3, 2]] as const) await a.publishAsync(topics[i], `qos ${qos}`, { qos, retain: true });
    const box = inbox(a);
    await a.subscribeAsync(wildtopics[5], { qos: 2 });
    await box.until(3);
    expect(box.packets.every((p) => p.retain)).to.equal(true);
    for (const [i, qos] of [[1, 0], [2, 1], [3, 2]] as const) await a.publishAsync(topics[i], '', { qos, retain: true });
    const b = await connect(tb.port, v4());
    const boxB = inbox(b);
    await b.subscribeAsync(wildtopics[5], { qos: 2 });
    await settle(300);
    expect(boxB.packets).to.have.length(0);
  });

  it('will_message_test (defined, not run by the Python suite): a client that vanishes has its will published', async () => {
    const b = await connect(tb.port, v4({ clientId: 'myclientid2', clean: false }));
    const box = inbox(b);
    await b.subscribeAsync(topics[2], { qos: 2 });
    const a = await rawClient(tb.port, { clientId: 'myclientid', protocolVersion: 4, username: 'paho', password: Buffer.from(PASSWORD), keepalive: 2, will: { topic: topics[2], payload: Buffer.from('client not disconnected'), qos: 2, retain: false } });
    a.end(); // terminate: no DISCONNECT
    await box.until(1);
    expect(box.packets[0]!.payload.toString()).to.equal('client not disconnected');
  });

  it('test_zero_length_clientid: an empty client id is refused with clean session 0 (2), accepted with 1', async () => {
    expect((await connackOf(tb.port, v4({ clientId: '', clean: true }))).code).to.equal(0);
    // mqtt.js refuses to send it: the CONNECT by hand.
    const str = (text: string) => Buffer.concat([Buffer.from([0, Buffer.byteLength(text)]), Buffer.from(text)]);
    const body = Buffer.concat([str('MQTT'), Buffer.from([4, 0xc0, 0, 0]), str(''), str('paho'), str(PASSWORD)]);
    const answer = await new Promise<Buffer>((resolve) => {
      const socket = net.connect(tb.port, '127.0.0.1', () => socket.write(Buffer.concat([Buffer.from([0x10, body.length]), body])));
      let received = Buffer.alloc(0);
      socket.on('data', (d: Buffer) => (received = Buffer.concat([received, d])));
      socket.on('error', () => {});
      socket.on('close', () => resolve(received));
    });
    expect([answer[0], answer[3]]).to.deep.equal([0x20, 2]);
  });

  it('test_offline_message_queueing: QoS 1 and 2 wait for a persistent session, which is present when it returns', async () => {
    const a = await connect(tb.port, v4({ clientId: 'myclientid', clean: false }));
    await a.subscribeAsync(wildtopics[5], { qos: 2 });
    await a.endAsync();
    const b = await connect(tb.port, v4({ clientId: 'myclientid2' }));
    await b.publishAsync(topics[1], 'qos 0', { qos: 0 });
    await b.publishAsync(topics[2], 'qos 1', { qos: 1 });
    await b.publishAsync(topics[3], 'qos 2', { qos: 2 });
    const back = mqtt.connect(clientOptions(tb.port, v4({ clientId: 'myclientid', clean: false })));
    const box = inbox(back);
    const connack = await withTimeout(new Promise<{ sessionPresent: boolean }>((resolve) => back.once('connect', resolve)), 5000, 'not connected');
    expect(connack.sessionPresent).to.equal(true);
    await box.until(2);
    await settle(300);
    expect(box.packets.map((p) => p.payload.toString()).filter((m) => m !== 'qos 0')).to.deep.equal(['qos 1', 'qos 2']);
    back.end(true);
  });

  it('test_overlapping_subscriptions: one message, at the highest QoS of the matching subscriptions, in either order [MQTT-3.3.5-1]', async () => {
    for (const order of [[wildtopics[6], wildtopics[0]], [wildtopics[0], wildtopics[6]]]) {
      const a = await connect(tb.port, v4());
      const box = inbox(a);
      await a.subscribeAsync(order[0]!, { qos: order[0] === wildtopics[6] ? 2 : 1 });
      await a.subscribeAsync(order[1]!, { qos: order[1] === wildtopics[6] ? 2 : 1 });
      await a.publishAsync(topics[3], 'overlapping topic filters', { qos: 2 });
      await box.until(1);
      await settle(300);
      expect(box.packets.map((p) => p.qos), order.join(' then ')).to.deep.equal([2]);
      await a.endAsync();
    }
  });

  it('test_keepalive: a silent client is dropped after 1.5 × its keepalive, and its will published', async () => {
    const b = await connect(tb.port, v4());
    const box = inbox(b);
    await b.subscribeAsync(topics[4], { qos: 2 });
    const started = Date.now();
    const a = await rawClient(tb.port, { clientId: 'silent', protocolVersion: 4, username: 'paho', password: Buffer.from(PASSWORD), keepalive: 1, will: { topic: topics[4], payload: Buffer.from('keepalive expiry'), qos: 2, retain: false } });
    await box.until(1);
    expect(Date.now() - started).to.be.within(1000, 4000);
    await withTimeout(a.closed, 1000, 'connection not closed');
  });

  it('test_redelivery_on_reconnect: unacknowledged QoS 1 and 2 deliveries come again at reconnect', async () => {
    const b = await rawClient(tb.port, { clientId: 'myclientid2', clean: false, protocolVersion: 4, username: 'paho', password: Buffer.from(PASSWORD) });
    b.send({ cmd: 'subscribe', messageId: 1, subscriptions: [{ topic: wildtopics[6], qos: 2 }] });
    await b.next('suback');
    const a = await connect(tb.port, v4());
    await a.publishAsync(topics[1], '', { qos: 1 });
    await a.publishAsync(topics[3], '', { qos: 2 });
    await b.next('publish');
    await b.next('publish');
    b.end();
    await b.closed;
    const back = mqtt.connect(clientOptions(tb.port, v4({ clientId: 'myclientid2', clean: false })));
    const box = inbox(back);
    await box.until(2);
    expect(box.packets.map((p) => p.topic).sort()).to.deep.equal([topics[1], topics[3]]);
    back.end(true);
  });

  it('test_subscribe_failure: a filter the user may not read gets 0x80, the connection stays', async () => {
    const a = await connect(tb.port, v4({ username: 'limited' }));
    expect(await subscribe(a, ['test/nosubscribe', topics[0]], 2)).to.deep.equal([0x80, 2]);
    expect(a.connected).to.equal(true);
  });

  it('test_dollar_topics: a filter starting with a wildcard does not match a $ topic', async () => {
    const b = await connect(tb.port, v4());
    const box = inbox(b);
    await b.subscribeAsync(wildtopics[5], { qos: 2 });
    await b.publishAsync('$' + topics[1], '', { qos: 1 });
    await b.publishAsync(topics[1], 'control', { qos: 1 });
    await box.until(1);
    await settle(200);
    expect(box.packets.map((p) => p.topic)).to.deep.equal([topics[1]]);
  });

  it('test_unsubscribe: nothing more from an unsubscribed topic, the others go on', async () => {
    const b = await connect(tb.port, v4());
    const box = inbox(b);
    for (const t of topics.slice(0, 3)) await b.subscribeAsync(t, { qos: 2 });
    await b.unsubscribeAsync(topics[0]);
    const a = await connect(tb.port, v4());
    for (const [i, text] of [[0, 'topic 0 - unsubscribed'], [1, 'topic 1'], [2, 'topic 2']] as const) await a.publishAsync(topics[i], text, { qos: 1 });
    await box.until(2);
    await settle(300);
    expect(box.packets.map((p) => p.payload.toString())).to.deep.equal(['topic 1', 'topic 2']);
  });
});
