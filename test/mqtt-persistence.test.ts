// The LMDB persistence on its own (real LMDB in temp dirs): what survives a reopen of the store,
// retained lookups by prefix, the caps, session expiry, reload after a restore, durability marks.
import { EventEmitter } from 'node:events';
import { rmSync } from 'node:fs';
import type { Readable } from 'node:stream';
import { expect } from 'chai';
import sinon from 'sinon';
import { loadConfig } from '../src/config/index.js';
import { createLmdbPersistence, persistenceLimits, type LmdbPersistence, type LmdbPersistenceDeps } from '../src/mqtt/persistence/index.js';
import { literalPrefix, topicMatches } from '../src/mqtt/persistence/topic-filter.js';
import { openStore, type Store } from '../src/store/index.js';
import { createStoragePolicy, STORAGE_DEFAULTS } from '../src/storage/index.js';
import { TEST_LIMITS } from './support/bare-aedes.js';
import { capturedLog } from './support/captured-log.js';
import { tempDir } from './support/harness.js';

async function list<T = Record<string, unknown>>(stream: Readable): Promise<T[]> {
  const out: T[] = [];
  for await (const item of stream) out.push(item as T);
  return out;
}

const DAY = 24 * 3600 * 1000;

/** A packet as aedes hands it to outgoingEnqueueCombi. */
function queued(topic: string, payload: string, brokerCounter: number, qos = 1) {
  return { cmd: 'publish', topic, payload: Buffer.from(payload), qos, retain: false, dup: false, brokerId: 'broker-1', brokerCounter };
}

function retained(topic: string, payload: string) {
  return { cmd: 'publish', topic, payload: Buffer.from(payload), qos: 0, retain: true };
}

const capturingLogger = () => capturedLog('debug');

