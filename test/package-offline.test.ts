// The package build's offline mode, the light part (issue 38 point 10; the whole build offline,
// in a network namespace, is test-platform/package-offline.test.ts): `--offline` keeps every npm
// command on npm's cache and says what to do when the cache lacks something, and a production
// install that lacks the target CPU's native binaries (npm skips an optional package it cannot
// fetch, silently) is refused instead of becoming a package without a store.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { checkTargetBinaries } from '../scripts/package-deb-tree.js';

const root = fileURLToPath(new URL('../..', import.meta.url));

describe('building the package offline (light)', function () {
  this.timeout(60_000);

  it("finds this install's x64 binaries, and names the ones an install lacks for another CPU", () => {
    expect(() => checkTargetBinaries(root, 'x64')).to.not.throw();
    // npm ci on this x64 machine fetched no 32-bit ARM optional packages (serialport carries every CPU's prebuilds in one).
    expect(() => checkTargetBinaries(root, 'arm')).to.throw('the production install lacks the linux-arm binaries of LMDB (@lmdb/lmdb-linux-arm), msgpackr-extract (@msgpackr-extract/msgpackr-extract-linux-arm)');
  });

  it('--offline with an empty npm cache stops at the first npm command, naming what is missing and the remedy', () => {
    const cache = mkdtempSync(join(tmpdir(), 'gatewayd-empty-npm-cache-'));
    try {
      const run = spawnSync(process.execPath, [join(root, 'dist/scripts/package-deb.js'), '--arch', 'armhf', '--offline', '--out', join(cache, 'never.deb'), '--cache-dir', join(cache, 'node')], {
        cwd: root,
        encoding: 'utf8',
        env: { ...process.env, npm_config_cache: cache, npm_config_update_notifier: 'false' },
      });
      expect(run.status, run.stderr).to.equal(1);
      expect(run.stderr).to.include(`package: the armhf modules: npm's cache (${cache}) lacks what it needs offline. Fill it first where the registry is reachable`);
      expect(run.stderr).to.include('docs/platforms.md "Building the package offline"');
    } finally {
      rmSync(cache, { recursive: true, force: true });
    }
  });
});
