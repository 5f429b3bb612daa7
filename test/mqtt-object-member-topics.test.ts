// Topics named like the members every JavaScript object has (constructor, __proto__, toString):
// aedes 2.0.0-beta.1 keeps a client's subscriptions in a plain object, where a SUBSCRIBE to
// `constructor` or `__proto__` found Object's members and ended the daemon's process (mqemitter
// asserts on the listener aedes then removes). gatewayd gives each client an object without
// prototype (src/mqtt/connections.ts). Real gateway, real broker, mqtt.js.
import { expect } from 'chai';
import { GOOD_PASSWORD, startGateway, type TestGateway } from './support/harness.js';
import { collect, connect, endAllClients, subscribe } from './support/mqtt-test-kit.js';

const TOPICS = ['constructor', '__proto__', 'toString', 'hasOwnProperty', 'valueOf'];

describe('MQTT topics named like object members', function () {
  this.timeout(30_000);
  let gw: TestGateway;
  before(async () => {
    gw = await startGateway();
    await gw.services.users.create({ username: 'members', password: GOOD_PASSWORD, identityProvider: 'local', initialPermissions: [{ resource: '#', operation: 'readWrite', context: 'mqtt' }] });
  });
  afterEach(async () => {
    await endAllClients();
  });
  after(async () => {
    await gw?.stop();
  });

  it('are subscribed, delivered and unsubscribed like any topic, and the broker lives on', async () => {
    const creds = { username: 'members', password: GOOD_PASSWORD };
    const subscriber = await connect(gw.ports.mqtt, creds);
    const inbox = collect(subscriber);
    for (const topic of TOPICS) expect(await subscribe(subscriber, topic, 1), topic).to.deep.equal([1]);
    const publisher = await connect(gw.ports.mqtt, creds);
    for (const topic of TOPICS) await publisher.publishAsync(topic, topic, { qos: 1 });
    await inbox.until((m) => m.topic === TOPICS.at(-1));
    expect(inbox.messages.map((m) => m.topic)).to.deep.equal(TOPICS);
    // Unsubscribed: nothing more arrives (a QoS 1 message to a topic it still has comes after).
    await subscriber.unsubscribeAsync(['constructor', '__proto__']);
    await subscribe(subscriber, 'after', 1);
    await publisher.publishAsync('constructor', 'late', { qos: 1 });
    await publisher.publishAsync('__proto__', 'late', { qos: 1 });
    await publisher.publishAsync('after', 'after', { qos: 1 });
    await inbox.until((m) => m.topic === 'after');
    expect(inbox.messages.map((m) => m.topic)).to.deep.equal([...TOPICS, 'after']);
    // A client that leaves with them still subscribed leaves nothing behind for the next one.
    await subscriber.endAsync();
    const next = await connect(gw.ports.mqtt, creds);
    const nextInbox = collect(next);
    expect(await subscribe(next, '__proto__', 0)).to.deep.equal([0]);
    await publisher.publishAsync('__proto__', 'again', { qos: 1 });
    await nextInbox.until((m) => m.topic === '__proto__');
    expect(gw.logs().filter((l) => l.level === 'error')).to.deep.equal([]);
  });
});
