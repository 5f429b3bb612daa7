// Where service files live (issue 30 point 2, docs/mapping.md "Service files"): by default with
// the gateway's data, <dataDir>/services (they can hold device passwords; the data directory is
// 0700), written there by the API; a ./services of the working directory, the default before,
// is still read while <dataDir>/services does not exist, with one line saying where it should
// move. systemd and the Docker image set /etc/gatewayd/services (test/packaging.test.ts).
import { expect } from 'chai';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ADMIN_PASSWORD, startDaemonProcess, startGateway, tempDir } from './support/harness.js';

const connectionYaml = `
resources:
  plc:
    type: Connection
    properties: {protocol: Modbus, targetState: disconnected, configuration: {host: 127.0.0.1, port: 1502}}
`;

/** GET /api/services of a daemon process on `port`. */
async function servicesOf(port: number): Promise<Array<{ id: string; file: string }>> {
  const base = `http://127.0.0.1:${port}`;
  const login = await fetch(`${base}/api/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: 'admin', password: ADMIN_PASSWORD }) });
  const { token } = (await login.json()) as { token: string };
  const res = await fetch(`${base}/api/services`, { headers: { authorization: `Bearer ${token}` } });
  expect(res.status).to.equal(200);
  return (await res.json()) as Array<{ id: string; file: string }>;
}

describe('the services directory', function () {
  this.timeout(60_000);

  it('defaults to <dataDir>/services: its files run, and the API writes new ones there', async () => {
    const dataDir = tempDir();
    mkdirSync(join(dataDir, 'services'));
    writeFileSync(join(dataDir, 'services', 'line.yaml'), connectionYaml);
    const gw = await startGateway({ dataDir, overrides: { mapping: { servicesDir: '' } } });
    try {
      const admin = await gw.login();
      const list = await gw.api('GET', '/api/services', { token: admin });
      expect(list.body.map((s: { id: string; file: string }) => [s.id, s.file])).to.deep.equal([['line', 'line.yaml']]);
      const put = await gw.api('PUT', '/api/services/press', { token: admin, raw: connectionYaml, headers: { 'content-type': 'application/yaml' } });
      expect(put.status, JSON.stringify(put.body)).to.equal(201);
      expect(readFileSync(join(dataDir, 'services', 'press.yaml'), 'utf8')).to.include('Modbus');
      expect(gw.logs().find((l) => l.message === 'protocol mapping started')).to.include({ servicesDir: join(dataDir, 'services') });
      expect(gw.logs().some((l) => String(l.message).includes('old default'))).to.equal(false);
    } finally {
      await gw.stop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('still reads ./services of the working directory while <dataDir>/services does not exist, and says where to move it', async () => {
    const work = tempDir();
    const dataDir = join(work, 'data');
    mkdirSync(join(work, 'services'));
    writeFileSync(join(work, 'services', 'old.yaml'), connectionYaml);
    let daemon = await startDaemonProcess(dataDir, {}, { cwd: work });
    try {
      const port = daemon.ready.http as number;
      expect((await servicesOf(port)).map((s) => [s.id, s.file])).to.deep.equal([['old', 'old.yaml']]);
      expect(daemon.lines.find((l) => l.message === 'protocol mapping started')).to.include({ servicesDir: join(work, 'services') });
      const moved = daemon.lines.filter((l) => String(l.message).includes('old default'));
      expect(moved).to.have.length(1);
      expect(moved[0]).to.include({ level: 'warn', servicesDir: join(work, 'services'), moveTo: join(dataDir, 'services') });
    } finally {
      daemon.child.kill('SIGTERM');
      await daemon.exited;
    }

    // Moved: the new place is read, the old one no longer, and nothing is said about it.
    mkdirSync(join(dataDir, 'services'));
    writeFileSync(join(dataDir, 'services', 'new.yaml'), connectionYaml);
    daemon = await startDaemonProcess(dataDir, {}, { cwd: work });
    try {
      expect((await servicesOf(daemon.ready.http as number)).map((s) => s.id)).to.deep.equal(['new']);
      expect(daemon.lines.find((l) => l.message === 'protocol mapping started')).to.include({ servicesDir: join(dataDir, 'services') });
      expect(daemon.lines.some((l) => String(l.message).includes('old default'))).to.equal(false);
    } finally {
      daemon.child.kill('SIGTERM');
      await daemon.exited;
      rmSync(work, { recursive: true, force: true });
    }
    expect(existsSync(join(work, 'services'))).to.equal(false);
  });
});
