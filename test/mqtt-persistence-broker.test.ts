// The LMDB persistence under a real (bare) aedes 2 broker on 127.0.0.1, driven by mqtt.js:
// restarts, message order next to the disk, durable acknowledgements, session expiry.
import { rmSync } from 'node:fs';
import net from 'node:net';
import { expect } from 'chai';
import { acknowledgeWhenDurable, type DurabilityBarrier } from '../src/mqtt/persistence/index.js';
import { startBareBroker, type BareBroker } from './support/bare-aedes.js';
import { sessionPresent } from './support/broker-crash-kit.js';
import { tempDir } from './support/harness.js';
import { connect, connectWithInbox, endAllClients, subscribe, withTimeout } from './support/mqtt-test-kit.js';

/**
 * The persistence's barrier, plus a switch: while held, an acknowledgement that the real barrier
 * would make wait for its copies waits for release() as well.
 */
function heldBarrier(real: Required<DurabilityBarrier>): DurabilityBarrier & { hold(): void; release(): void; waiting: number } {
  let gate = Promise.resolve();
  let open = () => {};
  const barrier = {
    waiting: 0,
    writesFor: (packet: { topic: string; qos: number; retain?: boolean }) => real.writesFor(packet),
    whenSettled: (publishId: number) => {
      barrier.waiting++;
      return gate.then(() => real.whenSettled(publishId));
    },
    hold: () => {
      gate = new Promise<void>((resolve) => (open = resolve));
    },
    release: () => open(),
  };
  barrier.hold();
  return barrier;
}

/** Resolves once aedes has run the whole publish of `topic` (stored, forwarded, published hook). */
function published(broker: BareBroker, topic: string): Promise<void> {
  return new Promise((resolve) => {
    const listener = (packet: { topic: string }) => {
      if (packet.topic !== topic) return;
      broker.aedes.removeListener('publish', listener);
      // The 'publish' event comes right after the published hook: let the hook's callback run.
      setImmediate(resolve);
    };
    broker.aedes.on('publish', listener);
  });
}

/** A raw MQTT 3.1.1 connection, to send a retransmitted QoS 2 PUBLISH (dup) by hand. */
async function rawClient(port: number, clientId: string): Promise<{ socket: net.Socket; received: Buffer[]; publishQos2(topic: string, messageId: number, dup: boolean): void; until(byte: number): Promise<void> }> {
  const socket = net.connect(port, '127.0.0.1');
  const received: Buffer[] = [];
  const waiters: { byte: number; resolve: () => void }[] = [];
  socket.on('data', (chunk: Buffer) => {
    received.push(chunk);
    for (const w of [...waiters]) if (chunk[0] === w.byte) waiters.splice(waiters.indexOf(w), 1) && w.resolve();
  });
  const until = (byte: number) => withTimeout(new Promise<void>((resolve) => (received.some((c) => c[0] === byte) ? resolve() : waiters.push({ byte, resolve }))), 5000, `packet 0x${byte.toString(16)} not received`);
  const id = Buffer.from(clientId);
  const body = Buffer.concat([Buffer.from([0, 4]), Buffer.from('MQTT'), Buffer.from([4, 2, 0, 60, 0, id.length]), id]);
  socket.write(Buffer.concat([Buffer.from([0x10, body.length]), body]));
  await until(0x20);
  received.length = 0;
  return {
    socket,
    received,
    until,
    publishQos2(topic, messageId, dup) {
      const t = Buffer.from(topic);
      const rest = Buffer.concat([Buffer.from([0, t.length]), t, Buffer.from([messageId >> 8, messageId & 0xff]), Buffer.from('payload')]);
      socket.write(Buffer.concat([Buffer.from([0x34 | (dup ? 0x08 : 0), rest.length]), rest]));
    },
  };
}

