// Who waits for which staged writes. A write may carry tags: the publish it is a copy of (aedes'
// brokerCounter, so a publisher's acknowledgement waits for exactly the copies its publish made)
// or a ticket of a caller that awaits its own writes (a SUBACK, a bdSeq). A tag is settled once
// every write that carries it is either committed and flushed, or cancelled because the
// recipient that needed it acknowledged it first. A write that replaces an uncommitted one takes
// over its tags: the newer value is what will reach the disk. A write may be lazy (background):
// it becomes prompt only once someone waits for its tag (a retained QoS 1 value from a client is;
// the same from the gateway's own mapping is not).

/** A publish (aedes' brokerCounter, > 0) or a ticket from `WriteLedger.ticket()` (< 0). */
export type WriteTag = number;

interface OpenTag {
  writes: number;
  waiters: (() => void)[] | undefined;
  /** Lazy writes carrying the tag: handed to onAwaited when someone starts waiting. */
  lazy: object[] | undefined;
}

export class WriteLedger {
  readonly #open = new Map<WriteTag, OpenTag>();
  #nextTicket = -1;

  /**
   * Someone started waiting for staged writes (the commit scheduler then commits without waiting
   * for the interval); `lazy`: the lazy writes of that tag, to be made prompt.
   */
  constructor(private readonly onAwaited: (lazy: readonly object[] | undefined) => void = () => undefined) {}

  /** A tag of its own for a caller that awaits the writes it issues (negative: never a brokerCounter). */
  ticket(): WriteTag {
    const t = this.#nextTicket;
    this.#nextTicket = t === -Number.MAX_SAFE_INTEGER ? -1 : t - 1;
    return t;
  }

  /** A write carrying `tag` was staged (`lazy`: it, when it waits for a waiter to become prompt). */
  opened(tag: WriteTag, lazy?: object): void {
    let open = this.#open.get(tag);
    if (open) open.writes++;
    else this.#open.set(tag, (open = { writes: 1, waiters: undefined, lazy: undefined }));
    if (lazy === undefined) return;
    if (open.waiters) this.onAwaited([lazy]);
    else (open.lazy ??= []).push(lazy);
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
    const lazy = open.lazy;
    open.lazy = undefined;
    this.onAwaited(lazy);
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
