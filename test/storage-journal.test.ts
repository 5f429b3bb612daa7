// The commit journal (src/storage/commit-journal.ts) under the storage policy, on a real LMDB
// store in a temp dir: what someone waits for is durable in a journal frame before LMDB has it; a
// store opened again after the process let go without a flush (what kill -9 leaves) gets it back
// from the journal; compactions make the journal start over and write what replaced a journaled
// write; a torn frame ends the replay; a journal that cannot be made leaves LMDB commits.
import { closeSync, mkdirSync, openSync, readFileSync, rmSync, statSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { openStore, type Store } from '../src/store/index.js';
import { createStoragePolicy, JOURNAL_BYTES, JOURNAL_FILE, type StagedTable, type StoragePolicy } from '../src/storage/index.js';
import { capturedLog } from './support/captured-log.js';
import { tempDir } from './support/harness.js';

describe('storage policy: the commit journal', function () {
  this.timeout(20_000);
  let dir: string;
  let store: Store;
  let policy: StoragePolicy;
  let table: StagedTable<string>;
  const timings = { holdMs: 200, commitIntervalMs: 50, backgroundCommitMs: 60_000 };
  const { log, lines: logged } = capturedLog();

  function open(t = timings): void {
    store = openStore({ dir });
    policy = createStoragePolicy({ store, timings: t, journal: true, log });
    table = policy.table<string>('things', { keyEncoding: 'ordered-binary' });
  }
  /** What kill -9 leaves: the store closed without the policy's flush (its staged writes and its timers are dropped). */
  async function crash(): Promise<void> {
    await store.close();
    // With its store closed the policy writes nothing more: close() only stops its timers and lets go of the journal.
    await policy.close();
  }
  const onDisk = (key: string) => table.db.get(key);
  const journalPath = () => join(dir, JOURNAL_FILE);

  beforeEach(() => {
    dir = tempDir('gatewayd-journal-');
    logged.length = 0;
    open();
  });
  afterEach(async () => {
    if (store.isOpen()) {
      await policy.close();
      await store.close();
    }
    rmSync(dir, { recursive: true, force: true });
  });

  it('makes the file in full once, and keeps a write someone waits for in one 4 KiB frame before LMDB has it', async () => {
    expect(statSync(journalPath()).size).to.equal(JOURNAL_BYTES);
    const started = Date.now();
    const tag = policy.ticket();
    table.put('a', 'a', 'acknowledged', { class: 'prompt', tag });
    await policy.whenSettled(tag);
    expect(onDisk('a'), 'LMDB does not have it yet').to.equal(undefined);
    expect(table.get('a', 'a'), 'reads see it').to.equal('acknowledged');
    expect(policy.stats()).to.include({ journalCommits: 1, journalBytes: 4096, journaledWrites: 1, committedWrites: 0 });
    expect(readFileSync(journalPath()).subarray(0, 4096).includes(Buffer.from('acknowledged')), 'the frame holds it').to.equal(true);
    const { budget } = policy.stats();
    // Taken from the wear budget (which refills meanwhile at 8.45 KB/s).
    const refilled = Math.ceil((budget.bytesPerSecond * (Date.now() - started + 2)) / 1000);
    expect(budget.availableBytes, 'the frame is taken from the wear budget').to.be.within(budget.burstBytes - 4096, budget.burstBytes - 4096 + refilled);
  });

  it('a store opened again after a crash gets what was acknowledged from the journal, in order, and writes it to LMDB', async () => {
    const tags: number[] = [];
    for (let i = 0; i < 30; i++) {
      const tag = policy.ticket();
      table.put(`q${String(i).padStart(2, '0')}`, `q${String(i).padStart(2, '0')}`, `m${i}`, { class: 'prompt', tag, owner: 'session' });
      tags.push(tag);
      // Some one at a time, some together: several frames.
      if (i % 3 === 0) await policy.whenSettled(tag);
    }
    await Promise.all(tags.map((t) => policy.whenSettled(t)));
    const notYet = policy.ticket();
    table.put('late', 'late', 'never acknowledged', { class: 'held', tag: notYet });
    expect(policy.pending(notYet)).to.equal(true);
    const frames = policy.stats().journalCommits;
    expect(frames, 'more than one frame').to.be.at.least(2);
    await crash();
    open();
    expect([...table.db.getRange({})].map(({ value }) => value), 'every acknowledged write, in order').to.deep.equal(Array.from({ length: 30 }, (_, i) => `m${i}`));
    expect(onDisk('late'), 'what was not acknowledged was not promised').to.equal(undefined);
    expect(logged.some((l) => l.message === 'storage: the commit journal was replayed into the store' && l.frames === frames && l.writes === 30)).to.equal(true);
    // Replayed once: another crash right away replays nothing (the marker says LMDB has it).
    await crash();
    logged.length = 0;
    open();
    expect(logged.some((l) => l.message === 'storage: the commit journal was replayed into the store')).to.equal(false);
    expect(onDisk('q29')).to.equal('m29');
  });

  it('a compaction writes the journaled writes to LMDB, and the journal starts over', async () => {
    const tag = policy.ticket();
    table.put('a', 'a', 'v1', { class: 'prompt', tag });
    await policy.whenSettled(tag);
    await policy.flush();
    expect(onDisk('a')).to.equal('v1');
    expect(policy.stats().stagedWrites, 'nothing left in memory').to.equal(0);
    // A crash now replays nothing (the journal's generation is in LMDB), even if the file still holds the frame.
    await crash();
    open();
    expect(logged.some((l) => l.message === 'storage: the commit journal was replayed into the store')).to.equal(false);
    expect(onDisk('a')).to.equal('v1');
  });

  it('a compaction at backgroundCommitMs: journaled writes reach LMDB without a flush', async () => {
    await policy.close();
    await store.close();
    open({ ...timings, backgroundCommitMs: 300 });
    const tag = policy.ticket();
    table.put('a', 'a', 'v', { class: 'prompt', tag });
    await policy.whenSettled(tag);
    const journaledAt = Date.now();
    for (let i = 0; i < 200 && onDisk('a') === undefined; i++) await new Promise((r) => setTimeout(r, 10));
    expect(onDisk('a')).to.equal('v');
    expect(Date.now() - journaledAt, 'not before its deadline').to.be.at.least(250);
  });

  it('a write that replaces a journaled one reaches LMDB in the compaction even if its own class would wait (a crash after it loses neither)', async () => {
    const tag = policy.ticket();
    table.put('copy', 'copy', 'queued', { class: 'prompt', tag });
    await policy.whenSettled(tag);
    // Its recipient came back: the copy is updated (a message id), held for its acknowledgement.
    table.put('copy', 'copy', 'sent', { class: 'held' });
    await policy.flush();
    expect(onDisk('copy')).to.equal('sent');
    // And a crash before any compaction: the journaled value comes back.
    const again = policy.ticket();
    table.put('other', 'other', 'queued', { class: 'prompt', tag: again });
    await policy.whenSettled(again);
    table.put('other', 'other', 'sent', { class: 'held' });
    await crash();
    open();
    expect(onDisk('other'), 'the acknowledged value').to.equal('queued');
  });

  it('a journaled copy removed before the compaction (its recipient took it) is never written to LMDB', async () => {
    const tag = policy.ticket();
    table.put('copy', 'copy', 'queued', { class: 'prompt', tag, fresh: true });
    await policy.whenSettled(tag);
    table.remove('copy', 'copy', { class: 'prompt', delivered: true });
    const put = table.db.put.bind(table.db);
    const written: unknown[] = [];
    (table.db as unknown as { put: typeof put }).put = (k: unknown, v: unknown) => {
      written.push(k);
      return put(k as string, v as string);
    };
    await policy.flush();
    expect(written, 'no put').to.deep.equal([]);
    expect(onDisk('copy')).to.equal(undefined);
  });

  it('a torn frame ends the replay: the frames before it are applied, nothing after it', async () => {
    for (const k of ['a', 'b', 'c']) {
      const tag = policy.ticket();
      table.put(k, k, k, { class: 'prompt', tag });
      await policy.whenSettled(tag);
    }
    expect(policy.stats().journalCommits).to.equal(3);
    await crash();
    // The second frame's last bytes changed (a write the power cut stopped half way).
    const fd = openSync(journalPath(), 'r+');
    writeSync(fd, Buffer.from('torn'), 0, 4, 4096 + 40);
    closeSync(fd);
    open();
    expect([onDisk('a'), onDisk('b'), onDisk('c')]).to.deep.equal(['a', undefined, undefined]);
  });

  it('a restore gets a journal of its own; what was journaled went to the store it replaced', async () => {
    const backup = tempDir('gatewayd-journal-backup-');
    try {
      await store.backup(`${backup}/db`);
      const tag = policy.ticket();
      table.put('before-restore', 'before-restore', 'v', { class: 'prompt', tag });
      await policy.whenSettled(tag);
      const replaced = tempDir('gatewayd-journal-replaced-');
      await store.reopen(async (storeDir) => {
        const { renameSync } = await import('node:fs');
        rmSync(replaced, { recursive: true });
        renameSync(storeDir, replaced);
        renameSync(`${backup}/db`, storeDir);
      });
      try {
        const old = openStore({ dir: replaced });
        expect(old.openDatabase<string, string>('things', { keyEncoding: 'ordered-binary' }).get('before-restore'), 'flushed to the replaced store').to.equal('v');
        await old.close();
      } finally {
        rmSync(replaced, { recursive: true, force: true });
      }
      expect(statSync(journalPath()).size, 'a journal in the restored directory').to.equal(JOURNAL_BYTES);
      expect(table.get('before-restore', 'before-restore')).to.equal(undefined);
      const tag2 = policy.ticket();
      table.put('after', 'after', 'v', { class: 'prompt', tag: tag2 });
      await policy.whenSettled(tag2);
      await crash();
      open();
      expect(onDisk('after'), 'the new journal is replayed into the restored store').to.equal('v');
    } finally {
      rmSync(backup, { recursive: true, force: true });
    }
  });

  it('without a journal (it cannot be made) commits go to LMDB and the log says why once', async () => {
    await policy.close();
    await store.close();
    rmSync(journalPath());
    mkdirSync(journalPath()); // a directory where the file should be
    logged.length = 0;
    open();
    expect(policy.stats().journal).to.equal(null);
    expect(logged.filter((l) => String(l.message).startsWith('storage: the commit journal cannot be created'))).to.have.length(1);
    const tag = policy.ticket();
    table.put('a', 'a', 'v', { class: 'prompt', tag });
    await policy.whenSettled(tag);
    expect(onDisk('a')).to.equal('v');
  });
});
