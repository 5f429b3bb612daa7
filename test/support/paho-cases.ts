// Cases of the Eclipse Paho interoperability suites that client_test.py (MQTT 3.1.1) and
// client_test5.py (MQTT 5) share, written once with mqtt.js and raw connections for both
// (test/paho-mqtt311.test.ts, test/paho-mqtt5.test.ts). `login` is the version and credentials.
import { expect } from 'chai';
import mqtt, { type IClientOptions } from 'mqtt';
import type mqttPacket from 'mqtt-packet';
import { clientOptions, connect, publishInbox, rawClient, withTimeout } from './mqtt-test-kit.js';
import { StaticMqttAccess } from './static-mqtt-access.js';

export const topics = ['TopicA', 'TopicA/B', 'Topic/C', 'TopicA/C', '/TopicA'] as const;
export const wildtopics = ['TopicA/+', '+/C', '#', '/#', '/+', '+/+', 'TopicA/#'] as const;

export const PAHO_PASSWORD = 'paho-pw';

/**
 * The users of the suites' runs: `paho` holds `#` and `$TopicA/#` (as for the Python runs),
 * `limited` only `TopicA/#` (its refused filter stands in for test_subscribe_failure's deny rule).
 */
export function pahoAccess(): StaticMqttAccess {
  return new StaticMqttAccess([
    {
      username: 'paho',
      password: PAHO_PASSWORD,
      permissions: [
        { resource: '#', operation: 'readWrite' },
        { resource: '$TopicA/#', operation: 'readWrite' },
      ],
    },
    { username: 'limited', password: PAHO_PASSWORD, permissions: [{ resource: 'TopicA/#', operation: 'readWrite' }] },
  ]);
}

export const settle = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

type Login = IClientOptions & { username: string; password: string; protocolVersion: 4 | 5 };

function rawLogin(login: Login): Pick<mqttPacket.IConnectPacket, 'protocolVersion' | 'username' | 'password'> {
  return { protocolVersion: login.protocolVersion, username: login.username, password: Buffer.from(login.password) };
}

/** test_dollar_topics: a filter starting with a wildcard does not match a `$` topic. */
export async function dollarTopics(port: number, login: Login): Promise<void> {
  const b = await connect(port, login);
  const box = publishInbox(b);
  await b.subscribeAsync(wildtopics[5], { qos: 2 });
  await b.publishAsync('$' + topics[1], '', { qos: 1 });
  await b.publishAsync(topics[1], 'control', { qos: 1 });
  await box.until(1);
  await settle(200);
  expect(box.packets.map((p) => p.topic)).to.deep.equal([topics[1]]);
}

/** test_unsubscribe: nothing more from an unsubscribed topic, the others go on. */
export async function unsubscribe(port: number, login: Login): Promise<void> {
  const b = await connect(port, login);
  const box = publishInbox(b);
  for (const t of topics.slice(0, 3)) await b.subscribeAsync(t, { qos: 2 });
  await b.unsubscribeAsync(topics[0]);
  const a = await connect(port, login);
  for (const [i, text] of [[0, 'topic 0 - unsubscribed'], [1, 'topic 1'], [2, 'topic 2']] as const) await a.publishAsync(topics[i], text, { qos: 1 });
  await box.until(2);
  await settle(300);
  expect(box.packets.map((p) => p.payload.toString())).to.deep.equal(['topic 1', 'topic 2']);
}

/** test_keepalive: a silent client is dropped after 1.5 × its keepalive, and its will published. */
export async function keepalive(port: number, login: Login): Promise<void> {
  const b = await connect(port, login);
  const box = publishInbox(b);
  await b.subscribeAsync(topics[4], { qos: 2 });
  const started = Date.now();
  const a = await rawClient(port, { clientId: 'silent', ...rawLogin(login), keepalive: 1, will: { topic: topics[4], payload: Buffer.from('keepalive expiry'), qos: 2, retain: false } });
  await box.until(1, 5000);
  expect(Date.now() - started).to.be.within(1000, 4000);
  expect(box.packets[0]!.payload.toString()).to.equal('keepalive expiry');
  await withTimeout(a.closed, 1000, 'connection not closed');
}

/** test_redelivery_on_reconnect: unacknowledged QoS 1 and 2 deliveries come again at reconnect. */
export async function redeliveryOnReconnect(port: number, login: Login, session: Partial<mqttPacket.IConnectPacket> & IClientOptions): Promise<void> {
  const b = await rawClient(port, { clientId: 'myclientid2', clean: false, ...rawLogin(login), ...(session.properties ? { properties: session.properties as mqttPacket.IConnectPacket['properties'] } : {}) });
  b.send({ cmd: 'subscribe', messageId: 1, subscriptions: [{ topic: wildtopics[6], qos: 2 }] });
  await b.next('suback');
  const a = await connect(port, login);
  await a.publishAsync(topics[1], '', { qos: 1 });
  await a.publishAsync(topics[3], '', { qos: 2 });
  await b.next('publish');
  await b.next('publish');
  b.end(); // neither acknowledged
  await b.closed;
  const back = mqtt.connect(clientOptions(port, { ...login, clientId: 'myclientid2', clean: false, ...(session.properties ? { properties: session.properties as IClientOptions['properties'] } : {}) }));
  const box = publishInbox(back);
  await box.until(2);
  expect(box.packets.map((p) => p.topic).sort()).to.deep.equal([topics[1], topics[3]]);
  back.end(true);
}

/** What the broker answers to these bytes on a new connection (at most 4 bytes, or all it sent before closing). */
export async function firstBytes(port: number, bytes: Buffer): Promise<Buffer> {
  const net = await import('node:net');
  return withTimeout(
    new Promise<Buffer>((resolve) => {
      const socket = net.connect(port, '127.0.0.1', () => socket.write(bytes));
      let received = Buffer.alloc(0);
      socket.on('data', (d: Buffer) => {
        received = Buffer.concat([received, d]);
        if (received.length >= 4) socket.destroy();
      });
      socket.on('error', () => {});
      socket.on('close', () => resolve(received));
    }),
    5000,
    'no answer',
  );
}

/** A CONNECT written by hand (mqtt.js and mqtt-packet refuse some the suites send). */
export function connectBytes(protocolName: string, level: 4 | 5, flags: number, clientId: string, login?: { username: string; password: string }): Buffer {
  const str = (text: string) => Buffer.concat([Buffer.from([0, Buffer.byteLength(text)]), Buffer.from(text)]);
  const header = Buffer.concat([str(protocolName), Buffer.from([level, flags | (login ? 0xc0 : 0), 0, 0]), level === 5 ? Buffer.from([0]) : Buffer.alloc(0)]);
  const body = Buffer.concat([header, str(clientId), ...(login ? [str(login.username), str(login.password)] : [])]);
  return Buffer.concat([Buffer.from([0x10, body.length]), body]);
}
