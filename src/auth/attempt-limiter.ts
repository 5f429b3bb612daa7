import { TooManyRequestsError } from '../errors/errors.js';

// Brute-force limits that concurrency cannot race (issue 11). An attempt is reserved BEFORE the
// expensive check (scrypt, an LDAP bind, an OTP): failures plus attempts still being evaluated
// never exceed maxAttempts, however many requests arrive at once. Locks are kept apart from the
// counters: the counter table is bounded (spraying made-up names evicts old counters), the lock
// table is not, and a lock is never dropped before it ends. Each lock costs maxAttempts full
// evaluations, so the lock table stays small by itself (a few thousand at most per lockout).

export interface AttemptLimiterOptions {
  /** Evaluations per key and window; the one that fails last locks the key. */
  maxAttempts: number;
  lockMs: number;
  /** Failures evaluated without delay; each one beyond waits delayStepMs more, up to maxDelayMs. */
  freeAttempts?: number;
  delayStepMs?: number;
  maxDelayMs?: number;
  /** Bound on tracked counters (not on locks). */
  maxTrackedKeys: number;
  /** A success forgets the key's failures (a username); false for keys shared by many (an address). */
  resetOnSuccess?: boolean;
  /**
   * Count attempts still being evaluated against maxAttempts (a username: at most maxAttempts
   * guesses in flight). False for an address, where many good logins may run at once.
   */
  countInFlight?: boolean;
  /** The 429 message. */
  message: string;
  now?: () => number;
}

/** One reserved evaluation: report its outcome exactly once. */
export interface Attempt {
  failed(): void;
  succeeded(): void;
  /** Neither: the evaluation did not happen (another limit refused it first). */
  release(): void;
}

interface Counter {
  failures: number;
  inFlight: number;
  lastFailure: number;
  /** Attempts waiting for an evaluation in flight to end (woken one per settle, all on a lock). */
  waiters: (() => void)[];
}

/** Attempts that may wait for one key at once; beyond, 429 at once. */
const MAX_WAITING = 256;
/** How long an attempt waits for its turn at most. */
const MAX_WAIT_MS = 10_000;

