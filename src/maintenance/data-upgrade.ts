// The data directory's format at start (docs/design.md §16, docs/operations.md "Upgrading"), before
// anything opens the store for writing:
//   - no store yet, or this build's format: nothing to do;
//   - an older format: a copy of the store as it is, in the backup archive format, under
//     <data>/backups/before-upgrade/format-<n>_<time>.tar.gz, then the migration in one
//     transaction; both said in the log. A crash before the commit leaves the old format, and the
//     next start does both again (the new copy replaces the older one of the same format);
//   - a newer format (or one no release writes): refused in one line naming both formats, the
//     release that wrote it and the copy to go back to; the store is only ever opened read-only.
// A migration that fails (a full disk, a bug) is refused the same way: the data stays as it was,
// and the daemon does not retry in a loop (each try would write another copy to the flash).
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { migrateStore, readDataFormat, type FoundDataFormat, type MigrationReport } from '../data-format/index.js';
import type { Logger } from '../log/index.js';
import { DATA_FORMAT_VERSION, DataFormatError, OLDEST_DATA_FORMAT, openStore } from '../store/index.js';
import { fsyncDir, listDir, remove } from './fs-util.js';
import { ARCHIVE_SUFFIX, BEFORE_UPGRADE_ID_PATTERN, beforeUpgradeIdFor, maintenancePaths, type MaintenancePaths } from './paths.js';
import { recoverMaintenanceFiles } from './recovery.js';
import { gatewaydVersion } from './version.js';
import { writeStoreArchive } from './write-archive.js';

export interface DataUpgradeDeps {
  dataDir: string;
  log: Logger;
  /** Defaults to the version in package.json. */
  version?: string;
  now?: () => Date;
}

export type DataUpgradeOutcome =
  | { action: 'new' | 'current' }
  | { action: 'migrated'; backup: string; backupBytes: number; migration: MigrationReport };

/** An archive taken before an upgrade, with the format it holds. */
export interface BeforeUpgradeArchive {
  file: string;
  id: string;
  format: number;
}

/** The archives in <data>/backups/before-upgrade, newest first. */
export function beforeUpgradeArchives(p: Pick<MaintenancePaths, 'beforeUpgrade'>): BeforeUpgradeArchive[] {
  return listDir(p.beforeUpgrade)
    .filter((name) => name.endsWith(ARCHIVE_SUFFIX))
    .map((name) => ({ id: name.slice(0, -ARCHIVE_SUFFIX.length), file: join(p.beforeUpgrade, name) }))
    .flatMap((a) => {
      const m = BEFORE_UPGRADE_ID_PATTERN.exec(a.id);
      return m ? [{ ...a, format: Number(m[1]) }] : [];
    })
    .sort((a, b) => b.id.slice(b.id.indexOf('_')).localeCompare(a.id.slice(a.id.indexOf('_'))));
}

/** The one line that refuses a data directory this build does not read. */
export function refusalMessage(o: { dataDir: string; found: FoundDataFormat; version: string; archives: BeforeUpgradeArchive[] }): string {
  const { found, version } = o;
  const p = maintenancePaths(o.dataDir);
  const writer = found.writtenBy ? `, written by gatewayd ${found.writtenBy}` : '';
  const head = `the data directory ${o.dataDir} holds data format ${JSON.stringify(found.format)}${writer}; gatewayd ${version} reads data formats ${OLDEST_DATA_FORMAT} to ${DATA_FORMAT_VERSION}`;
  // The way back: the newest copy of the highest format this build reads (an older one it migrates).
  const readable = o.archives.filter((a) => a.format <= DATA_FORMAT_VERSION).sort((a, b) => b.format - a.format)[0];
  const forward = found.writtenBy ? `run gatewayd ${found.writtenBy} or later on it, or ` : 'run the release that wrote it, or ';
  const back = readable
    ? `go back to the data of before that upgrade: stop gatewayd, move ${p.db} aside and unpack ${readable.file} into ${o.dataDir} (tar -xzf <archive> -C ${o.dataDir} db/data.mdb)`
    : `restore a backup of data format ${DATA_FORMAT_VERSION} or older (there is none in ${p.beforeUpgrade})`;
  return `${head}: ${forward}${back}; see docs/operations.md "Rolling back"`;
}

