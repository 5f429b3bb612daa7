// Fuzz target: the backup archive reader of src/maintenance (issue 35 B) — checkAndExtractArchive,
// the one streaming pass of gunzip, the tar parser (strict) and gatewayd's entry rules that a
// restore upload meets before anything else. Inputs: wire/tar-corpus.ts's hostile archives. Each
// runs in a fresh directory tree, the staging directory two levels down. Oracles: only
// ArchiveError escapes; nothing is written anywhere but the staging directory, and there only
// data.mdb; an accepted archive's data.mdb has the manifest's size and SHA-256; ≤ 50 ms of CPU per
// archive ≤ 64 KiB; buffers ≤ 16 × input + 1 MiB (gunzip's and the tar parser's own blocks).
// The REST upload (multer, the lock, the store digest) is tested in test/fuzz/archive.test.ts.
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { ArchiveError, checkAndExtractArchive, type BackupManifest } from '../../../src/maintenance/archive.js';
import { DATA_FORMAT_VERSION, OLDEST_DATA_FORMAT } from '../../../src/store/index.js';
import { FuzzFinding, typedTarget, type TypedTarget } from '../support/typed-target.js';
import { archiveArb, type ArchiveInput } from '../wire/tar-corpus.js';

export interface ArchiveState {
  base: string;
  runs: number;
}

function checkCompatible(m: BackupManifest): void {
  // As the restore's own check: this build's data format or an older one it migrates.
  if (m.storeSchemaVersion > DATA_FORMAT_VERSION || m.storeSchemaVersion < OLDEST_DATA_FORMAT) throw new ArchiveError(`data format ${m.storeSchemaVersion}`);
}

const EXPECTED = ['up', 'upload'];
let stagings = 0;

/**
 * One archive through the reader in `root` (made if needed): the upload beside a staging
 * directory two levels down, so that a `../` escape lands where it is seen. What it wrote and
 * what it answered are checked; the staging directory is emptied for the next one.
 */
export async function extractInTree(root: string, bytes: Buffer): Promise<void> {
  // A directory of its own each time, as every restore has (a refused archive's write may end
  // after the reader answered, in the directory the restore removes).
  const name = `staging-${stagings++}`;
  const staging = join(root, 'up', 'one', name);
  mkdirSync(staging, { recursive: true });
  const file = join(root, 'upload');
  writeFileSync(file, bytes);
  let extracted: Awaited<ReturnType<typeof checkAndExtractArchive>> | undefined;
  try {
    extracted = await checkAndExtractArchive({ file, destDir: staging, checkManifest: checkCompatible, bytesPerSecond: 0 });
  } catch (err) {
    if (!(err instanceof ArchiveError)) throw new FuzzFinding(`checkAndExtractArchive threw ${(err as Error)?.constructor?.name}: ${String((err as Error)?.message ?? err).slice(0, 300)}`);
  }
  const outside = [...readdirSync(root).filter((n) => !EXPECTED.includes(n)), ...readdirSync(join(root, 'up')).filter((n) => n !== 'one'), ...readdirSync(join(root, 'up', 'one')).filter((n) => !n.startsWith('staging-'))];
  const inside = readdirSync(staging);
  try {
    if (outside.length || inside.some((n) => n !== 'data.mdb')) throw new FuzzFinding(`the reader wrote outside its place: ${[...outside, ...inside.map((n) => `staging/${n}`)].slice(0, 5).join(', ')}`);
    if (extracted) {
      const data = readFileSync(extracted.storeFile);
      const expected = extracted.manifest.files['db/data.mdb']!;
      if (data.length !== expected.size || createHash('sha256').update(data).digest('hex') !== expected.sha256) throw new FuzzFinding('an accepted archive left a data.mdb that is not the one its manifest describes');
      if (relative(staging, extracted.storeFile) !== 'data.mdb') throw new FuzzFinding(`the store was extracted to ${extracted.storeFile}`);
    } else if (inside.length && statSync(join(staging, 'data.mdb')).size > 64 * 1024 * 1024) {
      throw new FuzzFinding('a refused archive left more than 64 MiB in the staging directory');
    }
  } finally {
    // What the restore does after a refusal: the staging directory goes.
    rmSync(staging, { recursive: true, force: true });
  }
}

export const archiveTarget: TypedTarget<ArchiveInput, ArchiveState> = {
  name: 'archive',
  description: 'only ArchiveError escapes; nothing written but <staging>/data.mdb; an accepted archive\'s data.mdb has the manifest\'s size and SHA-256; ≤ 50 ms of CPU per archive ≤ 64 KiB; buffers ≤ 16 × input + 1 MiB',
  arbitrary: () => archiveArb(DATA_FORMAT_VERSION),
  encode: (input) => input.bytes,
  decode: (bytes) => ({ kind: bytes[0] === 0x1f ? 'gz' : 'raw', bytes }),
  // gunzip's window and output blocks and the tar parser's are fixed costs of any archive.
  allowance: (n) => 16 * n + 1024 * 1024,
  async setup() {
    return { base: mkdtempSync(join(existsSync('/dev/shm') ? '/dev/shm' : tmpdir(), 'gatewayd-fuzz-archive-')), runs: 0 };
  },
  async teardown(state) {
    rmSync(state.base, { recursive: true, force: true });
  },
  async execute(state, input) {
    state.runs++;
    await extractInTree(join(state.base, 'tree'), input.bytes);
    const outside = readdirSync(state.base).filter((n) => n !== 'tree');
    if (outside.length) throw new FuzzFinding(`the reader wrote outside its tree: ${outside.slice(0, 5).join(', ')}`);
  },
};

/** The runner's form of it (test/fuzz/support/typed-target.ts). */
export const target = typedTarget(archiveTarget);
