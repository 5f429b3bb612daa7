/**
 * What /api/idp/login remembers about an authorization request until the identity provider
 * sends the browser back to /api/idp/redirect: kept server-side, keyed by `state`, single use,
 * expiring after `ttlMs`, and bounded to `maxEntries` (the oldest request makes room), so
 * anonymous callers of the public login call cannot grow memory.
 */
export interface PendingLogin {
  nonce: string;
  codeVerifier: string;
  /** The redirect_uri sent in the authorization request; the token request must repeat it. */
  redirectUri: string;
}

export interface PendingLogins {
  put(state: string, login: PendingLogin): void;
  /** Removes and returns the login of `state`; undefined when unknown, used or expired. */
  take(state: string): PendingLogin | undefined;
  size(): number;
}

export function createPendingLogins(options: { ttlMs: number; maxEntries: number; now?: () => number }): PendingLogins {
  const now = options.now ?? (() => Date.now());
  // Insertion order is expiry order (one TTL for all): the oldest entries are first.
  const entries = new Map<string, PendingLogin & { expiresAtMs: number }>();

  function sweep(t: number): void {
    for (const [state, entry] of entries) {
      if (entry.expiresAtMs > t) break;
      entries.delete(state);
    }
  }

  return {
    put(state, login) {
      const t = now();
      sweep(t);
      entries.delete(state);
      while (entries.size >= options.maxEntries) {
        const oldest = entries.keys().next();
        if (oldest.done) break;
        entries.delete(oldest.value);
      }
      entries.set(state, { ...login, expiresAtMs: t + options.ttlMs });
    },
    take(state) {
      const entry = entries.get(state);
      if (!entry) return undefined;
      entries.delete(state);
      if (entry.expiresAtMs <= now()) return undefined;
      return { nonce: entry.nonce, codeVerifier: entry.codeVerifier, redirectUri: entry.redirectUri };
    },
    size() {
      sweep(now());
      return entries.size;
    },
  };
}
