// When staged writes reach the disk (docs/footprint.md "Flash", docs/design.md §18). One commit at
// a time, of one of two kinds:
//   - a durable commit: every prompt write, every held write whose hold has passed, and for each
//     owner in it its earlier staged writes (order on disk). With the commit journal it is one
//     journal frame (commit-journal.ts); without, one LMDB transaction (background writes ride
//     along: the commit is paid anyway).
//   - an LMDB commit: the same, plus every background write and everything journaled (and what
//     replaced it); with the journal it is the compaction that lets the journal start over.
//
// When: group commit as databases do it. A durable commit starts as soon as someone waits for a
// staged write and the writes of the current event-loop turn are in (setImmediate): the first
// waiter leads, whoever arrives while it is under way rides the next one, which starts when it
// ends. Each commit costs the flash at least a block, so this draws on the wear budget
// (wear-budget.ts): while the budget is spent, or when nobody waits, durable commits come at most
// one per storage.commitIntervalMs. LMDB commits come when the oldest background or journaled
// write is storage.backgroundCommitMs old, when the journal runs full, and beyond MAX_STAGED.
import type { Store } from '../store/index.js';
import { CommitQueues, type Scope } from './commit-queues.js';
import { REMOVED, type StagedWrite, type WriteClass } from './staged-table.js';
import type { WearBudget } from './wear-budget.js';

export interface CommitTimings {
  holdMs: number;
  commitIntervalMs: number;
  backgroundCommitMs: number;
}

export interface CommitFigures {
  /** Group commits made: journal frames and LMDB transactions (each one flush). */
  commits: number;
  /** Of those, journal frames, and the bytes they took. */
  journalCommits: number;
  journalBytes: number;
  /** Durable commits started at once because someone waited for them (the wear budget allowed it). */
  fastCommits: number;
  /** Writes that reached LMDB. */
  committedWrites: number;
  /** Writes made durable in the journal (they reach LMDB in a later compaction). */
  journaledWrites: number;
  /** Writes cancelled before they reached the disk (acknowledged within the hold). */
  cancelledWrites: number;
  /** Writes lost to a failed commit, or refused while the store could not write. */
  failedWrites: number;
}

/** What the scheduler needs of the commit journal (storage-policy.ts adapts commit-journal.ts). */
export interface JournalPort {
  readonly size: number;
  /** The payload of one frame holding `writes`. */
  encode(writes: StagedWrite[]): Uint8Array;
  frameBytes(payload: Uint8Array): number;
  free(): number;
  /** Appends and syncs one frame; resolves with the bytes written. */
  append(payload: Uint8Array): Promise<number>;
  /** Frames since the journal last started over. */
  frames(): number;
  /** Issues the write of the compaction marker (in the same LMDB transaction as the compaction's writes). */
  markCompacted(): Promise<unknown>;
  /** The compaction is durable: the journal starts over. */
  compacted(): void;
}

/** Staged writes beyond which held writes are committed without waiting for their hold (memory bound). */
const MAX_STAGED = 50_000;
/** An LMDB commit (compaction) comes once less than this share of the journal is free. */
const JOURNAL_LOW = 1 / 8;


export interface CommitSchedulerDeps {
  store: Pick<Store, 'isOpen' | 'flushed' | 'noteWriteFailure'>;
  timings: CommitTimings;
  now: () => number;
  /** Staged writes over all tables (the memory bound). */
  stagedCount: () => number;
  budget: WearBudget;
  /** The commit journal now (absent: durable commits are LMDB commits). */
  journal: () => JournalPort | undefined;
  /** Whether the store can write (false after a failed commit until its probe says otherwise). */
  writable: () => boolean;
}

export class CommitScheduler {
  readonly figures: CommitFigures = { commits: 0, journalCommits: 0, journalBytes: 0, fastCommits: 0, committedWrites: 0, journaledWrites: 0, cancelledWrites: 0, failedWrites: 0 };
  readonly #queues = new CommitQueues();
  #timer: NodeJS.Timeout | undefined;
  #immediate: NodeJS.Immediate | undefined;
  #timerAt = Infinity;
  #lastDurableAt = -Infinity;
  #inFlight: Promise<void> | undefined;
  #stopped = false;
  /** Someone waits for a staged prompt write (a PUBACK, a SUBACK): the next durable commit may start at once. */
  #wanted = false;

  constructor(private readonly deps: CommitSchedulerDeps) {}

  delayOf(cls: WriteClass): number {
    const t = this.deps.timings;
    return cls === 'prompt' ? 0 : cls === 'held' ? t.holdMs : t.backgroundCommitMs;
  }

