// The quick start on a fresh copy of the checkout (issue 32 point 3): `npm ci` builds (the
// prepare script; npm runs the root package's prepare on npm ci), `npm start` starts without
// building; `npm ci --omit=dev` (a production install) does not try to build, keeps the built
// dist/, and `npm start` still starts.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { expect } from 'chai';
import { daemonTestEnv } from '../test/support/harness.js';
import { copyCheckout, seconds } from './support/platform-kit.js';

/** `npm start` in `cwd` to its ready line; the time it took; then SIGTERM to its process group. */
async function npmStart(cwd: string, dataDir: string): Promise<{ readyAfterMs: number; output: string }> {
  const started = Date.now();
  const child = spawn('npm', ['start'], {
    cwd,
    detached: true,
    env: { ...process.env, ...daemonTestEnv(dataDir) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  const output: string[] = [];
  child.stderr!.on('data', (d) => output.push(String(d)));
  try {
    await new Promise<void>((resolve, reject) => {
      createInterface({ input: child.stdout! }).on('line', (line) => {
        output.push(line);
        if (line.includes('"message":"ready"')) resolve();
      });
      void exited.then((code) => reject(new Error(`npm start exited with ${code}: ${output.join('\n')}`)));
    });
    return { readyAfterMs: Date.now() - started, output: output.join('\n') };
  } finally {
    process.kill(-child.pid!, 'SIGTERM');
    await exited;
  }
}

describe('the quick start on a fresh copy of the checkout', function () {
  this.timeout(600_000);
  let dir: string;
  before(() => (dir = mkdtempSync(join(tmpdir(), 'gatewayd-quick-start-'))));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('npm ci builds and npm start starts without building; npm ci --omit=dev does not build and npm start still starts', async () => {
    const app = join(dir, 'app');
    copyCheckout(app);
    expect(existsSync(join(app, 'dist'))).to.equal(false);

    // node-gyp (snap7, a devDependency) builds with this Node's own headers: CI cannot download them.
    const prefix = dirname(dirname(process.execPath));
    const nodedir = existsSync(join(prefix, 'include/node/node.h')) ? { npm_config_nodedir: prefix } : {};
    const installed = spawnSync('npm', ['ci', '--no-audit', '--no-fund'], { cwd: app, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...nodedir } });
    expect(installed.status, installed.stderr).to.equal(0);
    const ci = installed.stdout;
    expect(ci).to.match(/> gatewayd@[\d.]+ prepare\n> node scripts\/prepare\.mjs/);
    // Every install script is decided in package.json (docs/platforms.md "Install scripts"): npm 11 warns of none.
    expect(installed.stderr).to.not.match(/install scripts not yet covered by allowScripts/);
    const builtAt = statSync(join(app, 'dist/ui-build.json')).mtimeMs;
    expect(existsSync(join(app, 'dist/src/main.js'))).to.equal(true);

    const first = await npmStart(app, join(dir, 'data'));
    expect(first.output).to.not.match(/> tsc|npm run build/);
    expect(statSync(join(app, 'dist/ui-build.json')).mtimeMs, 'npm start did not build').to.equal(builtAt);

    const productionRun = spawnSync('npm', ['ci', '--omit=dev', '--no-audit', '--no-fund'], { cwd: app, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    expect(productionRun.status, productionRun.stderr).to.equal(0);
    expect(productionRun.stderr).to.not.match(/install scripts not yet covered by allowScripts/);
    const production = productionRun.stdout;
    expect(production).to.match(/development dependencies not installed \(a production install\): not building/);
    expect(existsSync(join(app, 'node_modules/typescript'))).to.equal(false);
    expect(statSync(join(app, 'dist/ui-build.json')).mtimeMs).to.equal(builtAt);
    const again = await npmStart(app, join(dir, 'data'));
    console.log(`      npm start to ready: ${seconds(first.readyAfterMs)} s (first start), ${seconds(again.readyAfterMs)} s (production install, restart)`);
  });
});
