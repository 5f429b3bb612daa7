// An upgrade of the installed package (issue 39 point 3, docs/operations.md "Upgrading" and
// "Rolling back"): the package of the newest earlier release (built from git with its own
// `npm run package`, scripts/releases.ts; cached by commit) installed with dpkg -i and given data,
// then this build's package installed over it with dpkg -i: /etc/gatewayd and /var/lib/gatewayd
// are kept, and the first start copies and migrates the data format; then the documented way
// back: the copy unpacked over the migrated store, dpkg -i of the earlier package (a downgrade),
// and the earlier release runs on its data as it was before the upgrade.
import { execFile, execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { buildRelease, releasesCacheDir, releasesUnderTest } from '../scripts/releases.js';
import { dpkg, installedVersion, mode, owner, packageStatus, purgeIfInstalled, startInstalledUnit } from './support/installed-package.js';
import { debFor, stopDaemon, version, type RunningDaemon } from './support/platform-kit.js';

const execFileAsync = promisify(execFile);
const ADMIN_PASSWORD = 'Upgraded-Passw0rd!';
const OPERATOR_PASSWORD = 'Operator-Passw0rd!';
const DATA = '/var/lib/gatewayd';

/** The amd64 package of the newest earlier release, built once per commit into the releases cache. */
async function earlierPackage(): Promise<{ file: string; version: string }> {
  const release = releasesUnderTest()[0]!;
  const built = await buildRelease(release);
  const script = join(built.dir, 'dist/scripts/package-deb.js');
  if (!existsSync(script)) throw new Error(`release ${release.version} has no package script (dist/scripts/package-deb.js)`);
  const dir = join(releasesCacheDir(), 'debs');
  const file = join(dir, `${release.commit}-amd64.deb`);
  if (!existsSync(file)) {
    mkdirSync(dir, { recursive: true });
    const partial = `${file}.${process.pid}.partial`;
    await execFileAsync(process.execPath, [script, '--arch', 'amd64', '--out', partial], { cwd: built.dir, maxBuffer: 16 * 1024 * 1024 });
    renameSync(partial, file);
  }
  return { file, version: release.version };
}

async function api(daemon: RunningDaemon, method: string, path: string, options: { token?: string; body?: unknown; raw?: string } = {}): Promise<{ status: number; body: any }> {
  const headers: Record<string, string> = {};
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  if (options.raw !== undefined) headers['content-type'] = 'application/yaml';
  const res = await fetch(`http://127.0.0.1:${daemon.ready.http as number}${path}`, { method, headers, body: options.raw ?? (options.body === undefined ? undefined : JSON.stringify(options.body)) });
  const text = await res.text();
  return { status: res.status, body: text && (res.headers.get('content-type') ?? '').includes('json') ? JSON.parse(text) : text };
}

const login = (daemon: RunningDaemon, username: string, password: string) => api(daemon, 'POST', '/api/login', { body: { username, password } });
const sha256 = (file: string) => createHash('sha256').update(readFileSync(file)).digest('hex');

describe('the amd64 package upgraded in place from the earlier release, and rolled back', function () {
  this.timeout(1_800_000);
  let daemon: RunningDaemon | undefined;

  before(function () {
    if (process.getuid?.() !== 0 || process.arch !== 'x64') this.skip();
    purgeIfInstalled();
  });

  after(async () => {
    if (daemon && daemon.child.exitCode === null) daemon.child.kill('SIGKILL');
    if (process.getuid?.() === 0 && packageStatus().includes('installed')) dpkg('-P', 'gatewayd');
  });

  it('dpkg -i of this package over the earlier one keeps /etc/gatewayd and /var/lib/gatewayd and migrates at the first start; the copy and a dpkg -i of the earlier package go back', async () => {
    const [earlier, current] = await Promise.all([earlierPackage(), debFor('amd64')]);

    // ---- the earlier release installed and given data
    const first = dpkg('-i', earlier.file);
    expect(first.status, first.output).to.equal(0);
    writeFileSync(
      '/etc/gatewayd/environment',
      `${readFileSync('/etc/gatewayd/environment', 'utf8')}GATEWAYD_ADMIN_PASSWORD=${ADMIN_PASSWORD}\nGATEWAYD_HOST=127.0.0.1\nGATEWAYD_HTTP_PORT=0\nGATEWAYD_HTTPS_PORT=0\nGATEWAYD_MQTT_PORT=0\nGATEWAYD_MQTTS_PORT=0\n`,
    );
    writeFileSync('/etc/gatewayd/config.json', '{"log": {"requests": false}}\n');
    const environment = readFileSync('/etc/gatewayd/environment', 'utf8');
    daemon = await startInstalledUnit();
    const admin = (await login(daemon, 'admin', ADMIN_PASSWORD)).body.token as string;
    expect((await api(daemon, 'POST', '/api/users', { token: admin, body: { username: 'operator', password: OPERATOR_PASSWORD, identityProvider: 'local' } })).status).to.equal(201);
    expect((await api(daemon, 'PUT', '/api/services/line-1', { token: admin, raw: 'description: line 1\nresources: {}\n' })).status).to.be.oneOf([200, 201]);
    expect(await stopDaemon(daemon, 30_000)).to.equal(0);
    daemon = undefined;
    const storeBefore = sha256(`${DATA}/db/data.mdb`);

    // ---- dpkg -i of this build's package over it
    const upgrade = dpkg('-i', current.file);
    expect(upgrade.status, upgrade.output).to.equal(0);
    expect([packageStatus(), installedVersion()]).to.deep.equal(['install ok installed', version]);
    expect(readFileSync('/etc/gatewayd/environment', 'utf8'), 'the environment file kept').to.equal(environment);
    expect(readFileSync('/etc/gatewayd/config.json', 'utf8')).to.include('requests');
    expect(existsSync('/etc/gatewayd/services/line-1.yaml'), 'the service file kept').to.equal(true);
    expect(sha256(`${DATA}/db/data.mdb`), 'dpkg leaves the data as it is').to.equal(storeBefore);
    expect(execFileSync('/usr/lib/gatewayd/node/bin/node', ['/usr/lib/gatewayd/dist/src/main.js', '--version'], { encoding: 'utf8' })).to.match(new RegExp(`^gatewayd ${version.replaceAll('.', '\\.')} \\(data format \\d+\\)\\n$`));

    // ---- the first start of this release: the copy, the migration, everything there
    daemon = await startInstalledUnit();
    const migrated = daemon.lines.find((l) => l.message === 'data format migrated');
    expect(migrated, 'the migration in the journal').to.include({ from: 1 });
    const copy = migrated!.backup as string;
    expect(copy.startsWith(`${DATA}/backups/before-upgrade/format-1_`)).to.equal(true);
    expect([mode(copy), owner(copy)], "the copy is the service's alone").to.deep.equal(['0600', 'gatewayd:gatewayd']);
    expect((await api(daemon, 'GET', '/health')).body).to.deep.equal({ status: 'ok', version });
    expect((await login(daemon, 'operator', OPERATOR_PASSWORD)).status, 'a password of the earlier release').to.equal(200);
    const admin2 = (await login(daemon, 'admin', ADMIN_PASSWORD)).body.token as string;
    expect(((await api(daemon, 'GET', '/api/services', { token: admin2 })).body as { id: string }[]).map((s) => s.id)).to.include('line-1');
    expect((await api(daemon, 'POST', '/api/users', { token: admin2, body: { username: 'newcomer', password: OPERATOR_PASSWORD, identityProvider: 'local' } })).status).to.equal(201);
    expect(await stopDaemon(daemon, 30_000)).to.equal(0);
    daemon = undefined;

    // ---- rolling back as docs/operations.md says: the copy over the store, then the earlier package
    renameSync(`${DATA}/db`, `${DATA}/db.after-upgrade`);
    execFileSync('tar', ['-xzf', copy, '-C', DATA, 'db/data.mdb']);
    execFileSync('chown', ['-R', 'gatewayd:gatewayd', `${DATA}/db`]);
    execFileSync('chmod', ['0700', `${DATA}/db`]);
    execFileSync('chmod', ['0600', `${DATA}/db/data.mdb`]);
    const downgrade = dpkg('-i', earlier.file);
    expect(downgrade.status, downgrade.output).to.equal(0);
    expect(downgrade.output).to.match(/downgrading/i);
    daemon = await startInstalledUnit();
    expect((await login(daemon, 'operator', OPERATOR_PASSWORD)).status, 'the data of before the upgrade').to.equal(200);
    expect((await login(daemon, 'newcomer', OPERATOR_PASSWORD)).status, 'what was written after the upgrade is gone').to.equal(401);
    expect(await stopDaemon(daemon, 30_000)).to.equal(0);
    daemon = undefined;
    expect(readdirSync(`${DATA}/db.after-upgrade`)).to.include('data.mdb');
    rmSync(`${DATA}/db.after-upgrade`, { recursive: true, force: true });
  });
});
