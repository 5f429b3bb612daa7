// Small, allocation-free building blocks for the broker's hardening rules. Kept apart
// from broker.ts so each can be unit-tested and reasoned about on its own.

/**
 * Runs at most `limit` jobs at once; the others wait in FIFO order. Nothing is dropped:
 * a reboot storm of many clients is served in turn instead of failing. A job receives
 * `release`, which it must call exactly once (extra calls are ignored).
 */
export class ConcurrencyLimiter {
  private active = 0;
  private queue: Array<(release: () => void) => void> = [];
  private head = 0;

  constructor(private readonly limit: number) {}

  get running(): number {
    return this.active;
  }

  get waiting(): number {
    return this.queue.length - this.head;
  }

  schedule(job: (release: () => void) => void): void {
    if (this.active < this.limit) {
      this.start(job);
      return;
    }
    this.queue.push(job);
  }

  private start(job: (release: () => void) => void): void {
    this.active++;
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      this.active--;
      this.next();
    };
    try {
      job(release);
    } catch {
      release();
    }
  }

  private next(): void {
    while (this.active < this.limit && this.head < this.queue.length) {
      const job = this.queue[this.head]!;
      this.queue[this.head] = undefined as never;
      this.head++;
      // Compact now and then so a long storm does not keep a huge sparse array.
      if (this.head > 1024 && this.head * 2 > this.queue.length) {
        this.queue = this.queue.slice(this.head);
        this.head = 0;
      }
      this.start(job);
    }
  }
}

/**
 * Token bucket: `ratePerSecond` tokens per second, burst of one second's worth.
 * `take()` costs one clock read and a few arithmetic operations.
 */
export class TokenBucket {
  private tokens: number;
  private refilledAt: number;

  constructor(private readonly ratePerSecond: number) {
    this.tokens = ratePerSecond;
    this.refilledAt = Date.now();
  }

  take(now = Date.now()): boolean {
    const elapsed = now - this.refilledAt;
    if (elapsed > 0) {
      const tokens = this.tokens + (elapsed * this.ratePerSecond) / 1000;
      this.tokens = tokens > this.ratePerSecond ? this.ratePerSecond : tokens;
      this.refilledAt = now;
    }
    if (this.tokens >= 1) {
      this.tokens -= 1;
      return true;
    }
    return false;
  }

  /** Tokens available now, as a share of the burst (0..1). */
  level(now = Date.now()): number {
    const tokens = Math.min(this.ratePerSecond, this.tokens + ((now - this.refilledAt) * this.ratePerSecond) / 1000);
    return tokens / this.ratePerSecond;
  }

  /** Milliseconds until one token is available. */
  msUntilToken(now = Date.now()): number {
    const missing = 1 - (this.tokens + ((now - this.refilledAt) * this.ratePerSecond) / 1000);
    return missing <= 0 ? 0 : Math.ceil((missing * 1000) / this.ratePerSecond);
  }
}

/**
 * Per-client cache of permission decisions by topic, bounded to `size` entries.
 *
 * The permission engine is already O(topic levels) (~0.2 µs), so a cache only pays when topics
 * repeat (a device publishing to its few topics). It fills up to `size` entries and then stops
 * inserting; only after `4 × size` misses is it emptied and refilled, so a subscriber that sees
 * thousands of distinct topics costs one Map lookup plus the engine call, not an
 * insert-and-evict per message (which cost twice the engine call in measurements). When fewer
 * lookups hit than missed over such a window, the topics hardly repeat and the Map lookup is
 * pure overhead (as much as the engine call itself, profiled on a 10 → 10 wildcard fan-out over
 * 1,000 topics per publisher): the cache is then left alone for `16 × size` lookups, and tried
 * again after.
 */
export class DecisionCache {
  /** Made at the first decision stored (a client that only subscribes never needs its write cache). */
  private map: Map<string, boolean> | undefined;
  private misses = 0;
  private hits = 0;
  /** Lookups still to answer "unknown" without consulting the map (topics do not repeat). */
  private bypass = 0;

  constructor(private readonly size: number) {}

  get entries(): number {
    return this.map?.size ?? 0;
  }

  /** True while the cache is skipped because its topics did not repeat. */
  get bypassed(): boolean {
    return this.bypass > 0;
  }

