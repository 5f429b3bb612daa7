// Earlier releases built from git, for the upgrade tests (docs/testing.md "Upgrades from earlier
// releases"): the releases CHANGELOG.md names (its `## [x.y.z]` headings and each one's milestone
// commit), each built from its annotated tag `v<x.y.z>` when the tag exists, else from the commit.
// A build is `git archive` of that commit unpacked in a cache directory, `npm ci --ignore-scripts`
// (no native builds: the releases' runtime binaries come prebuilt from npm, and the devDependencies
// that compile, like node-snap7, are only their tests' peers) into a node_modules shared by every
// release with the same lockfile, and the release's own `npm run build`. Cached across runs by
// commit and lockfile hash, under $GATEWAYD_RELEASES_CACHE or $XDG_CACHE_HOME/gatewayd-releases
// (~/.cache when unset); a build appears under its final name only once complete (a rename), so
// two runs at once cost a second build at worst, never a broken one.
import { execFileSync, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = fileURLToPath(new URL('../..', import.meta.url));

export interface Release {
  version: string;
  /** The full commit hash the release is built from (its tag's commit once tagged). */
  commit: string;
  /** What it is built from: `v<version>` (a tag) or the milestone commit. */
  ref: string;
}

export interface BuiltRelease extends Release {
  /** The release's tree with dist/ built and node_modules linked. */
  dir: string;
  /** Its `node dist/src/main.js`. */
  main: string;
}

/** The history is not there to build a release from (a shallow clone, no git): the tests fail with this, they never skip. */
export class ReleaseHistoryError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ReleaseHistoryError';
  }
}

export function releasesCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  return env.GATEWAYD_RELEASES_CACHE || join(env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'gatewayd-releases');
}

/** The releases CHANGELOG.md names, newest first, without the one this checkout is (package.json's version). */
export function changelogReleases(root = repoRoot): { version: string; milestone?: string }[] {
  const text = readFileSync(join(root, 'CHANGELOG.md'), 'utf8');
  const current = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string }).version;
  const found: { version: string; milestone?: string }[] = [];
  for (const section of text.split(/^## /m).slice(1)) {
    const heading = /^\[(\d+\.\d+\.\d+)\]/.exec(section);
    if (!heading || heading[1] === current) continue;
    const milestone = /Milestone commit `([0-9a-f]{40})`/.exec(section)?.[1];
    found.push({ version: heading[1]!, ...(milestone ? { milestone } : {}) });
  }
  return found;
}

function git(root: string, args: string[]): string {
  return execFileSync('git', args, { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
}

function gitOk(root: string, args: string[]): boolean {
  try {
    git(root, args);
    return true;
  } catch {
    return false;
  }
}

/** Where each release comes from: its tag, else its milestone commit; a commit the clone lacks fails with what to do. */
export function resolveReleases(entries: { version: string; milestone?: string }[], root = repoRoot): Release[] {
  if (!gitOk(root, ['rev-parse', '--git-dir'])) {
    throw new ReleaseHistoryError(`${root} is not a git checkout: the upgrade tests build the earlier releases from git history; run them in a clone`);
  }
  const shallow = git(root, ['rev-parse', '--is-shallow-repository']) === 'true';
  return entries.map(({ version, milestone }) => {
    const tag = `v${version}`;
    if (gitOk(root, ['rev-parse', '--verify', '--quiet', `refs/tags/${tag}`])) {
      return { version, commit: git(root, ['rev-parse', `${tag}^{commit}`]), ref: tag };
    }
    if (!milestone) throw new ReleaseHistoryError(`release ${version} has neither a tag ${tag} nor a "Milestone commit" in CHANGELOG.md`);
    if (!gitOk(root, ['cat-file', '-e', `${milestone}^{commit}`])) {
      throw new ReleaseHistoryError(
        `release ${version} is commit ${milestone} (CHANGELOG.md), which this clone does not have` +
          (shallow ? ': the clone is shallow; fetch the history (git fetch --unshallow --tags)' : ': fetch the history and tags (git fetch --tags origin)'),
      );
    }
    return { version, commit: git(root, ['rev-parse', `${milestone}^{commit}`]), ref: milestone };
  });
}

/**
 * The releases the upgrade test starts from: the newest `count` (3) the changelog names, or what
 * GATEWAYD_UPGRADE_RELEASES says: `all`, or versions separated by commas.
 */
export function releasesUnderTest(env: NodeJS.ProcessEnv = process.env, root = repoRoot, count = 3): Release[] {
  const all = changelogReleases(root);
  const wanted = env.GATEWAYD_UPGRADE_RELEASES?.trim();
  const chosen = !wanted ? all.slice(0, count) : wanted === 'all' ? all : all.filter((r) => wanted.split(',').map((v) => v.trim()).includes(r.version));
  if (wanted && wanted !== 'all' && chosen.length !== wanted.split(',').length) {
    throw new ReleaseHistoryError(`GATEWAYD_UPGRADE_RELEASES=${wanted} names a version CHANGELOG.md does not have (it has ${all.map((r) => r.version).join(', ')})`);
  }
  return resolveReleases(chosen, root);
}

function run(command: string, args: string[], cwd: string, log: (line: string) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, npm_config_update_notifier: 'false' } });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    child.once('error', reject);
    child.once('exit', (code) => {
      if (code === 0) return resolve();
      log(output.trim());
      reject(new Error(`${command} ${args.join(' ')} in ${cwd} exited with ${code}`));
    });
  });
}

