import { createHash, randomBytes } from 'node:crypto';

/** What a password login of an enrolled user left for POST /api/mfa/login to finish. */
export interface MfaChallenge {
  userId: string;
  username: string;
  expiresAtMs: number;
  /** The token lifetime and label asked for at POST /api/login. */
  lifetimeHours: number;
  label?: string;
}

const keyOf = (secret: string) => createHash('sha256').update(secret, 'utf8').digest('hex');

/**
 * Single-use login challenges, in memory only (a restart asks for the password again). Only
 * a hash of each challenge is kept. Bounded: beyond `maxEntries` the oldest go first, so
 * logins in a loop cannot grow memory. Time is read at call time (Date.now()).
 */
export function createMfaChallenges(options: { ttlMs: number; maxEntries: number }) {
  const entries = new Map<string, MfaChallenge>();

  const dropExpired = () => {
    const now = Date.now();
    for (const [key, c] of entries) {
      if (c.expiresAtMs > now) break; // insertion order is expiry order (fixed lifetime)
      entries.delete(key);
    }
  };

  return {
    /** A new challenge for this user; returns the secret handed to the client. */
    issue(c: Omit<MfaChallenge, 'expiresAtMs'>): string {
      dropExpired();
      const secret = randomBytes(32).toString('base64url');
      entries.set(keyOf(secret), { ...c, expiresAtMs: Date.now() + options.ttlMs });
      while (entries.size > options.maxEntries) entries.delete(entries.keys().next().value as string);
      return secret;
    },
    /** Removes and returns the live challenge for `secret` (expired or unknown: undefined). */
    take(secret: string): MfaChallenge | undefined {
      const key = keyOf(secret);
      const c = entries.get(key);
      if (!c) return undefined;
      entries.delete(key);
      return c.expiresAtMs > Date.now() ? c : undefined;
    },
    /** Puts back a challenge taken for an attempt that failed (it stays single-use on success). */
    restore(secret: string, c: MfaChallenge): void {
      if (c.expiresAtMs > Date.now()) entries.set(keyOf(secret), c);
    },
    /** Forgets every challenge of a user (MFA disabled, user deleted). */
    forgetUser(userId: string): void {
      for (const [key, c] of entries) if (c.userId === userId) entries.delete(key);
    },
    size: () => entries.size,
  };
}
export type MfaChallenges = ReturnType<typeof createMfaChallenges>;
