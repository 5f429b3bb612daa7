// The README's "First steps" are run as written (issue 13 point 6): every fenced block marked
// `sh first-steps`, in order, in one bash, against the real daemon on free ports with a random
// first-start admin password, so the README cannot drift from what gatewayd does.
import { execFile } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { startDaemonProcess, tempDir } from './support/harness.js';

const run = promisify(execFile);
const root = fileURLToPath(new URL('../..', import.meta.url));

export function firstStepsBlocks(readme: string): string[] {
  const blocks: string[] = [];
  const fence = /^```sh first-steps\n([\s\S]*?)^```$/gm;
  for (let m = fence.exec(readme); m; m = fence.exec(readme)) blocks.push(m[1]!);
  return blocks;
}

describe('README first steps', function () {
  this.timeout(60_000);

  it('work as written against a fresh daemon', async () => {
    const blocks = firstStepsBlocks(readFileSync(join(root, 'README.md'), 'utf8'));
    expect(blocks.length).to.be.at.least(5);
    const dataDir = tempDir('gatewayd-readme-');
    // No GATEWAYD_ADMIN_PASSWORD: the first start writes a random one, as for a new user.
    const daemon = await startDaemonProcess(dataDir, { GATEWAYD_ADMIN_PASSWORD: '' });
    try {
      const { stdout } = await run('bash', ['-euo', 'pipefail', '-c', blocks.join('\n')], {
        cwd: dataDir,
        timeout: 45_000,
        env: {
          PATH: process.env.PATH ?? '',
          GW: `https://localhost:${daemon.ready.https as number}`,
          MQTT_PORT: String(daemon.ready.mqtt),
          MQTTS_PORT: String(daemon.ready.mqtts),
          DATA: dataDir,
        },
      });
      // The retained value read with the password, then the state read over MQTTS.
      expect(stdout.trim().split('\n')).to.deep.equal(['21.5', 'online']);
    } finally {
      daemon.child.kill('SIGTERM');
      await daemon.exited;
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