describe('mqtt persistence under aedes 2', function () {
  this.timeout(30_000);
  let dir: string;
  let broker: BareBroker | undefined;

  beforeEach(() => {
    dir = tempDir('gatewayd-persistence-broker-');
  });
  afterEach(async () => {
    await endAllClients();
    await broker?.close();
    broker = undefined;
    rmSync(dir, { recursive: true, force: true });
  });

  it('a persistent session, its queued QoS 1 and 2 messages (MQTT 5 properties included) and retained messages survive a broker restart', async () => {
    broker = await startBareBroker({ dir });
    const session = { clientId: 'actuator', clean: false, protocolVersion: 5 as const, properties: { sessionExpiryInterval: 3600 } };
    const subscriber = await connect(broker.port, session);
    await subscriber.subscribeAsync('plant/cmd/#', { qos: 2 });
    await subscriber.endAsync();
    const publisher = await connect(broker.port, { protocolVersion: 5 });
    await publisher.publishAsync('plant/cmd/valve', 'open', { qos: 1, properties: { userProperties: { origin: 'scada' }, contentType: 'text/plain' } });
    await publisher.publishAsync('plant/cmd/pump', 'start', { qos: 2 });
    await publisher.publishAsync('plant/state/tank', '73%', { qos: 0, retain: true });
    await publisher.endAsync();
    await broker.close();

    broker = await startBareBroker({ dir });
    const back = await connectWithInbox(broker.port, session);
    expect(sessionPresent(back.client)).to.equal(true);
    const valve = new Promise<{ properties?: { userProperties?: unknown; contentType?: string } }>((resolve) => back.client.on('message', (topic, _payload, packet) => topic === 'plant/cmd/valve' && resolve(packet as never)));
    expect((await back.inbox.until((m) => m.topic === 'plant/cmd/valve')).payload).to.equal('open');
    expect((await back.inbox.until((m) => m.topic === 'plant/cmd/pump')).payload).to.equal('start');
    const valvePacket = await valve;
    expect(valvePacket.properties?.userProperties).to.deep.equal({ origin: 'scada' });
    expect(valvePacket.properties?.contentType).to.equal('text/plain');
    const reader = await connectWithInbox(broker.port, {});
    await subscribe(reader.client, 'plant/state/#', 1);
    expect((await reader.inbox.until((m) => m.topic === 'plant/state/tank')).payload).to.equal('73%');
    // Acknowledged deliveries leave the queue.
    for (let i = 0; i < 500 && broker.persistence!.stats().queuedMessages > 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(broker.persistence!.stats().queuedMessages).to.equal(0);
  });

  it('a live subscriber gets a QoS 1 message that also went to an offline queue, and the QoS 0 one published right after', async () => {
    // aedes drops a delivery whose broker counter is older than one the subscriber already got:
    // the persistence must not delay the QoS 1 publish behind its disk write.
    broker = await startBareBroker({ dir });
    const offline = await connect(broker.port, { clientId: 'offline', clean: false });
    await subscribe(offline, 'a', 1);
    await offline.endAsync();
    const live = await connectWithInbox(broker.port, {});
    await subscribe(live.client, '#', 1);
    const a = await connect(broker.port, {});
    const b = await connect(broker.port, {});
    for (let i = 0; i < 20; i++) {
      await a.publishAsync('a', `a${i}`, { qos: 1 });
      b.publish('b', `b${i}`, { qos: 0 });
    }
    await live.inbox.until((m) => m.payload === 'b19');
    await live.inbox.until((m) => m.payload === 'a19');
    expect(live.inbox.messages.filter((m) => m.topic === 'a')).to.have.length(20);
  });

  it('holds the PUBACK of a QoS 1 publish that wrote to the store until it is durable, not one that wrote nothing', async () => {
    broker = await startBareBroker({ dir, durableAcks: false });
    const barrier = heldBarrier(broker.persistence!);
    acknowledgeWhenDurable(broker.aedes, barrier);
    const publisher = await connect(broker.port, {});
    const acks: string[] = [];
    const puback = (topic: string, retain: boolean) => new Promise<void>((resolve) => publisher.publish(topic, 'x', { qos: 1, retain }, () => resolve(void acks.push(topic))));
    await withTimeout(puback('no/state', false), 5000, 'PUBACK of a publish that wrote nothing');

    const stored = published(broker, 'plant/state');
    const retainedAck = puback('plant/state', true);
    await stored;
    await new Promise((r) => setTimeout(r, 50)); // the PUBACK must not come: give it time to show up
    expect(acks).to.deep.equal(['no/state']);
    expect(barrier.waiting).to.equal(1);
    barrier.release();
    await withTimeout(retainedAck, 5000, 'PUBACK after release');
    expect(acks).to.deep.equal(['no/state', 'plant/state']);
  });

  it('holds the PUBREC of a new QoS 2 publish until its copies are safe; a retransmission is answered at once', async () => {
    broker = await startBareBroker({ dir, durableAcks: false });
    const barrier = heldBarrier(broker.persistence!);
    acknowledgeWhenDurable(broker.aedes, barrier);
    // A persistent subscriber away: the publish queues a copy for it.
    const away = await connect(broker.port, { clientId: 'q2-away', clean: false });
    await subscribe(away, 'q2/#', 2);
    await away.endAsync();
    const raw = await rawClient(broker.port, 'raw-qos2');
    const done = published(broker, 'q2/topic');
    raw.publishQos2('q2/topic', 7, false);
    await done;
    await new Promise((r) => setTimeout(r, 50)); // the PUBREC must not come: give it time to show up
    expect(raw.received.filter((c) => c[0] === 0x50)).to.have.length(0);
    barrier.release();
    await raw.until(0x50);
    // A retransmission of the same packet (its PUBREC was lost) is not published again: nothing
    // new to wait for, the PUBREC comes while the barrier holds everything else.
    raw.received.length = 0;
    barrier.hold();
    const waiting = barrier.waiting;
    raw.publishQos2('q2/topic', 7, true);
    await raw.until(0x50);
    expect(barrier.waiting).to.equal(waiting);
    raw.socket.destroy();
  });

  it('knows a persistent session from the first connect, without subscriptions, across a restart', async () => {
    broker = await startBareBroker({ dir });
    const quiet = await connect(broker.port, { clientId: 'quiet-device', clean: false });
    const passing = await connect(broker.port, { clientId: 'passing-by', clean: true });
    expect([broker.persistence!.hasSession('quiet-device'), broker.persistence!.hasSession('passing-by')]).to.deep.equal([true, false]);
    await Promise.all([quiet.endAsync(), passing.endAsync()]);
    await broker.close();
    broker = await startBareBroker({ dir });
    expect(broker.persistence!.hasSession('quiet-device')).to.equal(true);
  });

  it('wipes an abandoned persistent session: the device then gets sessionPresent 0, no old subscription and no queued message', async () => {
    let now = Date.now();
    broker = await startBareBroker({ dir, limits: { sessionExpirySeconds: 3600 }, persistence: { now: () => now } });
    const device = { clientId: 'gone-device', clean: false };
    const first = await connect(broker.port, device);
    await subscribe(first, 'cmd/#', 1);
    await first.endAsync();
    const publisher = await connect(broker.port, {});
    await publisher.publishAsync('cmd/x', 'queued', { qos: 1 });
    expect(broker.persistence!.stats()).to.include({ sessions: 1, queuedMessages: 1 });
    now += 3599_000;
    expect(broker.persistence!.sweepExpiredSessions()).to.equal(0);
    now += 2000;
    expect(broker.persistence!.sweepExpiredSessions()).to.equal(1);
    expect(broker.persistence!.stats()).to.include({ sessions: 0, queuedMessages: 0, subscriptions: 0 });
    const back = await connectWithInbox(broker.port, device);
    expect(sessionPresent(back.client)).to.equal(false);
    expect(await broker.persistence!.subscriptionsByClient({ id: 'gone-device' })).to.deep.equal([]);
    expect(back.inbox.messages).to.deep.equal([]);
  });
});
