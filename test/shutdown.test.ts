// SIGTERM (issue 13 point 1): requests that reach a kept-alive connection while the daemon stops
// are answered, never reset; a SIGTERM during start-up ends the process promptly.
import { spawn } from 'node:child_process';
import { Agent, request } from 'node:http';
import { rmSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { expect } from 'chai';
import { ADMIN_PASSWORD, mainScript, startDaemonProcess, tempDir } from './support/harness.js';

function get(agent: Agent, port: number, path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, agent }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('stopping', function () {
  this.timeout(60_000);

  it('answers or refuses, never resets, the requests of keep-alive clients during a SIGTERM', async () => {
    const dataDir = tempDir('gatewayd-stop-');
    const daemon = await startDaemonProcess(dataDir);
    const port = daemon.ready.http as number;
    const agent = new Agent({ keepAlive: true, maxSockets: 4 });
    const outcomes: string[] = [];
    let answered = 0;
    const worker = async () => {
      // Bounded: each worker sends at most 400 requests, and stops at its first refusal.
      for (let i = 0; i < 400; i++) {
        try {
          const status = await get(agent, port, '/health');
          outcomes.push(String(status));
          if (++answered === 40) daemon.child.kill('SIGTERM');
        } catch (err) {
          outcomes.push((err as NodeJS.ErrnoException).code ?? (err as Error).message);
          if ((err as NodeJS.ErrnoException).code === 'ECONNREFUSED') return;
        }
      }
    };
    try {
      await Promise.all([worker(), worker(), worker(), worker()]);
      expect(await daemon.exited).to.equal(0);
      const failures = outcomes.filter((o) => o !== '200' && o !== 'ECONNREFUSED');
      expect(failures, 'resets or hang-ups').to.deep.equal([]);
      expect(outcomes.filter((o) => o === '200').length).to.be.at.least(40);
    } finally {
      agent.destroy();
      if (daemon.child.exitCode === null) daemon.child.kill('SIGKILL');
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('exits promptly on a SIGTERM during start-up, without saying ready', async () => {
    const dataDir = tempDir('gatewayd-early-stop-');
    const child = spawn(process.execPath, [mainScript], {
      env: { PATH: process.env.PATH ?? '', GATEWAYD_DATA_DIR: dataDir, GATEWAYD_HOST: '127.0.0.1', GATEWAYD_HTTP_PORT: '0', GATEWAYD_HTTPS_PORT: '0', GATEWAYD_MQTT_PORT: '0', GATEWAYD_MQTTS_PORT: '0', GATEWAYD_ADMIN_PASSWORD: ADMIN_PASSWORD },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const lines: string[] = [];
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    try {
      // The first line the daemon logs: it is starting (the CA of a first start takes a while).
      await new Promise<void>((resolve) => createInterface({ input: child.stdout! }).on('line', (l) => (lines.push(l), lines.length === 1 && resolve())));
      const sent = Date.now();
      child.kill('SIGTERM');
      expect(await exited).to.equal(0);
      expect(Date.now() - sent, 'well before the shutdown timeout').to.be.below(5000);
      expect(lines.some((l) => l.includes('"message":"ready"'))).to.equal(false);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
