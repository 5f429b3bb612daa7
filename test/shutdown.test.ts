// SIGTERM (issue 13 point 1): requests that reach a kept-alive connection while the daemon stops
// are answered, never reset; a SIGTERM during start-up ends the process promptly.
import { spawn } from 'node:child_process';
import { Agent, request } from 'node:http';
import { Agent as TlsAgent, request as tlsRequest } from 'node:https';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { expect } from 'chai';
import { ADMIN_PASSWORD, mainScript, startDaemonProcess, tempDir } from './support/harness.js';
import { connectUrl, endAllClients } from './support/mqtt-test-kit.js';

function get(agent: Agent | TlsAgent, port: number, path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const send = agent instanceof TlsAgent ? tlsRequest : request;
    const req = send({ host: '127.0.0.1', port, path, agent }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('stopping', function () {
  this.timeout(60_000);

  // In clear, and over TLS on the same port (where HSTS sends a browser: served by the HTTPS listener).
  for (const transport of ['http', 'TLS'] as const) {
    it(`answers or refuses, never resets, the requests of keep-alive clients during a SIGTERM (${transport} on the plain port)`, async () => {
      const dataDir = tempDir('gatewayd-stop-');
      const daemon = await startDaemonProcess(dataDir);
      const port = daemon.ready.http as number;
      const agent = transport === 'http' ? new Agent({ keepAlive: true, maxSockets: 4 }) : new TlsAgent({ keepAlive: true, maxSockets: 4, ca: readFileSync(join(dataDir, 'pki', 'ca.cert.pem')) });
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
  }

  it('exits promptly on a SIGTERM with MQTT-over-WebSocket clients connected (ws and wss on the plain port, wss on the HTTPS port)', async () => {
    const dataDir = tempDir('gatewayd-stop-ws-');
    const daemon = await startDaemonProcess(dataDir);
    try {
      const ca = readFileSync(join(dataDir, 'pki', 'ca.cert.pem'));
      const urls = [`ws://127.0.0.1:${daemon.ready.http}/mqtt`, `wss://127.0.0.1:${daemon.ready.http}/mqtt`, `wss://127.0.0.1:${daemon.ready.https}/mqtt`];
      for (const url of urls) await connectUrl(url, { ca, username: 'admin', password: ADMIN_PASSWORD, protocolVersion: 4, reconnectPeriod: 0 });
      const sent = Date.now();
      daemon.child.kill('SIGTERM');
      // Upgraded connections are closed with the idle ones, not held until http.shutdownTimeoutMs
      // (10 s; and the process's own deadline, 5 s later, would exit 1 without stopping the store).
      expect(await daemon.exited).to.equal(0);
      expect(Date.now() - sent).to.be.below(5000);
      expect(daemon.lines.some((l) => l.message === 'stop timed out; exiting')).to.equal(false);
    } finally {
      await endAllClients();
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
