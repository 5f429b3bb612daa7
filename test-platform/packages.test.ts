// The Debian packages (issue 32 point 4, docs/platforms.md): `npm run package -- --arch A`
// for amd64, arm64 and armhf; their control data and contents (dpkg-deb), lintian, and every
// native binary they carry: the target's CPU (for armhf: hard-float), and no newer glibc or
// libstdc++ than the floor the daemon's check and the package's Depends state.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { GLIBC_FLOOR } from '../src/platform/index.js';
import { compareDotted, controlFields, debFor, elfFacts, filesEndingIn, root, unpackDeb, version, type DebArch } from './support/platform-kit.js';

/** GCC 11's libstdc++ (the package's Depends: libstdc++6 (>= 11)). */
const GLIBCXX_FLOOR = '3.4.29';
const TARGETS: { arch: DebArch; cpu: string; machine: RegExp; bundlesNode: boolean }[] = [
  { arch: 'amd64', cpu: 'x64', machine: /X86-64/, bundlesNode: true },
  { arch: 'arm64', cpu: 'arm64', machine: /AArch64/, bundlesNode: true },
  { arch: 'armhf', cpu: 'arm', machine: /^ARM$/, bundlesNode: false },
];

function contents(deb: string): Map<string, string> {
  const listing = execFileSync('dpkg-deb', ['-c', deb], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  const entries = new Map<string, string>();
  for (const line of listing.split('\n').filter(Boolean)) {
    const parts = line.split(/\s+/);
    entries.set(parts.slice(5).join(' ').replace(/ -> .*$/, '').replace(/^\.\//, '/').replace(/\/$/, '') || '/', parts[0]!);
  }
  return entries;
}

describe('Debian packages', function () {
  this.timeout(900_000);

  for (const target of TARGETS) {
    describe(`${target.arch}`, () => {
      let deb: string;
      let unpacked: string;
      before(async () => {
        const built = await debFor(target.arch);
        deb = built.file;
        console.log(`      ${built.output} (built in ${built.seconds.toFixed(1)} s in this run)`);
        unpacked = mkdtempSync(join(tmpdir(), `gatewayd-deb-${target.arch}-`));
        unpackDeb(deb, unpacked);
      });
      after(() => rmSync(unpacked, { recursive: true, force: true }));

      it(`npm run package -- --arch ${target.arch} writes dist/gatewayd_<version>_${target.arch}.deb with its control data`, () => {
        expect(deb).to.equal(join(root, 'dist', `gatewayd_${version}_${target.arch}.deb`));
        const control = controlFields(deb);
        expect(control).to.include({ Package: 'gatewayd', Version: version, Architecture: target.arch, Section: 'net', Priority: 'optional' });
        const depends = control.Depends!.split(/,\s*/);
        expect(depends).to.include.members(['adduser', `libc6 (>= ${GLIBC_FLOOR})`, 'libstdc++6 (>= 11)']);
        if (target.bundlesNode) expect(depends.some((d) => d.startsWith('nodejs'))).to.equal(false);
        else expect(depends).to.include('nodejs (>= 22)');
        expect(Number(control['Installed-Size'])).to.be.greaterThan(50_000);
        const info = execFileSync('dpkg-deb', ['-I', deb], { encoding: 'utf8' });
        for (const script of ['postinst', 'prerm', 'postrm']) expect(info).to.match(new RegExp(`\\d+ lines\\s+\\*\\s+${script}\\s+#!/bin/sh`));
        const conffiles = execFileSync('dpkg-deb', ['--ctrl-tarfile', deb], { encoding: 'buffer', maxBuffer: 64 * 1024 * 1024 });
        const tar = spawnSync('tar', ['-xO', './conffiles'], { input: conffiles, encoding: 'utf8' });
        expect(tar.stdout.split('\n').filter(Boolean)).to.deep.equal(['/etc/gatewayd/config.json', '/etc/gatewayd/environment']);
      });

      it('carries the built daemon, its production modules for this CPU only, the unit and /etc/gatewayd', () => {
        const entries = contents(deb);
        for (const path of [
          '/usr/lib/gatewayd/dist/src/main.js',
          '/usr/lib/gatewayd/dist/src/http/openapi.json',
          '/usr/lib/gatewayd/dist/src/maintenance/verify-store-main.js',
          '/usr/lib/gatewayd/dist/ui/index.html',
          '/usr/lib/gatewayd/config/default.json',
          '/usr/lib/gatewayd/package.json',
          '/usr/lib/gatewayd/node_modules/lmdb/package.json',
          `/usr/lib/gatewayd/node_modules/@lmdb/lmdb-linux-${target.cpu}/package.json`,
          `/usr/lib/gatewayd/node_modules/@serialport/bindings-cpp/prebuilds/linux-${target.cpu}`,
          '/lib/systemd/system/gatewayd.service',
          '/etc/gatewayd/config.json',
          '/etc/gatewayd/environment',
          '/etc/gatewayd/services',
          '/usr/share/doc/gatewayd/copyright',
          '/usr/share/doc/gatewayd/changelog.gz',
          '/usr/share/doc/gatewayd/CHANGELOG.md',
          '/usr/share/lintian/overrides/gatewayd',
        ]) {
          expect(entries.has(path), path).to.equal(true);
        }
        expect(entries.get('/usr/lib/gatewayd/node/bin/node'), 'the bundled Node').to.equal(target.bundlesNode ? '-rwxr-xr-x' : undefined);
        const paths = [...entries.keys()];
        // No development dependencies, sources, tests, source maps, or other CPUs' and musl binaries.
        for (const absent of [/\/node_modules\/(mocha|typescript|esbuild|chai|sinon)\//, /^\/usr\/lib\/gatewayd\/(src|test|scripts|ui|dist\/test|dist\/scripts)\//, /\.map$/, /\.d\.ts$/, /\.musl\.node$/]) {
          expect(paths.filter((p) => absent.test(p)).slice(0, 3), String(absent)).to.deep.equal([]);
        }
        const otherCpus = ['x64', 'arm64', 'arm'].filter((c) => c !== target.cpu);
        expect(paths.filter((p) => otherCpus.some((c) => p.includes(`-linux-${c}/`) || p.includes(`/prebuilds/linux-${c}/`)))).to.deep.equal([]);
        // Everything in the FHS places Debian packages use: nothing in /opt or /usr/local.
        expect(paths.filter((p) => !/^\/($|etc\/gatewayd|lib\/systemd\/system|usr\/lib\/gatewayd|usr\/share\/(doc|lintian)|(etc|lib|usr|usr\/lib|usr\/share|lib\/systemd)$)/.test(p))).to.deep.equal([]);
      });

      it("the unit is the repository's, with the package's paths and its Node", () => {
        const unit = readFileSync(join(unpacked, 'lib/systemd/system/gatewayd.service'), 'utf8');
        const node = target.bundlesNode ? '/usr/lib/gatewayd/node/bin/node' : '/usr/bin/node';
        expect(unit).to.match(new RegExp(`^ExecStart=${node} /usr/lib/gatewayd/dist/src/main\\.js$`, 'm'));
        expect(unit).to.match(/^WorkingDirectory=\/usr\/lib\/gatewayd$/m);
        const settingLines = unit.split('\n').filter((l) => !l.startsWith('#'));
        expect(settingLines.filter((l) => /\/opt\/|@NODE@/.test(l))).to.deep.equal([]);
        const repository = readFileSync(join(root, 'systemd/gatewayd.service'), 'utf8');
        const settings = (text: string) => text.split('\n').filter((l) => /^[A-Z]\w+=/.test(l) && !/^(ExecStart|WorkingDirectory|Documentation)=/.test(l));
        expect(settings(unit)).to.deep.equal(settings(repository));
      });

      it(`every native binary is ${target.arch}'s and asks for glibc ${GLIBC_FLOOR} and GLIBCXX ${GLIBCXX_FLOOR} at most (readelf)`, () => {
        const lib = join(unpacked, 'usr/lib/gatewayd');
        const binaries = filesEndingIn(join(lib, 'node_modules'), '.node');
        if (target.bundlesNode) binaries.push(join(lib, 'node/bin/node'));
        // lmdb (its Node-API and per-ABI builds), msgpackr-extract, serialport.
        expect(binaries.filter((b) => b.includes('/@lmdb/')).length).to.be.at.least(1);
        expect(binaries.filter((b) => b.includes('/@serialport/bindings-cpp/')).length).to.be.at.least(1);
        expect(binaries.filter((b) => b.includes('/@msgpackr-extract/')).length).to.be.at.least(1);
        const newest = { glibc: '0', glibcxx: '0' };
        for (const binary of binaries) {
          const elf = elfFacts(binary);
          const name = binary.slice(lib.length + 1);
          expect(elf.machine, name).to.match(target.machine);
          if (target.arch === 'armhf') expect(elf.flags, name).to.match(/hard-float ABI/);
          if (elf.glibc && compareDotted(elf.glibc, newest.glibc) > 0) newest.glibc = elf.glibc;
          if (elf.glibcxx && compareDotted(elf.glibcxx, newest.glibcxx) > 0) newest.glibcxx = elf.glibcxx;
          expect(compareDotted(elf.glibc ?? '0', GLIBC_FLOOR), `${name} needs GLIBC_${elf.glibc}`).to.be.at.most(0);
          expect(compareDotted(elf.glibcxx ?? '0', GLIBCXX_FLOOR), `${name} needs GLIBCXX_${elf.glibcxx}`).to.be.at.most(0);
        }
        // The floor is LMDB's: stated no lower than what is needed, no higher either.
        expect(newest.glibc).to.equal(GLIBC_FLOOR);
        console.log(`      ${binaries.length} native binaries: newest GLIBC_${newest.glibc}, GLIBCXX_${newest.glibcxx}`);
      });

      it('lintian: no errors and no warnings (the overrides shipped with the package say why each tag is accepted)', () => {
        const started = Date.now();
        const run = spawnSync('lintian', ['--fail-on', 'error,warning', '--tag-display-limit', '0', deb], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
        const tags = run.stdout.split('\n').filter((l) => /^[EW]: /.test(l));
        expect(tags).to.deep.equal([]);
        expect(run.status, run.stderr).to.equal(0);
        console.log(`      lintian: clean in ${((Date.now() - started) / 1000).toFixed(1)} s`);
      });
    });
  }

  it('refuses an unknown architecture with its usage', () => {
    const run = spawnSync(process.execPath, [join(root, 'dist/scripts/package-deb.js'), '--arch', 'riscv64'], { encoding: 'utf8' });
    expect(run.status).to.equal(1);
    expect(run.stderr).to.equal('package: unknown --arch riscv64: one of amd64, arm64, armhf\n');
    expect(() => statSync(join(root, 'dist', `gatewayd_${version}_riscv64.deb`))).to.throw(/ENOENT/);
  });
});
