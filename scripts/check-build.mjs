// Runs before `npm start` (the prestart script): npm start only starts the built daemon, it does
// not build. When dist/ is missing or older than the sources it says, in one line, what to run,
// and exits 1. Plain JavaScript, not compiled: it must run when dist/ does not exist.
//
// "The build" is dated by dist/ui-build.json, which the last step of `npm run build`
// (scripts/build-ui.ts) writes at every run: tsc rewrites only the outputs whose sources
// changed, so a compiled file's own date says nothing about the others.
import { readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const stamp = join(root, 'dist/ui-build.json');
/** What `npm run build` compiles: a change to any of them needs a new build. */
const sources = ['src', 'ui', 'tsconfig.json', 'scripts/build-openapi.ts', 'scripts/standalone-validators.ts', 'scripts/build-ui.ts'];

function mtime(path) {
  try {
    return statSync(path).mtimeMs;
  } catch {
    return undefined;
  }
}

/** Every source file newer than `since` (the walk is a few hundred files: milliseconds). */
function newerThan(since) {
  const newer = [];
  const visit = (path) => {
    let stat;
    try {
      stat = statSync(path);
    } catch {
      return;
    }
    if (stat.isDirectory()) for (const name of readdirSync(path)) visit(join(path, name));
    else if (stat.mtimeMs > since) newer.push(relative(root, path));
  };
  for (const source of sources) visit(join(root, source));
  return newer;
}

const built = mtime(stamp);
if (built === undefined || mtime(join(root, 'dist/src/main.js')) === undefined) {
  process.stderr.write('gatewayd: the daemon is not built (no dist/): run `npm run build` (npm ci builds it too), then npm start\n');
  process.exit(1);
}
const changed = newerThan(built);
if (changed.length) {
  const more = changed.length > 1 ? ` and ${changed.length - 1} more` : '';
  process.stderr.write(`gatewayd: dist/ is older than ${changed[0]}${more}: run \`npm run build\`, then npm start\n`);
  process.exit(1);
}
