// The access events of a change applied from the site: the same AccessChange events the users,
// roles and tokens services raise for a local write, derived from what the change did to each
// record, so the permission engine, the embedded broker and the cluster pushes react to a change
// made at a central as to one made here (src/auth/access-events.ts).
import type { AccessChange } from '../auth/access-events.js';
import type { RoleRecord, TokenRecord, UserRecord } from '../store/index.js';
import type { SiteKind } from './site-records.js';

export interface AppliedChange {
  kind: SiteKind;
  id: string;
  prev: Record<string, unknown> | undefined;
  next: Record<string, unknown> | null;
}

const grantKey = (p: { context: string; operation: string; resource: string }) => `${p.context}\0${p.operation}\0${p.resource}`;

/** Whether a role's new version holds less than its previous one (or is gone). */
function roleLost(prev: RoleRecord | undefined, next: RoleRecord | undefined): boolean {
  if (!prev) return false;
  if (!next) return prev.permissions.length > 0;
  const now = new Set(next.permissions.map(grantKey));
  return prev.permissions.some((p) => !now.has(grantKey(p)));
}

/**
 * `membersBefore`/`membersAfter`: the holders of each changed role before and after the change
 * (role membership is an index of the user records).
 */
export function accessChangesOf(applied: AppliedChange[], membersBefore: Map<string, string[]>, membersAfter: Map<string, string[]>): AccessChange[] {
  const out: AccessChange[] = [];
  /** userId → whether the change took something away from the user. */
  const permissions = new Map<string, boolean>();
  const touch = (userId: string, lost: boolean) => permissions.set(userId, (permissions.get(userId) ?? false) || lost);
  const deleted = new Set<string>();
  const removedTokens = new Map<string, string[]>();
  for (const c of applied) {
    if (c.kind === 'token' && c.prev && !c.next) {
      const t = c.prev as unknown as TokenRecord;
      removedTokens.set(t.userId, [...(removedTokens.get(t.userId) ?? []), t.fingerprint]);
    }
  }
  for (const c of applied) {
    if (c.kind === 'user') {
      const prev = c.prev as unknown as UserRecord | undefined;
      const next = c.next as unknown as UserRecord | null;
      if (prev && !next) {
        deleted.add(c.id);
        out.push({ userId: c.id, kind: 'deleted', username: prev.username });
        continue;
      }
      if (!prev || !next) {
        touch(c.id, false);
        continue;
      }
      touch(c.id, prev.roleIds.some((r) => !next.roleIds.includes(r)) || (prev.mqttPublishPrefix ?? '') !== (next.mqttPublishPrefix ?? ''));
      const tokens = removedTokens.get(c.id) ?? [];
      const passwordChanged = prev.passwordHash !== next.passwordHash;
      const enrolled = !prev.mfa?.enrolled && !!next.mfa?.enrolled;
      const certificateGone = prev.certificates.some((p) => !next.certificates.some((n) => n.fingerprint === p.fingerprint));
      if (certificateGone) out.push({ userId: c.id, kind: 'revoked' });
      else if (passwordChanged || enrolled) out.push({ userId: c.id, kind: 'revoked', tokenFingerprints: tokens, passwordSessions: true });
      else continue;
      removedTokens.delete(c.id);
    } else if (c.kind === 'role') {
      const lost = roleLost(c.prev as unknown as RoleRecord | undefined, (c.next ?? undefined) as unknown as RoleRecord | undefined);
      for (const userId of membersBefore.get(c.id) ?? []) touch(userId, lost);
      for (const userId of membersAfter.get(c.id) ?? []) touch(userId, lost);
    }
  }
  for (const [userId, fingerprints] of removedTokens) {
    if (!deleted.has(userId)) out.push({ userId, kind: 'revoked', tokenFingerprints: fingerprints });
  }
  for (const [userId, lost] of permissions) if (!deleted.has(userId)) out.unshift({ userId, kind: 'permissions', lost });
  return out;
}