export function createAttemptLimiter(options: AttemptLimiterOptions) {
  const now = options.now ?? (() => Date.now());
  const counters = new Map<string, Counter>();
  /** key → end of its lock (ms). Insertion order is expiry order: lockMs is fixed. */
  const locks = new Map<string, number>();

  function sweepLocks(t: number): void {
    for (const [key, until] of locks) {
      if (until > t) break;
      locks.delete(key);
    }
  }

  function counterOf(key: string, t: number): Counter {
    let c = counters.get(key);
    // A quiet period as long as a lock forgets earlier failures.
    if (c && c.inFlight === 0 && c.waiters.length === 0 && t - c.lastFailure > options.lockMs) {
      counters.delete(key);
      c = undefined;
    }
    if (!c) {
      c = { failures: 0, inFlight: 0, lastFailure: 0, waiters: [] };
      counters.set(key, c);
      // Evict the oldest idle counters. A counter with evaluations running or waiting stays:
      // evicted, its key would get a fresh counter and another maxAttempts guesses in flight
      // while the first ones still run (a spray of made-up names during a burst). Busy
      // counters are bounded by the requests in flight, so the table stays bounded too.
      if (counters.size > options.maxTrackedKeys) {
        for (const [k, other] of counters) {
          if (counters.size <= options.maxTrackedKeys) break;
          if (other !== c && other.inFlight === 0 && other.waiters.length === 0) counters.delete(k);
        }
      }
    }
    return c;
  }

  function tooMany(retryMs: number): TooManyRequestsError {
    return new TooManyRequestsError(options.message, Math.max(1, Math.ceil(retryMs / 1000)));
  }

  /**
   * One evaluation of `key` reserved now, with the delay its earlier failures earn; undefined
   * when it must wait for an evaluation in flight to end. 429 while the key is locked, when too
   * many wait, or after `waited` turns too many.
   */
  function reserve(key: string, waited: number): { attempt: Attempt; delayMs: number } | undefined {
    const t = now();
    sweepLocks(t);
    const until = locks.get(key);
    if (until !== undefined && until > t) throw tooMany(until - t);
    const c = counterOf(key, t);
    if (c.failures + (options.countInFlight === false ? 0 : c.inFlight) >= options.maxAttempts) {
      if (c.inFlight === 0 || c.waiters.length >= MAX_WAITING || waited > options.maxAttempts + MAX_WAITING) throw tooMany(options.lockMs);
      return undefined;
    }
    c.inFlight += 1;
    let settled = false;
    const settle = () => {
      if (settled) return false;
      settled = true;
      c.inFlight -= 1;
      return true;
    };
    const wakeNext = () => c.waiters.shift()?.();
    const attempt: Attempt = {
      failed() {
        if (!settle()) return;
        c.failures += 1;
        c.lastFailure = now();
        if (c.failures >= options.maxAttempts) {
          locks.delete(key);
          locks.set(key, c.lastFailure + options.lockMs);
          c.failures = 0;
          // Everyone waiting now meets the lock.
          for (const wake of c.waiters.splice(0)) wake();
        } else wakeNext();
      },
      succeeded() {
        if (!settle()) return;
        if (options.resetOnSuccess !== false) c.failures = 0;
        if (c.inFlight === 0 && c.failures === 0 && c.waiters.length === 0 && counters.get(key) === c) counters.delete(key);
        wakeNext();
      },
      release() {
        if (settle()) wakeNext();
      },
    };
    const over = c.failures - (options.freeAttempts ?? options.maxAttempts);
    const delayMs = over > 0 && options.delayStepMs ? Math.min(options.maxDelayMs ?? Infinity, over * options.delayStepMs) : 0;
    return { attempt, delayMs };
  }

  return {
    /** Seconds left of a lock on `key`, or 0. */
    lockedFor(key: string): number {
      const t = now();
      sweepLocks(t);
      const until = locks.get(key);
      return until !== undefined && until > t ? Math.ceil((until - t) / 1000) : 0;
    },

    /**
     * Reserves one evaluation for `key`, after the delay its failures earn. 429 while the key is
     * locked. While maxAttempts evaluations are failed or running, a new one waits for one of
     * them to end (a fleet of devices sharing a username all get in; guesses run out into the
     * lock), and is refused if too many wait or it waited too long.
     */
    async begin(key: string): Promise<Attempt> {
      for (let waited = 0; ; waited++) {
        const reserved = reserve(key, waited);
        if (reserved) {
          if (reserved.delayMs > 0) await new Promise((r) => setTimeout(r, reserved.delayMs).unref());
          return reserved.attempt;
        }
        // reserve() kept the counter: evaluations of this key are in flight.
        const counter = counters.get(key)!;
        await new Promise<void>((resolve) => {
          const timer = setTimeout(() => {
            counter.waiters = counter.waiters.filter((w) => w !== wake);
            resolve();
          }, MAX_WAIT_MS);
          const wake = () => {
            clearTimeout(timer);
            resolve();
          };
          counter.waiters.push(wake);
        });
      }
    },

    /**
     * begin() when it has nothing to wait for (no delay earned, a free place): the attempt at
     * once, synchronously (a device reconnecting with a password verified moments ago). 429 as
     * begin(); undefined when begin() would wait.
     */
    tryBegin(key: string): Attempt | undefined {
      const reserved = reserve(key, 0);
      if (reserved && reserved.delayMs > 0) {
        reserved.attempt.release();
        return undefined;
      }
      return reserved?.attempt;
    },

    /** Forgets the failures and the lock of `key`: an operator's decision (a confirmed registration). */
    forget(key: string): void {
      const c = counters.get(key);
      if (c && c.inFlight === 0) counters.delete(key);
      locks.delete(key);
    },

    trackedKeys: () => counters.size,
    locks: () => locks.size,
  };
}
export type AttemptLimiter = ReturnType<typeof createAttemptLimiter>;