describe('mqtt persistence: LMDB broker state', function () {
  this.timeout(30_000);
  let dir: string;
  let store: Store;
  const open: LmdbPersistence[] = [];

  type TestDeps = Partial<Omit<LmdbPersistenceDeps, 'limits'>> & { limits?: Partial<LmdbPersistenceDeps['limits']> };

  function persistence(deps: TestDeps = {}): LmdbPersistence {
    const p = createLmdbPersistence({ store, ...deps, limits: { ...TEST_LIMITS, ...deps.limits } });
    open.push(p);
    return p;
  }

  /** Destroys the persistence, closes the store and opens both again on the same directory. */
  async function restart(p: LmdbPersistence, deps: TestDeps = {}): Promise<LmdbPersistence> {
    await p.destroy();
    await store.close();
    store = openStore({ dir });
    return persistence(deps);
  }

  beforeEach(() => {
    dir = tempDir('gatewayd-persistence-');
    store = openStore({ dir });
  });
  afterEach(async () => {
    await Promise.all(open.splice(0).map((p) => p.destroy()));
    await store.close().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  });

  it('keeps retained messages, sessions, subscriptions, queues, in-flight packets and wills across a restart', async () => {
    let p = persistence();
    await p.setup({ id: 'broker-1' });
    await p.storeRetained(retained('plant/a/state', 'on'));
    await p.storeRetained(retained('plant/b/state', 'off'));
    await p.storeRetained(retained('other', 'x'));
    const device = { id: 'device-1' };
    await p.addSubscriptions(device, [
      { topic: 'cmd/#', qos: 1, rh: 0, rap: false, nl: false },
      { topic: 'info', qos: 0, rh: 0, rap: false, nl: false },
      { topic: 'v5/+', qos: 2, rh: 1, rap: true, nl: true, subscriptionIdentifier: 7 },
    ]);
    await p.outgoingEnqueueCombi([{ clientId: 'device-1' }], queued('cmd/1', 'one', 1));
    await p.outgoingEnqueueCombi([{ clientId: 'device-1' }], queued('cmd/2', 'two', 2, 2));
    await p.outgoingEnqueueCombi([{ clientId: 'device-1' }], queued('cmd/3', 'three', 3));
    await p.outgoingUpdate(device, { ...queued('cmd/1', 'one', 1), messageId: 11 });
    await p.outgoingUpdate(device, { ...queued('cmd/2', 'two', 2, 2), messageId: 12 });
    await p.outgoingUpdate(device, { cmd: 'pubrel', messageId: 12 });
    await p.incomingStorePacket({ id: 'publisher-1' }, { cmd: 'publish', topic: 'in', payload: Buffer.from('qos2'), qos: 2, messageId: 5 });
    const will = { topic: 'device-1/status', payload: Buffer.from('gone'), qos: 1, retain: true };
    await p.putWill({ id: 'device-1' }, will);

    p = await restart(p);
    await p.setup({ id: 'broker-2' });

    expect((await list<{ topic: string }>(p.createRetainedStream('#'))).map((r) => r.topic).sort()).to.deep.equal(['other', 'plant/a/state', 'plant/b/state']);
    expect((await list<{ payload: Buffer }>(p.createRetainedStream('plant/+/state'))).map((r) => r.payload.toString()).sort()).to.deep.equal(['off', 'on']);
    expect(await p.subscriptionsByClient(device)).to.deep.equal([
      { topic: 'cmd/#', qos: 1, rh: 0, rap: false, nl: false },
      { topic: 'info', qos: 0, rh: 0, rap: false, nl: false },
      { topic: 'v5/+', qos: 2, rh: 1, rap: true, nl: true, subscriptionIdentifier: 7 },
    ]);
    expect(await p.subscriptionsByTopic('cmd/9')).to.deep.equal([{ clientId: 'device-1', topic: 'cmd/#', qos: 1, rh: 0, rap: false, nl: false }]);
    expect(await p.countOffline()).to.deep.equal({ subsCount: 2, clientsCount: 1 });

    const queue = await list<{ cmd: string; topic?: string; messageId?: number }>(p.outgoingStream(device));
    expect(queue.map((q) => [q.cmd, q.topic, q.messageId])).to.deep.equal([
      ['publish', 'cmd/1', 11],
      ['pubrel', undefined, 12],
      ['publish', 'cmd/3', undefined],
    ]);
    expect(Buffer.isBuffer((queue[0] as { payload?: unknown }).payload)).to.equal(true);
    const acked = await p.outgoingClearMessageId(device, { messageId: 11 });
    expect(acked?.topic).to.equal('cmd/1');
    await p.outgoingUpdate(device, { ...queued('cmd/3', 'three', 3), messageId: 13 });
    expect((await list<{ messageId?: number }>(p.outgoingStream(device))).map((q) => q.messageId)).to.deep.equal([12, 13]);

    const incoming = await p.incomingGetPacket({ id: 'publisher-1' }, { messageId: 5 });
    expect([incoming.topic, (incoming.payload as Buffer).toString(), incoming.messageId]).to.deep.equal(['in', 'qos2', 5]);

    // The will of a client of the previous run (broker-1) is one to publish now.
    const wills = await list<{ clientId: string; brokerId: string; topic: string }>(p.streamWill({ 'broker-2': Date.now() }));
    expect(wills.map((w) => [w.clientId, w.brokerId, w.topic])).to.deep.equal([['device-1', 'broker-1', 'device-1/status']]);
    expect(await list(p.streamWill({ 'broker-1': Date.now() }))).to.deep.equal([]);
    expect(p.stats()).to.include({ sessions: 2, subscriptions: 3, queuedMessages: 2, retainedMessages: 3 });
  });

  it('opens without reading a queued message: the queue lengths come from the keys', async () => {
    let p = persistence({ limits: { maxQueuedMessages: 100 } });
    await p.setup({ id: 'b' });
    for (let s = 0; s < 20; s++) {
      await p.addSubscriptions({ id: `d${s}` }, [{ topic: `d${s}/#`, qos: 1 }]);
      for (let m = 0; m < 30; m++) await p.outgoingEnqueue({ clientId: `d${s}` }, queued(`d${s}/x`, `m${m}`, s * 100 + m));
    }
    await p.destroy();
    await store.close();
    store = openStore({ dir });
    // lmdb-js makes one database class per environment: spy on the new one's reads.
    const lmdb = Object.getPrototypeOf(store.users) as Record<'get' | 'getRange' | 'getValues', (...args: unknown[]) => unknown>;
    const reads = (['get', 'getRange', 'getValues'] as const).map((method) => sinon.spy(lmdb, method));
    try {
      p = persistence({ limits: { maxQueuedMessages: 100 } });
      const calls = reads.flatMap((spy) => spy.getCalls()).map((call) => ({ db: (call.thisValue as { name?: string }).name, options: call.args[0] as { values?: boolean } | undefined }));
      expect(calls.map((c) => c.db)).to.include('mqtt-sessions').and.include('mqtt-outgoing');
      // getKeys and getKeysCount read with values: false; nothing else touches the queues.
      expect(calls.filter((c) => c.db === 'mqtt-outgoing' && c.options?.values !== false)).to.deep.equal([]);
    } finally {
      reads.forEach((spy) => spy.restore());
    }
    expect(p.stats()).to.include({ sessions: 20, queuedMessages: 600 });
    expect((await list(p.outgoingStream({ id: 'd7' }))).length).to.equal(30);
  });

  it('reads a retained pattern with a literal start as a range of that prefix only', async () => {
    const p = persistence();
    await p.setup({ id: 'b' });
    for (let i = 0; i < 300; i++) await p.storeRetained(retained(`zone/${i}/temp`, String(i)));
    await p.storeRetained(retained('plant/1/temp', 'p1'));
    await p.storeRetained(retained('plant/1', 'parent'));
    await p.storeRetained(retained('plant/10/temp', 'p10'));
    await p.storeRetained(retained('plant/1/a/b', 'deep'));
    await p.flush();

    const getRange = sinon.spy(Object.getPrototypeOf(store.users) as { getRange: (...args: unknown[]) => unknown }, 'getRange');
    try {
      expect((await list<{ payload: Buffer }>(p.createRetainedStream('plant/1/+'))).map((r) => r.payload.toString())).to.deep.equal(['p1']);
      expect((await list<{ payload: Buffer }>(p.createRetainedStream('plant/1/#'))).map((r) => r.payload.toString()).sort()).to.deep.equal(['deep', 'p1', 'parent']);
      expect((await list<{ payload: Buffer }>(p.createRetainedStream('plant/+/temp'))).map((r) => r.payload.toString()).sort()).to.deep.equal(['p1', 'p10']);
      // Every range read of the retained database (binary keys) stayed inside 'plant/...'.
      const ranges = getRange.getCalls().map((c) => c.args[0] as { start?: unknown; end?: unknown }).filter((o) => Buffer.isBuffer(o?.start));
      expect(ranges).to.have.length(3);
      for (const range of ranges) {
        expect((range.start as Buffer).toString()).to.match(/^plant\//);
        expect((range.end as Buffer).toString()).to.match(/^plant[/0]/);
      }
    } finally {
      getRange.restore();
    }
    expect(await list(p.createRetainedStream('#'))).to.have.length(304);
  });

  it('matches filters as MQTT does: + and # levels, the parent of #, no $ topics for a leading wildcard', () => {
    expect(topicMatches('a/+/c', 'a/b/c')).to.equal(true);
    expect(topicMatches('a/+/c', 'a//c')).to.equal(true);
    expect(topicMatches('a/+', 'a/b/c')).to.equal(false);
    expect(topicMatches('a/#', 'a')).to.equal(true);
    expect(topicMatches('a/#', 'ab')).to.equal(false);
    expect(topicMatches('#', '$SYS/x')).to.equal(false);
    expect(topicMatches('+/x', '$SYS/x')).to.equal(false);
    expect(topicMatches('$SYS/#', '$SYS/x')).to.equal(true);
    expect([literalPrefix('a/b/+/c'), literalPrefix('a/b/#'), literalPrefix('#'), literalPrefix('+/a'), literalPrefix('a/b')]).to.deep.equal(['a/b/', 'a/b', '', '', 'a/b']);
  });

  it('stores topics and client ids longer than an LMDB key, with multi-byte characters', async () => {
    let p = persistence();
    await p.setup({ id: 'b' });
    const stem = 'plant/' + 'ü'.repeat(1500); // 3,000 bytes
    const longA = `${stem}/a`;
    const longB = `${stem}/b`;
    const clientId = 'c'.repeat(2000);
    await p.storeRetained(retained(longA, 'A'));
    await p.storeRetained(retained(longB, 'B'));
    await p.storeRetained(retained('plant/😀/x', 'emoji'));
    await p.addSubscriptions({ id: clientId }, [{ topic: `${stem}/#`, qos: 1 }]);
    await p.outgoingEnqueueCombi(await p.subscriptionsByTopic(longA), queued(longA, 'queued', 1));
    p = await restart(p);
    await p.setup({ id: 'b' });
    expect((await list<{ topic: string }>(p.createRetainedStream(`${stem}/+`))).map((r) => r.topic).sort()).to.deep.equal([longA, longB]);
    expect((await list<{ payload: Buffer }>(p.createRetainedStream(longB))).map((r) => r.payload.toString())).to.deep.equal(['B']);
    expect((await list<{ payload: Buffer }>(p.createRetainedStream('plant/+/x'))).map((r) => r.payload.toString())).to.deep.equal(['emoji']);
    expect((await p.subscriptionsByTopic(longB)).map((s) => s.clientId)).to.deep.equal([clientId]);
    expect((await list<{ topic: string }>(p.outgoingStream({ id: clientId }))).map((q) => q.topic)).to.deep.equal([longA]);
  });

  it('keeps $SYS retained messages in memory only: not written to flash, not matched by #', async () => {
    let p = persistence();
    await p.setup({ id: 'b' });
    await p.storeRetained(retained('$SYS/broker/uptime', '5'));
    await p.storeRetained(retained('plant/x', '1'));
    expect((await list<{ topic: string }>(p.createRetainedStream('#'))).map((r) => r.topic)).to.deep.equal(['plant/x']);
    expect((await list<{ topic: string }>(p.createRetainedStream('$SYS/#'))).map((r) => r.topic)).to.deep.equal(['$SYS/broker/uptime']);
    expect(p.stats().retainedMessages).to.equal(1);
    p = await restart(p);
    expect(await list(p.createRetainedStream('$SYS/#'))).to.deep.equal([]);
  });

  it('drops new messages for a full session queue (tail drop), counts them and warns once per episode', async () => {
    const { log, lines } = capturingLogger();
    const p = persistence({ log, limits: { maxQueuedMessages: 3 } });
    await p.setup({ id: 'broker-1' });
    const client = { id: 'slow' };
    await p.addSubscriptions(client, [{ topic: 't', qos: 1 }]);
    for (let i = 1; i <= 5; i++) await p.outgoingEnqueueCombi([{ clientId: 'slow' }, { clientId: 'other' }], queued('t', `m${i}`, i));
    const payloads = async (id: string) => (await list<{ payload: Buffer }>(p.outgoingStream({ id }))).map((q) => q.payload.toString());
    expect(await payloads('slow')).to.deep.equal(['m1', 'm2', 'm3']);
    expect(await payloads('other')).to.deep.equal(['m1', 'm2', 'm3']);
    expect(p.stats()).to.include({ queueDrops: 4, queuedMessages: 6 });
    expect(lines.filter((l) => l.message === 'mqtt session queue full: new messages are dropped until it has room')).to.have.length(1);
    await p.outgoingUpdate(client, { ...queued('t', 'm1', 1), messageId: 1 });
    await p.outgoingClearMessageId(client, { messageId: 1 });
    await p.outgoingEnqueueCombi([{ clientId: 'slow' }], queued('t', 'm6', 6));
    expect(await payloads('slow')).to.deep.equal(['m2', 'm3', 'm6']);
    expect(p.stats().queuedMessages).to.equal(6);
  });

  it('refuses new retained topics beyond the count and byte caps, keeps updating existing ones', async () => {
    const { log, lines } = capturingLogger();
    const p = persistence({ log, limits: { maxRetainedMessages: 2, maxRetainedBytes: 100 } });
    await p.setup({ id: 'b' });
    const payloadOf = async (topic: string) => (await list<{ payload: Buffer }>(p.createRetainedStream(topic))).map((r) => r.payload.toString())[0];
    await p.storeRetained(retained('a', '1'));
    await p.storeRetained(retained('b', '1'));
    await p.storeRetained(retained('c', '1'));
    expect(await payloadOf('c')).to.equal(undefined);
    await p.storeRetained(retained('a', '22'));
    expect(await payloadOf('a')).to.equal('22');
    await p.storeRetained({ ...retained('b', ''), payload: Buffer.alloc(0) });
    await p.storeRetained(retained('c', '1'));
    expect(await payloadOf('c')).to.equal('1');
    expect(p.stats()).to.include({ retainedMessages: 2, retainedBytes: 5, retainedRefused: 1 });
    expect(lines.some((l) => l.message === 'mqtt retained message not stored: the retained limit is reached' && l.topic === 'c')).to.equal(true);

    // Bytes: an update that would grow the total beyond the cap removes the topic's old message.
    await p.storeRetained(retained('a', 'x'.repeat(96)));
    expect(p.stats().retainedBytes).to.equal(99);
    await p.storeRetained(retained('c', 'yyy'));
    expect(await payloadOf('c')).to.equal(undefined);
    expect(p.stats()).to.include({ retainedMessages: 1, retainedBytes: 97, retainedRefused: 2 });
    await p.storeRetained(retained('a', 'z'));
    expect(p.stats()).to.include({ retainedMessages: 1, retainedBytes: 2 });
  });

  describe('session expiry', () => {
    let now: number;
    let broker: EventEmitter & { id: string; clients: Record<string, unknown> };

    function expiring(deps: TestDeps = {}): LmdbPersistence {
      return persistence({ now: () => now, limits: { sessionExpirySeconds: 7 * 24 * 3600 }, ...deps });
    }

    function connectClient(client: { id: string; clean?: boolean; version?: number; sessionExpiryInterval?: number }): void {
      broker.clients[client.id] = client;
      broker.emit('client', client);
    }

    function disconnectClient(client: { id: string }): void {
      delete broker.clients[client.id];
      broker.emit('clientDisconnect', client);
    }

    beforeEach(() => {
      now = Date.UTC(2030, 0, 1);
      broker = Object.assign(new EventEmitter(), { id: 'broker-1', clients: {} as Record<string, unknown> });
    });

    async function fillSession(p: LmdbPersistence, id: string): Promise<void> {
      await p.addSubscriptions({ id }, [{ topic: `${id}/cmd`, qos: 1 }]);
      await p.outgoingEnqueueCombi([{ clientId: id }], queued(`${id}/cmd`, 'x', 1));
      await p.incomingStorePacket({ id }, { cmd: 'publish', topic: 'in', payload: Buffer.from('x'), qos: 2, messageId: 3 });
      await p.putWill({ id }, { topic: `${id}/will`, payload: Buffer.from('gone'), qos: 0, retain: false });
    }

    async function present(p: LmdbPersistence, id: string): Promise<boolean[]> {
      return [
        (await p.subscriptionsByClient({ id })).length > 0,
        (await list(p.outgoingStream({ id }))).length > 0,
        await p.incomingGetPacket({ id }, { messageId: 3 }).then(() => true, () => false),
        (await p.getWill({ id })) !== undefined,
      ];
    }

    it('wipes an MQTT 3.1.1 persistent session sessionExpirySeconds after its client left, never while it is connected', async () => {
      const p = expiring();
      await p.setup(broker);
      const device = { id: 'device', clean: false, version: 4 };
      const online = { id: 'online', clean: false, version: 4 };
      connectClient(device);
      connectClient(online);
      await fillSession(p, 'device');
      await fillSession(p, 'online');
      now += 30 * DAY;
      expect(p.sweepExpiredSessions()).to.equal(0);
      disconnectClient(device);
      now += 7 * DAY - 1000;
      expect(p.sweepExpiredSessions()).to.equal(0);
      now += 2000;
      expect(p.sweepExpiredSessions()).to.equal(1);
      expect(await present(p, 'device')).to.deep.equal([false, false, false, false]);
      expect(await present(p, 'online')).to.deep.equal([true, true, true, true]);
      expect(p.stats()).to.include({ sessions: 1, sessionsExpired: 1, queuedMessages: 1 });
    });

    it('uses the MQTT 5 session expiry interval of the client, bounded by sessionExpirySeconds', async () => {
      const p = expiring();
      await p.setup(broker);
      const short = { id: 'short', clean: false, version: 5, sessionExpiryInterval: 60 };
      const forever = { id: 'forever', clean: false, version: 5, sessionExpiryInterval: 0xffffffff };
      for (const client of [short, forever]) {
        connectClient(client);
        await fillSession(p, client.id);
        disconnectClient(client);
      }
      now += 61_000;
      expect(p.sweepExpiredSessions()).to.equal(1);
      expect((await present(p, 'short'))[0]).to.equal(false);
      now += 7 * DAY;
      expect(p.sweepExpiredSessions()).to.equal(1);
      expect((await present(p, 'forever'))[0]).to.equal(false);
    });

    it('resumeSession: a returning client finds a live or unexpired session, with or without subscriptions; an expired one the sweep has not reached is wiped at once', async () => {
      const p = expiring({ sweepIntervalMs: 3_600_000 });
      await p.setup(broker);
      const quiet = { id: 'quiet', clean: false, version: 4 };
      const busy = { id: 'busy', clean: false, version: 4 };
      const brief = { id: 'brief', clean: false, version: 5, sessionExpiryInterval: 0 };
      for (const client of [quiet, busy, brief]) connectClient(client);
      await fillSession(p, 'busy');
      expect([p.resumeSession('quiet'), p.resumeSession('busy'), p.resumeSession('brief'), p.resumeSession('never-seen')], 'while connected').to.deep.equal([true, true, false, false]);
      for (const client of [quiet, busy, brief]) disconnectClient(client);
      now += 7 * DAY - 1000;
      expect([p.resumeSession('quiet'), p.resumeSession('busy'), p.resumeSession('brief')], 'before the expiry').to.deep.equal([true, true, false]);
      now += 2000;
      expect([p.resumeSession('quiet'), p.resumeSession('busy')], 'after it').to.deep.equal([false, false]);
      expect(await present(p, 'busy')).to.deep.equal([false, false, false, false]);
      expect(p.stats()).to.include({ sessions: 0, sessionsExpired: 2, queuedMessages: 0 });
    });

    it('wipes what a clean session left (a will, a QoS 2 packet in flight) once it disconnects', async () => {
      const p = expiring();
      await p.setup(broker);
      const client = { id: 'clean-one', clean: true, version: 4 };
      connectClient(client);
      await p.putWill(client, { topic: 'w', payload: Buffer.from('x'), qos: 0, retain: false });
      await p.incomingStorePacket(client, { cmd: 'publish', topic: 'in', payload: Buffer.from('x'), qos: 2, messageId: 3 });
      expect(p.sweepExpiredSessions()).to.equal(0);
      disconnectClient(client);
      expect(p.sweepExpiredSessions()).to.equal(1);
      expect(p.stats().sessions).to.equal(0);
    });

    it('a clean start discards the QoS 2 packets the client had not released, also those stored before a restart [MQTT-3.1.2-4]', async () => {
      let p = expiring();
      await p.setup(broker);
      const client = { id: 'qos2-device', clean: false, version: 5, sessionExpiryInterval: 3600 };
      connectClient(client);
      const publish = (messageId: number) => ({ cmd: 'publish', topic: 'in', payload: Buffer.from(`m${messageId}`), qos: 2, messageId });
      await p.incomingStorePacket(client, publish(1));
      await p.incomingStorePacket(client, publish(1)); // a retransmission: still one
      await p.incomingStorePacket(client, publish(2));
      await p.incomingDelPacket(client, { messageId: 2 }); // released
      await p.incomingStorePacket(client, publish(3));
      disconnectClient(client);
      p = await restart(p, { now: () => now, limits: { sessionExpirySeconds: 7 * 24 * 3600 } });
      await p.setup(broker);
      expect((await p.incomingGetPacket(client, { messageId: 1 })).payload).to.deep.equal(Buffer.from('m1'));
      // aedes asks cleanSubscriptions at every clean start: a new packet 1 must not pass for a retransmission.
      await p.cleanSubscriptions(client);
      for (const messageId of [1, 3]) {
        let found = true;
        await p.incomingGetPacket(client, { messageId }).catch(() => (found = false));
        expect(found, `packet ${messageId}`).to.equal(false);
      }
    });

    it('sweeps retained messages past their Message Expiry Interval, also after a restart', async () => {
      let p = expiring();
      await p.setup(broker);
      const message = (topic: string, messageExpiry?: number) => ({ cmd: 'publish', topic, payload: Buffer.from(topic), qos: 0, retain: true, ...(messageExpiry ? { messageExpiry } : {}) });
      await p.storeRetained(message('r/soon', now + 1000));
      await p.storeRetained(message('r/later', now + 60_000));
      await p.storeRetained(message('r/never'));
      await p.storeRetained(message('r/renewed', now + 1000));
      await p.storeRetained(message('r/renewed')); // the newer message has no expiry
      p = await restart(p, { now: () => now, limits: { sessionExpirySeconds: 7 * 24 * 3600 } });
      await p.setup(broker);
      now += 2000;
      p.sweepExpiredSessions();
      const topics = async () => (await list<{ topic: string }>(p.createRetainedStream('r/#'))).map((r) => r.topic).sort();
      expect(await topics()).to.deep.equal(['r/later', 'r/never', 'r/renewed']);
      expect(p.stats().retainedMessages).to.equal(3);
      now += 60_000;
      p.sweepExpiredSessions();
      expect(await topics()).to.deep.equal(['r/never', 'r/renewed']);
    });

    it('starts the expiry of a session whose client was connected when the process died at the next start', async () => {
      let p = expiring();
      await p.setup(broker);
      const device = { id: 'device', clean: false, version: 4 };
      connectClient(device);
      await fillSession(p, 'device');
      p = await restart(p, { now: () => now, limits: { sessionExpirySeconds: 3600 } });
      await p.setup(Object.assign(new EventEmitter(), { id: 'broker-2', clients: {} }));
      now += 3599_000;
      expect(p.sweepExpiredSessions()).to.equal(0);
      now += 2000;
      expect(p.sweepExpiredSessions()).to.equal(1);
    });

    it('does a bounded amount of work per sweep and gets to every expired session', async () => {
      const p = expiring({ sweepBatch: 20 });
      await p.setup(broker);
      for (let i = 0; i < 50; i++) await fillSession(p, `d${i}`);
      now += 8 * DAY;
      const wiped: number[] = [];
      for (let i = 0; i < 100 && p.stats().sessions > 0; i++) wiped.push(p.sweepExpiredSessions());
      expect(Math.max(...wiped)).to.equal(2);
      expect(wiped.reduce((a, b) => a + b, 0)).to.equal(50);
      expect(p.stats()).to.include({ sessions: 0, queuedMessages: 0, subscriptions: 0 });
    });

    it('sweeps on a timer once set up', async () => {
      const clock = sinon.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
      try {
        const p = expiring({ sweepIntervalMs: 60_000 });
        await p.setup(broker);
        await fillSession(p, 'gone');
        now += 8 * DAY;
        clock.tick(60_000);
        expect(p.stats()).to.include({ sessions: 0, sessionsExpired: 1 });
      } finally {
        clock.restore();
      }
    });
  });

  it('reloads the state of a restored backup after the store is reopened; fails while the store is closed', async () => {
    const p = persistence();
    await p.setup({ id: 'b' });
    await p.storeRetained(retained('kept', 'from-backup'));
    await p.addSubscriptions({ id: 'old-device' }, [{ topic: 'old/#', qos: 1 }]);
    await p.flush();
    const backup = tempDir('gatewayd-persistence-backup-');
    try {
      await store.backup(`${backup}/db`);
      await p.storeRetained(retained('kept', 'newer'));
      await p.storeRetained(retained('added', 'after-backup'));
      await p.addSubscriptions({ id: 'new-device' }, [{ topic: 'new/#', qos: 1 }]);
      let duringSwap: unknown;
      await store.reopen(async (storeDir) => {
        duringSwap = await p.storeRetained(retained('during', 'swap')).then(() => 'stored', (error: Error) => error);
        rmSync(storeDir, { recursive: true });
        const { renameSync } = await import('node:fs');
        renameSync(`${backup}/db`, storeDir);
      });
      expect(duringSwap).to.be.instanceOf(Error);
      p.reload();
      expect((await list<{ topic: string; payload: Buffer }>(p.createRetainedStream('#'))).map((r) => [r.topic, r.payload.toString()])).to.deep.equal([['kept', 'from-backup']]);
      expect((await p.subscriptionsByTopic('old/x')).map((s) => s.clientId)).to.deep.equal(['old-device']);
      expect(await p.subscriptionsByTopic('new/x')).to.deep.equal([]);
      await p.storeRetained(retained('after', 'reload'));
      expect(await list(p.createRetainedStream('after'))).to.have.length(1);
    } finally {
      rmSync(backup, { recursive: true, force: true });
    }
  });

  it('takes its limits from mqtt.persistence and mqtt.maxQueuedMessages, each settable from the environment', () => {
    expect(persistenceLimits(loadConfig({ env: {} }).mqtt)).to.deep.equal({ maxQueuedMessages: 1000, maxRetainedMessages: 10_000, maxRetainedBytes: 16 * 1024 * 1024, sessionExpirySeconds: 7 * 24 * 3600 });
    const config = loadConfig({ env: { GATEWAYD_SET__MQTT__PERSISTENCE__SESSION_EXPIRY_SECONDS: '3600', GATEWAYD_SET__MQTT__PERSISTENCE__ENABLED: 'false' } });
    expect([config.mqtt.persistence.sessionExpirySeconds, config.mqtt.persistence.enabled]).to.deep.equal([3600, false]);
    expect(() => loadConfig({ env: { GATEWAYD_SET__MQTT__PERSISTENCE__MAX_RETAINED_BYTES: '10' } })).to.throw(/maxRetainedBytes/);
  });

  it('holds a persistent session\'s SUBACK for a prompt group commit (a journal frame), not the commit interval; after a crash the subscription is back', async () => {
    // The gateway's wiring: the journal, and an interval far beyond the test's patience.
    const policy = createStoragePolicy({ store, timings: { holdMs: 1000, commitIntervalMs: 10_000, backgroundCommitMs: 60_000 }, journal: true });
    let p = persistence({ policy });
    await p.setup({ id: 'broker-1' });
    const started = Date.now();
    await p.addSubscriptions({ id: 'field-device' }, [{ topic: 'cmd/#', qos: 1 }]);
    const pending = p.subscriptionsPending('field-device');
    expect(pending, 'the SUBACK waits').to.be.instanceOf(Promise);
    await pending;
    expect(Date.now() - started, 'well before the 10 s interval').to.be.below(2_000);
    expect(policy.stats()).to.include({ journalCommits: 1, committedWrites: 0 });
    expect(p.subscriptionsPending('field-device'), 'nothing waits any more').to.equal(undefined);
    // What kill -9 leaves: the store let go without the policy's flush; the journal brings it back.
    await store.close();
    await policy.close();
    await p.destroy();
    open.splice(open.indexOf(p), 1);
    store = openStore({ dir });
    const again = createStoragePolicy({ store, timings: STORAGE_DEFAULTS, journal: true });
    p = persistence({ policy: again });
    await p.setup({ id: 'broker-1' });
    expect((await p.subscriptionsByClient({ id: 'field-device' })).map(({ topic, qos }) => ({ topic, qos }))).to.deep.equal([{ topic: 'cmd/#', qos: 1 }]);
    await again.close();
  });

  it('stages retained updates in the background; a QoS 1 one becomes prompt once its publisher waits for exactly that write', async () => {
    const p = persistence();
    await p.setup({ id: 'b' });
    const flushed = sinon.spy(store, 'flushed');
    await p.storeRetained({ ...retained('quiet', 'v0'), qos: 0 });
    await p.subscriptionsByTopic('x');
    expect(p.whenSettled(7), 'a publish that wrote nothing is settled at once').to.be.instanceOf(Promise);
    await p.whenSettled(7);
    expect(flushed.callCount, 'nothing committed for a QoS 0 retained update yet').to.equal(0);
    // The gateway's own reading (nobody waits for it): in the background.
    await p.storeRetained({ ...retained('reading', 'r1'), qos: 1, brokerCounter: 9 });
    await new Promise((r) => setTimeout(r, 50));
    expect(flushed.callCount, 'nothing committed for a QoS 1 update nobody waits for').to.equal(0);
    await p.storeRetained({ ...retained('loud', 'v1'), qos: 1, brokerCounter: 8 });
    await p.whenSettled(8);
    expect(flushed.callCount, 'the QoS 1 retained update was committed (with the QoS 0 one riding along)').to.equal(1);
    const stored = store.openDatabase<{ payload: Buffer }, Buffer>('mqtt-retained', { keyEncoding: 'binary' });
    expect(stored.get(Buffer.from('loud'))?.payload.toString()).to.equal('v1');
    expect(stored.get(Buffer.from('quiet'))?.payload.toString()).to.equal('v0');
  });
});
