import type { AccessChange, MqttPrincipal } from './mqtt-access.js';

/** How many recent revocations are remembered to close the authenticate/revoke race. */
const REVOCATION_LOG_SIZE = 256;

interface Revocation {
  seq: number;
  userId: string;
  fingerprints: ReadonlySet<string> | null;
  passwordSessions: boolean;
}

/**
 * Remembers the last revocations so that an authentication that started before a revocation
 * and resolves after it (with a principal that is no longer valid) is refused.
 */
export class RevocationLog {
  seq = 0;
  private readonly ring: Array<Revocation | undefined> = new Array(REVOCATION_LOG_SIZE);

  record(userId: string, fingerprints: readonly string[] | undefined, passwordSessions = false): void {
    this.seq++;
    this.ring[this.seq % REVOCATION_LOG_SIZE] = {
      seq: this.seq,
      userId,
      fingerprints: fingerprints ? new Set(fingerprints) : null,
      passwordSessions,
    };
  }

  /** Revoked after `since`? null when the log no longer reaches back that far. */
  revokedSince(since: number, principal: MqttPrincipal): boolean | null {
    if (this.seq === since) return false;
    if (this.seq - since > REVOCATION_LOG_SIZE) return null;
    for (let s = since + 1; s <= this.seq; s++) {
      const r = this.ring[s % REVOCATION_LOG_SIZE];
      if (!r || r.seq !== s || r.userId !== principal.userId) continue;
      if (r.fingerprints === null) return true;
      if (r.passwordSessions && principal.method === 'password') return true;
      if (principal.tokenFingerprint !== undefined && r.fingerprints.has(principal.tokenFingerprint)) return true;
    }
    return false;
  }
}

export function tokenSetOf(change: AccessChange): ReadonlySet<string> | null {
  return change.tokenFingerprints ? new Set(change.tokenFingerprints) : null;
}

