// Where the users, roles and tokens services write. A gateway on its own writes to its store; a
// gateway of a site (src/site) writes through the site's authority and its replica, which apply
// the same records and indexes in the same kind of transaction. The services' checks run inside
// `fn` either way, so they see the records they decide on.
import type { Store } from './store.js';

export interface IdentityWriter {
  /**
   * Runs `fn` atomically against the identity records (it may read and write them through the
   * store's databases, synchronously) and resolves with its result once the change is durable
   * where this gateway's identity is decided.
   */
  transaction<T>(fn: () => T): Promise<T>;
  /**
   * Runs `body` with every record it creates kept on this gateway only (never sent to a site):
   * the break-glass administrator of a site's edge, a session token issued while the site's
   * authority cannot be written.
   */
  local<T>(body: () => Promise<T>): Promise<T>;
  /** Whether a record is the site's (read-only on an edge); always false on a gateway on its own. */
  isSiteRecord(kind: 'user' | 'role' | 'token', id: string): boolean;
}

/** A gateway on its own: identity changes are store transactions. */
export function createStoreIdentityWriter(store: Store): IdentityWriter {
  return {
    transaction: (fn) => store.transaction(fn),
    local: (body) => body(),
    isSiteRecord: () => false,
  };
}
