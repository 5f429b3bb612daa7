import { closeSync, fsyncSync, openSync, renameSync, writeSync } from 'node:fs';
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
