// A client whose persistent MQTT 5 session holds more QoS 1 messages than its Receive Maximum is
// served while the replay of that queue waits for its acknowledgements (issue 35, found by the
// MQTT ingress fuzz target): packets it sent with its CONNECT (a SUBSCRIBE, a PINGREQ) are
// answered at once, not after the replay, and the broker reads on. aedes held them until its
// connect sequence ended and stopped reading meanwhile, so a client that acknowledges only after
// its SUBACK, or that sends nothing more, was never answered.
import net from 'node:net';
import { expect } from 'chai';
import mqttPacket from 'mqtt-packet';
import { connect, endAllClients, makeCerts, startBroker, subscribe, type Certs, type TestBroker } from './support/mqtt-test-kit.js';
import { StaticMqttAccess } from './support/static-mqtt-access.js';

describe('MQTT 5 replay held by the Receive Maximum', function () {
  this.timeout(20_000);
  let certs: Certs;
  let tb: TestBroker;
  const user = { username: 'device', password: 'Device-Passw0rd!' };
  before(async () => {
    certs = await makeCerts();
  });
  after(() => certs.cleanup());
  beforeEach(async () => {
    tb = await startBroker(new StaticMqttAccess([{ ...user, permissions: [{ resource: '#', operation: 'readWrite' }] }]), certs);
  });
  afterEach(async () => {
    await endAllClients();
    await tb.stop();
  });

  const session = { ...user, protocolVersion: 5 as const, clientId: 'slow-acker', clean: false, properties: { sessionExpiryInterval: 300, receiveMaximum: 2 } };

  it('answers the SUBSCRIBE and PINGREQ sent with the CONNECT while two of five queued messages wait for their PUBACKs, then replays the rest as they come', async () => {
    const first = await connect(tb.port, session);
    await subscribe(first, 'queue/#', 1);
    await first.endAsync();
    const publisher = await connect(tb.port, user);
    for (let i = 0; i < 5; i++) await publisher.publishAsync('queue/x', `m${i}`, { qos: 1 });

    const socket = net.connect(tb.port, '127.0.0.1');
    const parser = mqttPacket.parser({ protocolVersion: 5 });
    const seen: string[] = [];
    const publishes: mqttPacket.IPublishPacket[] = [];
    let waiter: { pred: () => boolean; resolve: () => void } | undefined;
    parser.on('packet', (packet: mqttPacket.Packet) => {
      seen.push(packet.cmd);
      if (packet.cmd === 'publish') publishes.push(packet);
      if (waiter?.pred()) waiter.resolve();
    });
    socket.on('data', (chunk) => parser.parse(chunk));
    const until = (pred: () => boolean, what: string) =>
      new Promise<void>((resolve, reject) => {
        if (pred()) return resolve();
        const timer = setTimeout(() => reject(new Error(`${what}: seen ${seen.join(' ')}`)), 3000);
        waiter = { pred, resolve: () => (clearTimeout(timer), resolve()) };
      });
    try {
      await new Promise((resolve) => socket.once('connect', resolve));
      socket.write(
        Buffer.concat([
          mqttPacket.generate({ cmd: 'connect', protocolId: 'MQTT', protocolVersion: 5, clean: false, clientId: session.clientId, keepalive: 60, username: user.username, password: Buffer.from(user.password), properties: session.properties }, { protocolVersion: 5 }),
          mqttPacket.generate({ cmd: 'subscribe', messageId: 1, subscriptions: [{ topic: 'other/#', qos: 1 }] }, { protocolVersion: 5 }),
          mqttPacket.generate({ cmd: 'pingreq' }, { protocolVersion: 5 }),
        ]),
      );
      await until(() => seen.includes('suback') && seen.includes('pingresp'), 'SUBACK and PINGRESP while the replay waits');
      expect(publishes.length, 'no more than the Receive Maximum unacknowledged').to.equal(2);
      // Acknowledged now: the replay goes on, two at a time.
      for (let acked = 0; acked < 5; acked++) {
        await until(() => publishes.length > acked, `publish ${acked + 1}`);
        socket.write(mqttPacket.generate({ cmd: 'puback', messageId: publishes[acked]!.messageId, reasonCode: 0 }, { protocolVersion: 5 }));
      }
      expect(publishes.map((p) => p.payload.toString())).to.deep.equal(['m0', 'm1', 'm2', 'm3', 'm4']);
    } finally {
      socket.destroy();
    }
  });
});
