import type { Logger } from '../log/index.js';
import type { AccessChange } from '../mqtt/index.js';
import type { ClusterKind, ClusterSession, ClusterSessions, GrantAtLogin } from './cluster-sessions.js';
import { ManagementError, type ManagementClient } from './management-clients.js';

/** Sessions of one user to drop on one cluster. */
interface Job {
  userId: string;
  username: string;
  clientIds: Set<string> | 'all';
  reason: 'user deleted' | 'credentials revoked' | 'permission lost';
  /** Stored messages and subscriptions go too (VerneMQ --cleanup): the user is gone. */
  cleanup: boolean;
}

/** Pending users per cluster beyond which the oldest pending push is dropped (and logged). */
const MAX_PENDING = 10_000;

/**
 * Revocation reaches the clusters: when a user is deleted, its credentials are revoked, or it
 * loses a permission, the sessions the clusters admitted for it are dropped through each
 * cluster's management API — the same events on which the embedded broker disconnects its own
 * clients. Sessions known from the login hooks are targeted exactly (a revoked token closes the
 * sessions that used it); without that knowledge (after a restart) all of the user's sessions
 * go, and the clients reconnect through the hooks. One queue per cluster, coalesced per user,
 * retried with backoff while the cluster is unreachable.
 */
export function createRevocation(deps: {
  clients: ManagementClient[];
  sessions: ClusterSessions;
  /** Is this grant still covered by the user's current permissions? */
  stillCovers: (userId: string, grant: GrantAtLogin) => boolean;
  mqttGrantsOf: (userId: string) => GrantAtLogin[];
  usernameOf: (userId: string) => string | undefined;
  retryMaxMs: () => number;
  log: Logger;
}) {
  const { sessions, log } = deps;
  const queues = new Map<ClusterKind, Map<string, Job>>();
  const wakeups = new Map<ClusterKind, () => void>();
  const counts = { pushed: 0, failed: 0, dropped: 0 };
  let stopped = false;
  const abort = new AbortController();

  function enqueue(kind: ClusterKind, job: Job): void {
    const queue = queues.get(kind);
    if (!queue) return;
    const pending = queue.get(job.userId);
    if (pending) {
      // Coalesce: all sessions dominates, otherwise the union; the weightier reason stays.
      if (pending.clientIds !== 'all') pending.clientIds = job.clientIds === 'all' ? 'all' : new Set([...pending.clientIds, ...job.clientIds]);
      if (job.reason === 'user deleted') pending.reason = job.reason;
      pending.cleanup ||= job.cleanup;
      return;
    }
    queue.set(job.userId, job);
    if (queue.size > MAX_PENDING) {
      const [oldest] = queue.values();
      queue.delete(oldest!.userId);
      counts.dropped++;
      log.error('broker revocation queue full: a push was dropped', { via: kind, username: oldest!.username });
    }
    wakeups.get(kind)?.();
  }

  /** Per cluster the sessions to drop: known client ids, or all when none is known. */
  function push(userId: string, username: string | undefined, targets: ClusterSession[] | 'all', reason: Job['reason']): void {
    if (!username) return;
    for (const { kind } of deps.clients) {
      const clientIds = targets === 'all' ? 'all' : new Set(targets.filter((s) => s.kind === kind).map((s) => s.clientId));
      if (clientIds !== 'all' && clientIds.size === 0) continue;
      enqueue(kind, { userId, username, clientIds, reason, cleanup: reason === 'user deleted' });
    }
  }

  function onChange(change: AccessChange): void {
    const known = sessions.ofUser(change.userId);
    const username = change.username ?? known[0]?.username ?? deps.usernameOf(change.userId);
    if (change.kind === 'deleted') {
      sessions.forgetUser(change.userId);
      push(change.userId, username, 'all', 'user deleted');
      return;
    }
    if (change.kind === 'revoked') {
      const tokens = change.tokenFingerprints ? new Set(change.tokenFingerprints) : undefined;
      const hit = known.filter((s) => !tokens || (s.tokenFingerprint !== undefined && tokens.has(s.tokenFingerprint)) || (change.passwordSessions === true && s.method === 'password'));
      for (const s of hit) s.revoked = true;
      if (known.length === 0) push(change.userId, username, 'all', 'credentials revoked');
      else push(change.userId, username, hit, 'credentials revoked');
      return;
    }
    // permissions: only a loss matters to sessions that were admitted with more.
    if (change.lost === false) {
      // Nothing was taken away (a site's replica knows): the sessions keep what they had.
      if (sessions.grantsAtLogin(change.userId)) sessions.setGrants(change.userId, deps.mqttGrantsOf(change.userId));
      return;
    }
    const before = sessions.grantsAtLogin(change.userId);
    if (!before) {
      push(change.userId, username, 'all', 'permission lost');
      return;
    }
    const lost = before.some((g) => !deps.stillCovers(change.userId, g));
    if (!lost) {
      sessions.setGrants(change.userId, deps.mqttGrantsOf(change.userId));
      return;
    }
    // Not marked revoked: their credentials still hold, and later hook calls are decided on the
    // permissions as they are now (a client that comes back through a broker's login cache is
    // not locked out until the cache expires).
    sessions.setGrants(change.userId, deps.mqttGrantsOf(change.userId));
    push(change.userId, username, known, 'permission lost');
  }

  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      abort.signal.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true });
    });

  async function worker(client: ManagementClient): Promise<void> {
    const queue = queues.get(client.kind)!;
    let backoffMs = 0;
    while (!stopped) {
      const [job] = queue.values();
      if (!job) {
        await new Promise<void>((resolve) => wakeups.set(client.kind, resolve));
        continue;
      }
      const clientIds = job.clientIds === 'all' ? 'all' : [...job.clientIds];
      try {
        const closed = await client.disconnect(job.username, clientIds, { cleanup: job.cleanup });
        // The sessions stay known as revoked: a hook call of one still in flight is refused.
        if (queue.get(job.userId) === job) queue.delete(job.userId);
        counts.pushed++;
        if (backoffMs > 0) log.info('cluster management API reachable again', { via: client.kind });
        backoffMs = 0;
        log.audit('mqtt.sessions.revoked', { via: client.kind, username: job.username, reason: job.reason, closed, ...(clientIds === 'all' ? { sessions: 'all' } : { clientIds }) });
      } catch (err) {
        if (stopped) return;
        counts.failed++;
        backoffMs = Math.min(deps.retryMaxMs(), Math.max(1000, backoffMs * 2));
        const unreachable = !(err instanceof ManagementError) || err.unreachable;
        log[unreachable ? 'warn' : 'error']('cluster revocation push failed, retrying', {
          via: client.kind,
          username: job.username,
          error: (err as Error).message,
          retryInSeconds: backoffMs / 1000,
        });
        await sleep(backoffMs);
      }
    }
  }

  return {
    onChange,
    start(): void {
      for (const client of deps.clients) {
        queues.set(client.kind, new Map());
        void worker(client);
      }
    },
    stop(): void {
      stopped = true;
      abort.abort();
      for (const wake of wakeups.values()) wake();
    },
    pending: () => [...queues.values()].reduce((n, q) => n + q.size, 0),
    counts: () => ({ ...counts }),
  };
}
export type Revocation = ReturnType<typeof createRevocation>;
