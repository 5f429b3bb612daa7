import { TooManyRequestsError } from '../errors/errors.js';

export interface LoginThrottleOptions {
  /** Failures before delays start. */
  freeAttempts: number;
  /** Failures after which the username is refused until lockoutSeconds pass. */
  maxAttempts: number;
  delayStepMs: number;
  maxDelayMs: number;
  lockoutSeconds: number;
  /** Bound on tracked usernames: an attacker spraying names cannot grow memory. */
  maxTrackedUsernames: number;
  now?: () => number;
}

interface Entry {
  failures: number;
  lockedUntil: number;
  lastFailure: number;
}

/**
 * Per-username failure counters, keyed by name whether or not the user exists so the answer
 * never reveals existence. A Map in insertion order serves as an LRU: the oldest entries go
 * first when the bound is reached.
 */
export function createLoginThrottle(options: LoginThrottleOptions) {
  const now = options.now ?? (() => Date.now());
  const entries = new Map<string, Entry>();
  const lockMs = options.lockoutSeconds * 1000;

  const current = (username: string): Entry | undefined => {
    const e = entries.get(username);
    if (!e) return undefined;
    // A quiet period as long as the lockout forgets earlier failures.
    if (e.lockedUntil <= now() && now() - e.lastFailure > lockMs) {
      entries.delete(username);
      return undefined;
    }
    return e;
  };

  return {
    /** Throws 429 while locked; otherwise resolves after the delay the failure count earns. */
    async before(username: string): Promise<void> {
      const e = current(username);
      if (!e) return;
      const t = now();
      if (e.lockedUntil > t) {
        throw new TooManyRequestsError('too many failed login attempts; try again later', Math.ceil((e.lockedUntil - t) / 1000));
      }
      const over = e.failures - options.freeAttempts;
      if (over > 0) {
        const delay = Math.min(options.maxDelayMs, over * options.delayStepMs);
        if (delay > 0) await new Promise((r) => setTimeout(r, delay).unref());
      }
    },
    failed(username: string): void {
      const e = current(username) ?? { failures: 0, lockedUntil: 0, lastFailure: 0 };
      e.failures += 1;
      e.lastFailure = now();
      if (e.failures >= options.maxAttempts) {
        e.lockedUntil = now() + lockMs;
        e.failures = 0;
      }
      entries.delete(username);
      entries.set(username, e);
      while (entries.size > options.maxTrackedUsernames) {
        const oldest = entries.keys().next().value as string;
        entries.delete(oldest);
      }
    },
    succeeded(username: string): void {
      entries.delete(username);
    },
    size: () => entries.size,
  };
}
export type LoginThrottle = ReturnType<typeof createLoginThrottle>;
