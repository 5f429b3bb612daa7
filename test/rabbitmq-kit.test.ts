// The RabbitMQ test kit itself (test/support/rabbitmq.ts): one node with the MQTT plugin and an
// internal user takes a publish from mqtt.js and delivers it to a subscriber.
import { expect } from 'chai';
import mqtt from 'mqtt';
import { startRabbitKit, type RabbitKit, type RabbitNode } from './support/rabbitmq.js';

describe('RabbitMQ test kit', function () {
  this.timeout(120_000);
  let kit: RabbitKit;
  let node: RabbitNode;

  before(async () => {
    kit = await startRabbitKit();
    node = await kit.startNode();
    await node.addUser('device-1', 'device-1-secret');
  });
  after(async () => kit?.destroy());

  it('starts a node whose MQTT listener takes a publish from an internal user', async () => {
    const opts = { host: '127.0.0.1', port: node.mqttPort, username: 'device-1', password: 'device-1-secret', reconnectPeriod: 0, connectTimeout: 10_000 };
    const sub = await mqtt.connectAsync({ ...opts, clientId: 'kit-sub' });
    const pub = await mqtt.connectAsync({ ...opts, clientId: 'kit-pub' });
    try {
      await sub.subscribeAsync('kit/+/temp', { qos: 1 });
      const got = new Promise<[string, string]>((resolve) => sub.once('message', (t, p) => resolve([t, p.toString()])));
      await pub.publishAsync('kit/line-1/temp', '21.5', { qos: 1 });
      expect(await got).to.deep.equal(['kit/line-1/temp', '21.5']);
    } finally {
      await Promise.all([sub.endAsync(), pub.endAsync()]);
    }
  });

  it('refuses a wrong password with CONNACK "not authorized"', async () => {
    const err = await mqtt
      .connectAsync({ host: '127.0.0.1', port: node.mqttPort, username: 'device-1', password: 'wrong', reconnectPeriod: 0, connectTimeout: 10_000 })
      .then((c) => (c.end(true), undefined), (e: Error & { code?: number }) => e);
    expect(err?.code).to.be.oneOf([4, 5]);
  });

  it('gives each node its own name and ports', () => {
    expect(node.name).to.match(/^gwd-[0-9a-f]{8}@localhost$/);
    expect(new Set([node.amqpPort, node.mqttPort, node.managementPort, node.distPort]).size).to.equal(4);
  });

  it('answers a command through rabbitmqctl, and gives up on a node that is not running after three attempts with the diagnostics in its first line', async () => {
    expect(await node.ctl(['list_users', '--silent'])).to.contain('device-1');
    const started = Date.now();
    const err = await kit.ctl('gwd-00000000@localhost', ['status']).then(() => undefined, (e: Error) => e);
    expect(err?.message.split('\n')[0]).to.match(/^rabbitmqctl status failed \(exit 69, attempt 3\): DIAGNOSTICS .*not running/);
    // Two waits of 2 s between the three attempts.
    expect(Date.now() - started).to.be.greaterThan(4000);
  });
});
