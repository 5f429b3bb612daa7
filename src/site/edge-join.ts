// An edge's one-time join to its site (docs/scaling-out.md "On an edge"): the join token names the
// join and carries the fingerprint of the site's signing key; the central answers the edge's
// credential, the site's public key and MFA key. A key that is not the pinned one is refused.
// What the edge had of a life before the site (all but its break-glass administrator) goes: the
// site's users replace them.
import { createPublicKey } from 'node:crypto';
import type { RoleRecord, Store, TokenRecord, UserRecord } from '../store/index.js';
import { BREAK_GLASS_NAME } from './central-writer.js';
import type { SiteReplica } from './replica.js';
import type { SiteClient } from './site-client.js';
import { parseJoinToken } from './site-feed.js';
import type { EdgeJoinState } from './site-files.js';
import type { RecordChange } from './site-records.js';
import { createSiteVerifier, keyFingerprint, type SiteVerifier } from './signing.js';

/** Why a join failed: `refused` when the centrals said no (a token unknown, used or expired). */
export class JoinError extends Error {
  constructor(
    message: string,
    readonly refused: boolean,
  ) {
    super(message);
    this.name = 'JoinError';
  }
}

/**
 * Drops this gateway's own users, roles and tokens (but an edge's break-glass administrator):
 * a gateway that joins a site whose users replace its own. Answers how many records went.
 */
export async function dropLocalIdentity(store: Store, replica: SiteReplica, keepBreakGlass = true): Promise<number> {
  const changes: RecordChange[] = [];
  const keep = new Set<string>();
  for (const { value: u } of store.users.getRange() as Iterable<{ value: UserRecord }>) {
    if (keepBreakGlass && u.username === BREAK_GLASS_NAME) {
      keep.add(u.id);
      keep.add(u.privateRoleId);
    } else changes.push({ kind: 'user', id: u.id, doc: null });
  }
  for (const { value: r } of store.roles.getRange() as Iterable<{ value: RoleRecord }>) {
    if (!(keepBreakGlass && r.name === BREAK_GLASS_NAME) && !keep.has(r.id)) changes.push({ kind: 'role', id: r.id, doc: null });
  }
  for (const { value: t } of store.tokens.getRange() as Iterable<{ value: TokenRecord }>) {
    if (!keep.has(t.userId)) changes.push({ kind: 'token', id: t.fingerprint, doc: null });
  }
  await replica.forget();
  if (changes.length) await replica.applyLocal(changes);
  return changes.length;
}

/** Joins through one of the centrals; answers the state to keep and the verifier of the pinned key. */
export async function joinSite(deps: { store: Store; replica: SiteReplica; client: SiteClient; token: string; name: string; now: number }): Promise<{ joined: EdgeJoinState; verifier: SiteVerifier; central: string }> {
  const { fingerprint } = parseJoinToken(deps.token);
  const res = await deps.client.request('/api/site/join', { method: 'POST', body: { token: deps.token, name: deps.name }, timeoutMs: 15_000 });
  if (res.status !== 201) throw new JoinError(`join refused by ${res.url}: ${res.status} ${res.body.toString('utf8').slice(0, 200)}`, res.status === 401 || res.status === 400);
  const answer = JSON.parse(res.body.toString('utf8')) as { siteId: string; edgeId: string; secret: string; publicKey: string; mfaKey: string };
  // The key the token pinned, or nothing: a central (or a man in the middle) with another key is refused.
  const verifier = createSiteVerifier(answer.publicKey, fingerprint);
  await dropLocalIdentity(deps.store, deps.replica);
  const joined: EdgeJoinState = {
    siteId: answer.siteId,
    publicKeyPem: answer.publicKey,
    fingerprint: keyFingerprint(createPublicKey(answer.publicKey)),
    edgeId: answer.edgeId,
    credential: answer.secret,
    mfaKeyHex: answer.mfaKey,
    joinedAt: new Date(deps.now).toISOString(),
  };
  return { joined, verifier, central: res.url };
}
