import { join } from 'node:path';

/** Where maintenance keeps its files, all inside the data directory (one file system). */
export interface MaintenancePaths {
  dataDir: string;
  /** The live store directory, `<data>/db`. */
  db: string;
  /** A restored store that is complete and verified, waiting for the swap. */
  staged: string;
  /** The store replaced by the last restore. */
  beforeRestore: string;
  /** Complete archives `<id>.tar.gz`; archives being written are `.<id>.tar.gz.partial`. */
  backups: string;
  /**
   * The copies a newer release took before it migrated the data format, `format-<n>_<time>.tar.gz`
   * (the format they hold), kept until the operator removes them: the way back to a release that
   * reads format n (docs/operations.md "Rolling back").
   */
  beforeUpgrade: string;
  /** Uploads, snapshots and extraction work; emptied at every start. */
  tmp: string;
}

export function maintenancePaths(dataDir: string): MaintenancePaths {
  return {
    dataDir,
    db: join(dataDir, 'db'),
    staged: join(dataDir, 'db.staged'),
    beforeRestore: join(dataDir, 'db.before-restore'),
    backups: join(dataDir, 'backups'),
    beforeUpgrade: join(dataDir, 'backups', 'before-upgrade'),
    tmp: join(dataDir, 'tmp', 'maintenance'),
  };
}

export const ARCHIVE_SUFFIX = '.tar.gz';
export const PARTIAL_SUFFIX = '.partial';

export function archiveFileName(id: string): string {
  return `${id}${ARCHIVE_SUFFIX}`;
}

export function partialArchiveFileName(id: string): string {
  return `.${id}${ARCHIVE_SUFFIX}${PARTIAL_SUFFIX}`;
}

/** Backup ids are `<version>_<ISO time with ':' replaced by '-'>`: safe as file names. */
export const BACKUP_ID_PATTERN = /^[0-9A-Za-z.+-]+_\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(?:\.\d{3})?Z$/;

export function backupIdFor(version: string, at: Date): string {
  const safeVersion = version.replace(/[^0-9A-Za-z.+-]/g, '-');
  return `${safeVersion}_${at.toISOString().replace(/:/g, '-')}`;
}

/** The time part of a backup id, comparable as a string (ISO order). */
export function backupIdTime(id: string): string {
  return id.slice(id.lastIndexOf('_') + 1);
}

/** Archives taken before a data format upgrade: `format-<n>_<ISO time with '-' for ':'>`. */
export const BEFORE_UPGRADE_ID_PATTERN = /^format-(\d+)_\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(?:\.\d{3})?Z$/;

export function beforeUpgradeIdFor(format: number, at: Date): string {
  return `format-${format}_${at.toISOString().replace(/:/g, '-')}`;
}
