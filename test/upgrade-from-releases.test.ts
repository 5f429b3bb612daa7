// Upgrades tested from history (issue 39 point 3, docs/testing.md "Upgrades from earlier releases"):
// each earlier release CHANGELOG.md names (the newest three; GATEWAYD_UPGRADE_RELEASES=all for
// every one) is built from git (its tag, else its milestone commit; scripts/releases.ts, cached;
// .ci/run builds them once per CI run before the suites), run as a daemon on a fresh data
// directory and given users, a role, MFA, a token, a persistent session with queued QoS 1
// messages, a retained value, a bridge queueing for a Mosquitto that is down, service files,
// Sparkplug history and audit events (upgrade-support.ts). It is stopped, and this build starts
// on the same directory: it copies and migrates the data format (said in its log), and everything
// is there and works. Then the earlier release, started again on the migrated directory, stops
// without writing to it: releases before 1.0.0 cannot refuse a newer format in one line (this
// build's refusal is test/data-format.test.ts). A clone without the history fails here, it does
// not skip.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { expect } from 'chai';
import { gatewaydVersion } from '../src/maintenance/version.js';
import { DATA_FORMAT_VERSION } from '../src/store/index.js';
import { buildRelease, cachedRelease, changelogReleases, ReleaseHistoryError, releasesUnderTest, repoRoot, resolveReleases, type BuiltRelease, type Release } from '../scripts/releases.js';
import { mainScript, tempDir } from './support/harness.js';
import { startReleaseDaemon, writeReleaseConfig, type ReleaseDaemon } from './support/release-daemon.js';
import { ADMIN_PASSWORD, checkKept, featuresOf, lineService, plant, startPeers, stopPeers, type Peers } from './upgrade-support.js';

const sha256 = (file: string) => createHash('sha256').update(readFileSync(file)).digest('hex');

/** The manifest of a backup archive (its first tar entry). */
function manifestOf(archive: string): Record<string, unknown> {
  const tar = gunzipSync(readFileSync(archive));
  const size = parseInt(tar.subarray(124, 136).toString('utf8').replace(/\0.*$/s, '').trim(), 8);
  return JSON.parse(tar.subarray(512, 512 + size).toString('utf8')) as Record<string, unknown>;
}

let releases: Release[] = [];
let historyProblem: unknown;
try {
  releases = releasesUnderTest();
} catch (err) {
  historyProblem = err;
}

