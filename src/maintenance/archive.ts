// The backup archive: a gzip-compressed tar holding exactly
//   manifest.json   {format, formatVersion, id, gatewaydVersion, storeSchemaVersion, createdAt,
//                    files: {"db/data.mdb": {size, sha256}}}
//   db/data.mdb     a consistent LMDB snapshot
// (an optional "db/" directory entry is tolerated). Reading never uses a path from the
// archive to write: the two allowed entries go to fixed names in a staging directory, and
// every other entry, link, device, absolute or ".." path fails the whole archive.
import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream, promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { Readable, Transform, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip, createGzip } from 'node:zlib';
import { createRequire } from 'node:module';
import type * as Tar from 'tar';
import { STORE_FILE } from '../store/index.js';
import { fsyncDir, fsyncFile } from './fs-util.js';
import { throttle } from './throttle.js';

// tar is loaded by the first backup or restore.
const requireCjs = createRequire(import.meta.url);
let tarModule: typeof Tar | undefined;
const tar = (): typeof Tar => (tarModule ??= requireCjs('tar') as typeof Tar);

export const MANIFEST_ENTRY = 'manifest.json';
export const STORE_ENTRY = `db/${STORE_FILE}`;
const DIRECTORY_ENTRIES = new Set(['db', 'db/']);
export const MANIFEST_FORMAT = 'gatewayd-backup';
export const MANIFEST_FORMAT_VERSION = 1;
const MAX_MANIFEST_BYTES = 64 * 1024;
/** Kept free on the data file system when extracting, so a restore cannot fill it up. */
export const FREE_SPACE_RESERVE_BYTES = 32 * 1024 * 1024;
/**
 * The store in an archive is at most this many times the archive's size (and at least
 * MIN_STORE_LIMIT_BYTES is allowed): backups are compacted LMDB copies that gzip 3–10 to 1, so
 * more is a gzip bomb — 10 GiB of zeros fit in 10 MiB of gzip — refused from the tar header,
 * before anything is written (Apache POI refuses entries inflating more than 100 times too).
 */
export const MAX_EXPANSION = 100;
export const MIN_STORE_LIMIT_BYTES = 64 * 1024 * 1024;

export interface ManifestFile {
  size: number;
  sha256: string;
}

export interface BackupManifest {
  format: typeof MANIFEST_FORMAT;
  formatVersion: number;
  id: string;
  gatewaydVersion: string;
  storeSchemaVersion: number;
  createdAt: string;
  files: Record<string, ManifestFile>;
}

/** A problem with an uploaded archive: the restore is refused, nothing changed. */
export class ArchiveError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ArchiveError';
  }
}

export async function sha256OfFile(path: string): Promise<ManifestFile> {
  const hash = createHash('sha256');
  let size = 0;
  for await (const chunk of createReadStream(path, { highWaterMark: 256 * 1024 })) {
    hash.update(chunk as Buffer);
    size += (chunk as Buffer).length;
  }
  return { size, sha256: hash.digest('hex') };
}

/**
 * Packs `<workDir>/manifest.json` and `<workDir>/db/data.mdb` (written by the caller's
 * snapshot) into `partialPath`, then fsyncs it. Compression runs on Node's zlib thread
 * pool, so the event loop stays free for API and broker traffic.
 */
export async function packArchive(options: {
  workDir: string;
  manifest: BackupManifest;
  partialPath: string;
  bytesPerSecond: number;
  signal?: AbortSignal;
}): Promise<{ bytes: number }> {
  const { workDir, partialPath } = options;
  await fsp.writeFile(join(workDir, MANIFEST_ENTRY), JSON.stringify(options.manifest, null, 2) + '\n', { mode: 0o600 });
  const pack = tar().c({ cwd: workDir, portable: true, noDirRecurse: true }, [MANIFEST_ENTRY, STORE_ENTRY]);
  const out = createWriteStream(partialPath, { flags: 'wx', mode: 0o600 });
  await pipeline(Readable.from(pack), createGzip({ level: 3 }), throttle(options.bytesPerSecond), out, options.signal ? { signal: options.signal } : {});
  await fsyncFile(partialPath);
  const { size } = await fsp.stat(partialPath);
  return { bytes: size };
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Checks the manifest's shape; compatibility is checked separately. */
export function parseManifest(text: string): BackupManifest {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new ArchiveError('manifest.json is not valid JSON');
  }
  if (!isPlainObject(parsed)) throw new ArchiveError('manifest.json must hold a JSON object');
  const m = parsed;
  if (m.format !== MANIFEST_FORMAT) throw new ArchiveError(`manifest.json: format must be "${MANIFEST_FORMAT}"`);
  if (m.formatVersion !== MANIFEST_FORMAT_VERSION) {
    throw new ArchiveError(`manifest.json: formatVersion ${JSON.stringify(m.formatVersion)} is not supported (this gatewayd reads ${MANIFEST_FORMAT_VERSION})`);
  }
  for (const key of ['id', 'gatewaydVersion', 'createdAt'] as const) {
    const v = m[key];
    if (typeof v !== 'string' || !v || v.length > 200) throw new ArchiveError(`manifest.json: ${key} must be a non-empty string of at most 200 characters`);
  }
  if (Number.isNaN(Date.parse(m.createdAt as string))) throw new ArchiveError('manifest.json: createdAt must be an ISO 8601 time');
  if (!Number.isInteger(m.storeSchemaVersion)) throw new ArchiveError('manifest.json: storeSchemaVersion must be an integer');
  if (!isPlainObject(m.files)) throw new ArchiveError('manifest.json: files must be an object');
  const names = Object.keys(m.files);
  if (names.length !== 1 || names[0] !== STORE_ENTRY) {
    throw new ArchiveError(`manifest.json: files must list exactly "${STORE_ENTRY}" (found ${names.map((n) => JSON.stringify(n)).join(', ') || 'none'})`);
  }
  const f = m.files[STORE_ENTRY];
  if (!isPlainObject(f) || !Number.isSafeInteger(f.size) || (f.size as number) < 0 || typeof f.sha256 !== 'string' || !/^[0-9a-f]{64}$/.test(f.sha256)) {
    throw new ArchiveError(`manifest.json: files["${STORE_ENTRY}"] must be {size: integer, sha256: 64 lower-case hex digits}`);
  }
  return m as unknown as BackupManifest;
}

