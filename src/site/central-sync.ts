// A central's replica follows PostgreSQL: LISTEN as a doorbell, a poll behind it (NOTIFY is
// lost while a connection is down, and standbys never send it), each row applied in order, a
// snapshot on a new epoch (a failover, a restore), a gap or a digest that differs. The writer
// of the same central catches up the same way under the site's lock before each change, so it
// decides on what the site holds; both run under one mutex, one step at a time.
import type { Logger } from '../log/index.js';
import { oneAtATime } from './one-at-a-time.js';
import type { PgAuthority } from './pg-authority.js';
import { ReplicaRefusal, type SiteReplica } from './replica.js';
import type { LogRow, SiteHead, SiteSnapshot } from './site-records.js';

export interface SyncSource {
  head(): Promise<SiteHead>;
  rowsSince(rev: number, limit: number): Promise<LogRow[] | 'gap'>;
  snapshot(): Promise<SiteSnapshot>;
}

export interface CentralSyncStatus {
  /** Connected to the primary and following it. */
  following: boolean;
  /** Epoch ms of the last successful exchange with PostgreSQL. */
  lastContactAt: number;
  resyncs: number;
  applied: number;
  lastError?: string;
}

const BATCH = 500;

export function createCentralSync(deps: { authority: PgAuthority; replica: SiteReplica; log: Logger; pollIntervalMs: number; now?: () => number }) {
  const { authority, replica, log } = deps;
  const now = deps.now ?? Date.now;
  const status: CentralSyncStatus = { following: false, lastContactAt: 0, resyncs: 0, applied: 0 };
  /** One catch-up or one write at a time (see the header). */
  const exclusive = oneAtATime();

  async function resync(source: SyncSource, why: string): Promise<void> {
    const snapshot = await source.snapshot();
    const { changed } = await replica.loadSnapshot(snapshot, { force: true });
    status.resyncs++;
    log.info('site replica loaded a snapshot', { why, epoch: snapshot.epoch, rev: snapshot.rev, records: snapshot.records.length, changed });
  }

  /** Brings the replica to the source's head. */
  async function catchUp(source: SyncSource): Promise<void> {
    for (let round = 0; round < 10_000; round++) {
      const head = await source.head();
      const s = replica.state();
      if (!s || s.epoch !== head.epoch) return resync(source, s ? 'new epoch' : 'first sync');
      if (head.rev === s.rev) {
        if (head.digest !== s.digest) await resync(source, 'digest differs');
        return;
      }
      if (head.rev < s.rev) return resync(source, 'the authority is behind the replica');
      const rows = await source.rowsSince(s.rev, BATCH);
      if (rows === 'gap' || rows.length === 0) return resync(source, 'log gap');
      for (const row of rows) {
        try {
          await replica.applyRow(row, head.epoch);
          status.applied++;
        } catch (err) {
          if (!(err instanceof ReplicaRefusal)) throw err;
          return resync(source, err.reason);
        }
      }
    }
  }

  let stopped = false;
  let wake: (() => void) | undefined;
  let sleeping: NodeJS.Timeout | undefined;
  const doorbell = () => wake?.();
  let loop: Promise<void> | undefined;

  async function follow(): Promise<void> {
    let backoffMs = 250;
    while (!stopped) {
      let follower: Awaited<ReturnType<PgAuthority['openFollower']>> | undefined;
      try {
        follower = await authority.openFollower(doorbell);
        status.following = true;
        backoffMs = 250;
        while (!stopped && !follower.conn.broken) {
          await exclusive(() => catchUp(follower!));
          status.lastContactAt = now();
          delete status.lastError;
          await new Promise<void>((resolve) => {
            wake = resolve;
            sleeping = setTimeout(resolve, deps.pollIntervalMs);
          });
          clearTimeout(sleeping);
          wake = undefined;
        }
      } catch (err) {
        if (stopped) break;
        const message = (err as Error).message;
        if (status.lastError !== message) log.warn('site replica cannot follow PostgreSQL; logins go on from the replica', { error: message });
        status.lastError = message;
      } finally {
        status.following = false;
        await follower?.conn.close();
      }
      if (stopped) break;
      await new Promise<void>((resolve) => {
        wake = resolve;
        sleeping = setTimeout(resolve, backoffMs);
      });
      wake = undefined;
      // Half a second at most: a promoted standby is followed within a second of its promotion.
      backoffMs = Math.min(500, backoffMs * 2);
    }
  }

  return {
    exclusive,
    catchUp,
    status: () => ({ ...status }),
    noteContact: () => void (status.lastContactAt = now()),
    start(): void {
      stopped = false;
      loop = follow();
    },
    /** Wakes the follower at once (a write of this central committed). */
    poke: doorbell,
    async stop(): Promise<void> {
      stopped = true;
      clearTimeout(sleeping);
      wake?.();
      await loop;
    },
  };
}
export type CentralSync = ReturnType<typeof createCentralSync>;
