// scripts/install.sh (issue 13 point 4) into a temporary prefix: it builds in a clean copy,
// installs exactly the runtime files, fills in the node path, creates the environment file
// (0640) and the services directory, and leaves the caller's checkout as it was.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { ADMIN_PASSWORD, startDaemonProcess, tempDir } from './support/harness.js';

const root = fileURLToPath(new URL('../..', import.meta.url));

describe('scripts/install.sh', function () {
  this.timeout(300_000);
  let dir: string;
  before(() => {
    dir = tempDir('gatewayd-install-');
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  const checkoutState = () => ({
    // The web UI's test files retake docs/screenshots meanwhile (npm test runs files side by side).
    status: execFileSync('git', ['status', '--porcelain', '--ignored=no', '--', '.', ':(exclude)docs/screenshots'], { cwd: root, encoding: 'utf8' }),
    devDependency: existsSync(join(root, 'node_modules/mocha/package.json')),
    modulesMtime: statSync(join(root, 'node_modules')).mtimeMs,
    testBuild: existsSync(join(root, 'dist/test')),
  });

  it('installs the runtime files only, and touches nothing in the checkout', async () => {
    const before = checkoutState();
    const prefix = join(dir, 'opt/gatewayd');
    const env = { ...process.env, PREFIX: prefix, ETC_DIR: join(dir, 'etc/gatewayd'), UNIT_DIR: join(dir, 'systemd'), SKIP_SYSTEMD: '1', SKIP_USER: '1' };
    execFileSync('bash', [join(root, 'scripts/install.sh')], { env, stdio: 'pipe' });

    expect(readdirSync(prefix).sort()).to.deep.equal(['CHANGELOG.md', 'README.md', 'config', 'dist', 'docs', 'node_modules', 'package-lock.json', 'package.json']);
    // The README's links into docs/ and to the changelog resolve on the installed gateway; no screenshots.
    const pages = [...readFileSync(join(prefix, 'README.md'), 'utf8').matchAll(/\]\(((?:docs\/[^)#]+|CHANGELOG)\.md)/g)].map((m) => m[1]!);
    expect(pages).to.include('CHANGELOG.md');
    for (const page of pages) expect(existsSync(join(prefix, page)), page).to.equal(true);
    expect(readdirSync(join(prefix, 'docs')).every((f) => f.endsWith('.md'))).to.equal(true);
    expect(readdirSync(join(prefix, 'dist')).sort()).to.deep.equal(['src', 'ui']);
    expect(existsSync(join(prefix, 'dist/src/main.js'))).to.equal(true);
    expect(existsSync(join(prefix, 'dist/src/http/openapi.json'))).to.equal(true);
    expect(existsSync(join(prefix, 'dist/ui/index.html'))).to.equal(true);
    expect(existsSync(join(prefix, 'node_modules/lmdb/package.json'))).to.equal(true);
    expect(existsSync(join(prefix, 'node_modules/mocha')), 'no dev dependencies').to.equal(false);
    for (const absent of ['.git', 'data', 'test', 'src', 'scripts', '.ci']) expect(existsSync(join(prefix, absent)), absent).to.equal(false);

    const unit = readFileSync(join(dir, 'systemd/gatewayd.service'), 'utf8');
    expect(unit).to.match(new RegExp(`^ExecStart=${execFileSync('readlink', ['-f', process.execPath], { encoding: 'utf8' }).trim().replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')} `, 'm'));
    expect(unit).to.not.include('@NODE@');
    expect(unit).to.include(`${prefix}/dist/src/main.js`);
    expect(statSync(join(dir, 'etc/gatewayd/environment')).mode & 0o777).to.equal(0o640);
    expect(statSync(join(dir, 'etc/gatewayd/services')).isDirectory()).to.equal(true);

    expect(checkoutState(), 'the checkout is untouched').to.deep.equal(before);

    // What was built for the service (build:runtime, not the tests) is whole: the installed
    // daemon starts from its own files and answers its API and its web UI.
    const daemon = await startDaemonProcess(join(dir, 'data'), {}, { script: join(prefix, 'dist/src/main.js'), cwd: prefix });
    try {
      const base = `http://127.0.0.1:${daemon.ready.http}`;
      const health = await fetch(`${base}/health`);
      expect(health.status).to.equal(200);
      const page = await fetch(`${base}/`);
      expect(page.status).to.equal(200);
      expect(await page.text()).to.include('<div id="app"');
      // The OpenAPI validators are compiled at build time (dist/src/http/openapi-validators.cjs).
      const refused = await fetch(`${base}/api/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"username":"admin"}' });
      expect(refused.status, 'a login without a password').to.equal(400);
      const login = await fetch(`${base}/api/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: 'admin', password: ADMIN_PASSWORD }) });
      expect(login.status).to.equal(200);
    } finally {
      daemon.child.kill('SIGTERM');
      await daemon.exited;
    }
  });

  it('refuses a Node older than engines', () => {
    const fakeBin = join(dir, 'old-node');
    execFileSync('mkdir', ['-p', fakeBin]);
    // A node that says it is 18.0.0 and fails every script: the version check must stop the install.
    writeFileSync(join(fakeBin, 'node'), '#!/bin/sh\necho v18.0.0\nexit 1\n', { mode: 0o755 });
    let message = '';
    try {
      execFileSync('bash', [join(root, 'scripts/install.sh')], { env: { ...process.env, PATH: `${fakeBin}:${process.env.PATH}`, PREFIX: join(dir, 'refused'), SKIP_SYSTEMD: '1', SKIP_USER: '1' }, stdio: 'pipe' });
    } catch (err) {
      message = String((err as { stderr?: Buffer }).stderr);
    }
    expect(message).to.match(/Node\.js >= 20\.19 is required/);
    expect(existsSync(join(dir, 'refused'))).to.equal(false);
  });
});
