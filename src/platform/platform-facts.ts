// Reads the facts platform-requirements.ts judges: the Node version, the CPU, the running glibc
// and which native binaries this install carries, found on disk as their loader
// (node-gyp-build-optional-packages) would look for them, without loading any of them.
import { existsSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { NativeBinary, PlatformFacts } from './platform-requirements.js';

interface ProcessReport {
  header?: { glibcVersionRuntime?: string };
}

/** The glibc this process runs on (Node's diagnostic report names it), or undefined. */
export function runningGlibc(): string | undefined {
  if (process.platform !== 'linux') return undefined;
  const report = process.report as unknown as { excludeNetwork?: boolean; getReport(): ProcessReport };
  // The report otherwise resolves the host's network interfaces: milliseconds for nothing here.
  const excluded = report.excludeNetwork;
  report.excludeNetwork = true;
  try {
    return report.getReport().header?.glibcVersionRuntime;
  } finally {
    report.excludeNetwork = excluded;
  }
}

/** The directory of package `name` as Node resolves it from `from` (node_modules upwards). */
function findPackage(from: string, name: string): string | undefined {
  for (let dir = from; ; dir = dirname(dir)) {
    const candidate = join(dir, 'node_modules', name);
    if (existsSync(join(candidate, 'package.json'))) return candidate;
    if (dirname(dir) === dir) return undefined;
  }
}

function list(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

/** A .node file in `dir` for this C library (files named for the other one do not count). */
function hasBinaryFor(dir: string, libc: string | undefined): boolean {
  return list(dir).some((f) => f.endsWith('.node') && (!/\.(glibc|musl)\./.test(f) || (libc !== undefined && f.includes(`.${libc}.`))));
}

function libcOf(glibc: string | undefined): string | undefined {
  if (process.platform !== 'linux') return undefined;
  return glibc === undefined ? 'musl' : 'glibc';
}

/** lmdb: a build of its own (build/Release), its prebuilds/ folder, or its @lmdb/lmdb-<platform>-<arch> package. */
export function findLmdbBinary(from: string, platform: string, arch: string, libc: string | undefined): NativeBinary {
  const lmdb = findPackage(from, 'lmdb');
  if (!lmdb) return { found: 'missing', carried: [] };
  if (hasBinaryFor(join(lmdb, 'build/Release'), libc)) return { found: 'source', carried: [] };
  const target = `${platform}-${arch}`;
  if (hasBinaryFor(join(lmdb, 'prebuilds', target), libc)) return { found: 'prebuilt', carried: [target] };
  const carried: string[] = [];
  for (let dir = lmdb; ; dir = dirname(dir)) {
    for (const name of list(join(dir, 'node_modules/@lmdb'))) if (name.startsWith('lmdb-') && !carried.includes(name.slice(5))) carried.push(name.slice(5));
    if (dirname(dir) === dir) break;
  }
  const platformPackage = findPackage(lmdb, `@lmdb/lmdb-${target}`);
  if (platformPackage && hasBinaryFor(platformPackage, libc)) return { found: 'prebuilt', carried };
  return { found: 'missing', carried };
}

/** @serialport/bindings-cpp: prebuilds/<platform>-<arch>/ inside the package, or a build of its own. */
export function findSerialportBinary(from: string, platform: string, arch: string, libc: string | undefined): NativeBinary {
  const bindings = findPackage(from, '@serialport/bindings-cpp');
  if (!bindings) return { found: 'missing', carried: [] };
  if (hasBinaryFor(join(bindings, 'build/Release'), libc)) return { found: 'source', carried: [] };
  const carried = list(join(bindings, 'prebuilds'));
  return { found: hasBinaryFor(join(bindings, 'prebuilds', `${platform}-${arch}`), libc) ? 'prebuilt' : 'missing', carried };
}

/** The facts of this process and of the install it runs from. */
export function readPlatformFacts(): PlatformFacts {
  const here = dirname(fileURLToPath(import.meta.url));
  const glibc = runningGlibc();
  const libc = libcOf(glibc);
  const { platform, arch } = process;
  return {
    node: process.versions.node,
    platform,
    arch,
    glibc,
    lmdb: findLmdbBinary(here, platform, arch, libc),
    serialport: findSerialportBinary(here, platform, arch, libc),
  };
}
