// The shipped systemd unit (issue 13 point 4): the OPC UA server starts under the unit's
// address-family restriction. node-opcua lists network interfaces through a netlink socket, so a
// unit without AF_NETLINK stops it from ever starting ("uv_interface_addresses returned Unknown
// system error 97"). Where systemd is absent the restriction is applied by a seccomp filter
// (test/support/restrict-address-families.py) with the families read from the unit file.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { ADMIN_PASSWORD, startDaemonProcess, tempDir } from './support/harness.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const unitFile = join(root, 'systemd/gatewayd.service');
const launcher = join(root, 'test/support/restrict-address-families.py');
const PYTHON = '/usr/bin/python3';

function unitSetting(name: string): string[] {
  const lines = readFileSync(unitFile, 'utf8').split('\n').filter((l) => l.startsWith(`${name}=`));
  return lines.map((l) => l.slice(name.length + 1).trim());
}

const SERVICE = `resources:
  srv:
    type: Server::Opcua
    properties:
      options: {port: 0, securityModes: [None]}
`;

/** Starts the daemon under the families given; resolves with the OPC UA server's state and whether listing interfaces was refused. */
async function opcuaServerUnder(families: string): Promise<{ state?: string; refusedListing: boolean; lines: string[] }> {
  const dataDir = tempDir('gatewayd-unit-');
  const services = join(dataDir, 'services');
  mkdirSync(services, { recursive: true });
  writeFileSync(join(services, 'opc.yaml'), SERVICE);
  const daemon = await startDaemonProcess(dataDir, { GATEWAYD_SET__MAPPING__SERVICESDIR: services }, { launcher: [PYTHON, launcher, families] });
  const text = () => daemon.lines.map((l) => JSON.stringify(l)).join('\n');
  try {
    const base = `http://127.0.0.1:${daemon.ready.http as number}`;
    const login = await fetch(`${base}/api/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: 'admin', password: ADMIN_PASSWORD }) });
    const token = ((await login.json()) as { token: string }).token;
    // Bounded wait: the server enabled, or the interface listing refused (logged, retried).
    const refusedListing = () => /uv_interface_addresses|EAFNOSUPPORT|error 97/.test(text());
    let state: string | undefined;
    for (let i = 0; i < 100; i++) {
      const srv = (await (await fetch(`${base}/api/servers/opc.srv`, { headers: { authorization: `Bearer ${token}` } })).json()) as { currentState?: string };
      state = srv.currentState;
      if (state === 'enabled' || refusedListing()) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    return { state, refusedListing: refusedListing(), lines: text().split('\n') };
  } finally {
    daemon.child.kill('SIGTERM');
    await daemon.exited;
    rmSync(dataDir, { recursive: true, force: true });
  }
}

describe("systemd unit", function () {
  this.timeout(90_000);

  it('restricts address families to what gatewayd needs, AF_NETLINK included', () => {
    const [families] = unitSetting('RestrictAddressFamilies');
    expect(families!.split(/\s+/)).to.have.members(['AF_INET', 'AF_INET6', 'AF_UNIX', 'AF_NETLINK']);
    expect(unitSetting('SystemCallFilter')).to.include('@system-service');
    expect(unitSetting('ProtectProc')).to.deep.equal(['invisible']);
    const [exec] = unitSetting('ExecStart');
    expect(exec, 'the node path is filled in at install').to.match(/^@NODE@ /);
    // No young-generation flags: they cost the broker CPU under load (issue 20); the daemon returns
    // its idle memory itself (src/idle-memory.ts). The unit's flags are npm start's (Docker image test).
    expect(exec).to.not.match(/--max-semi-space-size|--optimize-for-size/);
    expect(unitSetting('Environment').join(' ')).to.include('GATEWAYD_SET__MAPPING__SERVICESDIR=/etc/gatewayd/services');
  });

  it("runs the OPC UA server under the unit's address families, and would not without AF_NETLINK", async function () {
    try {
      execFileSync(PYTHON, ['-c', 'import seccomp']);
    } catch {
      // .ci/run installs python3-seccomp; a developer machine without it cannot apply the filter.
      this.skip();
    }
    expect(existsSync(launcher)).to.equal(true);
    const [families] = unitSetting('RestrictAddressFamilies');
    const underUnit = await opcuaServerUnder(families!);
    expect(underUnit.state, underUnit.lines.slice(-5).join('\n')).to.equal('enabled');
    expect(underUnit.refusedListing).to.equal(false);
    const withoutNetlink = await opcuaServerUnder(families!.split(/\s+/).filter((f) => f !== 'AF_NETLINK').join(' '));
    // The negative control: the filter really bites, or this test proves nothing.
    expect(withoutNetlink.refusedListing, withoutNetlink.lines.slice(-5).join('\n')).to.equal(true);
    expect(withoutNetlink.state).to.not.equal('enabled');
  });
});

describe('Docker image', () => {
  const dockerfile = readFileSync(join(root, 'Dockerfile'), 'utf8');
  const instructions = (name: string) => dockerfile.split('\n').filter((l) => l.startsWith(`${name} `)).map((l) => l.slice(name.length + 1));
  const startFlags = () => {
    const start = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts: { start: string } }).scripts.start.split(/\s+/);
    return start.slice(start.indexOf('node') + 1, start.findIndex((w) => w.endsWith('main.js'))).filter((f) => f !== '--enable-source-maps');
  };

  it('builds and runs on Node 24 LTS with tini, a readiness HEALTHCHECK and volumes for data and services', () => {
    for (const from of instructions('FROM')) expect(from).to.match(/^node:24-/);
    expect(instructions('ENTRYPOINT')).to.deep.equal(['["/usr/bin/tini", "--"]']);
    expect(dockerfile).to.match(/HEALTHCHECK [^\n]*\\\n\s+CMD [^\n]*\/health\/ready/);
    expect(instructions('VOLUME')[0]).to.include('/var/lib/gatewayd').and.include('/etc/gatewayd/services');
    expect(instructions('USER')).to.deep.equal(['gatewayd']);
    const cmd = JSON.parse(instructions('CMD').at(-1)!) as string[];
    expect(cmd.slice(1, -1), 'the Node flags of npm start').to.deep.equal(startFlags());
    expect(unitSetting('ExecStart')[0]!.split(/\s+/).slice(1, -1)).to.deep.equal(startFlags());
  });

  it("exposes the default ports of config/default.json, HTTPS among them", () => {
    const defaults = JSON.parse(readFileSync(join(root, 'config/default.json'), 'utf8')) as { http: { port: number; tlsPort: number }; mqtt: { port: number; tlsPort: number } };
    const exposed = instructions('EXPOSE').flatMap((l) => l.trim().split(/\s+/));
    expect(exposed).to.have.members([defaults.http.tlsPort, defaults.http.port, defaults.mqtt.port, defaults.mqtt.tlsPort].map(String));
    expect(exposed[0], 'HTTPS first: the port to publish').to.equal('8443');
    // The run line of the header publishes HTTPS, not the plain port.
    expect(dockerfile).to.match(/^# Run: +docker run -p 8443:8443 /m);
  });

  it("carries the README and the docs pages its links point to, not the screenshots", () => {
    const copies = instructions('COPY');
    // From the build context: the build stage copies no README, so a COPY --from=build of it cannot work.
    expect(copies).to.include('README.md CHANGELOG.md ./');
    expect(copies).to.include('docs/*.md ./docs/');
    expect(readFileSync(join(root, '.dockerignore'), 'utf8').split('\n').map((l) => l.trim())).to.include('docs/screenshots');
  });

  it('keeps data/ (keys, the admin password), .git and build output out of the build context', () => {
    const ignored = readFileSync(join(root, '.dockerignore'), 'utf8').split('\n').map((l) => l.trim());
    expect(ignored).to.include.members(['data', '.git', 'node_modules', 'dist']);
    expect(dockerfile).to.not.match(/COPY\s+(\.\s|data)/);
  });
});
