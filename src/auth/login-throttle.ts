import { createAttemptLimiter, type Attempt } from './attempt-limiter.js';

export interface LoginThrottleOptions {
  /** Failures before delays start. */
  freeAttempts: number;
  /** Passwords evaluated per username before it is refused until lockoutSeconds pass. */
  maxAttempts: number;
  delayStepMs: number;
  maxDelayMs: number;
  lockoutSeconds: number;
  /** Bound on tracked counters: an attacker spraying names cannot grow memory (locks are kept apart). */
  maxTrackedUsernames: number;
  /** Failed logins from one address (any usernames) before it is refused until lockoutSeconds pass; 0: no limit. */
  maxFailuresPerAddress: number;
  now?: () => number;
}

/**
 * Password-guessing limits for every login path (REST login and Basic, MQTT and OPC UA
 * passwords, LDAP binds): per username, keyed by name whether or not the user exists so the
 * answer never reveals existence, and per source address against spraying many usernames.
 */
export function createLoginThrottle(options: LoginThrottleOptions) {
  const lockMs = options.lockoutSeconds * 1000;
  const byUsername = createAttemptLimiter({
    maxAttempts: options.maxAttempts,
    lockMs,
    freeAttempts: options.freeAttempts,
    delayStepMs: options.delayStepMs,
    maxDelayMs: options.maxDelayMs,
    maxTrackedKeys: options.maxTrackedUsernames,
    message: 'too many failed login attempts; try again later',
    ...(options.now ? { now: options.now } : {}),
  });
  const byAddress =
    options.maxFailuresPerAddress > 0
      ? createAttemptLimiter({
          maxAttempts: options.maxFailuresPerAddress,
          lockMs,
          maxTrackedKeys: options.maxTrackedUsernames,
          resetOnSuccess: false,
          countInFlight: false,
          message: 'too many failed logins from this address; try again later',
          ...(options.now ? { now: options.now } : {}),
        })
      : undefined;

  /** One attempt of both limits: what happens to it happens to both. */
  const both = (forUser: Attempt, fromAddress: Attempt | undefined): Attempt => ({
    failed() {
      forUser.failed();
      fromAddress?.failed();
    },
    succeeded() {
      forUser.succeeded();
      fromAddress?.succeeded();
    },
    release() {
      forUser.release();
      fromAddress?.release();
    },
  });

  return {
    /**
     * Reserves one password check for `username` (and its source address): throws 429 while
     * either is locked or while maxAttempts checks of the username failed or are running.
     */
    async begin(username: string, address?: string): Promise<Attempt> {
      const fromAddress = address !== undefined && byAddress ? await byAddress.begin(address) : undefined;
      let forUser: Attempt;
      try {
        forUser = await byUsername.begin(username);
      } catch (err) {
        fromAddress?.release();
        throw err;
      }
      return both(forUser, fromAddress);
    },
    /** begin() at once, when neither limit would make it wait (else undefined); 429 as begin(). */
    tryBegin(username: string, address?: string): Attempt | undefined {
      const fromAddress = address !== undefined && byAddress ? byAddress.tryBegin(address) : undefined;
      if (address !== undefined && byAddress && !fromAddress) return undefined;
      let forUser: Attempt | undefined;
      try {
        forUser = byUsername.tryBegin(username);
      } catch (err) {
        fromAddress?.release();
        throw err;
      }
      if (!forUser) {
        fromAddress?.release();
        return undefined;
      }
      return both(forUser, fromAddress);
    },
    /** A registration confirmed for this username: its earlier failed polls (and a lock they caused) no longer count. */
    forget(username: string): void {
      byUsername.forget(username);
    },
    lockedFor: (username: string) => byUsername.lockedFor(username),
    size: () => byUsername.trackedKeys(),
    locks: () => byUsername.locks(),
  };
}
export type LoginThrottle = ReturnType<typeof createLoginThrottle>;
