// The package tree's files (scripts/package-deb.ts): other targets' native binaries removed,
// every native binary checked to be the target CPU's, file modes as Debian expects them.
import { chmodSync, closeSync, existsSync, lstatSync, openSync, readdirSync, readSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { findLmdbBinary, findSerialportBinary } from '../src/platform/platform-facts.js';

function* files(dir: string): Generator<string> {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    const stat = lstatSync(path);
    if (stat.isDirectory()) yield* files(path);
    else if (stat.isFile()) yield path;
  }
}

function* directories(dir: string): Generator<string> {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (lstatSync(path).isDirectory()) {
      yield path;
      yield* directories(path);
    }
  }
}

/**
 * Packages that carry every platform's binaries in one (serialport's prebuilds/<platform>-<cpu>)
 * keep the target's only, and musl builds go: the package is for glibc systems. What is left
 * is what the target loads.
 */
export function pruneForeignBinaries(nodeModules: string, cpu: string): void {
  const prebuilds = [...directories(nodeModules)].filter((d) => d.endsWith('/prebuilds'));
  for (const dir of prebuilds) {
    for (const name of readdirSync(dir)) if (name !== `linux-${cpu}`) rmSync(join(dir, name), { recursive: true, force: true });
  }
  for (const file of files(nodeModules)) if (/\.musl\.node$/.test(file)) rmSync(file);
}

/** Files Node never loads: development configuration, TypeScript declarations, source maps, C/C++ sources and build files. */
const DEVELOPMENT_FILE = /^(\.(eslintrc.*|eslintignore|npmignore|gitignore|gitattributes|gitmodules|editorconfig|prettierrc.*|travis\.yml|nycrc.*|jshintrc)|.*\.(d\.ts|d\.mts|d\.cts|map|c|cc|cpp|h|hpp|gyp|gypi|sln|vcxproj(\.filters)?))$/;
const DEVELOPMENT_DIR = /^\.(github|vscode|idea)$/;

/** Removes what a production install carries for its modules' developers only (a third of its size). */
export function pruneDevelopmentFiles(nodeModules: string): void {
  for (const dir of [...directories(nodeModules)]) if (DEVELOPMENT_DIR.test(dir.slice(dir.lastIndexOf('/') + 1))) rmSync(dir, { recursive: true, force: true });
  for (const file of files(nodeModules)) if (DEVELOPMENT_FILE.test(file.slice(file.lastIndexOf('/') + 1))) rmSync(file);
}

/** The e_machine of an ELF file, or undefined for any other file. */
export function elfMachine(path: string): number | undefined {
  const fd = openSync(path, 'r');
  try {
    const header = Buffer.alloc(20);
    if (readSync(fd, header, 0, 20, 0) < 20 || header.readUInt32BE(0) !== 0x7f454c46) return undefined;
    return header[5] === 2 ? header.readUInt16BE(18) : header.readUInt16LE(18);
  } finally {
    closeSync(fd);
  }
}

/** Every ELF file under `dir` is for the target machine; throws naming those that are not. */
export function checkElfMachines(dir: string, machine: number): void {
  const foreign = [...files(dir)].filter((f) => {
    const m = elfMachine(f);
    return m !== undefined && m !== machine;
  });
  if (foreign.length) throw new Error(`binaries for another CPU in the production install: ${foreign.join(', ')}`);
}

/**
 * The install in `stage` carries the native binaries the daemon loads on the target CPU: LMDB
 * (the store), the serial port binding (Modbus) and msgpackr's extractor. npm installs a CPU's
 * binaries as optional packages and skips, without failing, one it cannot fetch: offline, from a
 * cache filled for another architecture, a package would lack them. Throws naming what is missing.
 */
export function checkTargetBinaries(stage: string, cpu: string): void {
  const missing: string[] = [];
  if (findLmdbBinary(stage, 'linux', cpu, 'glibc').found === 'missing') missing.push(`LMDB (@lmdb/lmdb-linux-${cpu})`);
  if (findSerialportBinary(stage, 'linux', cpu, 'glibc').found === 'missing') missing.push(`serialport (@serialport/bindings-cpp prebuilds/linux-${cpu})`);
  const msgpackr = join(stage, 'node_modules/@msgpackr-extract', `msgpackr-extract-linux-${cpu}`);
  if (!existsSync(msgpackr) || !readdirSync(msgpackr).some((f) => f.endsWith('.glibc.node'))) missing.push(`msgpackr-extract (@msgpackr-extract/msgpackr-extract-linux-${cpu})`);
  if (missing.length) throw new Error(`the production install lacks the linux-${cpu} binaries of ${missing.join(', ')}`);
}

/** Directories 0755, files 0644, executables (the bundled node, #! scripts that were executable) 0755. */
export function normalizeModes(tree: string, executables: string[]): void {
  chmodSync(tree, 0o755);
  for (const dir of directories(tree)) chmodSync(dir, 0o755);
  for (const file of files(tree)) {
    const wasExecutable = (lstatSync(file).mode & 0o111) !== 0;
    chmodSync(file, executables.includes(file) || (wasExecutable && startsWithShebang(file)) ? 0o755 : 0o644);
  }
}

function startsWithShebang(path: string): boolean {
  const fd = openSync(path, 'r');
  try {
    const head = Buffer.alloc(2);
    return readSync(fd, head, 0, 2, 0) === 2 && head.toString() === '#!';
  } finally {
    closeSync(fd);
  }
}
