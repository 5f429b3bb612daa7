// The amd64 package installed for real (issue 32 point 4): dpkg -i on this machine (CI: root on
// a fresh Debian 12 without a running systemd), the unit's ExecStart run as the unit would run
// it (its user, working directory, environment, environment file and umask, read from the
// installed unit file), an HTTPS login trusting the gateway CA, then dpkg -r and dpkg -P: what
// remains after each is what Debian policy and docs/platforms.md say.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, lstatSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import { expect } from 'chai';
import { fetchTrusting } from '../test/support/https-fetch.js';
import { dpkg, mode, owner, packageStatus, purgeIfInstalled, startInstalledUnit, UNIT, unitExecution } from './support/installed-package.js';
import { debFor, stopDaemon, type RunningDaemon } from './support/platform-kit.js';

const ADMIN_PASSWORD = 'Installed-Passw0rd!';

/** Every path named *gatewayd* where a package could leave one. */
function gatewaydPaths(): string[] {
  const found = spawnSync('find', ['/etc', '/usr', '/var', '/lib', '/opt', '/srv', '-xdev', '-name', '*gatewayd*'], { encoding: 'utf8' });
  return found.stdout.split('\n').filter(Boolean).sort();
}

describe('the amd64 package installed with dpkg', function () {
  this.timeout(900_000);
  let pathsBefore: string[];
  let daemon: RunningDaemon | undefined;

  before(async function () {
    if (process.getuid?.() !== 0 || process.arch !== 'x64') this.skip();
    purgeIfInstalled();
    pathsBefore = gatewaydPaths();
    await debFor('amd64');
  });

  after(async () => {
    if (daemon && daemon.child.exitCode === null) daemon.child.kill('SIGKILL');
    if (process.getuid?.() === 0 && packageStatus().includes('installed')) dpkg('-P', 'gatewayd');
  });

  it('dpkg -i, the unit run as its user, an HTTPS login with the gateway CA; dpkg -i again keeps everything; dpkg -r keeps configuration and data; dpkg -P removes them', async () => {
    const { file } = await debFor('amd64');

    // ---- dpkg -i
    const install = dpkg('-i', file);
    expect(install.status, install.output).to.equal(0);
    expect(packageStatus()).to.equal('install ok installed');
    const user = execFileSync('getent', ['passwd', 'gatewayd'], { encoding: 'utf8' }).trim().split(':');
    expect(Number(user[2]), 'a system user').to.be.below(1000);
    expect(user[5]).to.equal('/var/lib/gatewayd');
    expect(user[6]).to.equal('/usr/sbin/nologin');
    expect([mode('/var/lib/gatewayd'), owner('/var/lib/gatewayd')]).to.deep.equal(['0700', 'gatewayd:gatewayd']);
    for (const conffile of ['/etc/gatewayd/config.json', '/etc/gatewayd/environment']) expect([mode(conffile), owner(conffile)], conffile).to.deep.equal(['0640', 'root:gatewayd']);
    expect([mode('/etc/gatewayd/services'), owner('/etc/gatewayd/services')]).to.deep.equal(['0750', 'gatewayd:gatewayd']);
    // Enabled without a running systemd (deb-systemd-helper), not started.
    expect(readlinkSync('/etc/systemd/system/multi-user.target.wants/gatewayd.service')).to.equal(UNIT);
    expect(install.output).to.include('/var/lib/gatewayd/initial-admin-password');

    // ---- the operator's settings, where the environment file says they go
    writeFileSync(
      '/etc/gatewayd/environment',
      `${readFileSync('/etc/gatewayd/environment', 'utf8')}GATEWAYD_ADMIN_PASSWORD=${ADMIN_PASSWORD}\nGATEWAYD_HOST=127.0.0.1\nGATEWAYD_HTTP_PORT=0\nGATEWAYD_HTTPS_PORT=0\nGATEWAYD_MQTT_PORT=0\nGATEWAYD_MQTTS_PORT=0\n`,
    );
    writeFileSync('/etc/gatewayd/config.json', '{"log": {"requests": false}}\n');

    // ---- ExecStart as the unit runs it
    const unit = unitExecution(readFileSync(UNIT, 'utf8'));
    expect(unit.argv).to.deep.equal(['/usr/lib/gatewayd/node/bin/node', '/usr/lib/gatewayd/dist/src/main.js']);
    expect([unit.user, unit.group, unit.cwd, unit.umask]).to.deep.equal(['gatewayd', 'gatewayd', '/usr/lib/gatewayd', '0077']);
    expect(unit.env).to.include({ GATEWAYD_DATA_DIR: '/var/lib/gatewayd', GATEWAYD_CONFIG: '/etc/gatewayd/config.json', GATEWAYD_ADMIN_PASSWORD: ADMIN_PASSWORD });
    daemon = await startInstalledUnit();
    expect(daemon.stderr(), 'no platform warning on the bundled Node').to.equal('');
    const httpsFetch = fetchTrusting('/var/lib/gatewayd/pki/ca.cert.pem');
    const login = await httpsFetch(`https://127.0.0.1:${daemon.ready.https as number}/api/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: 'admin', password: ADMIN_PASSWORD }),
    });
    expect(login.status).to.equal(200);
    const { token } = (await login.json()) as { token: string };
    const me = await httpsFetch(`https://127.0.0.1:${daemon.ready.https as number}/api/users/usernames`, { headers: { authorization: `Bearer ${token}` } });
    expect(me.status).to.equal(200);
    // What the daemon made is the service's alone (UMask=0077).
    expect([mode('/var/lib/gatewayd/db'), owner('/var/lib/gatewayd/db')]).to.deep.equal(['0700', 'gatewayd:gatewayd']);
    expect(mode('/var/lib/gatewayd/pki/ca.key.pem')).to.equal('0600');
    expect(await stopDaemon(daemon, 30_000)).to.equal(0);
    writeFileSync('/etc/gatewayd/services/line-1.yaml', 'resources: {}\n');

    // ---- dpkg -i again (an upgrade in place): the changed conffiles, service files and data stay, without a question
    const upgrade = dpkg('-i', file);
    expect(upgrade.status, upgrade.output).to.equal(0);
    expect(packageStatus()).to.equal('install ok installed');
    expect(readFileSync('/etc/gatewayd/environment', 'utf8')).to.include(`GATEWAYD_ADMIN_PASSWORD=${ADMIN_PASSWORD}`);
    expect([mode('/etc/gatewayd/environment'), owner('/etc/gatewayd/environment')]).to.deep.equal(['0640', 'root:gatewayd']);
    expect(existsSync('/etc/gatewayd/services/line-1.yaml')).to.equal(true);
    expect(existsSync('/var/lib/gatewayd/pki/ca.key.pem')).to.equal(true);

    // ---- dpkg -r: the program goes; configuration (changed conffiles, service files) and data stay
    const remove = dpkg('-r', 'gatewayd');
    expect(remove.status, remove.output).to.equal(0);
    expect(packageStatus()).to.equal('deinstall ok config-files');
    for (const gone of ['/usr/lib/gatewayd', UNIT, '/usr/share/doc/gatewayd']) expect(existsSync(gone), gone).to.equal(false);
    expect(readFileSync('/etc/gatewayd/environment', 'utf8')).to.include(`GATEWAYD_ADMIN_PASSWORD=${ADMIN_PASSWORD}`);
    expect(readFileSync('/etc/gatewayd/config.json', 'utf8')).to.include('requests');
    expect(existsSync('/etc/gatewayd/services/line-1.yaml')).to.equal(true);
    expect(existsSync('/var/lib/gatewayd/db/data.mdb')).to.equal(true);
    // Masked while removed, as debhelper does: a later install finds it again (postinst unmasks).
    expect(readlinkSync('/etc/systemd/system/gatewayd.service')).to.equal('/dev/null');

    // ---- dpkg -P: configuration, service files, data and the unit's links go; the system user stays
    const purge = dpkg('-P', 'gatewayd');
    expect(purge.status, purge.output).to.equal(0);
    expect(packageStatus()).to.be.oneOf(['unknown', 'unknown ok not-installed']);
    for (const gone of ['/etc/gatewayd', '/var/lib/gatewayd', '/etc/systemd/system/gatewayd.service', '/etc/systemd/system/multi-user.target.wants/gatewayd.service']) {
      expect(existsSync(gone) || isLink(gone), gone).to.equal(false);
    }
    expect(gatewaydPaths(), 'no file named gatewayd left that was not there before').to.deep.equal(pathsBefore);
    expect(spawnSync('getent', ['passwd', 'gatewayd']).status, 'the system user stays (Debian practice)').to.equal(0);
  });
});

function isLink(path: string): boolean {
  try {
    return lstatSync(path).isSymbolicLink();
  } catch {
    return false;
  }
}
