// What a commit takes (commit-scheduler.ts decides when): the staged writes queued by class, the
// journaled writes waiting for their compaction, and the writes that replaced journaled ones.
// A commit takes
//   - every prompt write,
//   - every held write whose hold has passed (the others may still be cancelled),
//   - every background write (when the commit is an LMDB one: it rides along for free, the commit
//     is paid anyway),
//   - for a compaction, everything journaled still current and what replaced journaled writes,
//   - and, for each owner in the commit, its earlier staged writes (order on disk).
import type { StagedWrite, WriteClass } from './staged-table.js';

/** durable: what someone may wait for; compaction: an LMDB commit that retires the journal; all: everything (flush). */
export type Scope = 'durable' | 'compaction' | 'all';

/** A write and the due time it was queued with (it may have been hastened or finished since). */
export interface Queued {
  write: StagedWrite;
  dueAt: number;
}

/** First in, first out, amortised O(1) at both ends. */
export class Fifo {
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

export class CommitQueues {
  readonly #byClass: Record<WriteClass, Fifo> = { prompt: new Fifo(), held: new Fifo(), background: new Fifo() };
  /** Journaled writes, due for compaction backgroundCommitMs after they were journaled. */
  readonly #journaled = new Fifo();
  /** Staged writes that replaced journaled ones: the next compaction takes them. */
  #overJournal: StagedWrite[] = [];

  /** A write was staged, or became due earlier. */
  push(write: StagedWrite): void {
    this.#byClass[write.cls].push({ write, dueAt: write.dueAt });
    if (write.overJournal) this.#overJournal.push(write);
  }

  /** `write` is in the journal: due for compaction at `dueAt`. */
  journaled(write: StagedWrite, dueAt: number): void {
    this.#journaled.push({ write, dueAt });
  }

  /** When the oldest journaled write is due for compaction (Infinity: none). */
  journaledDueAt(): number {
    return this.#journaled.peek()?.dueAt ?? Infinity;
  }

  clear(): void {
    for (const q of Object.values(this.#byClass)) q.clear();
    this.#journaled.clear();
    this.#overJournal = [];
  }

  /** The first queued write of a class still staged (finished heads are dropped on the way). */
  head(cls: WriteClass): Queued | undefined {
    const q = this.#byClass[cls];
    for (let head = q.peek(); head; head = q.peek()) {
      if (head.write.state === 'staged') return head;
      q.shift();
    }
    return undefined;
  }

  /**
   * The writes a commit takes now (still staged; not marked), owners' earlier writes included.
   * `early`: held writes are taken before their hold has passed (a flush, the memory bound).
   */
  choose(scope: Scope, withBackground: boolean, now: number, early: boolean): Set<StagedWrite> {
    const chosen = new Set<StagedWrite>();
    const take = (w: StagedWrite) => {
      if (w.state === 'staged') chosen.add(w);
    };
    const { prompt, held, background } = this.#byClass;
    for (let q = prompt.shift(); q; q = prompt.shift()) take(q.write);
    for (let q = held.peek(); q && (early || q.dueAt <= now); q = held.peek()) {
      held.shift();
      if (early || q.write.dueAt <= now) take(q.write);
    }
    const head = background.peek();
    if (withBackground && (scope !== 'durable' || chosen.size > 0 || (head !== undefined && head.dueAt <= now))) {
      const later: Queued[] = [];
      for (let q = background.shift(); q; q = background.shift()) {
        // A background write that became held since (someone now expects its recipient's answer) waits for its hold.
        if (q.write.cls === 'held' && !early && q.write.dueAt > now) later.push(q);
        else take(q.write);
      }
      for (const q of later) background.push(q);
    }
    if (scope !== 'durable') {
      for (const w of this.#overJournal) take(w);
      this.#overJournal = [];
    }
    withOwnerPrefixes(chosen);
    return chosen;
  }

  /** Every journaled write still current (the ones replaced since are done: their successors carry on). */
  takeJournaled(): StagedWrite[] {
    const out: StagedWrite[] = [];
    for (let q = this.#journaled.shift(); q; q = this.#journaled.shift()) {
      const w = q.write;
      if (w.state !== 'journaled') continue;
      if (w.table.current(w as never)) out.push(w);
      else w.table.finished(w as never);
    }
    return out;
  }
}

/** Adds, for each owner with a write in the commit, its writes staged before that one. */
function withOwnerPrefixes(chosen: Set<StagedWrite>): void {
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
        else if (w.state === 'staged') chosen.add(w);
      }
    }
  }
}
