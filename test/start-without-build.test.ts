// npm ci builds, npm start only starts (issue 32 point 3): the scripts of package.json, the check
// that runs before npm start (scripts/check-build.mjs) on a missing, a fresh and an outdated
// build, the prepare script of a production install, and npm start itself on this checkout.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { daemonTestEnv, tempDir } from './support/harness.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const scripts = (JSON.parse(execFileSync('cat', [join(root, 'package.json')], { encoding: 'utf8' })) as { scripts: Record<string, string> }).scripts;

describe('npm ci builds, npm start starts', function () {
  this.timeout(60_000);
  let dir: string;
  beforeEach(() => (dir = tempDir('gatewayd-start-')));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  /** A tree with the layout the scripts look at: scripts/, src/, ui/, and dist/ if `built`. */
  function tree(built: boolean): void {
    for (const d of ['scripts', 'src/http', 'ui/src']) mkdirSync(join(dir, d), { recursive: true });
    for (const s of ['check-build.mjs', 'prepare.mjs']) copyFileSync(join(root, 'scripts', s), join(dir, 'scripts', s));
    for (const f of ['src/main.ts', 'src/http/openapi.yaml', 'ui/src/main.tsx', 'tsconfig.json']) writeFileSync(join(dir, f), '');
    const past = new Date(Date.now() - 60_000);
    for (const f of ['src/main.ts', 'src/http/openapi.yaml', 'ui/src/main.tsx', 'tsconfig.json', 'src/http', 'src', 'ui/src', 'ui']) utimesSync(join(dir, f), past, past);
    if (!built) return;
    mkdirSync(join(dir, 'dist/src'), { recursive: true });
    writeFileSync(join(dir, 'dist/src/main.js'), '');
    writeFileSync(join(dir, 'dist/ui-build.json'), '{}');
  }

  const check = () => spawnSync(process.execPath, [join(dir, 'scripts/check-build.mjs')], { encoding: 'utf8' });

  it('package.json: prepare builds, prestart only checks, start runs the built daemon, tests build first', () => {
    expect(scripts.prepare).to.equal('node scripts/prepare.mjs');
    expect(scripts.prestart).to.equal('node scripts/check-build.mjs');
    expect(scripts.start).to.match(/^node [^&|;]*dist\/src\/main\.js$/);
    expect(scripts.pretest).to.equal('npm run build');
  });

  it('before npm start: no dist/ is one line saying what to run, and exit 1', () => {
    tree(false);
    const { status, stderr, stdout } = check();
    expect(status).to.equal(1);
    expect(stdout).to.equal('');
    expect(stderr).to.equal('gatewayd: the daemon is not built (no dist/): run `npm run build` (npm ci builds it too), then npm start\n');
  });

  it('before npm start: a build newer than every source passes silently; a source changed since is named', () => {
    tree(true);
    expect(check()).to.include({ status: 0, stdout: '', stderr: '' });
    writeFileSync(join(dir, 'src/http/openapi.yaml'), 'changed');
    const { status, stderr } = check();
    expect(status).to.equal(1);
    expect(stderr).to.equal('gatewayd: dist/ is older than src/http/openapi.yaml: run `npm run build`, then npm start\n');
    writeFileSync(join(dir, 'ui/src/main.tsx'), 'changed');
    expect(check().stderr).to.match(/older than (src\/http\/openapi\.yaml|ui\/src\/main\.tsx) and 1 more: run `npm run build`/);
  });

  it('prepare: a production install (no compiler) does not build, and succeeds', () => {
    tree(false);
    const { status, stdout } = spawnSync(process.execPath, [join(dir, 'scripts/prepare.mjs')], { encoding: 'utf8' });
    expect(status).to.equal(0);
    expect(stdout).to.match(/development dependencies not installed \(a production install\): not building/);
    expect(() => statSync(join(dir, 'dist'))).to.throw();
  });

  it('npm start on this (built) checkout starts the daemon without building', async () => {
    const stamp = () => statSync(join(root, 'dist/ui-build.json')).mtimeMs;
    const builtAt = stamp();
    const child = spawn('npm', ['start'], {
      cwd: root,
      detached: true,
      env: { ...process.env, ...daemonTestEnv(join(dir, 'data')) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    try {
      const output: string[] = [];
      const ready = await new Promise<Record<string, unknown>>((resolve, reject) => {
        createInterface({ input: child.stdout! }).on('line', (line) => {
          output.push(line);
          if (line.includes('"message":"ready"')) resolve(JSON.parse(line) as Record<string, unknown>);
        });
        createInterface({ input: child.stderr! }).on('line', (line) => output.push(line));
        void exited.then((code) => reject(new Error(`npm start exited with ${code}: ${output.join('\n')}`)));
      });
      expect((await fetch(`http://127.0.0.1:${ready.http as number}/health`)).status).to.equal(200);
      expect(output.join('\n')).to.not.match(/npm run build|tsc -p/);
      expect(stamp(), 'dist/ was not rebuilt').to.equal(builtAt);
    } finally {
      // npm start's process group: npm, its shell and the daemon (unless it ended by itself: then
      // the test's own failure says why, not a kill of no process).
      if (child.exitCode === null && child.signalCode === null) process.kill(-child.pid!, 'SIGTERM');
      await exited;
    }
  });
});
