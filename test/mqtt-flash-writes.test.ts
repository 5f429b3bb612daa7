// What the broker writes to the store in normal operation, through the storage policy, with a
// real broker on 127.0.0.1 and mqtt.js clients: a QoS 1 copy a connected persistent subscriber
// acknowledges within the hold is never written, and its publisher's PUBACK waits for exactly
// that acknowledgement (not for the disk, not for other clients); copies for clients away are
// written in group commits; acknowledgements keep their order.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import type { IClientOptions, MqttClient } from 'mqtt';
import { openStore, type Store } from '../src/store/index.js';
import { createStoragePolicy, type StoragePolicy } from '../src/storage/index.js';
import { StaticMqttAccess } from './support/static-mqtt-access.js';
import { connect, connectWithInbox, endAllClients, makeCerts, startBroker, subscribe, withTimeout, type Certs, type TestBroker } from './support/mqtt-test-kit.js';

describe('broker writes through the storage policy', function () {
  this.timeout(30_000);
  const HOLD_MS = 5000;
  let certs: Certs;
  let dir: string;
  let store: Store;
  let policy: StoragePolicy;
  let tb: TestBroker;
  const access = () => new StaticMqttAccess([{ username: 'plant', password: 'plant-pw', permissions: [{ resource: '#', operation: 'readWrite' }] }]);
  const plant = (options: IClientOptions = {}): IClientOptions => ({ username: 'plant', password: 'plant-pw', ...options });

  before(async () => {
    certs = await makeCerts();
  });
  after(async () => {
    await certs.cleanup();
  });
  beforeEach(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'gatewayd-flash-writes-'));
    store = openStore({ dir });
    policy = createStoragePolicy({ store, timings: { holdMs: HOLD_MS, commitIntervalMs: 50, backgroundCommitMs: 60_000 } });
    tb = await startBroker(access(), certs, {}, { store, storage: policy });
  });
  afterEach(async () => {
    await endAllClients();
    await tb.stop();
    await policy.close();
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });

  /** Publishes QoS 1; resolves with the ms until its PUBACK. */
  function published(client: MqttClient, topic: string, payload: string): Promise<number> {
    const started = Date.now();
    return new Promise((resolve, reject) => client.publish(topic, payload, { qos: 1 }, (err) => (err ? reject(err) : resolve(Date.now() - started))));
  }

  it('writes nothing for QoS 1 copies a connected persistent subscriber acknowledges within the hold', async () => {
    const subscriber = await connectWithInbox(tb.port, plant({ clientId: 'dashboard', clean: false }));
    await subscribe(subscriber.client, 'line/#', 1);
    const publisher = await connect(tb.port, plant({ clientId: 'press' }));
    await policy.flush(); // the session's own records
    const before = policy.stats();
    const took = await Promise.all(Array.from({ length: 50 }, (_, i) => published(publisher, `line/${i % 5}`, `m${i}`)));
    await subscriber.inbox.until((m) => m.payload === 'm49');
    expect(subscriber.inbox.messages.filter((m) => m.topic.startsWith('line/'))).to.have.length(50);
    const after = policy.stats();
    expect(after.committedWrites - before.committedWrites, 'nothing written').to.equal(0);
    expect(after.commits - before.commits, 'no commit').to.equal(0);
    expect(after.cancelledWrites - before.cancelledWrites, 'every copy cancelled by its PUBACK').to.be.at.least(50);
    expect(Math.max(...took), 'PUBACKs came with the subscriber\'s acknowledgements, not after the hold').to.be.below(HOLD_MS);
  });

  it('answers a publisher that is itself a persistent subscriber of its topic: its own delivery flows while its PUBACK waits', async () => {
    const both = await connectWithInbox(tb.port, plant({ clientId: 'loopback', clean: false }));
    await subscribe(both.client, 'echo/#', 1);
    const took = await published(both.client, 'echo/1', 'hello');
    expect(took, 'no deadlock until the hold').to.be.below(HOLD_MS);
    expect((await both.inbox.until((m) => m.topic === 'echo/1')).payload).to.equal('hello');
  });

  it('holds a publisher\'s PUBACK until a slow persistent subscriber acknowledges; a publish nobody keeps a copy of is not held but keeps its place behind', async () => {
    const slow = await connect(tb.port, plant({ clientId: 'slow', clean: false }));
    await subscribe(slow, 'slow/#', 1);
    const release: (() => void)[] = [];
    // mqtt.js sends the PUBACK of a QoS 1 message once handleMessage calls back.
    slow.handleMessage = (_packet, callback) => void release.push(() => callback());
    const publisher = await connect(tb.port, plant({ clientId: 'publisher' }));
    const order: string[] = [];
    const first = published(publisher, 'slow/1', 'a').then(() => order.push('slow/1'));
    const second = published(publisher, 'nobody/1', 'b').then(() => order.push('nobody/1'));
    await withTimeout(
      (async () => {
        while (release.length === 0) await new Promise((r) => setTimeout(r, 10));
      })(),
      5000,
      'the slow subscriber did not get its message',
    );
    await new Promise((r) => setTimeout(r, 100)); // the PUBACKs must not come: give them time to show up
    expect(order, 'both wait: the second may not overtake the first (MQTT-4.6.0-2)').to.deep.equal([]);
    const before = policy.stats();
    release.shift()!();
    await Promise.all([first, second]);
    expect(order).to.deep.equal(['slow/1', 'nobody/1']);
    expect(policy.stats().committedWrites - before.committedWrites, 'acknowledged within the hold: not written').to.equal(0);
  });

  it('writes the copy of a client away in the next group commit and acknowledges the publisher then', async () => {
    const away = await connect(tb.port, plant({ clientId: 'away', clean: false }));
    await subscribe(away, 'queue/#', 1);
    await away.endAsync();
    const publisher = await connect(tb.port, plant({ clientId: 'publisher' }));
    const before = policy.stats();
    await Promise.all(Array.from({ length: 20 }, (_, i) => published(publisher, 'queue/x', `q${i}`)));
    const after = policy.stats();
    expect(after.committedWrites - before.committedWrites, 'each copy written').to.be.at.least(20);
    expect(after.commits - before.commits, 'in a few group commits, not one per message').to.be.at.most(5);
    const back = await connectWithInbox(tb.port, plant({ clientId: 'away', clean: false }));
    await back.inbox.until((m) => m.payload === 'q19');
    expect(back.inbox.messages.map((m) => m.payload)).to.deep.equal(Array.from({ length: 20 }, (_, i) => `q${i}`));
  });
});