  schedule(write: StagedWrite): void {
    this.#queues.push(write);
    this.#arm();
  }

  /** Someone now waits for staged writes (WriteLedger.whenSettled): they are committed without waiting for the interval. */
  awaited(): void {
    this.#wanted = true;
    this.#arm();
  }

  /** The store writes again: the compaction that waited for it can come. */
  writableAgain(): void {
    this.#arm();
  }

  /**
   * Commits every staged write now, held ones too, journaled ones into LMDB (shutdown, backups,
   * tests); resolves once those are on disk.
   */
  async flushAll(): Promise<void> {
    this.#clearTimer();
    while (this.#inFlight) await this.#inFlight;
    if (!this.deps.store.isOpen()) return;
    this.#commitLmdb('all');
    while (this.#inFlight) await this.#inFlight;
  }

  /** Stops the timer (the writes still staged are the caller's to flush first). */
  stop(): void {
    this.#stopped = true;
    this.#clearTimer();
  }

  /** Forgets everything queued (a restore replaced the store). */
  discardAll(): void {
    this.#queues.clear();
    this.#clearTimer();
  }

  // ------------------------------------------------------------------ when

  #arm(): void {
    if (this.#stopped || this.#inFlight) return;
    const now = this.deps.now();
    const at = Math.min(this.#lmdbDue(now), this.#durableDue(now));
    if (at === Infinity) return;
    if ((this.#timer || this.#immediate) && this.#timerAt <= at) return;
    this.#clearTimer();
    this.#timerAt = at;
    const fire = () => {
      this.#timer = undefined;
      this.#immediate = undefined;
      this.#timerAt = Infinity;
      this.#tick();
    };
    // Due now: at the end of this event-loop turn, once the writes arriving in it are staged.
    if (at <= now) this.#immediate = setImmediate(fire);
    else this.#timer = setTimeout(fire, at - now);
    // Not unref'd: while writes are staged someone may wait for them (a SUBACK, a PUBACK), and
    // the timer exists only while they are (stop() and flushAll() clear it).
  }

  #clearTimer(): void {
    if (this.#timer) clearTimeout(this.#timer);
    if (this.#immediate) clearImmediate(this.#immediate);
    this.#timer = undefined;
    this.#immediate = undefined;
    this.#timerAt = Infinity;
  }

  #crowded(): boolean {
    return this.deps.stagedCount() > MAX_STAGED;
  }

  /** When the next LMDB commit is due (with the journal: the compaction). */
  #lmdbDue(now: number): number {
    const journal = this.deps.journal();
    if (this.#crowded() && this.deps.writable()) return now;
    const bg = this.#queues.head('background');
    let at = bg ? bg.dueAt : Infinity;
    // Journaled writes are safe where they are: while the store cannot write, they wait for it
    // (a compaction tried on a full disk fails, and each failed commit is a risk of its own).
    if (journal && this.deps.writable()) {
      at = Math.min(at, this.#queues.journaledDueAt());
      if (journal.frames() > 0 && journal.free() < journal.size * JOURNAL_LOW) at = now;
    }
    return at;
  }

  /** When the next durable commit is due: at once for what someone waits for while the budget lasts, else at the interval. */
  #durableDue(now: number): number {
    const prompt = this.#queues.head('prompt');
    const held = this.#queues.head('held');
    if (!prompt && !held) return Infinity;
    const interval = this.#lastDurableAt + this.deps.timings.commitIntervalMs;
    if (interval <= now) return Math.min(prompt?.dueAt ?? Infinity, held?.dueAt ?? Infinity);
    const fast = this.deps.budget.allowsFast();
    // A prompt write at once only when someone waits for it; a held write past its hold is
    // someone's acknowledgement (the copy's publisher waits for it).
    const promptAt = prompt ? (this.#wanted && fast ? prompt.dueAt : Math.max(prompt.dueAt, interval)) : Infinity;
    const heldAt = held ? (fast ? held.dueAt : Math.max(held.dueAt, interval)) : Infinity;
    return Math.min(promptAt, heldAt);
  }

  #tick(): void {
    const now = this.deps.now();
    if (!this.deps.store.isOpen()) {
      // A restore is swapping the store: try again after it (its reopen discards these writes).
      this.#lastDurableAt = now;
      this.#arm();
      return;
    }
    if (this.#lmdbDue(now) <= now) this.#commitLmdb(this.#crowded() ? 'all' : 'compaction');
    else if (this.#durableDue(now) <= now) this.#commitDurable(now);
    else this.#arm();
  }

  // ------------------------------------------------------------------ how

  #choose(scope: Scope, withBackground: boolean): Set<StagedWrite> {
    return this.#queues.choose(scope, withBackground, this.deps.now(), scope === 'all' || this.#crowded());
  }

  #track(done: Promise<void>): void {
    const tracked = done.finally(() => {
      if (this.#inFlight === tracked) this.#inFlight = undefined;
      // What piled up meanwhile rides the next commit, at once if someone waits for it.
      this.#arm();
    });
    this.#inFlight = tracked;
  }

  #commitDurable(now: number): void {
    const journal = this.deps.journal();
    // Sooner than the interval would have allowed: the wear budget's doing.
    const fast = now < this.#lastDurableAt + this.deps.timings.commitIntervalMs;
    this.#lastDurableAt = now;
    this.#wanted = false;
    if (!journal) {
      if (this.#commitLmdb('durable') && fast) this.figures.fastCommits++;
      return;
    }
    const writes = [...this.#choose('durable', false)];
    if (writes.length === 0) return this.#arm();
    const payload = journal.encode(writes);
    const bytes = journal.frameBytes(payload);
    // Too much for what is left of the journal: an LMDB commit takes them (and compacts).
    if (bytes > journal.free()) return void this.#commitLmdb('compaction', writes);
    for (const w of writes) w.state = 'journaling';
    this.deps.budget.charge(bytes);
    this.figures.commits++;
    if (fast) this.figures.fastCommits++;
    this.#track(
      journal.append(payload).then(
        (written) => {
          this.figures.journalCommits++;
          this.figures.journalBytes += written;
          this.figures.journaledWrites += writes.length;
          const dueAt = this.deps.now() + this.deps.timings.backgroundCommitMs;
          for (const w of writes) {
            w.table.journaled(w as never);
            this.#queues.journaled(w, dueAt);
          }
        },
        (error: unknown) => this.#lose(writes, error),
      ),
    );
  }

  /** One LMDB transaction; false when there was nothing to write. */
  #commitLmdb(scope: Scope, extra: StagedWrite[] = []): boolean {
    const { store } = this.deps;
    const journal = this.deps.journal();
    this.#lastDurableAt = this.deps.now();
    const chosen = this.#choose(scope, true);
    for (const w of extra) if (w.state === 'staged') chosen.add(w);
    if (!this.deps.writable()) {
      // Not tried (see #lmdbDue): what is only in memory is lost now, as a failed commit would lose
      // it, and whoever waited is released; journaled writes stay for the compaction once it writes.
      this.figures.failedWrites += chosen.size;
      for (const w of chosen) w.table.finished(w as never, true);
      this.#arm();
      return chosen.size > 0;
    }
    const journaled = journal ? this.#queues.takeJournaled() : [];
    const marking = journal !== undefined && journal.frames() > 0;
    if (chosen.size === 0 && journaled.length === 0 && !marking) {
      this.#arm();
      return false;
    }
    const writes = [...chosen, ...journaled];
    for (const w of writes) w.state = 'committing';
    const commits: Promise<unknown>[] = [];
    // Issued in one synchronous loop: lmdb-js makes them one transaction (one batch per event turn).
    for (const w of writes) {
      // A removal of a key LMDB never had (a journaled copy delivered before its compaction): nothing to write.
      if (w.value === REMOVED && w.mayBeOnDisk === false) continue;
      commits.push(this.#issue(w));
    }
    if (marking) commits.push(journal.markCompacted());
    this.figures.commits++;
    this.#track(
      Promise.all(commits)
        .then(() => store.flushed())
        .then(
          () => {
            if (marking) journal.compacted();
            this.figures.committedWrites += writes.length;
            for (const w of writes) w.table.finished(w as never);
          },
          (error: unknown) => {
            // Journaled writes are still durable in the journal: they wait for the next compaction.
            const dueAt = this.deps.now();
            for (const w of journaled) {
              w.state = 'journaled';
              this.#queues.journaled(w, dueAt);
            }
            this.#lose([...chosen], error);
          },
        ),
    );
    return true;
  }

  #issue(w: StagedWrite): Promise<unknown> {
    const db = w.table.db as unknown as { put(k: unknown, v: unknown): Promise<unknown>; remove(k: unknown): Promise<unknown> };
    return w.value === REMOVED ? db.remove(w.key) : db.put(w.key, w.value);
  }

  /**
   * Lost: the store's write health learns of it (507s, /health/ready, the broker's refusals);
   * whoever waited is released rather than held forever.
   */
  #lose(writes: StagedWrite[], error: unknown): void {
    this.deps.store.noteWriteFailure(error);
    this.figures.failedWrites += writes.length;
    for (const w of writes) w.table.finished(w as never, true);
  }
}
