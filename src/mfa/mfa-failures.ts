/**
 * Consecutive invalid OTPs or backup codes per user. `maxFailures` in a row ban the user's
 * MFA checks for `banSeconds`; a success resets the count. Bounded like the login throttle
 * (a Map in insertion order as an LRU). Time is read at call time (Date.now()).
 */
export function createMfaFailures(options: { maxFailures: number; banSeconds: number; maxEntries: number }) {
  const entries = new Map<string, { failures: number; bannedUntilMs: number }>();
  const banMs = options.banSeconds * 1000;

  return {
    /** Seconds left of a ban on this user, or 0. */
    bannedFor(userId: string): number {
      const e = entries.get(userId);
      if (!e) return 0;
      const left = e.bannedUntilMs - Date.now();
      if (left > 0) return Math.ceil(left / 1000);
      if (e.bannedUntilMs > 0) entries.delete(userId); // the ban ended: start afresh
      return 0;
    },
    /** Counts a failure; true when this failure started a ban. */
    failed(userId: string): boolean {
      const e = entries.get(userId) ?? { failures: 0, bannedUntilMs: 0 };
      e.failures += 1;
      let banned = false;
      if (e.failures >= options.maxFailures) {
        e.failures = 0;
        e.bannedUntilMs = Date.now() + banMs;
        banned = true;
      }
      entries.delete(userId);
      entries.set(userId, e);
      while (entries.size > options.maxEntries) entries.delete(entries.keys().next().value as string);
      return banned;
    },
    succeeded(userId: string): void {
      entries.delete(userId);
    },
  };
}
export type MfaFailures = ReturnType<typeof createMfaFailures>;