const builtMarker = '.gatewayd-release.json';

/** The cached build of `release`, if complete. */
export function cachedRelease(release: Release, cacheDir = releasesCacheDir()): BuiltRelease | undefined {
  const dir = join(cacheDir, 'builds', release.commit);
  return existsSync(join(dir, builtMarker)) ? { ...release, dir, main: join(dir, 'dist/src/main.js') } : undefined;
}

/** node_modules for a lockfile (shared by the releases that have it), installed once. */
async function modulesFor(tree: string, cacheDir: string, log: (line: string) => void): Promise<string> {
  const lock = readFileSync(join(tree, 'package-lock.json'));
  const hash = createHash('sha256').update(lock).digest('hex').slice(0, 20);
  const dir = join(cacheDir, 'modules', hash);
  if (existsSync(join(dir, '.installed'))) return join(dir, 'node_modules');
  const work = join(cacheDir, 'modules', `.tmp-${hash}-${process.pid}-${randomBytes(4).toString('hex')}`);
  mkdirSync(work, { recursive: true });
  try {
    for (const f of ['package.json', 'package-lock.json']) copyFileSync(join(tree, f), join(work, f));
    log(`npm ci --ignore-scripts for lockfile ${hash}`);
    await run('npm', ['ci', '--ignore-scripts', '--no-audit', '--no-fund', '--loglevel=error'], work, log);
    writeFileSync(join(work, '.installed'), `${new Date().toISOString()}\n`);
    try {
      renameSync(work, dir);
    } catch {
      // Another run installed it meanwhile: use that one.
      if (!existsSync(join(dir, '.installed'))) throw new Error(`could not move ${work} to ${dir}`);
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  return join(dir, 'node_modules');
}

/** Builds `release` into the cache (or finds it there). */
export async function buildRelease(release: Release, options: { root?: string; cacheDir?: string; log?: (line: string) => void } = {}): Promise<BuiltRelease> {
  const root = options.root ?? repoRoot;
  const cacheDir = options.cacheDir ?? releasesCacheDir();
  const log = options.log ?? (() => undefined);
  const cached = cachedRelease(release, cacheDir);
  if (cached) return cached;
  const final = join(cacheDir, 'builds', release.commit);
  const work = join(cacheDir, 'builds', `.tmp-${release.commit.slice(0, 12)}-${process.pid}-${randomBytes(4).toString('hex')}`);
  mkdirSync(work, { recursive: true });
  try {
    const started = Date.now();
    const tar = join(work, '.tree.tar');
    git(root, ['archive', '--format=tar', '-o', tar, release.commit]);
    execFileSync('tar', ['-xf', tar, '-C', work]);
    rmSync(tar);
    symlinkSync(await modulesFor(work, cacheDir, log), join(work, 'node_modules'));
    log(`building ${release.version} (${release.ref})`);
    await run('npm', ['run', 'build', '--silent'], work, log);
    writeFileSync(join(work, builtMarker), JSON.stringify({ ...release, builtBy: process.version, seconds: Math.round((Date.now() - started) / 1000) }) + '\n');
    try {
      renameSync(work, final);
    } catch {
      if (!cachedRelease(release, cacheDir)) throw new Error(`could not move ${work} to ${final}`);
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  return cachedRelease(release, cacheDir)!;
}
