// Database backup and restore (docs/design.md §10). Business rules live here; the HTTP routes are thin.
//
// One maintenance operation at a time: while a backup or a restore runs (from the start of a
// restore upload to the end of its swap), backup, restore and download answer 423. The rest of
// the API stays available, except during the store swap itself, when the gate answers 423 to
// every request (after letting in-flight requests finish) instead of letting them hit a
// closed store; GET /api/maintenance/db alone waits for the swap to end and answers its outcome.
import { mkdirSync, promises as fsp, type ReadStream } from 'node:fs';
import { join } from 'node:path';
import type { NextFunction, RequestHandler, Response } from 'express';
import type { AccessEvents } from '../auth/access-events.js';
import type { GatewayConfig } from '../config/index.js';
import type { Part } from '../daemon.js';
import { BadRequestError, LockedError, NotFoundError, ServiceUnavailableError } from '../errors/errors.js';
import type { Logger } from '../log/index.js';
import { migrateStore } from '../data-format/index.js';
import { DATA_FORMAT_VERSION, OLDEST_DATA_FORMAT, openStore, STORE_FILE, type IndexKey, type Store } from '../store/index.js';
import { ArchiveError, checkAndExtractArchive, STORE_ENTRY, type BackupManifest } from './archive.js';
import { fsyncDir, fsyncTree, listDir, pathExists, remove } from './fs-util.js';
import {
  archiveFileName,
  ARCHIVE_SUFFIX,
  BACKUP_ID_PATTERN,
  backupIdFor,
  backupIdTime,
  maintenancePaths,
} from './paths.js';
import { checkStoreFile } from './store-check.js';
import { gatewaydVersion } from './version.js';
import { writeStoreArchive } from './write-archive.js';

/** Where the last backup and restore are recorded, in the store's kv database. */
export const STATUS_KEY: IndexKey = ['maintenance', 'status'];
/** How long the swap waits for in-flight requests before closing the store anyway. */
const DRAIN_TIMEOUT_MS = 10_000;
const STATUS_PATH = '/api/maintenance/db';
/** How long GET /api/maintenance/db waits for a swap to end (the drain is bounded by DRAIN_TIMEOUT_MS). */
const STATUS_WAIT_MS = DRAIN_TIMEOUT_MS + 20_000;

function lockedDuringSwap(res: Response, next: NextFunction): void {
  res.setHeader('Retry-After', '2');
  next(new LockedError('the database is being restored; try again in a moment'));
}

/** The contract's shape of one operation: {id, succeeded, statusMessage, startDate, endDate}. */
export interface MaintenanceOperationView {
  id: string;
  succeeded?: boolean;
  statusMessage: string;
  startDate: string;
  endDate?: string;
}

export interface MaintenanceStatusView {
  running: boolean;
  backup?: MaintenanceOperationView;
  restore?: MaintenanceOperationView;
}

/** What is stored: the view plus whether it was still running (crash detection). */
interface OperationRecord extends MaintenanceOperationView {
  running?: boolean;
  /** Only ever written into a staged store right before the swap (see recovery.ts). */
  phase?: 'swapping';
  /** Restore: the id of the backup that was restored. */
  backupId?: string;
}

interface StatusRecord {
  backup?: OperationRecord;
  restore?: OperationRecord;
}

export interface Actor {
  userId?: string;
  username?: string;
}

export interface BackupArchive {
  id: string;
  fileName: string;
  size: number;
  /** Opened before returning: a later prune cannot make the download fail half-way. */
  stream: ReadStream;
}

/** A restore whose upload is being received; exactly one of fail() or start() ends it. */
export interface RestoreUpload {
  readonly id: string;
  /** Directory for the uploaded file (inside the data directory). */
  readonly uploadDir: string;
  /** True once fail() or start() was called. */
  readonly settled: boolean;
  /** The upload did not arrive (too large, aborted, invalid request): recorded, lock released, `file` removed. */
  fail(message: string, file?: string): void;
  /**
   * Checks the uploaded archive and stages it. Resolves when the restore is accepted (202),
   * the swap then runs in the background. Throws BadRequestError for a bad archive.
   */
  start(file: string): Promise<void>;
}

export interface MaintenanceServiceDeps {
  store: Store;
  config: Pick<GatewayConfig, 'dataDir' | 'maintenance'>;
  log: Logger;
  /** After a restore every user of the replaced store is told 'revoked' (MQTT sessions close). */
  events?: AccessEvents;
  /** Defaults to the version in package.json. */
  version?: string;
  now?: () => Date;
}

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

