// MQTT 5 features gatewayd implements around aedes 2 beta (src/mqtt/mqtt5/), beyond what the
// Paho suite checks (test/paho-mqtt5.test.ts): shared subscriptions decided by the permission
// engine on their filter, durable like other subscriptions (an away member, a restart), for
// MQTT 3.1.1 clients too; message expiry of retained and queued messages in LMDB across a
// restart; will delay against a resumed session; the client's Receive Maximum during the replay
// of its queue; its Maximum Packet Size against its stored queue. mqtt.js v5, raw connections,
// and mosquitto_pub/mosquitto_sub -V mqttv5 where they have the switch.
import { expect } from 'chai';
import mqtt, { type IClientOptions } from 'mqtt';
import type mqttPacket from 'mqtt-packet';
import { brokerOnStorePerTest, clientOptions, connect, publishInbox as inbox, rawClient, runCli, startMosquittoSub, subscribe, withTimeout, type RawMqttClient, type TestBroker } from './support/mqtt-test-kit.js';
import { StaticMqttAccess } from './support/static-mqtt-access.js';

/** What mosquitto_sub printed for its messages (startMosquittoSub runs it with -d). */
const printed = (stdout: string): string[] => stdout.split('\n').filter((l) => l !== '' && !/^(Client |Subscribed \(mid)/.test(l));

const settle = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

describe('MQTT 5 features around aedes (src/mqtt/mqtt5)', function () {
  this.timeout(30_000);
  const broker = brokerOnStorePerTest('gatewayd-mqtt5-features-', () =>
    new StaticMqttAccess([
      { username: 'plant', password: 'plant-pw', permissions: [{ resource: 'plant/#', operation: 'readWrite' }] },
      { username: 'line', password: 'line-pw', permissions: [{ resource: 'plant/line1/#', operation: 'read' }] },
    ]),
  );
  let tb: TestBroker;
  beforeEach(() => {
    tb = broker.tb;
  });

  const plant = (options: IClientOptions = {}): IClientOptions => ({ username: 'plant', password: 'plant-pw', protocolVersion: 5, ...options });
  const raw = (extra: Partial<mqttPacket.IConnectPacket> = {}): Promise<RawMqttClient> =>
    rawClient(tb.port, { clientId: `raw-${Math.random().toString(16).slice(2, 10)}`, protocolVersion: 5, username: 'plant', password: Buffer.from('plant-pw'), ...extra });
  const restartBroker = async () => {
    tb = await broker.restart();
  };
  const cli = (...args: string[]) => ['-h', '127.0.0.1', '-p', String(tb.port), '-u', 'plant', '-P', 'plant-pw', '-V', 'mqttv5', ...args];

  describe('shared subscriptions', () => {
    it('are decided on the filter without $share/<group>/: granted where the filter is readable, 0x87 (MQTT 3.1.1: 0x80) elsewhere', async () => {
      const v5 = await connect(tb.port, { username: 'line', password: 'line-pw', protocolVersion: 5 });
      expect(await subscribe(v5, ['$share/g/plant/line1/+/temp', '$share/g/plant/line2/#', '$share/g/#'], 1)).to.deep.equal([1, 0x87, 0x87]);
      const v4 = await connect(tb.port, { username: 'line', password: 'line-pw' });
      expect(await subscribe(v4, ['$share/g/plant/line1/#', '$share/g/plant/#'], 1)).to.deep.equal([1, 0x80]);
    });

    it('give each message to one member of each group (round robin), MQTT 3.1.1 and 5 members alike, no retained flag', async () => {
      const members = [await connect(tb.port, plant()), await connect(tb.port, { username: 'plant', password: 'plant-pw' }), await connect(tb.port, plant())];
      const boxes = members.map(inbox);
      for (const m of members) await subscribe(m, '$share/workers/plant/jobs/#', 1);
      const other = await connect(tb.port, plant());
      const otherBox = inbox(other);
      await subscribe(other, '$share/audit/plant/jobs/#', 0); // another group: a copy of its own
      const publisher = await connect(tb.port, plant());
      for (let i = 0; i < 9; i++) await publisher.publishAsync(`plant/jobs/${i}`, `job ${i}`, { qos: 1 });
      await withTimeout(
        (async () => {
          while (boxes.reduce((n, b) => n + b.packets.length, 0) < 9) await settle(20);
        })(),
        5000,
        'jobs not delivered',
      );
      await otherBox.until(9);
      await settle(200);
      expect(boxes.map((b) => b.packets.length)).to.deep.equal([3, 3, 3]);
      const jobs = boxes.flatMap((b) => b.packets.map((p) => p.payload.toString())).sort();
      expect(jobs).to.deep.equal([...Array(9).keys()].map((i) => `job ${i}`));
      expect(boxes.flatMap((b) => b.packets.map((p) => p.retain))).to.not.include(true);
    });

    it('are durable: a persistent member away gets the QoS 1 messages no connected member took, and its subscription survives a restart', async () => {
      const session = plant({ clientId: 'worker-1', clean: false, properties: { sessionExpiryInterval: 3600 } });
      const worker = await connect(tb.port, session);
      await subscribe(worker, '$share/workers/plant/jobs/#', 1);
      const helper = await connect(tb.port, plant());
      const helperBox = inbox(helper);
      await subscribe(helper, '$share/workers/plant/jobs/#', 1);
      await worker.endAsync();
      const publisher = await connect(tb.port, plant());
      await publisher.publishAsync('plant/jobs/1', 'while a member is connected', { qos: 1 });
      await helperBox.until(1);
      await helper.endAsync();
      await publisher.publishAsync('plant/jobs/2', 'to the member away', { qos: 1 });
      await publisher.publishAsync('plant/jobs/3', 'qos 0 is not kept', { qos: 0 });

      const back = mqtt.connect(clientOptions(tb.port, { ...session }));
      const backBox = inbox(back);
      await backBox.until(1);
      expect(backBox.packets.map((p) => p.payload.toString())).to.deep.equal(['to the member away']);
      back.end(true);

      await restartBroker();
      const afterRestart = mqtt.connect(clientOptions(tb.port, { ...session }));
      const restartBox = inbox(afterRestart);
      await withTimeout(new Promise((resolve) => afterRestart.once('connect', resolve)), 5000, 'not connected');
      const publisher2 = await connect(tb.port, plant());
      await publisher2.publishAsync('plant/jobs/4', 'after the restart', { qos: 1 });
      await restartBox.until(1);
      expect(restartBox.packets.map((p) => p.payload.toString())).to.deep.equal(['after the restart']);
      afterRestart.end(true);
    });

    it('with mosquitto_sub -V mqttv5: two members of a group share what mosquitto_pub sends', async () => {
      const subs = [
        await startMosquittoSub(cli('-t', '$share/cli/plant/cli/#', '-q', '1', '-F', '%p')),
        await startMosquittoSub(cli('-t', '$share/cli/plant/cli/#', '-q', '1', '-F', '%p')),
      ];
      for (let i = 0; i < 6; i++) expect((await runCli('mosquitto_pub', cli('-t', 'plant/cli/x', '-m', `m${i}`, '-q', '1'))).code).to.equal(0);
      await settle(500);
      for (const s of subs) s.kill();
      const outputs = await Promise.all(subs.map((s) => s.result));
      const lines = outputs.map((o) => printed(o.stdout));
      expect(lines.map((l) => l.length)).to.deep.equal([3, 3]);
      expect(lines.flat().sort()).to.deep.equal(['m0', 'm1', 'm2', 'm3', 'm4', 'm5']);
    });
  });

  describe('message expiry in the LMDB persistence', () => {
    it('keeps the absolute expiry of retained and queued messages across a restart', async () => {
      const session = plant({ clientId: 'reader', clean: false, properties: { sessionExpiryInterval: 3600 } });
      const reader = await connect(tb.port, session);
      await subscribe(reader, 'plant/q/#', 1);
      await reader.endAsync();
      const publisher = await connect(tb.port, plant());
      // All in flight at once: each PUBACK waits for the commit of its message (up to
      // storage.commitIntervalMs), one after another they could outlast the 2 s expiry.
      await Promise.all([
        publisher.publishAsync('plant/r/short', 'short', { qos: 1, retain: true, properties: { messageExpiryInterval: 2 } }),
        publisher.publishAsync('plant/r/long', 'long', { qos: 1, retain: true, properties: { messageExpiryInterval: 600 } }),
        publisher.publishAsync('plant/r/forever', 'forever', { qos: 1, retain: true }),
        publisher.publishAsync('plant/q/short', 'short', { qos: 1, properties: { messageExpiryInterval: 2 } }),
        publisher.publishAsync('plant/q/long', 'long', { qos: 1, properties: { messageExpiryInterval: 600 } }),
      ]);
      await restartBroker();

      const early = await connect(tb.port, plant());
      const earlyBox = inbox(early);
      await subscribe(early, 'plant/r/#', 1);
      await earlyBox.until(3);
      const expiry = Object.fromEntries(earlyBox.packets.map((p) => [p.topic, p.properties?.messageExpiryInterval]));
      expect(expiry['plant/r/short']).to.be.within(1, 2);
      expect(expiry['plant/r/long']).to.be.within(598, 600);
      expect(expiry['plant/r/forever']).to.equal(undefined);

      await settle(2100);
      const late = await connect(tb.port, plant());
      const lateBox = inbox(late);
      await subscribe(late, 'plant/r/#', 1);
      await lateBox.until(2);
      await settle(200);
      expect(lateBox.packets.map((p) => p.topic).sort()).to.deep.equal(['plant/r/forever', 'plant/r/long']);
      const back = mqtt.connect(clientOptions(tb.port, session));
      const backBox = inbox(back);
      await backBox.until(1);
      await settle(200);
      expect(backBox.packets.map((p) => [p.topic, p.properties?.messageExpiryInterval! > 590])).to.deep.equal([['plant/q/long', true]]);
      back.end(true);
    });

    it('with mosquitto_pub and mosquitto_sub -V mqttv5: a retained message comes with the time it has left (%E)', async () => {
      expect((await runCli('mosquitto_pub', cli('-t', 'plant/cli/retained', '-m', 'v', '-q', '1', '-r', '-D', 'publish', 'message-expiry-interval', '60'))).code).to.equal(0);
      const out = await runCli('mosquitto_sub', cli('-t', 'plant/cli/retained', '-C', '1', '-F', '%E %p'));
      const [seconds, payload] = out.stdout.trim().split(' ');
      expect(payload).to.equal('v');
      expect(Number(seconds)).to.be.within(58, 60);
    });
  });

  describe('offline queueing', () => {
    it('with mosquitto_sub -V mqttv5 -c: a session kept 60 s gets its queued message when it comes back asking for no expiry', async () => {
      const session = ['-i', 'cli-queue', '-c', '-q', '1', '-t', 'plant/cli/queue'];
      const first = await startMosquittoSub(cli(...session, '-x', '60'));
      first.kill(); // gone without unsubscribing: the session stays 60 s
      await first.result.catch(() => undefined);
      expect((await runCli('mosquitto_pub', cli('-t', 'plant/cli/queue', '-m', 'queued', '-q', '1'))).code).to.equal(0);
      // Back with clean start 0 and no Session Expiry Interval (0): the session and its queue are resumed.
      const back = await runCli('mosquitto_sub', cli(...session, '-x', '0', '-C', '1', '-W', '5', '-F', '%p'));
      expect(printed(back.stdout)).to.deep.equal(['queued']);
    });
  });

  describe('will delay and the session', () => {
    it('sends no will when the session is resumed within the Will Delay Interval [MQTT-3.1.3-9]', async () => {
      const watcher = await connect(tb.port, plant());
      const box = inbox(watcher);
      await subscribe(watcher, 'plant/status/#', 1);
      const will = { topic: 'plant/status/dev', payload: Buffer.from('offline'), qos: 1 as const, retain: false, properties: { willDelayInterval: 2 } };
      const dev = await raw({ clientId: 'dev', properties: { sessionExpiryInterval: 60 }, will });
      dev.end();
      await dev.closed;
      const back = await raw({ clientId: 'dev', clean: false, properties: { sessionExpiryInterval: 60 }, will });
      await settle(2600);
      expect(box.packets).to.have.length(0);
      back.end();
      await box.until(1, 4000); // the new connection's will, 2 s after it dropped
      expect(box.packets[0]!.properties ?? {}).to.not.have.property('willDelayInterval');
    });

    it('with mosquitto_sub -V mqttv5 killed: its will comes after the delay, without the will property', async () => {
      const watcher = await startMosquittoSub(cli('-t', 'plant/status/#', '-q', '1', '-C', '1', '-F', '%t %p'));
      const started = Date.now();
      const dying = await startMosquittoSub(cli('-t', 'plant/ignored', '-i', 'dying', '--will-topic', 'plant/status/dying', '--will-payload', 'gone', '--will-qos', '1', '-D', 'will', 'will-delay-interval', '1', '-D', 'connect', 'session-expiry-interval', '10'));
      dying.kill(); // SIGKILL: no DISCONNECT
      const out = await watcher.result;
      expect(printed(out.stdout)).to.deep.equal(['plant/status/dying gone']);
      expect(Date.now() - started).to.be.at.least(900);
    });
  });

  describe("the client's limits", () => {
    it('its Receive Maximum holds the replay of its queue at reconnect too', async () => {
      const session = { clientId: 'slow', clean: false, properties: { sessionExpiryInterval: 600, receiveMaximum: 2 } };
      const first = await raw(session);
      first.send({ cmd: 'subscribe', messageId: 1, subscriptions: [{ topic: 'plant/slow/#', qos: 1 }] });
      await first.next('suback');
      first.send({ cmd: 'disconnect' });
      await first.closed;
      const publisher = await connect(tb.port, plant());
      for (let i = 1; i <= 5; i++) await publisher.publishAsync(`plant/slow/${i}`, `m${i}`, { qos: 1 });
      const back = await raw(session);
      const a = (await back.next('publish')) as mqttPacket.IPublishPacket;
      const b = (await back.next('publish')) as mqttPacket.IPublishPacket;
      await settle(400);
      expect(back.received.filter((p) => p.cmd === 'publish'), 'more than 2 unacknowledged').to.have.length(2);
      const got = [a, b];
      while (got.length < 5) {
        back.send({ cmd: 'puback', messageId: got[got.length - 2]!.messageId! });
        got.push((await back.next('publish')) as mqttPacket.IPublishPacket);
      }
      expect(got.map((p) => String(p.payload))).to.deep.equal(['m1', 'm2', 'm3', 'm4', 'm5']);
    });

    it('a QoS 1 message too large for it is not sent and leaves its stored queue; mosquitto_sub -D connect maximum-packet-size gets only the small one', async () => {
      const session = { clientId: 'tiny', clean: false, properties: { sessionExpiryInterval: 600, maximumPacketSize: 100 } };
      const tiny = await raw(session);
      tiny.send({ cmd: 'subscribe', messageId: 1, subscriptions: [{ topic: 'plant/big/#', qos: 1 }] });
      await tiny.next('suback');
      const publisher = await connect(tb.port, plant());
      await publisher.publishAsync('plant/big/1', 'x'.repeat(200), { qos: 1 });
      await publisher.publishAsync('plant/big/2', 'small', { qos: 1 });
      const got = (await tiny.next('publish')) as mqttPacket.IPublishPacket;
      expect(String(got.payload)).to.equal('small');
      tiny.send({ cmd: 'puback', messageId: got.messageId! });
      await settle(200);
      expect(tb.broker.stats().persistence?.queuedMessages, 'nothing left queued').to.equal(0);

      const sub = await startMosquittoSub(cli('-t', 'plant/cli/size', '-q', '1', '-C', '1', '-F', '%p', '-D', 'connect', 'maximum-packet-size', '100'));
      await publisher.publishAsync('plant/cli/size', 'y'.repeat(200), { qos: 1 });
      await publisher.publishAsync('plant/cli/size', 'fits', { qos: 1 });
      expect(printed((await sub.result).stdout)).to.deep.equal(['fits']);
    });

    it('mosquitto_sub -V mqttv5 with two subscription identifiers gets both on one message (%S)', async () => {
      // Two SUBSCRIBE packets: mosquitto_sub sends its filters in one, with one identifier.
      const c = await connect(tb.port, plant());
      const box = inbox(c);
      await c.subscribeAsync('plant/si/#', { qos: 1, properties: { subscriptionIdentifier: 7 } });
      await c.subscribeAsync('plant/si/+', { qos: 0, properties: { subscriptionIdentifier: 8 } });
      const sub = await startMosquittoSub(cli('-t', 'plant/si/x', '-C', '1', '-F', '%S %p', '-D', 'subscribe', 'subscription-identifier', '42'));
      expect((await runCli('mosquitto_pub', cli('-t', 'plant/si/x', '-m', 'hello', '-q', '1'))).code).to.equal(0);
      expect(printed((await sub.result).stdout)).to.deep.equal(['42 hello']);
      await box.until(1);
      await settle(200);
      expect(box.packets).to.have.length(1);
      expect(box.packets[0]!.qos).to.equal(1);
      expect(([] as number[]).concat(box.packets[0]!.properties!.subscriptionIdentifier!).sort()).to.deep.equal([7, 8]);
    });
  });
});
