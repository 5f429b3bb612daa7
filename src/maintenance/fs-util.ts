// Small file-system helpers for crash-safe maintenance work: every rename that makes
// something visible is followed by an fsync of the directory that holds it.
import { closeSync, existsSync, fsyncSync, openSync, promises as fsp, readdirSync, rmSync } from 'node:fs';

/** Makes the entries of `dir` (creations, renames, removals) durable. */
export function fsyncDirSync(dir: string): void {
  const fd = openSync(dir, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

export async function fsyncDir(dir: string): Promise<void> {
  const handle = await fsp.open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

export async function fsyncFile(path: string): Promise<void> {
  const handle = await fsp.open(path, 'r+');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** fsyncs every regular file directly inside `dir`, then the directory itself. */
export async function fsyncTree(dir: string): Promise<void> {
  for (const entry of await fsp.readdir(dir, { withFileTypes: true })) {
    if (entry.isFile()) await fsyncFile(`${dir}/${entry.name}`);
  }
  await fsyncDir(dir);
}

export function pathExists(path: string): boolean {
  return existsSync(path);
}

export function removeSync(path: string): void {
  rmSync(path, { recursive: true, force: true, maxRetries: 2 });
}

export async function remove(path: string): Promise<void> {
  await fsp.rm(path, { recursive: true, force: true, maxRetries: 2 });
}

export function listDir(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
}
