// The wear budget (src/storage/wear-budget.ts) and what the commit scheduler does with it, on a
// sinon clock: its rate from storage.flash, spent and refilled (each said once in the log, the
// refill also when nothing asks), every write of the process counted once, and a stream of
// acknowledgements that gets a commit each while the budget lasts and one per commit interval
// once it is spent (the journal's writes are real I/O in a temp dir; only the clock is fake).
import { rmSync } from 'node:fs';
import { expect } from 'chai';
import sinon from 'sinon';
import { openStore, type Store } from '../src/store/index.js';
import { budgetBytesPerSecond, createStoragePolicy, createWearBudget, REFILLED_SHARE, WEAR_DEFAULTS, type StoragePolicy } from '../src/storage/index.js';
import { capturedLog } from './support/captured-log.js';
import { tempDir } from './support/harness.js';

const logSink = () => capturedLog();

const spentLine = 'storage: the wear budget is spent; acknowledgements that wait for the flash now wait for the commit interval until it refills';
const refilledLine = 'storage: the wear budget is refilled; acknowledgements no longer wait for the commit interval';

describe('wear budget', () => {
  let clock: sinon.SinonFakeTimers;
  beforeEach(() => {
    clock = sinon.useFakeTimers({ now: 1_000_000, toFake: ['Date', 'setTimeout', 'clearTimeout'] });
  });
  afterEach(() => clock.restore());

  it('fills at capacity × cycles / (write amplification × life): 8 GB, 1,000 cycles, 3, 10 years is 8,450 B/s, 730 MB a day', () => {
    const rate = budgetBytesPerSecond(WEAR_DEFAULTS);
    expect(rate).to.be.closeTo((8e9 * 1000) / (3 * 10 * 365.25 * 86400), 1e-9);
    expect(rate * 86400).to.be.within(730e6, 731e6);
    expect(budgetBytesPerSecond({ ...WEAR_DEFAULTS, lifeYears: 20 }), 'twice the life, half the rate').to.be.closeTo(rate / 2, 1e-9);
    expect(budgetBytesPerSecond({ ...WEAR_DEFAULTS, ratedWriteCycles: 20_000 }), 'pSLC').to.be.closeTo(rate * 20, 1e-6);
  });

  it('is spent when charges empty it (said once), and refilled at a tenth of the allowance (said once, by its own timer)', () => {
    const { log, lines } = logSink();
    const burst = 1_000_000;
    const budget = createWearBudget({ spec: { ...WEAR_DEFAULTS, burstBytes: burst }, readWrittenBytes: () => undefined, log });
    expect(budget.allowsFast()).to.equal(true);
    for (let i = 0; i < 244; i++) budget.charge(4096); // 999,424 B
    expect(budget.state().mode).to.equal('fast');
    budget.charge(4096);
    budget.charge(4096);
    expect(budget.allowsFast()).to.equal(false);
    expect(budget.state()).to.include({ mode: 'spent', availableBytes: 0, spentCount: 1, spentSince: 1_000_000 });
    expect(lines.filter((l) => l.message === spentLine)).to.have.length(1);
    expect(lines[0]).to.include({ level: 'warn', burstBytes: burst, lifeYears: 10 });
    const rate = budgetBytesPerSecond(WEAR_DEFAULTS);
    const refillMs = ((REFILLED_SHARE * burst) / rate) * 1000;
    clock.tick(Math.floor(refillMs * 0.95));
    expect(budget.allowsFast(), 'not before a tenth is back').to.equal(false);
    expect(lines.filter((l) => l.message === refilledLine)).to.have.length(0);
    // Nobody asks: the budget's timer says it when it is.
    clock.tick(Math.ceil(refillMs * 0.1) + 1000);
    expect(lines.filter((l) => l.message === refilledLine), 'said once, without being asked').to.have.length(1);
    expect(budget.allowsFast()).to.equal(true);
    expect(budget.state()).to.include({ mode: 'fast', spentSince: null, spentCount: 1 });
    budget.stop();
  });

  it('counts every write of the process once: write_bytes beyond what was charged is taken, a charged frame is not taken again', () => {
    let written = 0;
    const burst = 10_000_000;
    const budget = createWearBudget({ spec: { ...WEAR_DEFAULTS, burstBytes: burst, lifeYears: 1e9 }, readWrittenBytes: () => written });
    budget.charge(4096); // a journal frame about to be written
    clock.tick(1000);
    written += 4096 + 50_000; // the frame and an LMDB commit
    expect(budget.state().availableBytes).to.equal(burst - 4096 - 50_000);
    // A frame charged whose write the kernel has not counted yet: credited until it is.
    budget.charge(4096);
    clock.tick(1000);
    expect(budget.state().availableBytes).to.equal(burst - 2 * 4096 - 50_000);
    written += 4096;
    clock.tick(1000);
    expect(budget.state().availableBytes, 'not taken twice').to.equal(burst - 2 * 4096 - 50_000);
    written += 1000; // a login's commit
    clock.tick(1000);
    expect(budget.state().availableBytes).to.equal(burst - 2 * 4096 - 51_000);
    budget.stop();
  });

  it('is off with burstBytes 0: never fast, nothing said', () => {
    const { log, lines } = logSink();
    const budget = createWearBudget({ spec: { ...WEAR_DEFAULTS, burstBytes: 0 }, readWrittenBytes: () => undefined, log });
    budget.charge(4096);
    expect(budget.allowsFast()).to.equal(false);
    expect(budget.state()).to.include({ mode: 'off', spentCount: 0 });
    expect(lines).to.have.length(0);
  });
});

