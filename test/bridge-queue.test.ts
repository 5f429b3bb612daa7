// The store-and-forward queue of a bridge on a real LMDB store in a temp dir: order, removal
// only on acknowledgement, resends after a lost connection, the three limits (oldest first,
// counted by reason), a backlog far larger than what stays in memory, and what a reopened
// store (a restart, a kill -9 after the flush) holds.
import { rmSync } from 'node:fs';
import { expect } from 'chai';
import type { Database, Key } from 'lmdb';
import { BridgeQueue, type QueueLimits } from '../src/bridges/bridge-queue.js';
import { QUEUE_DATABASE } from '../src/bridges/index.js';
import { openStore, type Store } from '../src/store/index.js';
import { tempDir } from './support/harness.js';

const big: QueueLimits = { maxMessages: 1_000_000, maxBytes: 1 << 30, maxAgeSeconds: 0 };

describe('bridge queue', () => {
  let dir: string;
  let store: Store;
  let db: Database<Buffer, Key>;
  const open = () => {
    store = openStore({ dir });
    db = store.openDatabase<Buffer, Key>(QUEUE_DATABASE, { keyEncoding: 'ordered-binary', encoding: 'binary' });
  };
  const message = (n: number, qos: 0 | 1 = 1) => ({ localTopic: `plant/m/${n}`, remoteTopic: `site-a/plant/m/${n}`, payload: Buffer.from(String(n)), qos, retain: false });
  const stored = (q: BridgeQueue, n: number) => new Promise<void>((resolve) => q.enqueue(message(n), resolve));
  /** Everything next() gives now, acknowledged at once. */
  const drain = (q: BridgeQueue) => {
    const out: number[] = [];
    for (let m = q.next(); m; m = q.next()) {
      out.push(Number(m.payload.toString()));
      q.acknowledged(m.seq);
    }
    return out;
  };

  beforeEach(() => {
    dir = tempDir('gatewayd-bridge-queue-');
    open();
  });
  afterEach(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('keeps order, calls back once the message is on disk, and removes it only when acknowledged', async () => {
    const q = new BridgeQueue(db, store, 'svc.cloud', big);
    await Promise.all([1, 2, 3].map((n) => stored(q, n)));
    expect(q.figures()).to.include({ messages: 3 });
    const first = q.next()!;
    expect(first.remoteTopic).to.equal('site-a/plant/m/1');
    expect(first.localTopic).to.equal('plant/m/1');
    const second = q.next()!;
    expect(q.inFlight).to.equal(2);
    expect(q.acknowledged(second.seq)).to.equal(true);
    expect(q.acknowledged(second.seq), 'a second acknowledgement').to.equal(false);
    await q.settled();
    // On disk: 1 (sent, not acknowledged) and 3; a restart finds both, in order.
    await store.close();
    open();
    const again = new BridgeQueue(db, store, 'svc.cloud', big);
    expect(again.figures().messages).to.equal(2);
    expect(drain(again)).to.deep.equal([1, 3]);
  });

  it('writes the removal of an acknowledged message with the next message queued: on disk once that one is', async () => {
    const q = new BridgeQueue(db, store, 'svc.cloud', big);
    await Promise.all([1, 2].map((n) => stored(q, n)));
    q.acknowledged(q.next()!.seq);
    await stored(q, 3); // its batch carries the removal of 1
    const onDisk = () => [...db.getRange({ start: ['svc.cloud', 0], end: ['svc.cloud', Number.MAX_SAFE_INTEGER] })].map(({ value }) => Number(value.subarray(value.length - 1).toString()));
    expect(onDisk()).to.deep.equal([2, 3]);
  });

  it('sends what was not acknowledged again, first and in order, after a lost connection', async () => {
    const q = new BridgeQueue(db, store, 'b', big);
    for (let n = 1; n <= 6; n++) q.enqueue(message(n));
    const sent = [q.next()!, q.next()!, q.next()!, q.next()!];
    q.acknowledged(sent[1]!.seq);
    q.connectionLost();
    expect(drain(q)).to.deep.equal([1, 3, 4, 5, 6]);
    expect(q.resent).to.equal(3);
    expect(q.figures().messages).to.equal(0);
  });

  it('drops the oldest messages beyond maxMessages and maxBytes, counted by reason', async () => {
    const q = new BridgeQueue(db, store, 'b', { ...big, maxMessages: 5 });
    const drops: string[] = [];
    q.onDrop = (reason, n) => drops.push(`${reason}:${n}`);
    for (let n = 1; n <= 8; n++) q.enqueue(message(n));
    expect(q.figures().dropped.maxMessages).to.equal(3);
    expect(drops).to.deep.equal(['maxMessages:1', 'maxMessages:1', 'maxMessages:1']);
    const one = q.next()!; // 4 in flight: dropping it makes a late acknowledgement harmless
    const size = q.figures().bytes / 5;
    q.limits = { ...q.limits, maxMessages: 100, maxBytes: Math.ceil(size * 3) };
    q.enqueue(message(9));
    expect(q.figures().dropped.maxBytes).to.equal(3);
    expect(q.acknowledged(one.seq)).to.equal(false);
    expect(drain(q)).to.deep.equal([7, 8, 9]);
    await q.settled();
    await store.close();
    open();
    expect(new BridgeQueue(db, store, 'b', big).figures().messages, 'dropped ones are gone from disk').to.equal(0);
  });

  it('drops messages older than maxAgeSeconds', () => {
    let now = 1_000_000;
    const q = new BridgeQueue(db, store, 'b', { ...big, maxAgeSeconds: 60 }, () => now);
    q.enqueue(message(1));
    now += 30_000;
    q.enqueue(message(2));
    expect(q.figures().oldestAgeSeconds).to.equal(30);
    now += 31_000;
    q.enforceAge();
    expect(q.figures()).to.deep.include({ messages: 1, oldestAgeSeconds: 31 });
    expect(q.figures().dropped.maxAge).to.equal(1);
    expect(drain(q)).to.deep.equal([2]);
  });

  it('drains a backlog far beyond its memory window from disk, in order, also after a restart', async function () {
    this.timeout(30_000);
    const q = new BridgeQueue(db, store, 'b', big);
    const total = 5000;
    for (let n = 0; n < total; n++) q.enqueue(message(n));
    await q.settled();
    expect(q.figures().messages).to.equal(total);
    const firstHalf: number[] = [];
    for (let i = 0; i < total / 2; i++) {
      const m = q.next()!;
      firstHalf.push(Number(m.payload.toString()));
      q.acknowledged(m.seq);
    }
    expect(firstHalf).to.deep.equal([...Array(total / 2).keys()]);
    await q.settled();
    await store.close();
    open();
    const again = new BridgeQueue(db, store, 'b', big);
    // New messages go behind the backlog.
    again.enqueue(message(total));
    expect(drain(again)).to.deep.equal([...Array(total / 2 + 1).keys()].map((i) => i + total / 2));
  });

  it('keeps the queues of two bridges apart and clears one without touching the other', async () => {
    const a = new BridgeQueue(db, store, 'svc.a', big);
    const b = new BridgeQueue(db, store, 'svc.ab', big);
    a.enqueue(message(1));
    b.enqueue(message(2));
    a.clear();
    await Promise.all([a.settled(), b.settled()]);
    expect(a.figures().messages).to.equal(0);
    expect(drain(b)).to.deep.equal([2]);
    expect(new BridgeQueue(db, store, 'svc.a', big).figures().messages).to.equal(0);
  });

  it('answers at once and counts the message when the store cannot write', async () => {
    const q = new BridgeQueue(db, store, 'b', big);
    const closed = { ...store, isOpen: () => false };
    const refusing = new BridgeQueue(db, closed as Store, 'c', big);
    let called = false;
    refusing.enqueue(message(1), () => (called = true));
    expect(called).to.equal(true);
    expect(refusing.figures().dropped.storeFailure).to.equal(1);
    expect(q.figures().messages).to.equal(0);
  });
});
