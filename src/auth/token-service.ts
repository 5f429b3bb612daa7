import { createHash, randomBytes } from 'node:crypto';
import type { Store, TokenRecord } from '../store/index.js';
import { prefixRange } from '../store/index.js';
import { putTokenIndexed, removeTokenIndexed } from '../store/identity-indexes.js';
import type { IdentityWriter } from '../store/identity-writer.js';
import type { AccessEvents } from './access-events.js';
import { InsufficientStorageError, LockedError, ServiceUnavailableError } from '../errors/errors.js';
import type { Logger } from '../log/index.js';

/** Tokens are opaque: 32 random bytes, base64url. Only their SHA-256 is stored. */
export function tokenFingerprint(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

/** A cheap shape check that spares a store lookup for values that cannot be our tokens. */
export function looksLikeToken(value: string): boolean {
  return value.length === 43 && /^[A-Za-z0-9_-]+$/.test(value);
}

export interface IssueTokenOptions {
  lifetimeHours: number;
  label?: string;
  scope?: TokenRecord['scope'];
}

export function createTokenService(deps: { store: Store; identity: IdentityWriter; events: AccessEvents; log: Logger; maxTokensPerUser: number; now?: () => number }) {
  const { store, identity, events, log } = deps;
  const now = deps.now ?? (() => Date.now());

  /** Deletes the given tokens inside the caller's transaction. */
  const removeInTxn = (userId: string, fingerprints: string[]) => {
    for (const fp of fingerprints) removeTokenIndexed(store, userId, fp);
  };

  const fingerprintsOf = (userId: string): string[] =>
    [...store.userTokens.getKeys(prefixRange(userId))].map((k) => String(k[1]));

  /**
   * Sessions issued while the store could not write (disk full, read-only): kept in memory so
   * that people and devices can still sign in; they end at the next restart. Bounded.
   */
  const unsaved = new Map<string, TokenRecord>();
  const MAX_UNSAVED = 10_000;
  const unsavedOf = (userId: string) => [...unsaved.values()].filter((r) => r.userId === userId);

  return {
    async issue(userId: string, options: IssueTokenOptions): Promise<{ token: string; record: TokenRecord }> {
      const token = randomBytes(32).toString('base64url');
      const t = now();
      const record: TokenRecord = {
        fingerprint: tokenFingerprint(token),
        userId,
        createdAt: new Date(t).toISOString(),
        expiresAt: new Date(t + options.lifetimeHours * 3_600_000).toISOString(),
        scope: options.scope ?? 'full',
        ...(options.label !== undefined ? { label: options.label } : {}),
      };
      // Housekeeping bounded by this user's tokens: expired ones go when a new one comes, and
      // beyond maxTokensPerUser the oldest live ones make room (a script that logs in every
      // minute must not grow the store and every later login without bound). `mine`: which
      // tokens it may remove.
      const issueInTxn = (mine: (fp: string) => boolean) => {
        const live: TokenRecord[] = [];
        const expired: string[] = [];
        for (const fp of fingerprintsOf(userId)) {
          if (!mine(fp)) continue;
          const r = store.tokens.get(fp);
          if (!r || Date.parse(r.expiresAt) <= t) expired.push(fp);
          else live.push(r);
        }
        live.sort((a, b) => a.createdAt.localeCompare(b.createdAt));
        const displaced = live.slice(0, Math.max(0, live.length - deps.maxTokensPerUser + 1)).map((r) => r.fingerprint);
        removeInTxn(userId, [...expired, ...displaced]);
        putTokenIndexed(store, record);
        return displaced;
      };
      let displaced: string[];
      try {
        try {
          displaced = await identity.transaction(() => issueInTxn(() => true));
        } catch (err) {
          // A site's records cannot change here now (an edge; a central whose authority is
          // down): the session is this gateway's own, and only its own tokens make room.
          if (!(err instanceof LockedError) && !(err instanceof ServiceUnavailableError)) throw err;
          displaced = await identity.local(() => identity.transaction(() => issueInTxn((fp) => !identity.isSiteRecord('token', fp))));
        }
      } catch (err) {
        if (!(err instanceof InsufficientStorageError)) throw err;
        if (unsaved.size >= MAX_UNSAVED) unsaved.delete(unsaved.keys().next().value!);
        unsaved.set(record.fingerprint, record);
        log.warn('session token kept in memory only: the store cannot write', { userId });
        return { token, record };
      }
      if (displaced.length) {
        events.emit({ userId, kind: 'revoked', tokenFingerprints: displaced });
        log.audit('tokens revoked', { userId, count: displaced.length, tokens: displaced.map((fp) => fp.slice(0, 12)), reason: 'maxTokensPerUser' });
      }
      return { token, record };
    },

    /** The live record of a token, or undefined when unknown or expired. O(1). */
    verify(token: string): TokenRecord | undefined {
      if (!looksLikeToken(token)) return undefined;
      const fp = tokenFingerprint(token);
      const record = store.tokens.get(fp) ?? unsaved.get(fp);
      if (!record || Date.parse(record.expiresAt) <= now()) return undefined;
      return record;
    },

    list(userId: string): TokenRecord[] {
      const t = now();
      return [...fingerprintsOf(userId).map((fp) => store.tokens.get(fp)), ...unsavedOf(userId)].filter((r): r is TokenRecord => !!r && Date.parse(r.expiresAt) > t);
    },

    fingerprintsOf,
    removeInTxn,

    /** Revokes the given tokens of a user (all when fingerprints is undefined). Returns how many. */
    async revoke(userId: string, fingerprints?: string[]): Promise<number> {
      for (const r of unsavedOf(userId)) if (!fingerprints || fingerprints.includes(r.fingerprint)) unsaved.delete(r.fingerprint);
      const removed = await identity.transaction(() => {
        const own = new Set(fingerprintsOf(userId));
        const targets = fingerprints ? fingerprints.filter((fp) => own.has(fp)) : [...own];
        removeInTxn(userId, targets);
        return targets;
      });
      if (removed.length) {
        events.emit({ userId, kind: 'revoked', tokenFingerprints: removed });
        // Fingerprint prefixes identify the tokens to an operator; a fingerprint is no secret.
        log.audit('tokens revoked', { userId, count: removed.length, tokens: removed.map((fp) => fp.slice(0, 12)) });
      }
      return removed.length;
    },
  };
}
export type TokenService = ReturnType<typeof createTokenService>;
