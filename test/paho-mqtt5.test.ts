// The Eclipse Paho MQTT 5 interoperability suite (eclipse/paho.mqtt.testing,
// interoperability/client_test5.py), case by case with mqtt.js v5 (and a raw mqtt-packet
// connection where a case needs what mqtt.js would not send, or not answer by itself): the
// suite's own Python client is not installable where CI runs (no network but npm and Debian).
// Every `it` names the Paho test it comes from; the Python suite itself passes 26 of 27 against
// gatewayd (docs/mqtt-broker.md "MQTT 5"), these keep that from regressing. The user holds `#` and
// `$TopicA/#`, as for the Python runs; maxKeepaliveSeconds is 60, the server keep alive the suite
// expects. test_subscribe_failure needs a filter refused inside an allowed `#` (a deny rule the
// permission model does not have): here the user lacks the permission instead.
import { expect } from 'chai';
import mqtt, { type IClientOptions } from 'mqtt';
import net from 'node:net';
import type mqttPacket from 'mqtt-packet';
import mqttPacketRuntime from 'mqtt-packet';
import { brokerOnStorePerTest, clientOptions, connackPacket, connect, publishInbox as inbox, rawClient, subscribe, withTimeout, type RawMqttClient, type TestBroker } from './support/mqtt-test-kit.js';
import { PAHO_PASSWORD, connectBytes, dollarTopics, firstBytes, keepalive, pahoAccess, redeliveryOnReconnect, settle, topics, unsubscribe, wildtopics } from './support/paho-cases.js';

const PASSWORD = PAHO_PASSWORD;
const ids = (value: unknown): number[] => (value === undefined ? [] : ([] as number[]).concat(value as number | number[]));

/** QoS 2 PUBLISH packets 1..n of topics[0], as one client would write them. */
function qos2Publishes(n: number): Buffer[] {
  return Array.from({ length: n }, (_, i) => mqttPacketRuntime.generate({ cmd: 'publish', topic: topics[0], payload: Buffer.from(`message ${i + 1}`), qos: 2, messageId: i + 1, dup: false, retain: false }, { protocolVersion: 5 }));
}

