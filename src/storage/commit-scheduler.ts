// When staged writes reach the disk: one group commit (one LMDB transaction, one flush) per tick
// for everything due, at most one tick per commit interval. A tick takes
//   - every prompt write,
//   - every held write whose hold has passed (the others may still be cancelled),
//   - every background write, whenever anything else is committed or the oldest background
//     write reached its deadline (it rides along for free: the commit is paid anyway),
//   - and, for each owner in the commit, its earlier staged writes (order on disk).
import type { Store } from '../store/index.js';
import { REMOVED, type StagedWrite, type WriteClass } from './staged-table.js';

export interface CommitTimings {
  holdMs: number;
  commitIntervalMs: number;
  backgroundCommitMs: number;
}

export interface CommitFigures {
  /** Group commits made (each one LMDB transaction and one flush). */
  commits: number;
  /** Writes that reached the disk. */
  committedWrites: number;
  /** Writes cancelled before they reached the disk (acknowledged within the hold). */
  cancelledWrites: number;
  /** Writes lost to a failed commit, or refused while the store could not write. */
  failedWrites: number;
}

/** Staged writes beyond which held writes are committed without waiting for their hold (memory bound). */
const MAX_STAGED = 50_000;
/**
 * Prompt writes someone waits for that make a commit worth its cost at once, without waiting for
 * the rest of the commit interval: a commit writes ~30 KB whatever it holds, so 64 queued messages
 * cost under 1 KB each. Under load (a backlog while the uplink is down) publishers are then
 * acknowledged as fast as the disk commits, not 64 per interval.
 */
const FULL_COMMIT = 64;

/** A write and the due time it was queued with (it may have been hastened or finished since). */
interface Queued {
  write: StagedWrite;
  dueAt: number;
}

/** First in, first out, amortised O(1) at both ends. */
class Fifo {
  #items: Queued[] = [];
  #head = 0;
  push(q: Queued): void {
    this.#items.push(q);
  }
  peek(): Queued | undefined {
    return this.#items[this.#head];
  }
  shift(): Queued | undefined {
    const q = this.#items[this.#head];
    if (q === undefined) return undefined;
    this.#items[this.#head++] = undefined as unknown as Queued;
    if (this.#head > 1024 && this.#head * 2 > this.#items.length) {
      this.#items = this.#items.slice(this.#head);
      this.#head = 0;
    }
    return q;
  }
  get length(): number {
    return this.#items.length - this.#head;
  }
  clear(): void {
    this.#items = [];
    this.#head = 0;
  }
}

export interface CommitSchedulerDeps {
  store: Pick<Store, 'isOpen' | 'flushed' | 'noteWriteFailure'>;
  timings: CommitTimings;
  now: () => number;
  /** Staged writes over all tables (the memory bound). */
  stagedCount: () => number;
}

export class CommitScheduler {
  readonly figures: CommitFigures = { commits: 0, committedWrites: 0, cancelledWrites: 0, failedWrites: 0 };
  readonly #queues: Record<WriteClass, Fifo> = { prompt: new Fifo(), held: new Fifo(), background: new Fifo() };
  #timer: NodeJS.Timeout | undefined;
  #timerAt = Infinity;
  #lastTickAt = -Infinity;
  #inFlight = new Set<Promise<void>>();
  #stopped = false;
  /** Prompt writes someone waits for (a PUBACK, a SUBACK), staged since the last tick: FULL_COMMIT counts these. */
  #awaited = 0;

  constructor(private readonly deps: CommitSchedulerDeps) {}

  delayOf(cls: WriteClass): number {
    const t = this.deps.timings;
    return cls === 'prompt' ? 0 : cls === 'held' ? t.holdMs : t.backgroundCommitMs;
  }

  schedule(write: StagedWrite): void {
    this.#queues[write.cls].push({ write, dueAt: write.dueAt });
    if (write.cls === 'prompt' && write.tags !== undefined) this.#awaited++;
    this.#arm();
  }

