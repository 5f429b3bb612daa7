// One archive of the store, as a backup and the copy taken before a data format upgrade both
// write it: a consistent snapshot (one LMDB read transaction), its manifest, packed under a
// temporary name, fsynced, and renamed to `<dir>/<id>.tar.gz` once complete.
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { STORE_FILE, type Store } from '../store/index.js';
import { MANIFEST_FORMAT, MANIFEST_FORMAT_VERSION, packArchive, sha256OfFile, STORE_ENTRY, type BackupManifest } from './archive.js';
import { fsyncDir, remove } from './fs-util.js';
import { archiveFileName, partialArchiveFileName } from './paths.js';

export interface StoreArchiveOptions {
  store: Store;
  /** Scratch directory for the snapshot (the caller removes it). */
  workDir: string;
  /** Where the archive goes. */
  dir: string;
  id: string;
  gatewaydVersion: string;
  /** The data format the snapshot holds (the manifest's storeSchemaVersion). */
  dataFormat: number;
  createdAt: () => string;
  bytesPerSecond: number;
  signal?: AbortSignal;
}

/** Writes the archive; on failure no file of it is left in `dir`. */
export async function writeStoreArchive(o: StoreArchiveOptions): Promise<{ file: string; bytes: number }> {
  const partial = join(o.dir, partialArchiveFileName(o.id));
  const final = join(o.dir, archiveFileName(o.id));
  try {
    await fsp.mkdir(o.dir, { recursive: true, mode: 0o700 });
    await fsp.mkdir(o.workDir, { recursive: true, mode: 0o700 });
    await o.store.backup(join(o.workDir, 'db'));
    o.signal?.throwIfAborted();
    const manifest: BackupManifest = {
      format: MANIFEST_FORMAT,
      formatVersion: MANIFEST_FORMAT_VERSION,
      id: o.id,
      gatewaydVersion: o.gatewaydVersion,
      storeSchemaVersion: o.dataFormat,
      createdAt: o.createdAt(),
      files: { [STORE_ENTRY]: await sha256OfFile(join(o.workDir, 'db', STORE_FILE)) },
    };
    o.signal?.throwIfAborted();
    const { bytes } = await packArchive({ workDir: o.workDir, manifest, partialPath: partial, bytesPerSecond: o.bytesPerSecond, ...(o.signal ? { signal: o.signal } : {}) });
    // Visible under its final name only once complete and durable.
    await fsp.rename(partial, final);
    await fsyncDir(o.dir);
    return { file: final, bytes };
  } catch (err) {
    await remove(partial).catch(() => {});
    throw err;
  }
}
