// The audit trail (docs/design.md §14): every audit event the daemon logs also goes to a bounded LMDB
// database, answered page by page by GET /api/audit. The parts keep calling `log.audit(...)`;
// the logger given to them taps those calls (audit-logger.ts), and the caller of the request
// they happen in comes from the request context (audit-context.ts).
import { randomBytes } from 'node:crypto';
import type { Logger } from '../log/index.js';
import type { Part } from '../daemon.js';
import type { Store } from '../store/index.js';
import type { StoragePolicy } from '../storage/index.js';
import { TokenBucket } from '../mqtt/limits.js';
import { createAuditContext, type AuditContext } from './audit-context.js';
import { tapAudit } from './audit-logger.js';
import { toRecord, type AuditRecord } from './audit-records.js';
import { createAuditStore, type AuditLimits, type AuditPage, type AuditQuery } from './audit-store.js';
import { readPreviousTrail } from './previous-trail.js';

export interface AuditTrailDeps {
  store: Store;
  /** The gateway's storage policy: records are written in its background class. */
  storage: StoragePolicy;
  /** Where the pruning and the write failures are reported (the plain logger: not audited). */
  log: Logger;
  limits: AuditLimits & {
    /** Events stored per second at most (a burst of one second's worth); beyond, counted and summed up in one record. */
    maxPerSecond: number;
  };
  /** The store a restore replaced (<data>/db.before-restore): its newer events are kept after a restore. */
  previousStoreDir?: string;
  /** Period of the age pruning (default 60 s). */
  pruneIntervalMs?: number;
  now?: () => number;
}

export interface AuditStats {
  /** Records in the trail. */
  records: number;
  /** Events not stored: the store could not write, too many arrived during a restore's swap, or faster than maxPerSecond. */
  dropped: number;
}

export interface AuditTrail {
  /** `log` with every audit event also recorded. */
  logger(log: Logger): Logger;
  record(event: string, fields?: Record<string, unknown>): void;
  query(q: AuditQuery): AuditPage;
  actions(): string[];
  stats(): AuditStats;
  context: AuditContext;
  part: Part;
  /** Resolves when the writes issued so far are committed (tests, shutdown). */
  settled(): Promise<void>;
}

/** Events kept in memory while a restore swaps the store; more are dropped (and counted). */
const MAX_PENDING = 1000;

export function createAuditTrail(deps: AuditTrailDeps): AuditTrail {
  const { store, log } = deps;
  const now = deps.now ?? Date.now;
  const db = createAuditStore({ storage: deps.storage, limits: deps.limits });
  const context = createAuditContext();
  const run = randomBytes(6).toString('base64url');
  let seq = 0;
  let dropped = 0;
  let opened = false;
  let pending: AuditRecord[] = [];
  let timer: NodeJS.Timeout | undefined;
  // A flood of refused MQTT connects must not turn into a flood of flash writes: beyond the rate
  // events reach the log only, and one record says how many the trail lacks.
  const bucket = new TokenBucket(deps.limits.maxPerSecond);
  let overflow = 0;
  let overflowSince = 0;

  function prune(): void {
    if (!opened || !store.isOpen()) return;
    const n = db.prune(now());
    if (n > 0) log.debug('audit trail pruned', { removed: n });
  }

  function write(record: AuditRecord): void {
    // Staged (the storage policy's background class); refused while the store cannot write.
    if (!db.append(record)) {
      dropped++;
      return;
    }
    if (db.count() > deps.limits.maxEntries) prune();
  }

  function record(event: string, fields: Record<string, unknown> = {}): void {
    if (!bucket.take(now())) {
      if (overflow++ === 0) overflowSince = now();
      dropped++;
      return;
    }
    summariseOverflow();
    const request = context.current();
    const r = toRecord({ time: now(), seq: seq++, run, action: event, fields, ...(request?.actor ? { actor: request.actor } : {}), ...(request?.source ? { requestSource: request.source } : {}) });
    if (!opened || !store.isOpen()) {
      if (pending.length < MAX_PENDING) pending.push(r);
      else dropped++;
      return;
    }
    write(r);
  }

  /** The record of the events the rate kept out, once the rate allows again (or at the next pruning). */
  function summariseOverflow(): void {
    if (overflow === 0) return;
    const count = overflow;
    overflow = 0;
    const r = toRecord({ time: now(), seq: seq++, run, action: 'audit events not stored', fields: { count, since: new Date(overflowSince).toISOString(), reason: `more than ${deps.limits.maxPerSecond} events per second (they are in the log)` } });
    if (!opened || !store.isOpen()) pending.push(r);
    else write(r);
  }

  function flushPending(): void {
    const queued = pending;
    pending = [];
    for (const r of queued) write(r);
  }

  async function takeOverPrevious(): Promise<void> {
    if (!deps.previousStoreDir) return;
    try {
      const written = await db.merge(readPreviousTrail(deps.previousStoreDir), now());
      if (written > 0) log.info('audit trail: events of the replaced store kept', { records: written });
      prune();
    } catch (err) {
      log.error('audit trail: the replaced store could not be read', { error: (err as Error).message });
    }
  }

  store.onReopen(() => {
    db.open();
    flushPending();
    void takeOverPrevious();
  });

  return {
    logger: (base) => tapAudit(base, record),
    record,
    query: (q) => db.query(q),
    actions: () => db.actions(),
    stats: () => ({ records: opened && store.isOpen() ? db.count() : 0, dropped }),
    context,
    // Everything recorded so far on disk (the whole policy's staged writes are committed with it).
    settled: () => deps.storage.flush(),
    part: {
      name: 'audit',
      start: async () => {
        db.open();
        opened = true;
        flushPending();
        prune();
        timer = setInterval(() => {
          if (bucket.take(now())) summariseOverflow();
          prune();
        }, deps.pruneIntervalMs ?? 60_000);
        timer.unref();
      },
      stop: async () => {
        clearInterval(timer);
        await deps.storage.flush();
      },
    },
  };
}