describe('commit scheduler with the wear budget (sinon clock, real journal)', function () {
  this.timeout(20_000);
  let dir: string;
  let store: Store;
  let policy: StoragePolicy;
  let clock: sinon.SinonFakeTimers;
  const realTimeout = setTimeout;
  const waiters = new Map<number, Promise<void>>();
  const timings = { holdMs: 1000, commitIntervalMs: 500, backgroundCommitMs: 600_000 };

  beforeEach(() => {
    dir = tempDir('gatewayd-budget-');
    waiters.clear();
    clock = sinon.useFakeTimers({ now: 1_000_000, toFake: ['Date', 'setTimeout', 'clearTimeout', 'setImmediate', 'clearImmediate'] });
  });
  afterEach(async () => {
    clock.restore();
    await policy.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /**
   * Runs what is due on the fake clock without moving it, and lets the journal's real I/O turn,
   * until `tag` settles or `realMs` of real time passed: true if it settled. A commit's frame is
   * fsynced for real, which takes what the machine's disk takes (hundreds of ms under a loaded
   * CI), so a settling is awaited, not counted in turns of the event loop.
   */
  async function settles(tag: number, realMs = 10_000): Promise<boolean> {
    const until = performance.now() + realMs;
    // Only a settling someone already waits for is awaited: asking whenSettled() is waiting for it,
    // which the policy answers with a fast commit.
    const settled = waiters.get(tag);
    while (performance.now() < until) {
      await clock.tickAsync(0);
      if (!policy.pending(tag)) return true;
      await Promise.race([...(settled ? [settled] : []), new Promise((r) => realTimeout(r, 5))]);
    }
    await clock.tickAsync(0);
    return !policy.pending(tag);
  }
  /** No commit starts for `tag` at the clock's present time (the count is taken when a commit starts, before its I/O), nor does it settle within 200 ms of real time. */
  async function waitsForTheClock(tag: number): Promise<boolean> {
    const started = policy.stats().commits;
    const settled = await settles(tag, 200);
    return !settled && policy.stats().commits === started;
  }

  it('a commit per acknowledgement while the budget lasts; once it is spent, one per commit interval; fast again once refilled', async () => {
    const { log, lines } = logSink();
    store = openStore({ dir });
    // Four frames of 4 KiB empty it.
    policy = createStoragePolicy({ store, timings, wear: { ...WEAR_DEFAULTS, burstBytes: 3 * 4096 + 100 }, journal: true, log });
    const table = policy.table<string>('copies', { keyEncoding: 'ordered-binary' });
    let n = 0;
    const acknowledge = () => {
      const tag = policy.ticket();
      table.put(`m${n}`, `m${n}`, `message ${n}`, { class: 'prompt', tag });
      n++;
      waiters.set(tag, policy.whenSettled(tag));
      return tag;
    };
    for (let i = 0; i < 4; i++) {
      const tag = acknowledge();
      expect(await settles(tag), `acknowledgement ${i}: at once, no clock time`).to.equal(true);
    }
    expect(policy.stats().budget.mode).to.equal('spent');
    expect(lines.filter((l) => l.message === spentLine)).to.have.length(1);
    // Spent: the next waits for the interval after the last commit.
    const slow = acknowledge();
    expect(await waitsForTheClock(slow), 'not at once').to.equal(true);
    await clock.tickAsync(timings.commitIntervalMs - 1);
    expect(await waitsForTheClock(slow), 'not before the interval').to.equal(true);
    await clock.tickAsync(1);
    expect(await settles(slow), 'at the interval').to.equal(true);
    expect(policy.stats().journalCommits).to.equal(5);
    // Refilled (a tenth of the allowance at 8,450 B/s: 146 ms): at once again.
    await clock.tickAsync(1000);
    expect(lines.filter((l) => l.message === refilledLine)).to.have.length(1);
    expect(policy.stats().budget.mode).to.equal('fast');
    expect(await settles(acknowledge()), 'at once again').to.equal(true);
  });

  it('writes nobody waits for are not hastened by the budget: they wait for the interval', async () => {
    store = openStore({ dir });
    policy = createStoragePolicy({ store, timings, journal: true });
    const table = policy.table<string>('copies', { keyEncoding: 'ordered-binary' });
    const first = policy.ticket();
    table.put('a', 'a', 'v', { class: 'prompt', tag: first });
    waiters.set(first, policy.whenSettled(first));
    expect(await settles(first)).to.equal(true);
    const quiet = policy.ticket();
    table.put('b', 'b', 'v', { class: 'prompt', tag: quiet }); // tagged, but nobody calls whenSettled
    await clock.tickAsync(timings.commitIntervalMs - 1);
    expect(await waitsForTheClock(quiet)).to.equal(true);
    await clock.tickAsync(1);
    expect(await settles(quiet)).to.equal(true);
    // Neither came sooner than the interval allowed (the first after a quiet spell never does).
    expect(policy.stats().fastCommits).to.equal(0);
  });
});