export function createMaintenanceService(deps: MaintenanceServiceDeps) {
  const { store, log } = deps;
  const version = deps.version ?? gatewaydVersion();
  const now = deps.now ?? (() => new Date());
  const limits = deps.config.maintenance;
  const p = maintenancePaths(deps.config.dataDir);

  let status: StatusRecord = {};
  let active: { kind: 'backup' | 'restore'; id: string; abort: AbortController; done?: Promise<void> } | undefined;
  let stopping = false;
  /** While true the gate answers 423 to everything but the status: the store is being swapped. */
  let swapping = false;
  /** Resolved when the current swap ends (rolled back or not). */
  let swapEnded: { promise: Promise<void>; resolve: () => void } | undefined;
  /** Set when even the rollback could not reopen a store: nothing can be served. */
  let storeBroken: string | undefined;
  let inflight = 0;
  /** Work that outlives its lock (a status write after a refused upload); stop() waits for it. */
  const pending = new Set<Promise<void>>();
  let drainWaiters: (() => void)[] = [];

  // ------------------------------------------------------------------------------ status

  function view(op: OperationRecord | undefined): MaintenanceOperationView | undefined {
    if (!op) return undefined;
    const v: MaintenanceOperationView = { id: op.id, statusMessage: op.statusMessage, startDate: op.startDate };
    if (!op.running) {
      v.succeeded = op.succeeded ?? false;
      if (op.endDate) v.endDate = op.endDate;
    }
    return v;
  }

  async function persist(): Promise<void> {
    if (swapping || storeBroken) return;
    try {
      await store.kv.put(STATUS_KEY, status);
    } catch (err) {
      log.error('could not record the maintenance status', { error: err });
    }
  }

  function setOp(kind: 'backup' | 'restore', op: OperationRecord): void {
    status = { ...status, [kind]: op };
  }

  async function finish(kind: 'backup' | 'restore', op: OperationRecord, succeeded: boolean, statusMessage: string): Promise<void> {
    const done: OperationRecord = { id: op.id, startDate: op.startDate, succeeded, statusMessage, endDate: now().toISOString() };
    if (op.backupId) done.backupId = op.backupId;
    setOp(kind, done);
    await persist();
  }

  function acquire(kind: 'backup' | 'restore', id: string) {
    if (storeBroken) throw new ServiceUnavailableError(storeBroken);
    if (stopping) throw new LockedError('gatewayd is stopping');
    if (active) throw new LockedError(`a database ${active.kind} is running (${active.id}); try again when it has finished`);
    active = { kind, id, abort: new AbortController() };
    return active;
  }

  function release(id: string): void {
    if (active?.id === id) active = undefined;
  }

  function newId(): string {
    let id = backupIdFor(version, now());
    // Two operations within one millisecond (or a clock set back) must not share an archive name.
    if (pathExists(join(p.backups, archiveFileName(id))) || status.restore?.id === id || status.backup?.id === id) {
      id = backupIdFor(version, new Date(now().getTime() + 1));
    }
    return id;
  }

  // ------------------------------------------------------------------------------ backup

  function completeArchives(): { id: string; fileName: string }[] {
    return listDir(p.backups)
      .filter((name) => !name.startsWith('.') && name.endsWith(ARCHIVE_SUFFIX))
      .map((fileName) => ({ id: fileName.slice(0, -ARCHIVE_SUFFIX.length), fileName }))
      .filter((a) => BACKUP_ID_PATTERN.test(a.id))
      .sort((a, b) => backupIdTime(b.id).localeCompare(backupIdTime(a.id)) || b.id.localeCompare(a.id));
  }

  async function prune(): Promise<string[]> {
    const removed: string[] = [];
    for (const archive of completeArchives().slice(limits.backupsToKeep)) {
      await remove(join(p.backups, archive.fileName));
      removed.push(archive.id);
    }
    if (removed.length) await fsyncDir(p.backups);
    return removed;
  }

  async function runBackup(op: OperationRecord, signal: AbortSignal, actor: Actor): Promise<void> {
    const started = performance.now();
    const work = join(p.tmp, `backup-${op.id}`);
    try {
      const { bytes } = await writeStoreArchive({
        store,
        workDir: work,
        dir: p.backups,
        id: op.id,
        gatewaydVersion: version,
        dataFormat: DATA_FORMAT_VERSION,
        createdAt: () => now().toISOString(),
        bytesPerSecond: limits.ioBytesPerSecond,
        signal,
      });
      const pruned = await prune();
      const ms = Math.round(performance.now() - started);
      await finish('backup', op, true, `backup ${op.id} complete: ${bytes} bytes`);
      log.audit('database backup completed', { backupId: op.id, bytes, ms, pruned, ...actorFields(actor) });
    } catch (err) {
      const reason = signal.aborted ? 'aborted because gatewayd is stopping' : errorMessage(err);
      await finish('backup', op, false, `backup failed: ${reason}`);
      log.audit('database backup failed', { backupId: op.id, reason, ...actorFields(actor) });
      if (!signal.aborted) log.error('backup failed', { backupId: op.id, error: err });
    } finally {
      await remove(work).catch(() => {});
    }
  }

  function actorFields(actor: Actor): Record<string, unknown> {
    return { ...(actor.userId ? { userId: actor.userId } : {}), ...(actor.username ? { username: actor.username } : {}) };
  }

  // ------------------------------------------------------------------------------ restore

  /**
   * An archive of this build's data format or an older one (migrated when staged); a newer one is
   * refused, naming both formats and the release that reads it (docs/operations.md "Upgrading").
   */
  function checkCompatible(m: BackupManifest): void {
    const format = m.storeSchemaVersion;
    if (format > DATA_FORMAT_VERSION) {
      throw new ArchiveError(
        `the archive holds data format ${format} (written by gatewayd ${m.gatewaydVersion}); this gatewayd ${version} reads data format ${DATA_FORMAT_VERSION} and older: ` +
          `restore it with gatewayd ${m.gatewaydVersion} or later`,
      );
    }
    if (format < OLDEST_DATA_FORMAT) {
      throw new ArchiveError(`the archive holds data format ${format} (written by gatewayd ${m.gatewaydVersion}); this gatewayd ${version} restores data formats ${OLDEST_DATA_FORMAT} to ${DATA_FORMAT_VERSION}`);
    }
  }

  /** Waits until requests that passed the gate have finished (bounded). */
  function drain(): Promise<void> {
    if (inflight === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        log.warn('restore: requests still running after the drain timeout; swapping anyway', { inflight });
        drainWaiters = drainWaiters.filter((w) => w !== done);
        resolve();
      }, DRAIN_TIMEOUT_MS);
      const done = () => {
        clearTimeout(timer);
        resolve();
      };
      drainWaiters.push(done);
    });
  }

  async function swapIn(op: OperationRecord, manifest: BackupManifest, actor: Actor): Promise<void> {
    const trash = join(p.tmp, `before-restore-${op.id}`);
    let swapped = false;
    let swapError: unknown;
    swapping = true;
    let resolveSwap!: () => void;
    swapEnded = { promise: new Promise<void>((resolve) => (resolveSwap = resolve)), resolve: () => resolveSwap() };
    try {
      await drain();
      // Users whose sessions must end after the swap: everyone the replaced store knew.
      const previousUsers = deps.events ? [...store.users.getKeys()] : [];
      try {
        await store.reopen(async (dir) => {
          try {
            if (pathExists(p.beforeRestore)) await fsp.rename(p.beforeRestore, trash);
            await fsp.rename(dir, p.beforeRestore);
            await fsp.rename(p.staged, dir);
            swapped = true;
          } catch (err) {
            // Put things back so that the reopen opens the previous store.
            swapError = err;
            if (!pathExists(dir) && pathExists(p.beforeRestore)) await fsp.rename(p.beforeRestore, dir);
            if (!pathExists(p.beforeRestore) && pathExists(trash)) await fsp.rename(trash, p.beforeRestore);
          }
          // A failure here rejects the reopen: the rollback then undoes the swap.
          await fsyncDir(p.dataDir);
        });
      } catch (openError) {
        await rollback(op, swapped, trash, openError, actor);
        return;
      }
      swapping = false;
      if (swapError !== undefined) {
        await remove(p.staged).catch(() => {});
        await finish('restore', op, false, `restore failed while swapping the store (${errorMessage(swapError)}); the previous store is in use`);
        log.audit('database restore failed', { restoreId: op.id, reason: errorMessage(swapError), ...actorFields(actor) });
        return;
      }
      await remove(trash).catch(() => {});
      await revokeAll(previousUsers);
      const migrated = manifest.storeSchemaVersion < DATA_FORMAT_VERSION ? `, its data format ${manifest.storeSchemaVersion} migrated to ${DATA_FORMAT_VERSION}` : '';
      await finish('restore', op, true, `restored backup ${manifest.id} (created ${manifest.createdAt}${migrated}); the previous store is kept as db.before-restore`);
      log.audit('database restore completed', { restoreId: op.id, backupId: manifest.id, backupCreatedAt: manifest.createdAt, dataFormat: manifest.storeSchemaVersion, ...actorFields(actor) });
    } finally {
      swapping = false;
      swapEnded?.resolve();
      swapEnded = undefined;
    }
  }

  /**
   * Credentials and permissions may all have changed: every user of the replaced store is
   * revoked (live MQTT sessions close and re-authenticate against the restored store).
   */
  async function revokeAll(userIds: string[]): Promise<void> {
    for (let i = 0; i < userIds.length; i++) {
      deps.events?.emit({ userId: userIds[i]!, kind: 'revoked' });
      if (i % 5000 === 4999) await new Promise((resolve) => setImmediate(resolve));
    }
  }

  async function rollback(op: OperationRecord, swapped: boolean, trash: string, cause: unknown, actor: Actor): Promise<void> {
    log.error('restore: the restored store could not be opened; rolling back', { restoreId: op.id, error: cause });
    const failed = join(p.tmp, `failed-restore-${op.id}`);
    try {
      await store.reopen(async (dir) => {
        if (swapped && pathExists(dir) && pathExists(p.beforeRestore)) await fsp.rename(dir, failed);
        if (!pathExists(dir) && pathExists(p.beforeRestore)) await fsp.rename(p.beforeRestore, dir);
        if (!pathExists(p.beforeRestore) && pathExists(trash)) await fsp.rename(trash, p.beforeRestore);
        await fsyncDir(p.dataDir);
      });
    } catch (err) {
      storeBroken = 'the store could not be reopened after a failed restore; restart gatewayd';
      log.error('restore rollback failed: the store is closed', { restoreId: op.id, error: err });
      setOp('restore', { ...op, running: false, succeeded: false, endDate: now().toISOString(), statusMessage: `restore failed and the rollback failed: ${errorMessage(err)}` });
      return;
    }
    swapping = false;
    await remove(failed).catch(() => {});
    await finish(
      'restore',
      op,
      false,
      swapped
        ? `restore failed: the restored store could not be opened (${errorMessage(cause)}); the previous store was put back`
        : `restore failed: the store could not be reopened during the swap (${errorMessage(cause)}); the previous store is in use`,
    );
    log.audit('database restore failed', { restoreId: op.id, reason: errorMessage(cause), rolledBack: true, ...actorFields(actor) });
  }

  /** Everything before the swap: check, extract, verify, stage. Throws BadRequestError for a bad archive. */
  async function stage(op: OperationRecord, file: string, signal: AbortSignal): Promise<BackupManifest> {
    const work = join(p.tmp, `restore-${op.id}`);
    const stagedDb = join(work, 'db');
    try {
      await fsp.mkdir(stagedDb, { recursive: true, mode: 0o700 });
      const { manifest, storeFile } = await checkAndExtractArchive({
        file,
        destDir: stagedDb,
        checkManifest: checkCompatible,
        bytesPerSecond: limits.ioBytesPerSecond,
        signal,
      });
      checkCompatible(manifest);
      await remove(file);
      const check = await checkStoreFile(storeFile, { sizeBytes: manifest.files[STORE_ENTRY]!.size, signal });
      if (check.schemaVersion !== manifest.storeSchemaVersion) {
        throw new ArchiveError(`the store in the archive has data format ${JSON.stringify(check.schemaVersion) ?? 'none'}; its manifest says ${manifest.storeSchemaVersion}`);
      }
      signal.throwIfAborted();
      const staged = openStore({ dir: stagedDb, acceptOlderFormat: true, writtenBy: version });
      try {
        // An older format is brought to this build's before anything reads it (one transaction).
        if (staged.openedFormat() < DATA_FORMAT_VERSION) {
          const migration = await migrateStore(staged, version);
          log.lifecycle('restore: the archive\'s data format migrated', { restoreId: op.id, backupId: manifest.id, from: migration.from, to: migration.to, ms: migration.ms, steps: migration.steps });
        }
        // The restored store carries the status from the moment of the swap: if the daemon dies
        // mid-swap, the store that comes up tells which side of the swap it is (recovery.ts).
        const record: StatusRecord = { ...status, restore: { ...op, running: true, phase: 'swapping', statusMessage: 'restore running: swapping the store', backupId: manifest.id } };
        if (record.backup?.running) delete record.backup;
        await staged.kv.put(STATUS_KEY, record);
        await staged.flushed();
      } finally {
        await staged.close();
      }
      await remove(join(stagedDb, `${STORE_FILE}-lock`));
      await fsyncTree(stagedDb);
      // db.staged exists only complete and verified: the recovery rule depends on it.
      await remove(p.staged);
      await fsp.rename(stagedDb, p.staged);
      await fsyncDir(p.dataDir);
      return manifest;
    } finally {
      await remove(work).catch(() => {});
      await remove(file).catch(() => {});
    }
  }

  function beginRestoreUpload(actor: Actor): RestoreUpload {
    const id = newId();
    const lock = acquire('restore', id);
    const op: OperationRecord = { id, startDate: now().toISOString(), statusMessage: 'restore running: receiving the archive', running: true };
    setOp('restore', op);
    mkdirSync(p.tmp, { recursive: true, mode: 0o700 });
    let settled = false;
    return {
      id,
      uploadDir: p.tmp,
      get settled() {
        return settled;
      },
      fail(message, file) {
        if (settled) return;
        settled = true;
        // Recorded and released at once: the error answer must not race a next attempt.
        setOp('restore', { id, startDate: op.startDate, succeeded: false, statusMessage: `restore refused: ${message}`, endDate: now().toISOString() });
        release(id);
        log.audit('database restore refused', { restoreId: id, reason: message, ...actorFields(actor) });
        const work = (async () => {
          if (file) await remove(file).catch(() => {});
          await persist();
        })();
        pending.add(work);
        void work.finally(() => pending.delete(work));
      },
      start(file) {
        if (settled) return Promise.reject(new Error('restore already settled'));
        settled = true;
        let accept!: () => void;
        let refuse!: (err: unknown) => void;
        const accepted = new Promise<void>((resolve, reject) => {
          accept = resolve;
          refuse = reject;
        });
        // lock.done covers the whole restore, swap included: stop() waits for all of it.
        lock.done = (async () => {
          let manifest: BackupManifest;
          try {
            setOp('restore', { ...op, statusMessage: 'restore running: checking the archive' });
            await persist();
            log.audit('database restore started', { restoreId: id, ...actorFields(actor) });
            manifest = await stage(op, file, lock.abort.signal);
            lock.abort.signal.throwIfAborted();
          } catch (err) {
            const aborted = lock.abort.signal.aborted;
            const reason = aborted ? 'aborted because gatewayd is stopping' : errorMessage(err);
            const refused = err instanceof ArchiveError && !aborted;
            if (aborted) await remove(p.staged).catch(() => {});
            await finish('restore', op, false, `${refused ? 'restore refused' : 'restore failed'}: ${reason}`);
            log.audit(refused ? 'database restore refused' : 'database restore failed', { restoreId: id, reason, ...actorFields(actor) });
            if (!refused && !aborted) log.error('restore failed', { restoreId: id, error: err });
            release(id);
            refuse(refused ? new BadRequestError(`restore refused: ${reason}`) : aborted ? new LockedError('gatewayd is stopping') : err);
            return;
          }
          setOp('restore', { ...op, statusMessage: `restore running: swapping in backup ${manifest.id}`, backupId: manifest.id });
          // swapIn closes the gate synchronously; the 202 is sent while it drains.
          const swap = swapIn(op, manifest, actor);
          accept();
          try {
            await swap;
          } catch (err) {
            log.error('restore swap failed', { restoreId: id, error: err });
          } finally {
            release(id);
          }
        })();
        return accepted;
      },
    };
  }

  // ------------------------------------------------------------------------------ lifecycle

  function reconcile(): boolean {
    const stored = store.kv.get(STATUS_KEY) as StatusRecord | undefined;
    status = stored && typeof stored === 'object' ? { ...stored } : {};
    let changed = false;
    const endDate = now().toISOString();
    if (status.backup?.running) {
      const { running: _r, phase: _p, ...rest } = status.backup;
      status.backup = { ...rest, succeeded: false, endDate, statusMessage: 'backup interrupted: gatewayd stopped while it ran; no archive was kept' };
      changed = true;
    }
    if (status.restore?.running) {
      const { running: _r, phase, ...rest } = status.restore;
      status.restore =
        phase === 'swapping'
          ? { ...rest, succeeded: true, endDate, statusMessage: `restored backup ${rest.backupId ?? ''} (the swap was completed at start-up after an interruption)`.replace('  ', ' ') }
          : { ...rest, succeeded: false, endDate, statusMessage: 'restore interrupted: gatewayd stopped before the swap; the previous store is in use' };
      changed = true;
    }
    return changed;
  }

  const part: Part = {
    name: 'maintenance',
    async start() {
      stopping = false;
      mkdirSync(p.tmp, { recursive: true, mode: 0o700 });
      if (reconcile()) {
        await persist();
        log.warn('maintenance: an operation was interrupted by a stop', { backup: view(status.backup), restore: view(status.restore) });
      }
    },
    async stop() {
      stopping = true;
      const current = active;
      if (current) {
        // A swap is short and must complete; everything before it is abandoned.
        if (!swapping) current.abort.abort();
        await current.done;
      }
      await Promise.all([...pending]);
    },
  };

  const gate: RequestHandler = (req, res, next) => {
    if (storeBroken) return next(new ServiceUnavailableError(storeBroken));
    if (swapping) {
      // The status stays readable: it waits for the (short) swap to end, then answers with the
      // outcome, so a page polling it shows the progress instead of an error.
      const ended = swapEnded?.promise;
      if (ended && req.method === 'GET' && req.path === STATUS_PATH) {
        const timer = new Promise<void>((resolve) => setTimeout(resolve, STATUS_WAIT_MS).unref());
        void Promise.race([ended, timer]).then(() => (swapping ? lockedDuringSwap(res, next) : gate(req, res, next)));
        return;
      }
      return lockedDuringSwap(res, next);
    }
    // Downloads read a file, not the store: a slow one must not hold up a swap.
    if (req.method === 'GET' && req.path === '/api/maintenance/db/backup') return next();
    inflight++;
    let counted = true;
    const end = () => {
      if (!counted) return;
      counted = false;
      inflight--;
      if (inflight === 0 && drainWaiters.length) {
        const waiters = drainWaiters;
        drainWaiters = [];
        for (const w of waiters) w();
      }
    };
    res.once('finish', end);
    res.once('close', end);
    next();
  };

  return {
    part,
    gate,
    paths: p,

    status(): MaintenanceStatusView {
      const out: MaintenanceStatusView = { running: active !== undefined };
      const b = view(status.backup);
      const r = view(status.restore);
      if (b) out.backup = b;
      if (r) out.restore = r;
      return out;
    },

    /** Starts a backup in the background and returns its id at once. */
    startBackup(actor: Actor = {}): string {
      const id = newId();
      const lock = acquire('backup', id);
      const op: OperationRecord = { id, startDate: now().toISOString(), statusMessage: 'backup running', running: true };
      setOp('backup', op);
      log.audit('database backup started', { backupId: id, ...actorFields(actor) });
      lock.done = (async () => {
        try {
          await persist();
          await runBackup(op, lock.abort.signal, actor);
        } finally {
          release(id);
        }
      })();
      return id;
    },

    /** The newest complete archive, opened for reading. */
    async newestArchive(): Promise<BackupArchive> {
      if (active) throw new LockedError(`a database ${active.kind} is running (${active.id}); try again when it has finished`);
      for (const archive of completeArchives()) {
        const path = join(p.backups, archive.fileName);
        try {
          const handle = await fsp.open(path, 'r');
          const { size } = await handle.stat();
          return { id: archive.id, fileName: archive.fileName, size, stream: handle.createReadStream({ autoClose: true }) };
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
        }
      }
      throw new NotFoundError('no backup archive available');
    },

    beginRestoreUpload,

    /** Resolves when the running operation (if any) has ended; for tests and shutdown. */
    async idle(): Promise<void> {
      for (let i = 0; i < 4 && active; i++) await active.done;
    },
  };
}

export type MaintenanceService = ReturnType<typeof createMaintenanceService>;