function describeEntryProblem(path: string, type: string): string | undefined {
  if (path.startsWith('/') || /^[A-Za-z]:/.test(path) || path.startsWith('\\')) return `entry "${path}" has an absolute path`;
  if (path.split(/[\\/]/).includes('..')) return `entry "${path}" contains a ".." path segment`;
  if (type === 'SymbolicLink' || type === 'Link') return `entry "${path}" is a link; links are not allowed`;
  if (type === 'CharacterDevice' || type === 'BlockDevice' || type === 'FIFO') return `entry "${path}" is a device or FIFO; these are not allowed`;
  const isFile = type === 'File' || type === 'OldFile' || type === 'ContiguousFile';
  if (DIRECTORY_ENTRIES.has(path)) return type === 'Directory' ? undefined : `entry "${path}" must be a directory`;
  if (path !== MANIFEST_ENTRY && path !== STORE_ENTRY) return `unexpected entry "${path}" (an archive holds only ${MANIFEST_ENTRY} and ${STORE_ENTRY})`;
  if (!isFile) return `entry "${path}" must be a regular file (is ${type})`;
  return undefined;
}

export interface ExtractedArchive {
  manifest: BackupManifest;
  /** The extracted store file, `<destDir>/data.mdb`. */
  storeFile: string;
}

/**
 * Checks an uploaded archive and extracts the store file into `destDir` in one streaming
 * pass. Throws ArchiveError (what is wrong, for the operator) for every bad archive; on any
 * failure the caller removes destDir.
 */
