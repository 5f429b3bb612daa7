import { randomBytes } from 'node:crypto';
import { closeSync, fsyncSync, openSync, renameSync, writeSync } from 'node:fs';
import { open, rename, rm } from 'node:fs/promises';
import { dirname } from 'node:path';

/**
 * Writes a file so that a power cut leaves either the old or the new content: write to a
 * temporary name, fsync, rename over, fsync the directory.
 */
export function writeFileAtomic(path: string, content: string | Buffer, mode = 0o600): void {
  const tmp = `${path}.tmp-${process.pid}`;
  const fd = openSync(tmp, 'w', mode);
  try {
    writeSync(fd, typeof content === 'string' ? Buffer.from(content) : content);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, path);
  const dir = openSync(dirname(path), 'r');
  try {
    fsyncSync(dir);
  } finally {
    closeSync(dir);
  }
}

/**
 * writeFileAtomic without blocking the event loop: the writes and fsyncs run on libuv's thread
 * pool (an fsync on flash can take tens of milliseconds), the same temporary-name-then-rename
 * sequence, so a power cut still leaves the old or the new content.
 */
export async function writeFileAtomicAsync(path: string, content: string | Buffer, mode = 0o600): Promise<void> {
  const tmp = `${path}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`;
  const file = await open(tmp, 'w', mode);
  try {
    await file.chmod(mode); // open's mode is filtered by the umask
    await file.writeFile(content);
    await file.sync();
  } catch (err) {
    await file.close();
    await rm(tmp, { force: true });
    throw err;
  }
  await file.close();
  try {
    await rename(tmp, path);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
  const dir = await open(dirname(path), 'r');
  try {
    await dir.sync();
  } finally {
    await dir.close();
  }
}
