// The platform check of the entry (issue 32 point 2, docs/platforms.md): a Node, glibc or CPU
// gatewayd cannot run on is refused in one line naming what is missing and the remedy, exit 78,
// before any native module is loaded. The verdicts on given facts; the lookup of the native
// binaries in this install and in built-from-source layouts; the real entry on a glibc that
// Node's report names differently (test/support/fake-platform-report.ts). Real old Nodes and a
// foreign-CPU install are started by the platform suite (test-platform/).
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { findLmdbBinary, findSerialportBinary, GLIBC_FLOOR, judgePlatform, nodeCommand, PLATFORM_EXIT_CODE, type PlatformFacts } from '../src/platform/index.js';
import { ADMIN_PASSWORD, mainScript, startDaemonProcess, tempDir } from './support/harness.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const preload = fileURLToPath(new URL('./support/fake-platform-report.js', import.meta.url));

const supported: PlatformFacts = {
  node: '22.23.3',
  platform: 'linux',
  arch: 'x64',
  glibc: '2.36',
  lmdb: { found: 'prebuilt', carried: ['linux-x64'] },
  serialport: { found: 'prebuilt', carried: ['linux-x64'] },
};

describe('platform check: the verdict', () => {
  it('starts silently on Node 22 and 24 with glibc at or above the floor', () => {
    for (const node of ['22.23.3', '24.22.0']) expect(judgePlatform({ ...supported, node })).to.deep.equal({ warnings: [] });
    expect(judgePlatform({ ...supported, glibc: GLIBC_FLOOR })).to.deep.equal({ warnings: [] });
  });

  it('refuses a Node below 20.19 (no crypto.hash), naming it and the remedy', () => {
    for (const node of ['18.20.4', '20.11.0', '20.18.3']) {
      const { refusal } = judgePlatform({ ...supported, node });
      expect(refusal).to.match(new RegExp(`^Node\\.js ${node.replaceAll('.', '\\.')} is too old for gatewayd, which needs Node\\.js 22 or 24 \\(at least 20\\.19\\): install Node\\.js 22 LTS`));
    }
  });

  it('starts on Node 20.19+ with one warning that it is past its end of life and untested; other lines are untested', () => {
    expect(judgePlatform({ ...supported, node: '20.19.0' })).to.deep.equal({
      warnings: ['Node.js 20 reached its end of life on 2026-04-30 and gatewayd is not tested on it: move to Node.js 22 or 24'],
    });
    expect(judgePlatform({ ...supported, node: '26.1.0' })).to.deep.equal({ warnings: ['gatewayd is tested on Node.js 22 or 24, not on 26.1.0'] });
  });

  it('refuses a glibc below the floor of the prebuilt binaries, naming both, the systems that have it and the way out', () => {
    const { refusal } = judgePlatform({ ...supported, glibc: '2.31' });
    expect(refusal).to.equal(
      "this system has glibc 2.31, and gatewayd's prebuilt native binaries (LMDB) need glibc 2.34 or later (Debian 12+, Ubuntu 22.04+, Yocto Kirkstone+): upgrade the system or run the gatewayd Docker image; see docs/platforms.md",
    );
    // LMDB built on the machine itself is linked against the glibc it has.
    expect(judgePlatform({ ...supported, glibc: '2.31', lmdb: { found: 'source', carried: [] } }).refusal).to.equal(undefined);
    // Another C library (musl): the prebuilt musl binaries may work; it is not tested.
    expect(judgePlatform({ ...supported, glibc: undefined }).warnings[0]).to.match(/not glibc: gatewayd is tested on glibc 2\.34 or later only/);
  });

  it('refuses an install made for another CPU, naming what it carries and the package for this one', () => {
    const { refusal } = judgePlatform({ ...supported, lmdb: { found: 'missing', carried: ['linux-arm64'] } });
    expect(refusal).to.equal(
      'this gatewayd install carries LMDB binaries (the store) for linux-arm64, not for this linux-x64 machine: run npm ci on this machine or install the gatewayd package for amd64; see docs/platforms.md',
    );
    expect(judgePlatform({ ...supported, arch: 'riscv64', lmdb: { found: 'missing', carried: ['linux-x64'] } }).refusal).to.equal(
      'gatewayd ships no LMDB binaries (the store) for linux-riscv64: it runs on amd64, arm64 and armhf; see docs/platforms.md',
    );
  });

  it('warns, and starts, when the serial-port binding for this CPU is missing (Modbus only)', () => {
    const verdict = judgePlatform({ ...supported, arch: 'arm', lmdb: { found: 'prebuilt', carried: ['linux-arm'] }, serialport: { found: 'missing', carried: ['linux-x64'] } });
    expect(verdict.refusal).to.equal(undefined);
    expect(verdict.warnings).to.deep.equal([
      'Modbus connections will not work: this gatewayd install carries serial-port binaries (modbus-serial) for linux-x64, not for this linux-arm machine: run npm ci on this machine or install the gatewayd package for armhf; see docs/platforms.md',
    ]);
  });
});