export async function checkAndExtractArchive(options: {
  file: string;
  destDir: string;
  /** Called with the manifest as soon as it is read (schema compatibility, fail fast). */
  checkManifest: (m: BackupManifest) => void;
  bytesPerSecond: number;
  signal?: AbortSignal;
}): Promise<ExtractedArchive> {
  const { file, destDir } = options;
  const head = Buffer.alloc(2);
  const fh = await fsp.open(file, 'r');
  let archiveBytes: number;
  try {
    const { bytesRead } = await fh.read(head, 0, 2, 0);
    if (bytesRead < 2 || head[0] !== 0x1f || head[1] !== 0x8b) throw new ArchiveError('the file is not a gzip-compressed tar archive (.tar.gz)');
    archiveBytes = (await fh.stat()).size;
  } finally {
    await fh.close();
  }
  const storeLimit = Math.max(MIN_STORE_LIMIT_BYTES, MAX_EXPANSION * archiveBytes);

  const storeFile = join(destDir, STORE_FILE);
  const seen = new Set<string>();
  let manifest: BackupManifest | undefined;
  let stored: ManifestFile | undefined;
  const pending: Promise<void>[] = [];
  let failure: Error | undefined;
  const sinks: Writable[] = [];

  const input = createReadStream(file, { highWaterMark: 256 * 1024 });
  const gunzip = createGunzip();
  const parser = new (tar().Parser)({ strict: true, maxMetaEntrySize: MAX_MANIFEST_BYTES });

  const done = new Promise<void>((resolve, reject) => {
    const fail = (err: unknown) => {
      if (failure) return;
      failure = err instanceof ArchiveError ? err : toArchiveError(err);
      input.destroy();
      gunzip.destroy();
      for (const sink of sinks) sink.destroy();
      parser.abort(failure);
      reject(failure);
    };
    options.signal?.addEventListener('abort', () => fail(new Error('aborted')), { once: true });
    input.on('error', fail);
    gunzip.on('error', (err) => fail(new ArchiveError(`the archive is not valid gzip: ${err.message}`)));
    parser.on('error', (err: Error) => fail(err));
    parser.on('ignoredEntry', (entry: Tar.ReadEntry) => fail(new ArchiveError(`entry "${entry.path}" has an unsupported type (${entry.type})`)));
    parser.on('entry', (entry: Tar.ReadEntry) => {
      const path = entry.path;
      const problem = describeEntryProblem(path, entry.type);
      if (problem) return fail(new ArchiveError(problem));
      if (seen.has(path)) return fail(new ArchiveError(`entry "${path}" appears more than once`));
      seen.add(path);
      if (entry.type === 'Directory') return void entry.resume();
      if (path === MANIFEST_ENTRY) {
        if (entry.size > MAX_MANIFEST_BYTES) return fail(new ArchiveError(`manifest.json is larger than ${MAX_MANIFEST_BYTES} bytes`));
        const chunks: Buffer[] = [];
        entry.on('data', (c: Buffer) => chunks.push(c));
        entry.on('end', () => {
          if (failure) return;
          try {
            manifest = parseManifest(Buffer.concat(chunks).toString('utf8'));
            options.checkManifest(manifest);
          } catch (err) {
            fail(err);
          }
        });
        return;
      }
      if (entry.size > storeLimit) {
        return fail(new ArchiveError(`${STORE_ENTRY} would be ${entry.size} bytes from an archive of ${archiveBytes}: more than ${MAX_EXPANSION} times its size (at most ${storeLimit} bytes)`));
      }
      // STORE_ENTRY: hashed while written to its fixed place; throttled like backups.
      pending.push(
        (async () => {
          const stats = await fsp.statfs(destDir);
          const free = stats.bavail * stats.bsize;
          if (entry.size + FREE_SPACE_RESERVE_BYTES > free) {
            throw new ArchiveError(`not enough free space to restore: ${STORE_ENTRY} needs ${entry.size} bytes, ${free} are free`);
          }
          const hash = createHash('sha256');
          let size = 0;
          const tap = new Transform({
            transform(chunk: Buffer, _e, cb) {
              hash.update(chunk);
              size += chunk.length;
              cb(null, chunk);
            },
          });
          // The file is opened here, not by the stream: pipeline() may settle before a write
          // stream's own open does (Node 24, when the archive fails meanwhile), with its error
          // listeners gone, and that open then met the staging directory removed and ended the
          // process with ENOENT (found by the archive fuzz target). The archive may also have
          // failed while the free space was asked (a manifest refused meanwhile): then nothing
          // is opened at all.
          if (failure) throw failure;
          const handle = await fsp.open(storeFile, 'wx', 0o600);
          if (failure) {
            await handle.close();
            throw failure;
          }
          const out = handle.createWriteStream();
          const closed = new Promise<void>((resolve) => out.once('close', resolve));
          sinks.push(out);
          try {
            await pipeline(entry as unknown as NodeJS.ReadableStream, tap, throttle(options.bytesPerSecond), out);
          } finally {
            // Answered only once the file is closed: the caller removes the directory next.
            out.destroy();
            await closed;
          }
          stored = { size, sha256: hash.digest('hex') };
        })().catch((err: unknown) => {
          fail(err);
        }),
      );
    });
    parser.on('end', () => {
      if (!failure) resolve();
    });
  });
  input.pipe(gunzip).pipe(parser as unknown as Writable);
  // Refused or not, every file this opened is closed before the caller may remove its directory:
  // thrown at the failure, a write stream still opening met the staging directory removed and
  // ended the process with ENOENT (found by the archive fuzz target).
  await done.catch(() => undefined);
  await Promise.all(pending);
  if (failure) throw failure;

  if (!manifest) throw new ArchiveError('manifest.json is missing');
  if (!stored) throw new ArchiveError(`${STORE_ENTRY} is missing`);
  const expected = manifest.files[STORE_ENTRY]!;
  if (expected.size !== stored.size) throw new ArchiveError(`${STORE_ENTRY} has ${stored.size} bytes, manifest.json says ${expected.size}`);
  if (expected.sha256 !== stored.sha256) throw new ArchiveError(`checksum mismatch for ${STORE_ENTRY}: manifest.json says sha256 ${expected.sha256}, the archive holds ${stored.sha256}`);
  await fsyncFile(storeFile);
  await fsyncDir(destDir);
  return { manifest, storeFile };
}

function toArchiveError(err: unknown): Error {
  if (err instanceof ArchiveError) return err;
  const e = err as NodeJS.ErrnoException & { tarCode?: string };
  if (e && typeof e === 'object' && (e.tarCode || /^TAR_/.test(e.code ?? ''))) {
    const message = String(e.message).replace(/^TAR_[A-Z_]+: /, '');
    return new ArchiveError(`the archive is not a valid tar: ${message}`);
  }
  return err instanceof Error ? err : new Error(String(err));
}
