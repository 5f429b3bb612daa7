// Fuzz target: the backup archive reader of src/maintenance (issue 35 B) — checkAndExtractArchive,
// the one streaming pass of gunzip, the tar parser (strict) and gatewayd's entry rules that a
// restore upload meets before anything else. Inputs: tar-corpus.ts's hostile archives. Each
// runs in a fresh directory tree, the staging directory two levels down. Oracles: only
// ArchiveError escapes; nothing is written anywhere but the staging directory, and there only
// data.mdb; an accepted archive's data.mdb has the manifest's size and SHA-256; ≤ 50 ms per
// archive ≤ 64 KiB; buffers ≤ 16 × input + 1 MiB (gunzip's and the tar parser's own blocks).
// The REST upload (multer, the lock, the store digest) is tested in test/fuzz/archive.test.ts.
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { ArchiveError, checkAndExtractArchive, type BackupManifest } from '../../src/maintenance/archive.js';
import { STORE_SCHEMA_VERSION } from '../../src/store/index.js';
import { FuzzFinding, type NorthTarget } from './north-support.js';
import { archiveArb, type ArchiveInput } from './tar-corpus.js';

export interface ArchiveState {
  base: string;
  runs: number;
}

/** Every path under `dir`, relative to it. */
function tree(dir: string): string[] {
  return (readdirSync(dir, { recursive: true }) as string[]).map((p) => p.replaceAll('\\', '/')).sort();
}

function checkCompatible(m: BackupManifest): void {
  if (m.storeSchemaVersion !== STORE_SCHEMA_VERSION) throw new ArchiveError(`store schema version ${m.storeSchemaVersion}`);
}

/** One archive through the reader in a fresh tree: what it wrote and what it answered. */
export async function extractInFreshTree(base: string, bytes: Buffer, name: string): Promise<void> {
  const root = join(base, name);
  const staging = join(root, 'up', 'one', 'staging');
  mkdirSync(staging, { recursive: true });
  const file = join(root, 'upload');
  writeFileSync(file, bytes);
  try {
    let extracted: Awaited<ReturnType<typeof checkAndExtractArchive>> | undefined;
    try {
      extracted = await checkAndExtractArchive({ file, destDir: staging, checkManifest: checkCompatible, bytesPerSecond: 0 });
    } catch (err) {
      if (!(err instanceof ArchiveError)) throw new FuzzFinding(`checkAndExtractArchive threw ${(err as Error)?.constructor?.name}: ${String((err as Error)?.message ?? err).slice(0, 300)}`);
    }
    const written = tree(root).filter((p) => !['upload', 'up', 'up/one', 'up/one/staging', 'up/one/staging/data.mdb'].includes(p));
    if (written.length) throw new FuzzFinding(`the reader wrote outside its place: ${written.slice(0, 5).join(', ')}`);
    if (extracted) {
      const data = readFileSync(extracted.storeFile);
      const expected = extracted.manifest.files['db/data.mdb']!;
      if (data.length !== expected.size || createHash('sha256').update(data).digest('hex') !== expected.sha256) throw new FuzzFinding('an accepted archive left a data.mdb that is not the one its manifest describes');
      if (relative(staging, extracted.storeFile) !== 'data.mdb') throw new FuzzFinding(`the store was extracted to ${extracted.storeFile}`);
    } else if (existsSync(join(staging, 'data.mdb')) && statSync(join(staging, 'data.mdb')).size > 64 * 1024 * 1024) {
      throw new FuzzFinding('a refused archive left more than 64 MiB in the staging directory');
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

export const archiveTarget: NorthTarget<ArchiveInput, ArchiveState> = {
  name: 'archive',
  oracle: 'only ArchiveError escapes; nothing written but <staging>/data.mdb; an accepted archive\'s data.mdb has the manifest\'s size and SHA-256; ≤ 50 ms per archive ≤ 64 KiB; buffers ≤ 16 × input + 1 MiB',
  floor: 500,
  ciMs: 15_000,
  arbitrary: () => archiveArb(STORE_SCHEMA_VERSION),
  encode: (input) => input.bytes,
  decode: (bytes) => ({ kind: bytes[0] === 0x1f ? 'gz' : 'raw', bytes }),
  sizeOf: (input) => input.bytes.length,
  // gunzip's window and output blocks and the tar parser's are fixed costs of any archive.
  allocationLimit: (n) => 16 * n + 1024 * 1024,
  async setup() {
    return { base: mkdtempSync(join(existsSync('/dev/shm') ? '/dev/shm' : tmpdir(), 'gatewayd-fuzz-archive-')), runs: 0 };
  },
  async teardown(state) {
    rmSync(state.base, { recursive: true, force: true });
  },
  async execute(state, input) {
    await extractInFreshTree(state.base, input.bytes, `r${state.runs++}`);
    const outside = tree(state.base);
    if (outside.length) throw new FuzzFinding(`the reader wrote outside its tree: ${outside.slice(0, 5).join(', ')}`);
  },
};