  lookup(topic: string): boolean | undefined {
    if (this.bypass > 0) {
      this.bypass--;
      return undefined;
    }
    const decision = this.map?.get(topic);
    if (decision === undefined) this.misses++;
    else this.hits++;
    return decision;
  }

  store(topic: string, decision: boolean): void {
    if (this.bypass > 0) return;
    this.map ??= new Map();
    if (this.map.size < this.size) {
      this.map.set(topic, decision);
    } else if (this.misses > 4 * this.size) {
      this.map.clear();
      if (this.hits < this.misses) {
        this.bypass = 16 * this.size;
      } else {
        this.map.set(topic, decision);
      }
      this.misses = 0;
      this.hits = 0;
    }
  }

  clear(): void {
    this.map?.clear();
    this.misses = 0;
    this.hits = 0;
    this.bypass = 0;
  }
}

/** The promise half of the aedes-persistence interface that the queue bound wraps. */
interface OutgoingPersistence {
  outgoingEnqueue(sub: { clientId: string }, packet: unknown, cb?: unknown): unknown;
  outgoingEnqueueCombi(subs: Array<{ clientId: string }>, packet: unknown, cb?: unknown): unknown;
  outgoingClearMessageId(client: { id: string }, packet: unknown, cb?: unknown): unknown;
}

function isOutgoingPersistence(value: unknown): value is OutgoingPersistence {
  const p = value as Partial<OutgoingPersistence> | null;
  return (
    !!p &&
    typeof p.outgoingEnqueue === 'function' &&
    typeof p.outgoingEnqueueCombi === 'function' &&
    typeof p.outgoingClearMessageId === 'function'
  );
}

/**
 * Bounds every session's outgoing QoS>0 queue (unacknowledged + offline messages of persistent
 * sessions) to `limit` messages. The in-memory aedes persistence keeps them in an unbounded
 * array per client id, so a persistent-session subscriber that never comes back, or never
 * acknowledges, would grow memory forever. Beyond the limit new messages are dropped for that
 * session (tail drop, as mosquitto's max_queued_messages); an online session whose queue is full
 * is disconnected by aedes when the dropped message cannot be tracked (a slow consumer).
 *
 * Works on the promise-style calls aedes 1.x makes; counts are exact because the memory
 * persistence adds one entry per subscription on enqueue and removes one per cleared id.
 */
export function boundOutgoingQueues(
  persistence: unknown,
  limit: number,
  onDrop: (clientId: string) => void,
): { queued(clientId: string): number } | null {
  if (!isOutgoingPersistence(persistence)) return null;
  const counts = new Map<string, number>();
  const enqueue = persistence.outgoingEnqueue.bind(persistence);
  const enqueueCombi = persistence.outgoingEnqueueCombi.bind(persistence);
  const clear = persistence.outgoingClearMessageId.bind(persistence);

  const admit = (clientId: string): boolean => {
    const n = counts.get(clientId) ?? 0;
    if (n >= limit) {
      onDrop(clientId);
      return false;
    }
    counts.set(clientId, n + 1);
    return true;
  };

  persistence.outgoingEnqueue = (sub, packet, cb) => {
    if (cb !== undefined) return enqueue(sub, packet, cb); // callback API: not used by aedes 1.x
    if (!admit(sub.clientId)) return Promise.resolve();
    return enqueue(sub, packet);
  };
  persistence.outgoingEnqueueCombi = (subs, packet, cb) => {
    if (cb !== undefined) return enqueueCombi(subs, packet, cb);
    let kept = subs;
    for (let i = 0; i < subs.length; i++) {
      if (!admit(subs[i]!.clientId)) {
        // Rare path: rebuild the list without the full queues.
        kept = subs.slice(0, i);
        for (let j = i + 1; j < subs.length; j++) if (admit(subs[j]!.clientId)) kept.push(subs[j]!);
        break;
      }
    }
    return enqueueCombi(kept, packet);
  };
  persistence.outgoingClearMessageId = (client, packet, cb) => {
    if (cb !== undefined) return clear(client, packet, cb);
    return Promise.resolve(clear(client, packet)).then((removed) => {
      if (removed) {
        const n = (counts.get(client.id) ?? 1) - 1;
        if (n > 0) counts.set(client.id, n);
        else counts.delete(client.id);
      }
      return removed;
    });
  };
  return { queued: (clientId) => counts.get(clientId) ?? 0 };
}
