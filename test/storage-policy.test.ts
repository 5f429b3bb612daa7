// The storage policy (src/storage) on a real LMDB store in a temp dir: what reaches the disk and
// when (held writes only if not cancelled within the hold, prompt ones in group commits, background
// ones riding along or at their deadline), who is answered when (tags), order per owner, restores,
// failed commits and the memory bound.
import { rmSync } from 'node:fs';
import { expect } from 'chai';
import sinon from 'sinon';
import { openStore, type Store } from '../src/store/index.js';
import { createStoragePolicy, WEAR_DEFAULTS, type StagedTable, type StoragePolicy } from '../src/storage/index.js';
import { tempDir } from './support/harness.js';

describe('storage policy', function () {
  this.timeout(20_000);
  let dir: string;
  let store: Store;
  let policy: StoragePolicy;
  let table: StagedTable<string>;
  const timings = { holdMs: 200, commitIntervalMs: 50, backgroundCommitMs: 600 };

  function open(t = timings): void {
    store = openStore({ dir });
    policy = createStoragePolicy({ store, timings: t });
    table = policy.table<string>('things', { keyEncoding: 'ordered-binary' });
  }
  /** A tag that settles when the write carrying it does; resolves with the ms it took. */
  function timed(tag: number): Promise<number> {
    const started = Date.now();
    return policy.whenSettled(tag).then(() => Date.now() - started);
  }
  const onDisk = (key: string) => table.db.get(key);

  beforeEach(() => {
    dir = tempDir('gatewayd-storage-');
    open();
  });
  afterEach(async () => {
    sinon.restore();
    await policy.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('writes nothing for a held put that is removed within the hold; whoever waited is answered at the removal', async () => {
    const tag = policy.ticket();
    table.put('a', 'a', 'copy', { class: 'held', tag });
    expect(table.get('a', 'a'), 'reads see the staged write').to.equal('copy');
    expect(policy.pending(tag)).to.equal(true);
    table.remove('a', 'a', { delivered: true });
    expect(policy.pending(tag), 'settled by the acknowledgement').to.equal(false);
    await policy.flush();
    expect(policy.stats()).to.include({ commits: 0, committedWrites: 0, cancelledWrites: 1 });
    expect(onDisk('a')).to.equal(undefined);
  });

  it('writes a held put that is still needed once the hold is over, not before', async () => {
    const tag = policy.ticket();
    table.put('a', 'a', 'copy', { class: 'held', tag });
    const took = await timed(tag);
    expect(took, 'not before the hold').to.be.at.least(timings.holdMs - 20);
    expect(onDisk('a')).to.equal('copy');
    expect(policy.stats()).to.include({ commits: 1, committedWrites: 1 });
  });

  it('group-commits prompt writes: one commit for a burst; a stream someone waits for commits as it comes while the wear budget lasts', async () => {
    const tags = Array.from({ length: 50 }, (_, i) => {
      const tag = policy.ticket();
      table.put(`k${i}`, `k${i}`, `v${i}`, { class: 'prompt', tag });
      return tag;
    });
    await Promise.all(tags.map((t) => policy.whenSettled(t)));
    expect(policy.stats().commits, 'a burst: one commit').to.equal(1);
    expect(onDisk('k49')).to.equal('v49');
    // A stream, one write someone waits for every 5 ms: each is committed as it comes, long before
    // the commit interval (the first waiter leads; no other write waits with it). A long interval,
    // so that a slow disk cannot blur the two.
    await policy.close();
    await store.close();
    open({ ...timings, commitIntervalMs: 5000 });
    const before = policy.stats().commits;
    const began = Date.now();
    for (let i = 0; i < 20; i++) {
      const tag = policy.ticket();
      table.put(`s${i}`, `s${i}`, 'v', { class: 'prompt', tag });
      await policy.whenSettled(tag);
      await new Promise((r) => setTimeout(r, 5));
    }
    expect(policy.stats().commits - before, 'one commit per write').to.equal(20);
    expect(Date.now() - began, 'far less than one interval per write').to.be.below(5000);
    // Each started sooner than the commit interval after the one before would have allowed (the
    // commits themselves take what the disk takes: not timed here).
    expect(policy.stats().fastCommits, 'sooner than the interval: the budget\'s doing').to.be.at.least(19);
  });

  it('without a wear budget (burstBytes 0) a stream is committed at most once per commit interval, and prompt writes nobody waits for always are', async () => {
    await policy.close();
    await store.close();
    store = openStore({ dir });
    policy = createStoragePolicy({ store, timings, wear: { ...WEAR_DEFAULTS, burstBytes: 0 } });
    table = policy.table<string>('things', { keyEncoding: 'ordered-binary' });
    expect(policy.stats().budget.mode).to.equal('off');
    const began = Date.now();
    const streamed: Promise<void>[] = [];
    for (let i = 0; i < 60; i++) {
      const tag = policy.ticket();
      table.put(`s${i}`, `s${i}`, 'v', { class: 'prompt', tag });
      streamed.push(policy.whenSettled(tag));
      await new Promise((r) => setTimeout(r, 5));
    }
    await Promise.all(streamed);
    const commits = policy.stats().commits;
    const elapsedIntervals = (Date.now() - began) / timings.commitIntervalMs;
    expect(commits, 'at most one commit per interval (+1 for the first)').to.be.at.most(elapsedIntervals + 2);
    expect(commits, 'but more than one').to.be.at.least(2);
    expect(policy.stats().fastCommits).to.equal(0);
  });

  it('a prompt write nobody waits for waits for the commit interval even while the budget lasts', async () => {
    table.put('first', 'first', 'v', { class: 'prompt' });
    const flushedAt = Date.now(); // the interval counts from a commit's start
    await policy.flush();
    table.put('quiet', 'quiet', 'v', { class: 'prompt' });
    for (let i = 0; i < 200 && onDisk('quiet') === undefined; i++) await new Promise((r) => setTimeout(r, 5));
    expect(onDisk('quiet')).to.equal('v');
    expect(Date.now() - flushedAt, 'at the interval after the last commit').to.be.at.least(timings.commitIntervalMs - 10);
    expect(policy.stats().fastCommits).to.equal(0);
  });

  it('lets background writes ride along with another commit, and writes them alone at their deadline', async () => {
    table.put('bg1', 'bg1', 'x', { class: 'background' });
    const tag = policy.ticket();
    table.put('p', 'p', 'y', { class: 'prompt', tag });
    await policy.whenSettled(tag);
    expect(onDisk('bg1'), 'rode along').to.equal('x');
    expect(policy.stats().commits).to.equal(1);
    table.put('bg2', 'bg2', 'z', { class: 'background' });
    const started = Date.now();
    for (let i = 0; i < 200 && onDisk('bg2') === undefined; i++) await new Promise((r) => setTimeout(r, 25));
    expect(onDisk('bg2')).to.equal('z');
    expect(Date.now() - started, 'not before its deadline').to.be.at.least(timings.backgroundCommitMs - 50);
    expect(policy.stats().commits).to.equal(2);
  });

  it('coalesces: updates of one key before its commit write only the latest value, and owe what the older ones owed', async () => {
    const first = policy.ticket();
    table.put('topic', 'topic', 'v0', { class: 'prompt', tag: first });
    for (let i = 1; i <= 99; i++) table.put('topic', 'topic', `v${i}`, { class: 'background' });
    await policy.whenSettled(first);
    expect(onDisk('topic'), 'the first waiter is answered when a state at least as new is on disk').to.equal('v99');
    expect(policy.stats()).to.include({ commits: 1, committedWrites: 1 });
  });

  it('keeps the order of an owner on disk: committing a write takes the earlier staged writes of its owner along', async () => {
    table.put('q1', 'q1', 'first', { class: 'held', owner: 'session-a' });
    table.put('other', 'other', 'x', { class: 'held', owner: 'session-b' });
    const tag = policy.ticket();
    table.put('q2', 'q2', 'second', { class: 'prompt', owner: 'session-a', tag });
    await policy.whenSettled(tag);
    expect([onDisk('q1'), onDisk('q2')], 'the earlier one of the same owner came along').to.deep.equal(['first', 'second']);
    expect(onDisk('other'), 'another owner waits for its hold').to.equal(undefined);
    table.put('q3', 'q3', 'third', { class: 'held', owner: 'session-a' });
    table.promote('session-a');
    await policy.flush();
    expect(onDisk('q3')).to.equal('third');
  });

  it('removes a key that is on disk with a staged removal; reads miss it at once', async () => {
    table.put('gone', 'gone', 'v', { class: 'prompt' });
    await policy.flush();
    const tag = policy.ticket();
    table.remove('gone', 'gone', { class: 'prompt', tag });
    expect(table.get('gone', 'gone')).to.equal(undefined);
    expect(onDisk('gone'), 'still on disk until the commit').to.equal('v');
    await policy.whenSettled(tag);
    expect(onDisk('gone')).to.equal(undefined);
  });

  it('range() pages what the disk will hold: committed entries merged in key order with staged puts, updates and removals', async () => {
    for (const k of ['b', 'd', 'f']) table.put(k, k, `disk-${k}`, { class: 'prompt' });
    await policy.flush();
    table.put('a', 'a', 'new-a', { class: 'background' });
    table.put('d', 'd', 'new-d', { class: 'background' });
    table.remove('f', 'f', { class: 'background' });
    table.put('e', 'e', 'new-e', { class: 'held' });
    const page = (o: { start?: string; end?: string; limit?: number }) => [...table.range(o)].map(({ key, value }) => `${String(key)}=${value}`);
    expect(page({})).to.deep.equal(['a=new-a', 'b=disk-b', 'd=new-d', 'e=new-e']);
    expect(page({ start: 'b', end: 'e' })).to.deep.equal(['b=disk-b', 'd=new-d']);
    expect(page({ limit: 3 })).to.deep.equal(['a=new-a', 'b=disk-b', 'd=new-d']);
    await policy.flush();
    expect([...table.db.getRange({})].map(({ key, value }) => `${String(key)}=${value}`)).to.deep.equal(page({}));
  });

  it('flush() writes every staged write, held ones too, and close() leaves nothing staged', async () => {
    table.put('h', 'h', 'held', { class: 'held' });
    table.put('b', 'b', 'bg', { class: 'background' });
    await policy.close();
    expect([onDisk('h'), onDisk('b')]).to.deep.equal(['held', 'bg']);
    expect(policy.stats().stagedWrites).to.equal(0);
    open();
  });

  it('a backup holds what was staged: the policy commits it first', async () => {
    table.put('recent', 'recent', 'staged a moment ago', { class: 'background' });
    const backup = tempDir('gatewayd-storage-backup-');
    try {
      await store.backup(`${backup}/db`);
      const copy = openStore({ dir: `${backup}/db` });
      try {
        expect(copy.openDatabase<string, string>('things', { keyEncoding: 'ordered-binary' }).get('recent')).to.equal('staged a moment ago');
      } finally {
        await copy.close();
      }
    } finally {
      rmSync(backup, { recursive: true, force: true });
    }
  });

  it('a restore first writes what was staged to the store it replaces, then reads the restored one', async () => {
    table.put('kept', 'kept', 'in-backup', { class: 'prompt' });
    await policy.flush();
    const backup = tempDir('gatewayd-storage-backup-');
    try {
      await store.backup(`${backup}/db`);
      const tag = policy.ticket();
      table.put('lost', 'lost', 'staged', { class: 'held', tag });
      await store.reopen(async (storeDir) => {
        rmSync(storeDir, { recursive: true });
        const { renameSync } = await import('node:fs');
        renameSync(`${backup}/db`, storeDir);
      });
      expect(policy.pending(tag)).to.equal(false);
      expect(table.get('lost', 'lost')).to.equal(undefined);
      expect(table.get('kept', 'kept')).to.equal('in-backup');
      await policy.flush();
      expect(onDisk('lost')).to.equal(undefined);
    } finally {
      rmSync(backup, { recursive: true, force: true });
    }
  });

  it('a failed commit answers its waiters, counts the writes and tells the table which were lost', async () => {
    const lost: string[] = [];
    table.onLost = (w) => void lost.push(w.id);
    const failure = Object.assign(new Error('Commit failed'), { commitError: Promise.reject(new Error('ENOSPC: no space left on device')) });
    failure.commitError.catch(() => undefined);
    sinon.stub(table.db, 'put').rejects(failure);
    const noted = sinon.spy(store, 'noteWriteFailure');
    const tag = policy.ticket();
    table.put('x', 'x', 'v', { class: 'prompt', tag });
    await policy.whenSettled(tag);
    expect(lost).to.deep.equal(['x']);
    expect(policy.stats().failedWrites).to.equal(1);
    expect(noted.callCount).to.equal(1);
    expect(table.get('x', 'x')).to.equal(undefined);
  });

  it('refuses writes while the store cannot write (nothing staged, counted)', () => {
    sinon.stub(store, 'writeHealth').returns({ writable: false, reason: 'disk full', since: Date.now() });
    expect(table.put('x', 'x', 'v', { class: 'prompt' })).to.equal(false);
    expect(policy.stats()).to.include({ stagedWrites: 0, failedWrites: 1 });
  });

  it('bounds memory: beyond 50,000 staged writes, held ones are written without waiting for their hold', async () => {
    const slow = { holdMs: 60_000, commitIntervalMs: 50, backgroundCommitMs: 60_000 };
    await policy.close();
    await store.close();
    open(slow);
    for (let i = 0; i < 50_001; i++) table.put(`h${i}`, `h${i}`, 'v', { class: 'held' });
    for (let i = 0; i < 200 && policy.stats().stagedWrites > 0; i++) await new Promise((r) => setTimeout(r, 25));
    expect(policy.stats().stagedWrites).to.equal(0);
    expect(onDisk('h50000')).to.equal('v');
  });
});
