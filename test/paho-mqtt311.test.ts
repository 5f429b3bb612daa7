// The Eclipse Paho MQTT 3.1.1 interoperability suite (eclipse/paho.mqtt.testing,
// interoperability/client_test.py), case by case with mqtt.js (MQTT 3.1.1) and raw connections:
// the suite's own Python client is not installable where CI runs. Every `it` names the Paho test
// it comes from. The Python suite passes all but test_subscribe_failure against gatewayd for a
// user holding `#` and `$TopicA/#` (it wants one filter refused inside an allowed `#`, a deny rule
// the permission model does not have): here the user lacks the permission instead.
import { expect } from 'chai';
import mqtt, { type IClientOptions } from 'mqtt';
import { brokerOnStorePerTest, clientOptions, connackOf, connect, publishInbox as inbox, rawClient, subscribe, withTimeout, type TestBroker } from './support/mqtt-test-kit.js';
import { PAHO_PASSWORD, connectBytes, dollarTopics, firstBytes, keepalive, pahoAccess, redeliveryOnReconnect, settle, topics, unsubscribe, wildtopics } from './support/paho-cases.js';

const PASSWORD = PAHO_PASSWORD;

describe('Paho MQTT 3.1.1 interoperability suite (client_test.py), with mqtt.js', function () {
  this.timeout(30_000);
  const broker = brokerOnStorePerTest('gatewayd-paho311-', pahoAccess);
  let tb: TestBroker;
  beforeEach(() => {
    tb = broker.tb;
  });

  const v4 = (options: Omit<IClientOptions, 'password' | 'protocolVersion'> = {}) => ({ username: 'paho', password: PASSWORD, protocolVersion: 4 as const, ...options });

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

    const answer = await firstBytes(tb.port, connectBytes('hj', 4, 2, 'x'));
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
    const answer = await firstBytes(tb.port, connectBytes('MQTT', 4, 0, '', { username: 'paho', password: PASSWORD }));
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

  it('test_keepalive: a silent client is dropped after 1.5 × its keepalive, and its will published', () => keepalive(tb.port, v4()));

  it('test_redelivery_on_reconnect: unacknowledged QoS 1 and 2 deliveries come again at reconnect', () => redeliveryOnReconnect(tb.port, v4(), {}));

  it('test_subscribe_failure: a filter the user may not read gets 0x80, the connection stays', async () => {
    const a = await connect(tb.port, v4({ username: 'limited' }));
    expect(await subscribe(a, ['test/nosubscribe', topics[0]], 2)).to.deep.equal([0x80, 2]);
    expect(a.connected).to.equal(true);
  });

  it('test_dollar_topics: a filter starting with a wildcard does not match a $ topic', () => dollarTopics(tb.port, v4()));

  it('test_unsubscribe: nothing more from an unsubscribed topic, the others go on', () => unsubscribe(tb.port, v4()));
});
