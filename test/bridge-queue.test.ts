// The store-and-forward queue of a bridge on a real LMDB store in a temp dir, through the storage
// policy: order, removal only on acknowledgement, what is written while the link is up (nothing
// that upstream acknowledges within the hold) and down (everything, in group commits), resends
// after a lost connection, the three limits (oldest first, counted by reason), a backlog far
// larger than what stays in memory, and what a reopened store (a restart) holds.
import { rmSync } from 'node:fs';
import { expect } from 'chai';
import type { Database, Key } from 'lmdb';
import { BridgeQueue, type QueueLimits } from '../src/bridges/bridge-queue.js';
import { QUEUE_DATABASE } from '../src/bridges/index.js';
import { openStore, type Store } from '../src/store/index.js';
import { createStoragePolicy, type StagedTable, type StoragePolicy } from '../src/storage/index.js';
import { tempDir } from './support/harness.js';

const big: QueueLimits = { maxMessages: 1_000_000, maxBytes: 1 << 30, maxAgeSeconds: 0 };

describe('bridge queue', () => {
  let dir: string;
  let store: Store;
  let db: Database<Buffer, Key>;
  let policy: StoragePolicy;
  let table: StagedTable<Buffer>;
  const open = () => {
    store = openStore({ dir });
    policy = createStoragePolicy({ store, timings: { holdMs: 300, commitIntervalMs: 20, backgroundCommitMs: 1000 } });
    table = policy.table<Buffer>(QUEUE_DATABASE, { keyEncoding: 'ordered-binary', encoding: 'binary' });
    db = table.db;
  };
  const queue = (id: string, limits = big, now?: () => number) => new BridgeQueue({ table, store, policy }, id, limits, now);
  const message = (n: number, qos: 0 | 1 = 1) => ({ localTopic: `plant/m/${n}`, remoteTopic: `site-a/plant/m/${n}`, payload: Buffer.from(String(n)), qos, retain: false });
  /** Queues message n carrying a tag of its own; resolves once the copy is safe. */
  const stored = (q: BridgeQueue, n: number) => {
    const tag = policy.ticket();
    q.enqueue(message(n), tag);
    return policy.whenSettled(tag);
  };
  const onDisk = (id: string) => [...db.getRange({ start: [id, 0], end: [id, Number.MAX_SAFE_INTEGER] })].map(({ value }) => Number(value.subarray(value.length - 1).toString()));
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
    await policy.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('keeps order, settles a copy once it is on disk while the link is down, and removes it only when acknowledged', async () => {
    const q = queue('svc.cloud');
    await Promise.all([1, 2, 3].map((n) => stored(q, n)));
    expect(onDisk('svc.cloud'), 'on disk once settled').to.deep.equal([1, 2, 3]);
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
    await policy.close();
    await store.close();
    open();
    const again = queue('svc.cloud');
    expect(again.figures().messages).to.equal(2);
    expect(drain(again)).to.deep.equal([1, 3]);
  });

  it('writes nothing while the link is up and upstream acknowledges within the hold; the copy is safe at the acknowledgement', async () => {
    const q = queue('svc.cloud');
    q.setLinkUp(true);
    const commits = policy.stats().commits;
    const safe = [1, 2, 3].map((n) => stored(q, n));
    let settled = 0;
    for (const p of safe) void p.then(() => settled++);
    await new Promise((r) => setImmediate(r));
    expect(settled, 'not safe before upstream took them').to.equal(0);
    for (let m = q.next(); m; m = q.next()) q.acknowledged(m.seq);
    await Promise.all(safe);
    await q.settled();
    expect(policy.stats().commits - commits, 'no commit at all').to.equal(0);
    expect(policy.stats().cancelledWrites).to.equal(3);
    expect(onDisk('svc.cloud')).to.deep.equal([]);
  });

  it('writes a message upstream has not acknowledged once the hold is over, and at once when the link goes down, in order', async () => {
    const q = queue('svc.cloud');
    q.setLinkUp(true);
    const first = stored(q, 1);
    const started = Date.now();
    await first;
    expect(Date.now() - started, 'written after the hold (300 ms)').to.be.at.least(250);
    expect(onDisk('svc.cloud')).to.deep.equal([1]);
    const second = stored(q, 2);
    const third = stored(q, 3);
    const staged = () => [...table.stagedOf('svc.cloud')].map((w) => w.cls);
    expect(staged()).to.deep.equal(['held', 'held']);
    q.setLinkUp(false);
    expect(staged(), 'due in the next group commit, not after the hold').to.deep.equal(['prompt', 'prompt']);
    await Promise.all([second, third]);
    expect(onDisk('svc.cloud')).to.deep.equal([1, 2, 3]);
  });

  it('sends what was not acknowledged again, first and in order, after a lost connection', async () => {
    const q = queue('b');
    for (let n = 1; n <= 6; n++) q.enqueue(message(n));
    const sent = [q.next()!, q.next()!, q.next()!, q.next()!];
    q.acknowledged(sent[1]!.seq);
    q.connectionLost();
    expect(drain(q)).to.deep.equal([1, 3, 4, 5, 6]);
    expect(q.resent).to.equal(3);
    expect(q.figures().messages).to.equal(0);
  });

  it('drops the oldest messages beyond maxMessages and maxBytes, counted by reason', async () => {
    const q = queue('b', { ...big, maxMessages: 5 });
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
    await policy.close();
    await store.close();
    open();
    expect(queue('b').figures().messages, 'dropped ones are gone from disk').to.equal(0);
  });

  it('drops messages older than maxAgeSeconds', () => {
    let now = 1_000_000;
    const q = queue('b', { ...big, maxAgeSeconds: 60 }, () => now);
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
    const q = queue('b');
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
    await policy.close();
    await store.close();
    open();
    const again = queue('b');
    // New messages go behind the backlog.
    again.enqueue(message(total));
    expect(drain(again)).to.deep.equal([...Array(total / 2 + 1).keys()].map((i) => i + total / 2));
  });

  it('keeps the queues of two bridges apart and clears one without touching the other', async () => {
    const a = queue('svc.a');
    const b = queue('svc.ab');
    a.enqueue(message(1));
    b.enqueue(message(2));
    a.clear();
    await Promise.all([a.settled(), b.settled()]);
    expect(a.figures().messages).to.equal(0);
    expect(drain(b)).to.deep.equal([2]);
    expect(queue('svc.a').figures().messages).to.equal(0);
  });

  it('holds nothing when made again right after it was cleared, before the removal is on disk (a bridge removed and added back)', async () => {
    const q = queue('svc.cloud');
    await Promise.all([1, 2].map((n) => stored(q, n)));
    expect(onDisk('svc.cloud')).to.deep.equal([1, 2]);
    q.clear();
    // The removal is staged (due in the next commit): the new queue must not read the disk alone.
    expect(onDisk('svc.cloud')).to.deep.equal([1, 2]);
    const again = queue('svc.cloud');
    expect(again.figures().messages).to.equal(0);
    expect(drain(again)).to.deep.equal([]);
    await stored(again, 3);
    expect(drain(again)).to.deep.equal([3]);
    await again.settled();
    expect(onDisk('svc.cloud')).to.deep.equal([]);
  });

  it('counts the message as dropped when the store cannot write; its publisher is not held', async () => {
    const q = queue('b');
    const closed = { ...store, isOpen: () => false };
    const refusing = new BridgeQueue({ table, store: closed as Store, policy }, 'c', big);
    const tag = policy.ticket();
    refusing.enqueue(message(1), tag);
    expect(policy.pending(tag)).to.equal(false);
    expect(refusing.figures().dropped.storeFailure).to.equal(1);
    expect(q.figures().messages).to.equal(0);
  });
});
