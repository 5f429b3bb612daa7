import { hash, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * Remembers recent successful password checks so a device reconnecting after a network blip
 * does not cost another scrypt derivation (tens of ms and ~32 MiB each). Only a keyed SHA-256 of the
 * password under a key that lives in this process is kept, bound to the stored hash it was
 * verified against: a password change invalidates it by itself. Wrong passwords are never
 * cached, so they always pay the full cost.
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
    size: () => entries.size,
  };
}
export type VerifiedPasswordCache = ReturnType<typeof createVerifiedPasswordCache>;