describe('upgrades from the earlier releases, built from git', function () {
  this.timeout(120_000);
  if (historyProblem !== undefined) {
    it('finds the earlier releases in the git history', () => {
      throw historyProblem;
    });
    return;
  }

  const builds = new Map<string, BuiltRelease>();
  before(async function () {
    // Warm when .ci/run (node dist/scripts/build-releases.js) or an earlier run built them.
    if (releases.some((r) => !cachedRelease(r))) this.timeout(30 * 60_000);
    for (const r of releases) builds.set(r.version, await buildRelease(r));
  });

  it('tests at least the newest three', () => {
    expect(releases.length).to.be.at.least(process.env.GATEWAYD_UPGRADE_RELEASES ? 1 : 3);
  });

  for (const release of releases) {
    it(`from ${release.version} (${release.ref.slice(0, 12)}): its data opens in this build, copied and migrated, and everything is there and works`, async () => {
      const built = builds.get(release.version)!;
      const features = featuresOf(built.dir);
      const work = tempDir('gatewayd-upgrade-');
      const dataDir = join(work, 'data');
      const wanted = {
        dataDir,
        host: '127.0.0.1',
        log: { level: 'info', requests: false },
        http: { port: 0, tlsPort: 0 },
        mqtt: { port: 0, tlsPort: 0 },
        auth: { adminPassword: ADMIN_PASSWORD, passwordHashCost: 10 },
      };
      const oldConfig = join(work, 'earlier.json');
      const newConfig = join(work, 'this.json');
      // The earlier releases' default services directory was ./services; this build's is <data>/services.
      writeReleaseConfig(built.main, oldConfig, { ...wanted, mapping: { servicesDir: join(dataDir, 'services') } });
      writeReleaseConfig(mainScript, newConfig, wanted);
      let peers: Peers | undefined;
      let daemon: ReleaseDaemon | undefined;
      try {
        peers = await startPeers();
        mkdirSync(join(dataDir, 'services'), { recursive: true });
        writeFileSync(join(dataDir, 'services', 'line.yaml'), lineService(peers.plc.port));
        daemon = await startReleaseDaemon(built.main, oldConfig, work);
        const planted = await plant(daemon, peers, features);
        planted.stoppedAt = Date.now();
        expect(await daemon.stop(), `${release.version} stops cleanly`).to.equal(0);

        daemon = await startReleaseDaemon(mainScript, newConfig, work);
        const migrated = daemon.lines.find((l) => l.message === 'data format migrated');
        expect(daemon.lines.map((l) => l.message)).to.include('data format upgrade: copying the data as it is first');
        expect(migrated, 'the migration in the log').to.include({ from: 1, to: DATA_FORMAT_VERSION });
        const copy = migrated!.backup as string;
        expect(copy.startsWith(join(dataDir, 'backups', 'before-upgrade', 'format-1_'))).to.equal(true);
        expect(manifestOf(copy)).to.include({ format: 'gatewayd-backup', storeSchemaVersion: 1 });
        expect((await daemon.api('GET', '/health')).body).to.deep.equal({ status: 'ok', version: gatewaydVersion() });
        await checkKept(daemon, peers, features, planted);
        expect(await daemon.stop(), 'this build stops cleanly').to.equal(0);
        daemon = undefined;

        // Back to the earlier release without the copy: it stops at start and writes nothing.
        const storeFile = join(dataDir, 'db', 'data.mdb');
        const before = sha256(storeFile);
        const back = await startReleaseDaemon(built.main, oldConfig, work).then(
          async (d) => `ready (${String(await d.stop())})`,
          (err: unknown) => String(err),
        );
        expect(back).to.match(/exited with 1 before ready: [\s\S]*store schema version 2 is not supported \(this build reads 1\)/);
        expect(sha256(storeFile), 'the migrated store untouched by the earlier release').to.equal(before);
        expect(existsSync(copy), 'the copy to go back to').to.equal(true);
      } finally {
        await daemon?.stop();
        await stopPeers(peers);
        rmSync(work, { recursive: true, force: true });
      }
    });
  }
});

describe('the earlier releases: where they come from', function () {
  this.timeout(60_000);

  it('CHANGELOG.md names every earlier release with its milestone commit, newest first, not this one', () => {
    const named = changelogReleases();
    expect(named.map((r) => r.version)).to.deep.equal(['0.5.0', '0.4.0', '0.3.0', '0.2.0', '0.1.0']);
    for (const r of named) expect(r.milestone, r.version).to.match(/^[0-9a-f]{40}$/);
    expect(named.map((r) => r.version)).to.not.include(gatewaydVersion());
  });

  it('a clone without the history fails with what to do, never skips: shallow, not git, an unknown version', () => {
    const dir = tempDir('gatewayd-shallow-');
    try {
      const shallow = join(dir, 'clone');
      execFileSync('git', ['clone', '--quiet', '--depth', '1', `file://${repoRoot}`, shallow], { stdio: 'ignore' });
      expect(() => resolveReleases(changelogReleases(), shallow)).to.throw(ReleaseHistoryError, /which this clone does not have: the clone is shallow; fetch the history \(git fetch --unshallow --tags\)/);
      const plain = join(dir, 'plain');
      execFileSync('mkdir', ['-p', plain]);
      for (const f of ['CHANGELOG.md', 'package.json']) copyFileSync(join(repoRoot, f), join(plain, f));
      expect(() => resolveReleases(changelogReleases(plain), plain)).to.throw(ReleaseHistoryError, /is not a git checkout/);
      expect(() => releasesUnderTest({ GATEWAYD_UPGRADE_RELEASES: '0.5.0,9.9.9' })).to.throw(ReleaseHistoryError, /names a version CHANGELOG.md does not have/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
