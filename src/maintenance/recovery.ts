// Start-up recovery of the files a backup or restore may leave behind when the daemon dies
// (SIGKILL, power cut). Runs before the store is opened. The rule, decided from which
// directories exist, is deterministic:
//
//   <data>/db missing, <data>/db.staged present          -> the swap was cut after the live
//        store moved aside; db.staged only ever exists complete and verified, so the swap is
//        completed (db.staged -> db). The restored store's status record says so.
//   <data>/db missing, only <data>/db.before-restore     -> a rollback was cut; the previous
//        store is put back (db.before-restore -> db).
//   <data>/db present, <data>/db.staged present          -> the swap never started; the staged
//        copy is discarded and the live store stays.
//   always: <data>/tmp/maintenance (uploads, snapshots, extraction work) is emptied and
//        `.<id>.tar.gz.partial` archives are removed (in backups/ and backups/before-upgrade/),
//        so only complete archives remain.
import { mkdirSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from '../log/index.js';
import { fsyncDirSync, listDir, pathExists, removeSync } from './fs-util.js';
import { ARCHIVE_SUFFIX, maintenancePaths, PARTIAL_SUFFIX } from './paths.js';

export type RecoveryAction = 'none' | 'completed-swap' | 'rolled-back' | 'discarded-staged';

export interface RecoveryReport {
  action: RecoveryAction;
  removedPartialArchives: string[];
}

export function recoverMaintenanceFiles(deps: { dataDir: string; log: Logger }): RecoveryReport {
  const { log } = deps;
  const p = maintenancePaths(deps.dataDir);
  mkdirSync(p.dataDir, { recursive: true, mode: 0o700 });
  let action: RecoveryAction = 'none';

  if (!pathExists(p.db)) {
    if (pathExists(p.staged)) {
      renameSync(p.staged, p.db);
      action = 'completed-swap';
    } else if (pathExists(p.beforeRestore)) {
      renameSync(p.beforeRestore, p.db);
      action = 'rolled-back';
    }
    if (action !== 'none') fsyncDirSync(p.dataDir);
  } else if (pathExists(p.staged)) {
    removeSync(p.staged);
    fsyncDirSync(p.dataDir);
    action = 'discarded-staged';
  }
  if (action !== 'none') log.warn('maintenance recovery after an interrupted restore', { action });

  removeSync(p.tmp);
  mkdirSync(p.tmp, { recursive: true, mode: 0o700 });

  const removedPartialArchives: string[] = [];
  // Backups, and the copies taken before a data format upgrade (data-upgrade.ts).
  for (const dir of [p.backups, p.beforeUpgrade]) {
    let removed = false;
    for (const name of listDir(dir)) {
      if (name.startsWith('.') && name.endsWith(ARCHIVE_SUFFIX + PARTIAL_SUFFIX)) {
        removeSync(join(dir, name));
        removedPartialArchives.push(name);
        removed = true;
      }
    }
    if (removed) fsyncDirSync(dir);
  }
  if (removedPartialArchives.length) log.warn('removed incomplete backup archives', { files: removedPartialArchives });
  return { action, removedPartialArchives };
}
