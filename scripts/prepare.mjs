// The prepare script: npm runs it at the end of `npm ci` and `npm install`, so a checkout is
// built by the install (the quick start is `npm ci && npm start`). A production install
// (`npm ci --omit=dev`, NODE_ENV=production) has no compiler: it does not build, and expects
// dist/ to be there already (the .deb and the Docker image carry it prebuilt).
// Plain JavaScript, not compiled: it runs before the first build.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));

if (!existsSync(join(root, 'node_modules/typescript/package.json'))) {
  console.log('gatewayd: development dependencies not installed (a production install): not building, dist/ must be there already');
  process.exit(0);
}
// npm_execpath: the npm that runs this script (npm's own node script), whatever PATH says.
const npm = process.env.npm_execpath;
const run = npm && npm.endsWith('.js') ? spawnSync(process.execPath, [npm, 'run', 'build'], { cwd: root, stdio: 'inherit' }) : spawnSync('npm', ['run', 'build'], { cwd: root, stdio: 'inherit' });
process.exit(run.status ?? 1);