describe('Paho MQTT 5 interoperability suite (client_test5.py), with mqtt.js', function () {
  this.timeout(30_000);
  const broker = brokerOnStorePerTest('gatewayd-paho5-', pahoAccess, { maxKeepaliveSeconds: 60, maxInflightMessages: 10 });
  let tb: TestBroker;
  beforeEach(() => {
    tb = broker.tb;
  });

  const v5 = (options: Omit<IClientOptions, 'password' | 'protocolVersion'> = {}) => ({ username: 'paho', password: PASSWORD, protocolVersion: 5 as const, ...options });
  const raw = (extra: Partial<mqttPacket.IConnectPacket> = {}): Promise<RawMqttClient> =>
    rawClient(tb.port, { clientId: `raw-${Math.random().toString(16).slice(2, 10)}`, protocolVersion: 5, username: 'paho', password: Buffer.from(PASSWORD), ...extra });

  it('test_basic: QoS 0, 1 and 2 to itself; a second CONNECT on a connection and a wrong protocol name close it', async () => {
    const a = await connect(tb.port, v5({ clientId: 'myclientid' }));
    const box = inbox(a);
    await a.subscribeAsync(topics[0], { qos: 2 });
    for (const qos of [0, 1, 2] as const) await a.publishAsync(topics[0], `qos ${qos}`, { qos });
    await box.until(3);
    expect(box.packets.map((p) => p.qos).sort()).to.deep.equal([0, 1, 2]);

    const twice = await raw();
    twice.send({ cmd: 'connect', protocolId: 'MQTT', protocolVersion: 5, clean: true, keepalive: 0, clientId: 'again', username: 'paho', password: Buffer.from(PASSWORD) });
    await withTimeout(twice.closed, 3000, 'second CONNECT left the connection open');

    // CONNECT with the protocol name "hj": no CONNACK 0, the connection closes.
    const answer = await firstBytes(tb.port, connectBytes('hj', 5, 2, 'x'));
    expect(answer.length >= 4 && answer[0] === 0x20 && answer[3] === 0, 'accepted').to.equal(false);
  });

  it('test_retained_message: retained QoS 0, 1 and 2 with user properties come back on a wildcard subscription', async () => {
    const a = await connect(tb.port, v5());
    const userProperties = { a: '2', c: '3' };
    for (const [i, qos] of [[1, 0], [2, 1], [3, 2]] as const) await a.publishAsync(topics[i], `qos ${qos}`, { qos, retain: true, properties: { userProperties } });
    const box = inbox(a);
    await a.subscribeAsync(wildtopics[5], { qos: 2 });
    await box.until(3);
    await settle(200);
    expect(box.packets).to.have.length(3);
    for (const p of box.packets) expect(p.properties?.userProperties).to.deep.equal(userProperties);
    expect(box.packets.map((p) => p.qos).sort()).to.deep.equal([0, 1, 2]);
  });

  it('test_will_message: the will goes with its user properties and without the Will Delay Interval (a will property)', async () => {
    const b = await connect(tb.port, v5());
    const box = inbox(b);
    await b.subscribeAsync(topics[2], { qos: 2 });
    const a = await raw({
      keepalive: 2,
      will: { topic: topics[2], payload: Buffer.from('will message'), qos: 2, retain: false, properties: { willDelayInterval: 0, userProperties: { a: '2', c: '3' } } },
    });
    // No PINGREQ: the broker ends the connection after 1.5 × keepalive and publishes the will.
    await box.until(1, 6000);
    expect(box.packets[0]!.payload.toString()).to.equal('will message');
    expect(box.packets[0]!.properties?.userProperties).to.deep.equal({ a: '2', c: '3' });
    expect(box.packets[0]!.properties).to.not.have.property('willDelayInterval');
    a.end();
  });

  it('test_zero_length_clientid: an empty client id is accepted with clean start 0 and 1 (MQTT 5 assigns one)', async () => {
    for (const clean of [false, true]) {
      // mqtt.js and mqtt-packet refuse to send an empty id with clean start 0: the CONNECT by hand.
      const answer = await firstBytes(tb.port, connectBytes('MQTT', 5, clean ? 2 : 0, '', { username: 'paho', password: PASSWORD }));
      expect([answer[0], answer[3]], `CONNACK of clean start ${clean}`).to.deep.equal([0x20, 0]);
    }
  });

  it('test_offline_message_queueing: QoS 1 and 2 wait for a session resumed with no expiry of its own', async () => {
    const a = await connect(tb.port, v5({ clientId: 'myclientid', properties: { sessionExpiryInterval: 99999 } }));
    await a.subscribeAsync(wildtopics[5], { qos: 2 });
    await a.endAsync();
    const b = await connect(tb.port, v5({ clientId: 'myclientid2' }));
    await b.publishAsync(topics[1], 'qos 0', { qos: 0 });
    await b.publishAsync(topics[2], 'qos 1', { qos: 1 });
    await b.publishAsync(topics[3], 'qos 2', { qos: 2 });
    const back = mqtt.connect(clientOptions(tb.port, v5({ clientId: 'myclientid', clean: false })));
    const box = inbox(back);
    await box.until(2);
    await settle(300);
    expect(box.packets.map((p) => p.payload.toString()).filter((m) => m !== 'qos 0')).to.deep.equal(['qos 1', 'qos 2']);
    back.end(true);
  });

  it('test_overlapping_subscriptions: one message, at the highest QoS of the matching subscriptions', async () => {
    const a = await connect(tb.port, v5());
    const box = inbox(a);
    await a.subscribeAsync({ [wildtopics[6]]: { qos: 2 }, [wildtopics[0]]: { qos: 1 } });
    await a.publishAsync(topics[3], 'overlapping topic filters', { qos: 2 });
    await box.until(1);
    await settle(300);
    expect(box.packets.map((p) => p.qos)).to.deep.equal([2]);
  });

  it('test_keepalive: a silent client is dropped after 1.5 × its keepalive, and its will published', () => keepalive(tb.port, v5()));

  it('test_redelivery_on_reconnect: unacknowledged QoS 1 and 2 deliveries come again at reconnect', () =>
    redeliveryOnReconnect(tb.port, v5(), { properties: { sessionExpiryInterval: 99999 } }));

  it('test_subscribe_failure: a filter the user may not read is refused (0x87), the connection stays', async () => {
    const a = await connect(tb.port, v5({ username: 'limited' }));
    expect(await subscribe(a, ['test/nosubscribe', topics[0]], 2)).to.deep.equal([0x87, 2]);
    expect(a.connected).to.equal(true);
  });

  it('test_dollar_topics: a filter starting with a wildcard does not match a $ topic', () => dollarTopics(tb.port, v5()));

  it('test_unsubscribe: nothing more from an unsubscribed topic, the others go on', () => unsubscribe(tb.port, v5()));

  it('test_session_expiry: 0 ends the session with the connection, N keeps it N seconds, DISCONNECT can change it', async () => {
    const present = async (sessionExpiryInterval: number, clean: boolean, disconnectExpiry?: number): Promise<boolean> => {
      const c = await connect(tb.port, v5({ clientId: 'myclientid', clean, properties: { sessionExpiryInterval } }));
      const seen = connackPacket(c)?.sessionPresent === true;
      if (clean) await c.subscribeAsync(topics[0], { qos: 2 });
      await c.endAsync(false, disconnectExpiry === undefined ? {} : { properties: { sessionExpiryInterval: disconnectExpiry } });
      return seen;
    };
    expect(await present(0, true)).to.equal(false);
    expect(await present(0, false), 'expiry 0: gone with its connection').to.equal(false);
    expect(await present(2, true)).to.equal(false);
    await settle(500);
    expect(await present(2, false), 'within 2 s').to.equal(true);
    await settle(2600);
    expect(await present(2, false), 'after 2 s').to.equal(false);
    expect(await present(1, true, 3)).to.equal(false);
    await settle(1600);
    expect(await present(1, false, 0), 'the DISCONNECT set 3 s').to.equal(true);
    expect(await present(1, false), 'the DISCONNECT set 0').to.equal(false);
  });

  it('test_user_properties: user properties travel with QoS 0, 1 and 2', async () => {
    const a = await connect(tb.port, v5());
    const box = inbox(a);
    await a.subscribeAsync(topics[0], { qos: 2 });
    for (const qos of [0, 1, 2] as const) await a.publishAsync(topics[0], '', { qos, properties: { userProperties: { a: '2', c: '3' } } });
    await box.until(3);
    for (const p of box.packets) expect(p.properties?.userProperties).to.deep.equal({ a: '2', c: '3' });
    expect(box.packets.map((p) => p.qos).sort()).to.deep.equal([0, 1, 2]);
  });

  it('test_payload_format: payload format indicator and content type travel with QoS 0, 1 and 2', async () => {
    const a = await connect(tb.port, v5());
    const box = inbox(a);
    await a.subscribeAsync(topics[0], { qos: 2 });
    for (const qos of [0, 1, 2] as const) await a.publishAsync(topics[0], '', { qos, properties: { payloadFormatIndicator: true, contentType: 'My name' } });
    await box.until(3);
    for (const p of box.packets) {
      expect(p.properties?.contentType).to.equal('My name');
      expect(p.properties?.payloadFormatIndicator).to.equal(true);
    }
  });

  it('test_publication_expiry: queued messages expire, the others arrive with the time they have left', async () => {
    const session = { clientId: 'myclientid2', properties: { sessionExpiryInterval: 99999 } };
    const b = await connect(tb.port, v5(session));
    await b.subscribeAsync(topics[0], { qos: 2 });
    await b.endAsync(false, { properties: { sessionExpiryInterval: 999999999 } });
    const a = await connect(tb.port, v5());
    await a.publishAsync(topics[0], 'qos 1 - expire', { qos: 1, properties: { messageExpiryInterval: 1 } });
    await a.publishAsync(topics[0], 'qos 2 - expire', { qos: 2, properties: { messageExpiryInterval: 1 } });
    await a.publishAsync(topics[0], "qos 1 - don't expire", { qos: 1, properties: { messageExpiryInterval: 6 } });
    await a.publishAsync(topics[0], "qos 2 - don't expire", { qos: 2, properties: { messageExpiryInterval: 6 } });
    await settle(2100);
    const back = mqtt.connect(clientOptions(tb.port, v5({ clientId: 'myclientid2', clean: false })));
    const box = inbox(back);
    await box.until(2);
    await settle(300);
    expect(box.packets.map((p) => p.payload.toString())).to.deep.equal(["qos 1 - don't expire", "qos 2 - don't expire"]);
    for (const p of box.packets) expect(p.properties?.messageExpiryInterval).to.be.within(1, 4);
    back.end(true);
  });

  it('test_subscribe_options: no local, retain as published, retain handling 0, 1 and 2', async () => {
    // noLocal
    const a = await connect(tb.port, v5());
    const b = await connect(tb.port, v5());
    const boxA = inbox(a);
    const boxB = inbox(b);
    await a.subscribeAsync(topics[0], { qos: 2, nl: true });
    await b.subscribeAsync(topics[0], { qos: 2, nl: true });
    await a.publishAsync(topics[0], 'noLocal test', { qos: 1 });
    await boxB.until(1);
    await settle(300);
    expect(boxA.packets).to.have.length(0);
    expect(boxB.packets).to.have.length(1);
    await a.endAsync();

    // retainAsPublished
    const r = await connect(tb.port, v5());
    const boxR = inbox(r);
    await r.subscribeAsync(topics[0], { qos: 2, rap: true });
    await r.publishAsync(topics[0], 'retain as published false', { qos: 1 });
    await r.publishAsync(topics[0], 'retain as published true', { qos: 1, retain: true });
    await boxR.until(2);
    expect(boxR.packets.map((p) => p.retain)).to.deep.equal([false, true]);
    await r.publishAsync(topics[0], '', { qos: 1, retain: true });

    // retainHandling
    for (const [i, qos] of [[1, 0], [2, 1], [3, 2]] as const) await r.publishAsync(topics[i], `qos ${qos}`, { qos, retain: true });
    const retained = async (rh: 0 | 1 | 2): Promise<[number, number]> => {
      const c = await connect(tb.port, v5());
      const box = inbox(c);
      await c.subscribeAsync(wildtopics[5], { qos: 2, rh });
      await settle(300);
      const first = box.packets.length;
      await c.subscribeAsync(wildtopics[5], { qos: 2, rh });
      await settle(300);
      await c.endAsync();
      return [first, box.packets.length - first];
    };
    expect(await retained(1), 'rh 1: only for a new subscription').to.deep.equal([3, 0]);
    expect(await retained(2), 'rh 2: never').to.deep.equal([0, 0]);
    expect(await retained(0), 'rh 0: at every subscribe').to.deep.equal([3, 3]);
  });

  it('test_assigned_clientid: an empty client id gets an Assigned Client Identifier', async () => {
    const c = await connect(tb.port, v5({ clientId: '' }));
    const assigned = connackPacket(c)?.properties?.assignedClientIdentifier;
    expect(assigned).to.be.a('string').and.not.equal('');
  });

  it('test_subscribe_identifiers: a message carries the identifier of every matching subscription', async () => {
    const a = await connect(tb.port, v5());
    const boxA = inbox(a);
    await a.subscribeAsync(topics[0], { qos: 2, properties: { subscriptionIdentifier: 456789 } });
    const b = await connect(tb.port, v5());
    const boxB = inbox(b);
    await b.subscribeAsync(topics[0], { qos: 2, properties: { subscriptionIdentifier: 2 } });
    await b.subscribeAsync(topics[0] + '/#', { qos: 2, properties: { subscriptionIdentifier: 3 } });
    await b.publishAsync(topics[0], 'sub identifier test', { qos: 1 });
    await boxA.until(1);
    await boxB.until(1);
    await settle(300);
    expect(boxA.packets.map((p) => ids(p.properties?.subscriptionIdentifier))).to.deep.equal([[456789]]);
    expect(boxB.packets).to.have.length(1);
    expect(ids(boxB.packets[0]!.properties?.subscriptionIdentifier).sort()).to.deep.equal([2, 3]);
  });

  it('test_request_response: response topic and correlation data reach the responder, the response the requester', async () => {
    const a = await connect(tb.port, v5());
    const b = await connect(tb.port, v5());
    const boxA = inbox(a);
    const boxB = inbox(b);
    await a.subscribeAsync(topics[0], { qos: 2, nl: true });
    await b.subscribeAsync(topics[0], { qos: 2, nl: true });
    await a.publishAsync(topics[0], 'request', { qos: 1, properties: { responseTopic: topics[0], correlationData: Buffer.from('334') } });
    await boxB.until(1);
    const request = boxB.packets[0]!;
    expect(request.properties?.responseTopic).to.equal(topics[0]);
    expect(Buffer.from(request.properties!.correlationData!).toString()).to.equal('334');
    await b.publishAsync(request.properties!.responseTopic!, 'response', { qos: 1, properties: { correlationData: request.properties!.correlationData! } });
    await boxA.until(1);
    expect(boxA.packets[0]!.payload.toString()).to.equal('response');
  });

  it('test_client_topic_alias: alias 0 and an alias unknown to a new connection end it with 0x94; aliases resolve within one', async () => {
    const zero = await raw();
    zero.send({ cmd: 'publish', topic: topics[0], payload: Buffer.from('topic alias 0'), qos: 1, messageId: 1, dup: false, retain: false, properties: { topicAlias: 0 } });
    expect(((await zero.next('disconnect')) as mqttPacket.IDisconnectPacket).reasonCode).to.equal(0x94);

    const session = { clientId: 'myclientid', clean: true, properties: { sessionExpiryInterval: 99999, topicAliasMaximum: 0 } };
    const a = await raw(session);
    const connack = a.received[0] as mqttPacket.IConnackPacket;
    expect(connack.properties?.topicAliasMaximum).to.equal(16);
    a.send({ cmd: 'subscribe', messageId: 1, subscriptions: [{ topic: topics[0], qos: 2 }] });
    await a.next('suback');
    a.send({ cmd: 'publish', topic: topics[0], payload: Buffer.from('topic alias 1'), qos: 1, messageId: 2, dup: false, retain: false, properties: { topicAlias: 1 } });
    a.send({ cmd: 'publish', topic: '', payload: Buffer.from('topic alias 2'), qos: 1, messageId: 3, dup: false, retain: false, properties: { topicAlias: 1 } });
    const first = (await a.next('publish')) as mqttPacket.IPublishPacket;
    const second = (await a.next('publish')) as mqttPacket.IPublishPacket;
    expect([first.topic, second.topic, String(second.payload)]).to.deep.equal([topics[0], topics[0], 'topic alias 2']);
    a.send({ cmd: 'disconnect' });
    await a.closed;

    const back = await raw({ ...session, clean: false });
    back.send({ cmd: 'publish', topic: '', payload: Buffer.from('topic alias 4'), qos: 1, messageId: 1, dup: false, retain: false, properties: { topicAlias: 1 } });
    expect(((await back.next('disconnect')) as mqttPacket.IDisconnectPacket).reasonCode).to.equal(0x94);
  });

  it('test_server_topic_alias: a client with a Topic Alias Maximum gets the topic once, then the alias; one without gets none', async () => {
    const a = await raw({ properties: { topicAliasMaximum: 1 } });
    a.send({ cmd: 'subscribe', messageId: 1, subscriptions: [{ topic: topics[0], qos: 2 }] });
    await a.next('suback');
    for (const qos of [0, 1, 2] as const) a.send({ cmd: 'publish', topic: topics[0], payload: Buffer.from('topic alias 1'), qos, messageId: qos + 10, dup: false, retain: false });
    const got: mqttPacket.IPublishPacket[] = [];
    for (let i = 0; i < 3; i++) got.push((await a.next('publish')) as mqttPacket.IPublishPacket);
    const alias = got[0]!.properties?.topicAlias;
    expect(alias).to.equal(1);
    expect(got.map((p) => p.topic)).to.deep.equal([topics[0], '', '']);
    expect(got.map((p) => p.properties?.topicAlias)).to.deep.equal([1, 1, 1]);

    const none = await raw();
    none.send({ cmd: 'subscribe', messageId: 1, subscriptions: [{ topic: topics[0], qos: 2 }] });
    await none.next('suback');
    for (const qos of [0, 1, 2] as const) none.send({ cmd: 'publish', topic: topics[0], payload: Buffer.from('no alias'), qos, messageId: qos + 10, dup: false, retain: false });
    for (let i = 0; i < 3; i++) {
      const p = (await none.next('publish')) as mqttPacket.IPublishPacket;
      expect(p.topic).to.equal(topics[0]);
      expect(p.properties?.topicAlias).to.equal(undefined);
    }
  });

  it("test_maximum_packet_size: a message larger than the client's Maximum Packet Size is not sent to it", async () => {
    const a = await raw({ properties: { maximumPacketSize: 64 } });
    const connack = a.received[0] as mqttPacket.IConnackPacket;
    expect(connack.properties?.maximumPacketSize).to.equal(262144);
    a.send({ cmd: 'subscribe', messageId: 1, subscriptions: [{ topic: topics[0], qos: 2 }] });
    await a.next('suback');
    const publisher = await connect(tb.port, v5());
    await publisher.publishAsync(topics[0], '.'.repeat(32), { qos: 0 });
    await publisher.publishAsync(topics[0], '.'.repeat(64), { qos: 1 });
    await publisher.publishAsync(topics[0], 'small again', { qos: 0 });
    const first = (await a.next('publish')) as mqttPacket.IPublishPacket;
    const second = (await a.next('publish')) as mqttPacket.IPublishPacket;
    expect([String(first.payload).length, String(second.payload)]).to.deep.equal([32, 'small again']);
    await settle(200);
    expect(a.received.filter((p) => p.cmd === 'publish')).to.have.length(2);
  });

  it('test_server_keep_alive: a keepalive above the maximum gets the Server Keep Alive (60)', async () => {
    const a = await raw({ keepalive: 120 });
    expect((a.received[0] as mqttPacket.IConnackPacket).properties?.serverKeepAlive).to.equal(60);
  });

  it("test_flow_control1: never more unacknowledged QoS 1 messages than the client's Receive Maximum", async () => {
    const a = await raw({ properties: { receiveMaximum: 2 } });
    a.send({ cmd: 'subscribe', messageId: 1, subscriptions: [{ topic: topics[0], qos: 2 }] });
    await a.next('suback');
    for (let i = 1; i <= 3; i++) a.send({ cmd: 'publish', topic: topics[0], payload: Buffer.from(`message ${i}`), qos: 1, messageId: 100 + i, dup: false, retain: false });
    const first = (await a.next('publish')) as mqttPacket.IPublishPacket;
    const second = (await a.next('publish')) as mqttPacket.IPublishPacket;
    await settle(500);
    expect(a.received.filter((p) => p.cmd === 'publish'), 'a third before an acknowledgement').to.have.length(2);
    a.send({ cmd: 'puback', messageId: first.messageId! });
    const third = (await a.next('publish')) as mqttPacket.IPublishPacket;
    expect([first, second, third].map((p) => String(p.payload))).to.deep.equal(['message 1', 'message 2', 'message 3']);
  });

  it("test_flow_control2: a client exceeding the broker's Receive Maximum is disconnected with 0x93", async () => {
    const a = await raw();
    const announced = (a.received[0] as mqttPacket.IConnackPacket).properties?.receiveMaximum;
    expect(announced).to.equal(10);
    // QoS 2 PUBLISH packets never released (no PUBREL): each stays unanswered.
    for (let i = 1; i <= announced! + 1; i++) a.send({ cmd: 'publish', topic: topics[0], payload: Buffer.from(`message ${i}`), qos: 2, messageId: i, dup: false, retain: false });
    expect(((await a.next('disconnect')) as mqttPacket.IDisconnectPacket).reasonCode).to.equal(0x93);
    await withTimeout(a.closed, 2000, 'not closed');
  });

  it('test_flow_control2 as Paho runs it: a client that answers each PUBREC with a PUBREL still reads the 0x93 DISCONNECT, and the connection ends without a reset', async () => {
    const socket = net.connect(tb.port, '127.0.0.1');
    await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
    const errors: string[] = [];
    socket.on('error', (err: NodeJS.ErrnoException) => errors.push(err.code ?? err.message));
    const parser = mqttPacketRuntime.parser({ protocolVersion: 5 });
    const seen: mqttPacket.Packet[] = [];
    const send = (packet: mqttPacket.Packet) => {
      if (!socket.destroyed) socket.write(mqttPacketRuntime.generate(packet, { protocolVersion: 5 }));
    };
    parser.on('packet', (packet: mqttPacket.Packet) => {
      seen.push(packet);
      if (packet.cmd === 'pubrec') send({ cmd: 'pubrel', messageId: packet.messageId });
    });
    socket.on('data', (chunk: Buffer) => parser.parse(chunk));
    const ended = new Promise<boolean>((resolve) => {
      socket.once('end', () => resolve(true));
      socket.once('close', () => resolve(false));
    });
    const connack = new Promise<void>((resolve) => parser.on('packet', (p: mqttPacket.Packet) => p.cmd === 'connack' && resolve()));
    send({ cmd: 'connect', protocolId: 'MQTT', protocolVersion: 5, clean: true, keepalive: 0, clientId: 'flow-control2', username: 'paho', password: Buffer.from(PASSWORD) });
    await withTimeout(connack, 5000, 'no CONNACK');
    socket.write(Buffer.concat(qos2Publishes(11)));
    expect(await withTimeout(ended, 5000, 'the connection did not end'), 'ended by the broker (FIN), not reset').to.equal(true);
    await new Promise((resolve) => socket.once('close', resolve));
    expect(errors, 'errors on the client socket').to.deep.equal([]);
    const disconnect = seen.find((p) => p.cmd === 'disconnect') as mqttPacket.IDisconnectPacket | undefined;
    expect(disconnect?.reasonCode).to.equal(0x93);
  });

  it('QoS 2 publishes beyond the Receive Maximum pipelined behind the CONNECT (before the CONNACK): the connection closes, the broker goes on', async () => {
    const socket = net.connect(tb.port, '127.0.0.1');
    await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
    socket.on('error', () => {});
    const closed = new Promise((resolve) => socket.once('close', resolve));
    const connectBytes5 = mqttPacketRuntime.generate({ cmd: 'connect', protocolId: 'MQTT', protocolVersion: 5, clean: true, keepalive: 0, clientId: 'pipelined', username: 'paho', password: Buffer.from(PASSWORD) }, { protocolVersion: 5 });
    socket.write(Buffer.concat([connectBytes5, ...qos2Publishes(11)]));
    await withTimeout(closed, 5000, 'not closed');
    // The broker is still there: a client connects and gets its own message back.
    const a = await connect(tb.port, v5());
    const box = inbox(a);
    await a.subscribeAsync(topics[0], { qos: 1 });
    await a.publishAsync(topics[0], 'still here', { qos: 1 });
    await box.until(1);
  });

  it('test_will_delay: the will goes after min(Will Delay Interval, Session Expiry Interval)', async () => {
    const b = await connect(tb.port, v5());
    const box = inbox(b);
    await b.subscribeAsync(topics[0], { qos: 2 });
    const delayOf = async (willDelayInterval: number, sessionExpiryInterval: number): Promise<number> => {
      const before = box.packets.length;
      const a = await raw({ clientId: 'myclientid', properties: { sessionExpiryInterval }, will: { topic: topics[0], payload: Buffer.from('test_will_delay will message'), qos: 2, retain: false, properties: { willDelayInterval } } });
      const started = Date.now();
      a.end(); // no DISCONNECT
      await box.until(before + 1, 6000);
      expect(box.packets.at(-1)!.payload.toString()).to.equal('test_will_delay will message');
      expect(box.packets.at(-1)!.properties ?? {}).to.not.have.property('willDelayInterval');
      return Date.now() - started;
    };
    expect(await delayOf(2, 4), 'will delay 2, session expiry 4').to.be.within(1500, 3500);
    expect(await delayOf(3, 0), 'will delay 3, session expiry 0').to.be.below(1000);
    expect(await delayOf(3, 1), 'will delay 3, session expiry 1').to.be.within(700, 2500);
  });

  it('test_shared_subscriptions: a message to a shared subscription reaches one member; non-shared ones reach all', async () => {
    const shared = '$share/sharename/client_test5/x';
    const a = await connect(tb.port, v5());
    const b = await connect(tb.port, v5());
    const boxA = inbox(a);
    const boxB = inbox(b);
    expect(connackPacket(a)?.properties?.sharedSubscriptionAvailable).to.not.equal(false);
    for (const c of [a, b]) expect((await c.subscribeAsync({ [shared]: { qos: 2 }, [topics[0]]: { qos: 2 } })).map((g) => g.qos)).to.deep.equal([2, 2]);
    await b.publishAsync(topics[0], 'message 0', { qos: 0 });
    await boxA.until(1);
    await boxB.until(1);
    for (let i = 0; i < 10; i++) await b.publishAsync('client_test5/x', `message ${i}`, { qos: i % 2 === 0 ? 0 : 1 });
    await withTimeout(
      (async () => {
        while (boxA.packets.length + boxB.packets.length < 12) await settle(20);
      })(),
      5000,
      'shared messages not received',
    );
    await settle(300);
    const sharedA = boxA.packets.filter((p) => p.topic === 'client_test5/x').length;
    const sharedB = boxB.packets.filter((p) => p.topic === 'client_test5/x').length;
    expect(sharedA + sharedB, 'each message once').to.equal(10);
    expect([sharedA, sharedB], 'round robin').to.deep.equal([5, 5]);
  });
});