  /**
   * Commits every staged write now, held ones too (shutdown, tests); resolves once those and any
   * commit already under way are on disk.
   */
  async flushAll(): Promise<void> {
    this.#clearTimer();
    this.#tick(true);
    await Promise.all([...this.#inFlight]);
  }

  /** Stops the timer (the writes still staged are the caller's to flush first). */
  stop(): void {
    this.#stopped = true;
    this.#clearTimer();
  }

  /** Forgets everything queued (a restore replaced the store). */
  discardAll(): void {
    for (const q of Object.values(this.#queues)) q.clear();
    this.#clearTimer();
  }

  #arm(): void {
    if (this.#stopped) return;
    const next = this.#nextDue();
    if (next === Infinity) return;
    // Removals of delivered copies (a draining queue) do not count: nobody waits for them.
    const full = this.#awaited >= FULL_COMMIT && this.#inFlight.size === 0;
    const at = full ? next : Math.max(next, this.#lastTickAt + this.deps.timings.commitIntervalMs);
    if (this.#timer && this.#timerAt <= at) return;
    this.#clearTimer();
    this.#timerAt = at;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#timerAt = Infinity;
      this.#tick(false);
      this.#arm();
    }, Math.max(0, at - this.deps.now()));
    // Not unref'd: while writes are staged someone may wait for them (a SUBACK, a PUBACK), and
    // the timer exists only while they are (stop() and flushAll() clear it).
  }

  #clearTimer(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#timerAt = Infinity;
  }

  /** The earliest due time among queued writes still staged (finished heads are dropped on the way). */
  #nextDue(): number {
    let next = Infinity;
    for (const cls of ['prompt', 'held', 'background'] as const) {
      const q = this.#queues[cls];
      for (let head = q.peek(); head; head = q.peek()) {
        if (head.write.state === 'staged') {
          next = Math.min(next, head.dueAt);
          break;
        }
        q.shift();
      }
    }
    if (next !== Infinity && this.deps.stagedCount() > MAX_STAGED) return this.deps.now();
    return next;
  }

  #tick(all: boolean): void {
    const now = this.deps.now();
    this.#lastTickAt = now;
    this.#awaited = 0;
    if (!this.deps.store.isOpen()) {
      // A restore is swapping the store: try again after it (its reopen discards these writes).
      if (!all) this.#arm();
      return;
    }
    const writes = this.#choose(all);
    if (writes.length > 0) this.#commit(writes);
  }

  /** The writes a commit takes now (marked committing), owners' earlier writes included. */
  #choose(all: boolean): StagedWrite[] {
    const now = this.deps.now();
    const crowded = this.deps.stagedCount() > MAX_STAGED;
    const chosen = new Set<StagedWrite>();
    const take = (w: StagedWrite) => {
      if (w.state !== 'staged') return;
      w.state = 'committing';
      chosen.add(w);
    };
    for (let q = this.#queues.prompt.shift(); q; q = this.#queues.prompt.shift()) take(q.write);
    const held = this.#queues.held;
    for (let q = held.peek(); q && (all || crowded || q.dueAt <= now); q = held.peek()) {
      held.shift();
      if (all || crowded || q.write.dueAt <= now) take(q.write);
    }
    const background = this.#queues.background;
    const head = background.peek();
    if (all || chosen.size > 0 || (head !== undefined && head.dueAt <= now)) {
      const later: Queued[] = [];
      for (let q = background.shift(); q; q = background.shift()) {
        // A background write that became held since (someone now expects its recipient's answer) waits for its hold.
        if (q.write.cls === 'held' && !all && q.write.dueAt > now) later.push(q);
        else take(q.write);
      }
      for (const q of later) background.push(q);
    }
    if (chosen.size === 0) return [];
    this.#withOwnerPrefixes(chosen);
    return [...chosen];
  }

  /** Adds, for each owner with a write in the commit, its writes staged before that one. */
  #withOwnerPrefixes(chosen: Set<StagedWrite>): void {
    const groups = new Map<StagedWrite['table'], Map<string, number>>();
    for (const w of chosen) {
      if (w.owner === undefined) continue;
      let owners = groups.get(w.table);
      if (!owners) groups.set(w.table, (owners = new Map()));
      owners.set(w.owner, (owners.get(w.owner) ?? 0) + 1);
    }
    for (const [table, owners] of groups) {
      for (const [owner, count] of owners) {
        let left = count;
        for (const w of table.ownerPrefix(owner)) {
          if (left === 0) break;
          if (chosen.has(w)) left--;
          else if (w.state === 'staged') {
            w.state = 'committing';
            chosen.add(w);
          }
        }
      }
    }
  }

  #issue(w: StagedWrite): Promise<unknown> {
    const db = w.table.db as unknown as { put(k: unknown, v: unknown): Promise<unknown>; remove(k: unknown): Promise<unknown> };
    return w.value === REMOVED ? db.remove(w.key) : db.put(w.key, w.value);
  }

  #commit(writes: StagedWrite[]): void {
    const { store } = this.deps;
    const commits = new Set<Promise<unknown>>();
    // Issued in one synchronous loop: lmdb-js makes them one transaction (one batch per event turn).
    for (const w of writes) commits.add(this.#issue(w));
    this.figures.commits++;
    const done = Promise.all(commits)
      .then(() => store.flushed())
      .then(
        () => this.#finish(writes, undefined),
        (error: unknown) => this.#finish(writes, error),
      );
    this.#inFlight.add(done);
    void done.finally(() => {
      this.#inFlight.delete(done);
      // What piled up meanwhile may make a full commit now.
      this.#arm();
    });
  }

  #finish(writes: StagedWrite[], error: unknown): void {
    if (error === undefined) {
      this.figures.committedWrites += writes.length;
      for (const w of writes) w.table.finished(w as never);
      return;
    }
    // Lost: the store's write health learns of it (507s, /health/ready, the broker's refusals);
    // whoever waited is released rather than held forever.
    this.deps.store.noteWriteFailure(error);
    this.figures.failedWrites += writes.length;
    for (const w of writes) w.table.finished(w as never, true);
  }
}
