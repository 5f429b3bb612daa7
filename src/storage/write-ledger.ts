// Who waits for which staged writes. A write may carry tags: the publish it is a copy of (aedes'
// brokerCounter, so a publisher's acknowledgement waits for exactly the copies its publish made)
// or a ticket of a caller that awaits its own writes (a SUBACK, a bdSeq). A tag is settled once
// every write that carries it is either committed and flushed, or cancelled because the
// recipient that needed it acknowledged it first. A write that replaces an uncommitted one takes
// over its tags: the newer value is what will reach the disk.

/** A publish (aedes' brokerCounter, > 0) or a ticket from `WriteLedger.ticket()` (< 0). */
export type WriteTag = number;

interface OpenTag {
  writes: number;
  waiters: (() => void)[] | undefined;
}

export class WriteLedger {
  readonly #open = new Map<WriteTag, OpenTag>();
  #nextTicket = -1;

  /** Someone started waiting for staged writes (the commit scheduler then commits without waiting for the interval). */
  constructor(private readonly onAwaited: () => void = () => undefined) {}

  /** A tag of its own for a caller that awaits the writes it issues (negative: never a brokerCounter). */
  ticket(): WriteTag {
    const t = this.#nextTicket;
    this.#nextTicket = t === -Number.MAX_SAFE_INTEGER ? -1 : t - 1;
    return t;
  }

  /** A write carrying `tag` was staged. */
  opened(tag: WriteTag): void {
    const open = this.#open.get(tag);
    if (open) open.writes++;
    else this.#open.set(tag, { writes: 1, waiters: undefined });
  }

  /** A write carrying `tag` reached the disk, or is no longer needed. */
  settled(tag: WriteTag): void {
    const open = this.#open.get(tag);
    if (!open) return;
    if (--open.writes > 0) return;
    this.#open.delete(tag);
    if (open.waiters) for (const wake of open.waiters) wake();
  }

  /** Whether writes carrying `tag` are still staged. */
  pending(tag: WriteTag): boolean {
    return this.#open.has(tag);
  }

  /** Resolves once no staged write carries `tag` (at once when none does). */
  whenSettled(tag: WriteTag): Promise<void> {
    const open = this.#open.get(tag);
    if (!open) return Promise.resolve();
    const waiting = new Promise<void>((resolve) => (open.waiters ??= []).push(resolve));
    this.onAwaited();
    return waiting;
  }

  /** Tags with staged writes (for stats; O(1)). */
  get size(): number {
    return this.#open.size;
  }

  /** Settles everything (the store was swapped under the writes by a restore). */
  settleAll(): void {
    const open = [...this.#open.values()];
    this.#open.clear();
    for (const o of open) if (o.waiters) for (const wake of o.waiters) wake();
  }
}
