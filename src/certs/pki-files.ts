// The PEM files of the gateway CA in <data>/pki: written atomically (a power cut leaves the
// old or the new file), keys kept at mode 0600, temp files of a crashed write removed.
import { promises as fs } from 'node:fs';
import path from 'node:path';
export { writeFileAtomicAsync as writeFileAtomic } from '../store/write-file-atomic.js';

export const CA_KEY_FILE = 'ca.key.pem';
export const CA_CERT_FILE = 'ca.cert.pem';
export const SERVER_KEY_FILE = 'server.key.pem';
export const SERVER_CERT_FILE = 'server.cert.pem';

export async function readIfExists(file: string): Promise<string | undefined> {
  try {
    return await fs.readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

export async function restrictKeyFileMode(file: string): Promise<void> {
  const { mode } = await fs.stat(file);
  if ((mode & 0o077) !== 0) await fs.chmod(file, 0o600);
}

// The temporary names writeFileAtomicAsync uses next to its target.
const TEMP_SUFFIX = /\.pem\.tmp-\d+-[0-9a-f]{8}$/;

/** Temp files left behind by a crash mid-write; they may hold key material. */
export async function removeStaleTempFiles(dir: string): Promise<void> {
  const names = [CA_KEY_FILE, CA_CERT_FILE, SERVER_KEY_FILE, SERVER_CERT_FILE];
  for (const entry of await fs.readdir(dir)) {
    if (TEMP_SUFFIX.test(entry) && names.some((n) => entry.startsWith(n + '.'))) {
      await fs.rm(path.join(dir, entry), { force: true });
    }
  }
}