/** Runs before the store opens (the daemon's start): see the head of this file. */
export async function upgradeDataDirectory(deps: DataUpgradeDeps): Promise<DataUpgradeOutcome> {
  const { log } = deps;
  const version = deps.version ?? gatewaydVersion();
  const now = deps.now ?? (() => new Date());
  const p = maintenancePaths(deps.dataDir);
  const refuseUnreadable = (found: FoundDataFormat | undefined) => {
    const f = found?.format;
    if (f === undefined || (typeof f === 'number' && Number.isInteger(f) && f >= OLDEST_DATA_FORMAT && f <= DATA_FORMAT_VERSION)) return;
    throw new DataFormatError(typeof f === 'number' ? f : Number.NaN, refusalMessage({ dataDir: deps.dataDir, found: found!, version, archives: beforeUpgradeArchives(p) }));
  };
  // A directory this build does not read is left exactly as it is, its maintenance files too.
  refuseUnreadable(readDataFormat(p.db));
  // An interrupted restore swap is finished or undone first: the store checked is the one that runs.
  recoverMaintenanceFiles({ dataDir: deps.dataDir, log });
  const found = readDataFormat(p.db);
  refuseUnreadable(found);
  if (!found || found.format === undefined) return { action: 'new' };
  if (found.format === DATA_FORMAT_VERSION) return { action: 'current' };
  const from = found.format as number;

  const id = beforeUpgradeIdFor(from, now());
  log.lifecycle('data format upgrade: copying the data as it is first', { from, to: DATA_FORMAT_VERSION, backup: join(p.beforeUpgrade, `${id}${ARCHIVE_SUFFIX}`) });
  const store = openStore({ dir: p.db, acceptOlderFormat: true, writtenBy: version });
  const work = join(p.tmp, `upgrade-${id}`);
  let step = 'copying the data';
  try {
    const { file, bytes } = await writeStoreArchive({ store, workDir: work, dir: p.beforeUpgrade, id, gatewaydVersion: version, dataFormat: from, createdAt: () => now().toISOString(), bytesPerSecond: 0 });
    await remove(work);
    // One copy per format: an earlier one (an upgrade tried before, then rolled back) is older data.
    const older = beforeUpgradeArchives(p).filter((a) => a.format === from && a.id !== id);
    for (const a of older) await remove(a.file);
    if (older.length) await fsyncDir(p.beforeUpgrade);
    step = 'migrating';
    const migration = await migrateStore(store, version);
    log.lifecycle('data format migrated', { from: migration.from, to: migration.to, ms: migration.ms, steps: migration.steps, backup: file, backupBytes: bytes });
    return { action: 'migrated', backup: file, backupBytes: bytes, migration };
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    throw new DataFormatError(from, `the upgrade of the data directory ${deps.dataDir} from data format ${from} to ${DATA_FORMAT_VERSION} failed while ${step} (${reason}); the data is unchanged (format ${from}): free space or mend the cause and start again, or run the release that wrote it`);
  } finally {
    await remove(work).catch(() => {});
    await store.close();
  }
}

/** Bytes of every archive under <data>/backups, the copies taken before upgrades included (the footprint on disk). */
export async function backupBytes(p: Pick<MaintenancePaths, 'backups' | 'beforeUpgrade'>): Promise<number> {
  let total = 0;
  for (const dir of [p.backups, p.beforeUpgrade]) {
    for (const name of listDir(dir)) {
      if (!name.endsWith(ARCHIVE_SUFFIX)) continue;
      try {
        total += (await fsp.stat(join(dir, name))).size;
      } catch {
        // pruned meanwhile
      }
    }
  }
  return total;
}
