import { hash, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * Remembers recent successful password checks so a device reconnecting after a network blip
 * does not cost another scrypt derivation (tens of ms and ~32 MiB each). Only a keyed SHA-256 of the
 * password under a key that lives in this process is kept, bound to the stored hash it was
 * verified against: a password change invalidates it by itself. Wrong passwords are never
 * cached, so they always pay the full cost.
 *
 * It also knows the derivations under way (track/underWay): after a reboot every device of a
 * user connects at once, before any check has finished; the checks of the same password
 * against the same stored hash then share one derivation instead of each running its own.
 */
/** has() answers true only for the password verified last, and renews that entry; remember() after a full check. */
export function createVerifiedPasswordCache(options: { ttlMs: number; maxEntries: number; now?: () => number }) {
  const now = options.now ?? (() => Date.now());
  // SHA-256 of a secret prefix and the password: a digest that never leaves this process and is
  // only compared for equality needs no HMAC (length extension forges nothing here), and the
  // one-shot hash costs a third of createHmac's object per check (each MQTT connect pays one).
  const key = randomBytes(32).toString('hex');
  const entries = new Map<string, { mac: Buffer; passwordHash: string; expires: number }>();
  const mac = (password: string) => hash('sha256', key + password, 'buffer');
  /** Derivations under way by user and stored hash: the digest of the candidate and the outcome to come. */
  const underWay = new Map<string, { mac: Buffer; outcome: Promise<boolean> }[]>();
  const underWayKey = (userId: string, passwordHash: string) => `${userId}\n${passwordHash}`;

  return {
    has(userId: string, passwordHash: string | undefined, password: string): boolean {
      if (options.ttlMs <= 0 || !passwordHash) return false;
      const e = entries.get(userId);
      if (!e) return false;
      if (e.expires <= now() || e.passwordHash !== passwordHash) {
        entries.delete(userId);
        return false;
      }
      if (!timingSafeEqual(e.mac, mac(password))) return false;
      // A hit counts as a fresh verification (expiry and recency renewed), without a second digest.
      entries.delete(userId);
      e.expires = now() + options.ttlMs;
      entries.set(userId, e);
      return true;
    },
    remember(userId: string, passwordHash: string | undefined, password: string): void {
      if (options.ttlMs <= 0 || !passwordHash) return;
      entries.delete(userId);
      entries.set(userId, { mac: mac(password), passwordHash, expires: now() + options.ttlMs });
      while (entries.size > options.maxEntries) entries.delete(entries.keys().next().value as string);
    },
    forget(userId: string): void {
      entries.delete(userId);
    },
    /** Registers a check of `password` against `passwordHash` under way until `outcome` settles. */
    track(userId: string, passwordHash: string, password: string, outcome: Promise<boolean>): void {
      const k = underWayKey(userId, passwordHash);
      const entry = { mac: mac(password), outcome };
      underWay.set(k, [...(underWay.get(k) ?? []), entry]);
      const done = () => {
        const rest = (underWay.get(k) ?? []).filter((e) => e !== entry);
        if (rest.length) underWay.set(k, rest);
        else underWay.delete(k);
      };
      outcome.then(done, done);
    },
    /** The outcome of a check of this very password against this hash under way, if there is one. */
    underWay(userId: string, passwordHash: string, password: string): Promise<boolean> | undefined {
      const checks = underWay.get(underWayKey(userId, passwordHash));
      if (!checks) return undefined;
      const digest = mac(password);
      return checks.find((e) => timingSafeEqual(e.mac, digest))?.outcome;
    },
    size: () => entries.size,
  };
}
export type VerifiedPasswordCache = ReturnType<typeof createVerifiedPasswordCache>;