describe('platform check: the native binaries of an install', () => {
  let dir: string;
  beforeEach(() => (dir = tempDir('gatewayd-platform-')));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("finds this install's LMDB and serial-port binaries for this machine, and none for another CPU", () => {
    const from = join(root, 'dist/src/platform');
    expect(findLmdbBinary(from, 'linux', process.arch, 'glibc')).to.deep.include({ found: 'prebuilt' });
    expect(findLmdbBinary(from, 'linux', process.arch, 'glibc').carried).to.include(`linux-${process.arch}`);
    const other = process.arch === 'arm64' ? 'x64' : 'arm64';
    // npm ci on this machine fetched the platform package of this CPU only.
    expect(findLmdbBinary(from, 'linux', other, 'glibc')).to.deep.equal({ found: 'missing', carried: [`linux-${process.arch}`] });
    expect(findSerialportBinary(from, 'linux', process.arch, 'glibc').found).to.equal('prebuilt');
    expect(findSerialportBinary(from, 'linux', 'riscv64', 'glibc').found).to.equal('missing');
  });

  it('takes an LMDB built on the machine (build/Release) before any prebuilt one, and a binary for the other C library as none', () => {
    const lmdb = join(dir, 'node_modules/lmdb');
    mkdirSync(join(lmdb, 'build/Release'), { recursive: true });
    writeFileSync(join(lmdb, 'package.json'), '{"name":"lmdb"}');
    mkdirSync(join(dir, 'node_modules/@lmdb/lmdb-linux-x64'), { recursive: true });
    writeFileSync(join(dir, 'node_modules/@lmdb/lmdb-linux-x64/package.json'), '{}');
    writeFileSync(join(dir, 'node_modules/@lmdb/lmdb-linux-x64/node.napi.musl.node'), '');
    const from = join(dir, 'app/dist');
    expect(findLmdbBinary(from, 'linux', 'x64', 'glibc')).to.deep.equal({ found: 'missing', carried: ['linux-x64'] });
    expect(findLmdbBinary(from, 'linux', 'x64', 'musl').found).to.equal('prebuilt');
    writeFileSync(join(lmdb, 'build/Release/lmdb.node'), '');
    expect(findLmdbBinary(from, 'linux', 'x64', 'glibc')).to.deep.equal({ found: 'source', carried: [] });
  });

  it('starts Node children directly, or through the launcher GATEWAYD_NODE_LAUNCHER names (an emulator)', () => {
    expect(nodeCommand({})).to.deep.equal({ command: process.execPath, prefix: [] });
    expect(nodeCommand({ GATEWAYD_NODE_LAUNCHER: 'qemu-aarch64-static -L /sysroot' })).to.deep.equal({ command: 'qemu-aarch64-static', prefix: ['-L', '/sysroot', process.execPath] });
    expect(nodeCommand({ GATEWAYD_NODE_LAUNCHER: '["/opt/qemu dir/qemu", "-L", "/a b"]' })).to.deep.equal({ command: '/opt/qemu dir/qemu', prefix: ['-L', '/a b', process.execPath] });
  });
});

describe('platform check: the daemon entry', function () {
  this.timeout(60_000);
  let dir: string;
  beforeEach(() => (dir = tempDir('gatewayd-platform-')));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  /** The entry with the report's glibc replaced; resolves when it exits. */
  function runEntry(glibc: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
    const child = spawn(process.execPath, [mainScript], {
      env: { PATH: process.env.PATH ?? '', NODE_OPTIONS: `--import=${preload}`, FAKE_GLIBC_VERSION: glibc, DLOPEN_LOG: join(dir, 'dlopen.log'), GATEWAYD_DATA_DIR: join(dir, 'data') },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
  }

  it('stops on glibc 2.31 with one line and exit 78, before loading any native module or touching the data directory', async () => {
    const { code, stdout, stderr } = await runEntry('2.31');
    expect(code).to.equal(PLATFORM_EXIT_CODE);
    expect(stdout).to.equal('');
    const lines = stderr.split('\n').filter((l) => l && !/end of life|not tested on/.test(l));
    expect(lines).to.deep.equal([
      "gatewayd: this system has glibc 2.31, and gatewayd's prebuilt native binaries (LMDB) need glibc 2.34 or later (Debian 12+, Ubuntu 22.04+, Yocto Kirkstone+): upgrade the system or run the gatewayd Docker image; see docs/platforms.md",
    ]);
    expect(existsSync(join(dir, 'dlopen.log')), 'no native module was loaded').to.equal(false);
    expect(existsSync(join(dir, 'data'))).to.equal(false);
  });

  it('starts on glibc 2.34 (the floor), loading LMDB then: the log above would have seen it', async () => {
    const daemon = await startDaemonProcess(join(dir, 'data'), { NODE_OPTIONS: `--import=${preload}`, FAKE_GLIBC_VERSION: GLIBC_FLOOR, DLOPEN_LOG: join(dir, 'dlopen.log'), GATEWAYD_ADMIN_PASSWORD: ADMIN_PASSWORD });
    try {
      const res = await fetch(`http://127.0.0.1:${daemon.ready.http as number}/health`);
      expect(res.status).to.equal(200);
      expect(readFileSync(join(dir, 'dlopen.log'), 'utf8')).to.match(/@lmdb\/lmdb-linux-[a-z0-9]+\/node\.[a-z0-9]+\.glibc\.node/);
    } finally {
      daemon.child.kill('SIGTERM');
      await daemon.exited;
    }
  });
});
