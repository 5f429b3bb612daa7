import type { MqttPrincipal } from '../mqtt/index.js';

export type ClusterKind = 'rabbitmq' | 'vernemq' | 'emqx';
export const CLUSTER_KINDS: readonly ClusterKind[] = ['rabbitmq', 'vernemq', 'emqx'];

/** A session a cluster admitted through a login hook, as the embedded broker keeps its principal. */
export interface ClusterSession {
  kind: ClusterKind;
  clientId: string;
  userId: string;
  username: string;
  method: MqttPrincipal['method'];
  tokenFingerprint?: string;
  /** Its credentials were revoked: later hook calls of this session are refused. */
  revoked: boolean;
}

/** An MQTT grant the user held when one of its sessions logged in (to tell a lost permission from a new one). */
export interface GrantAtLogin {
  resource: string;
  operation: 'read' | 'write' | 'readWrite';
}

/**
 * What gatewayd learned from the clusters' login hooks: which client ids of which user are
 * signed in how, and the user's MQTT grants at that time. In memory and bounded (the least
 * recently admitted sessions go first): after a restart or beyond the bound, revocation falls
 * back to every session of the user (src/broker-hooks/revocation.ts).
 */
export function createClusterSessions(maxSessions = 100_000) {
  const byKey = new Map<string, ClusterSession>();
  const byUser = new Map<string, { keys: Set<string>; grants: GrantAtLogin[] }>();
  const keyOf = (kind: ClusterKind, clientId: string) => `${kind}\u0000${clientId}`;

  function drop(key: string): void {
    const session = byKey.get(key);
    if (!session) return;
    byKey.delete(key);
    const user = byUser.get(session.userId);
    user?.keys.delete(key);
    if (user && user.keys.size === 0) byUser.delete(session.userId);
  }

  return {
    remember(session: Omit<ClusterSession, 'revoked'>, grants: GrantAtLogin[]): void {
      const key = keyOf(session.kind, session.clientId);
      drop(key); // a new login of the client id replaces its session (and refreshes its place)
      byKey.set(key, { ...session, revoked: false });
      let user = byUser.get(session.userId);
      if (!user) byUser.set(session.userId, (user = { keys: new Set(), grants }));
      user.keys.add(key);
      user.grants = grants;
      if (byKey.size > maxSessions) drop(byKey.keys().next().value!);
    },
    get: (kind: ClusterKind, clientId: string): ClusterSession | undefined => byKey.get(keyOf(kind, clientId)),
    ofUser(userId: string): ClusterSession[] {
      const user = byUser.get(userId);
      return user ? [...user.keys].map((k) => byKey.get(k)!).filter(Boolean) : [];
    },
    grantsAtLogin: (userId: string): GrantAtLogin[] | undefined => byUser.get(userId)?.grants,
    /** After a push: the user's grants now are what its remaining sessions hold. */
    setGrants(userId: string, grants: GrantAtLogin[]): void {
      const user = byUser.get(userId);
      if (user) user.grants = grants;
    },
    forgetUser(userId: string): void {
      for (const key of byUser.get(userId)?.keys ?? []) byKey.delete(key);
      byUser.delete(userId);
    },
    size: () => byKey.size,
  };
}
export type ClusterSessions = ReturnType<typeof createClusterSessions>;
