import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { nodeCommand } from '../platform/node-command.js';
import { ArchiveError } from './archive.js';

const script = fileURLToPath(new URL('./verify-store-main.js', import.meta.url));

export interface StoreCheck {
  schemaVersion: unknown;
  databases: number;
  records: number;
}

/**
 * Opens a store file in a separate, short-lived process and walks all of it. A corrupt file
 * (which can crash LMDB's native code) ends that process, not the daemon. Throws ArchiveError
 * when the file is not a usable store.
 */
export function checkStoreFile(file: string, options: { sizeBytes: number; signal?: AbortSignal }): Promise<StoreCheck> {
  // 60 s plus 1 s per 5 MB: generous for flash, still bounded.
  const timeout = 60_000 + Math.ceil(options.sizeBytes / 5_000_000) * 1000;
  const { command, prefix } = nodeCommand();
  return new Promise((resolve, reject) => {
    execFile(
      command,
      [...prefix, '--max-old-space-size=96', script, file],
      { timeout, killSignal: 'SIGKILL', maxBuffer: 64 * 1024, env: { PATH: process.env.PATH ?? '' }, ...(options.signal ? { signal: options.signal } : {}) },
      (err, stdout) => {
        const line = stdout.trim().split('\n').pop() ?? '';
        let result: ({ ok: true } & StoreCheck) | { ok: false; message: string } | undefined;
        try {
          result = JSON.parse(line) as typeof result;
        } catch {
          result = undefined;
        }
        if (result?.ok) return resolve({ schemaVersion: result.schemaVersion, databases: result.databases, records: result.records });
        if (result && !result.ok) return reject(new ArchiveError(`the store in the archive cannot be used: ${result.message}`));
        const e = err as (Error & { killed?: boolean; signal?: string; code?: unknown }) | null;
        if (options.signal?.aborted) return reject(new Error('aborted'));
        if (e?.killed && e.signal === 'SIGKILL') return reject(new ArchiveError('the store in the archive could not be checked in time'));
        if (e?.signal) return reject(new ArchiveError(`the store in the archive is corrupt (its check crashed with ${e.signal})`));
        reject(new Error(`store check failed: ${e?.message ?? 'no result'}`));
      },
    );
  });
}
