import { request } from 'node:http';
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { ADMIN_PASSWORD, startDaemonProcess, tempDir } from './support/harness.js';

const basic = 'Basic ' + Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64');

async function login(port: number): Promise<string> {
  const res = await fetch(`http://127.0.0.1:${port}/api/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username: 'admin', password: ADMIN_PASSWORD }),
  });
  expect(res.status).to.equal(200);
  return ((await res.json()) as { token: string }).token;
}

describe('daemon process', function () {
  this.timeout(60_000);

  it('logs one JSON ready line with the bound ports and exits 0 on SIGTERM', async () => {
    const d = await startDaemonProcess(tempDir());
    expect(d.ready.http).to.be.a('number').greaterThan(0);
    expect(d.ready.mqtt).to.be.a('number').greaterThan(0);
    expect(d.ready.mqtts).to.be.a('number').greaterThan(0);
    expect(d.lines.every((l) => typeof l.level === 'string' && typeof l.timestamp === 'string')).to.equal(true);
    const res = await fetch(`http://127.0.0.1:${d.ready.http}/api/policy/username`, { headers: { authorization: basic } });
    expect(res.status).to.equal(200);
    d.child.kill('SIGTERM');
    expect(await d.exited).to.equal(0);
    expect(d.lines.map((l) => l.message)).to.include('stopped');
  });

  it('without GATEWAYD_ADMIN_PASSWORD writes a random admin password to a 0600 file and never logs it', async () => {
    const dir = tempDir();
    const d = await startDaemonProcess(dir, { GATEWAYD_ADMIN_PASSWORD: '' });
    const file = join(dir, 'initial-admin-password');
    expect(existsSync(file)).to.equal(true);
    expect(statSync(file).mode & 0o777).to.equal(0o600);
    const { readFileSync } = await import('node:fs');
    const password = readFileSync(file, 'utf8').trim();
    expect(password.length).to.be.at.least(20);
    const res = await fetch(`http://127.0.0.1:${d.ready.http}/api/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: 'admin', password }),
    });
    expect(res.status).to.equal(200);
    expect(JSON.stringify(d.lines)).to.not.include(password);
    expect(d.lines.some((l) => l.message === 'initial admin password written' && l.file === file)).to.equal(true);
    d.child.kill('SIGTERM');
    expect(await d.exited).to.equal(0);
  });

  it('lets an in-flight request finish after SIGTERM, then exits 0', async () => {
    const d = await startDaemonProcess(tempDir());
    const body = JSON.stringify({ username: 'admin', password: ADMIN_PASSWORD });
    const stopping = new Promise<void>((resolve) => {
      d.child.stdout!.on('data', (chunk: Buffer) => {
        if (chunk.toString().includes('"stopping"')) resolve();
      });
    });
    const answered = new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = request(
        { host: '127.0.0.1', port: d.ready.http, method: 'POST', path: '/api/login', headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } },
        (res) => {
          let text = '';
          res.on('data', (c) => (text += c));
          res.on('end', () => resolve({ status: res.statusCode!, body: text }));
        },
      );
      req.on('error', reject);
      // Headers and half the body now: the request is in flight when the signal arrives.
      req.flushHeaders();
      req.write(body.slice(0, 10));
      req.on('socket', (socket) => {
        socket.once('connect', () => {
          // Give the server the headers before signalling: the signal handler logs 'stopping'.
          setImmediate(() => d.child.kill('SIGTERM'));
        });
      });
      void stopping.then(() => req.end(body.slice(10)));
    });
    const res = await answered;
    expect(res.status).to.equal(200);
    expect(JSON.parse(res.body).token).to.be.a('string');
    expect(await d.exited).to.equal(0);
  });

  it('keeps every acknowledged write across SIGKILL and reopens the store', async () => {
    const dir = tempDir();
    const first = await startDaemonProcess(dir);
    const token = await login(first.ready.http);
    const acknowledged: string[] = [];
    let killed = false;
    const writer = async (w: number) => {
      for (let i = 0; i < 500 && !killed; i++) {
        const name = `role-${w}-${i}`;
        try {
          const res = await fetch(`http://127.0.0.1:${first.ready.http}/api/roles`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
            body: JSON.stringify({ name, isShared: true, permissions: [{ resource: `plant/${name}/#`, operation: 'read', context: 'mqtt' }] }),
          });
          if (res.status === 201) acknowledged.push(name);
        } catch {
          return; // the connection died with the process
        }
        if (acknowledged.length >= 60 && !killed) {
          killed = true;
          first.child.kill('SIGKILL');
        }
      }
    };
    await Promise.all([0, 1, 2, 3].map(writer));
    await first.exited;
    expect(killed).to.equal(true);
    expect(acknowledged.length).to.be.at.least(60);

    const second = await startDaemonProcess(dir);
    const token2 = await login(second.ready.http);
    const res = await fetch(`http://127.0.0.1:${second.ready.http}/api/roles/names`, { headers: { authorization: `Bearer ${token2}` } });
    const names = new Set(((await res.json()) as { name: string }[]).map((r) => r.name));
    const lost = acknowledged.filter((n) => !names.has(n));
    expect(lost, 'acknowledged writes lost').to.deep.equal([]);
    // Indexes agree with records: every listed role can be read with its permission.
    const one = await fetch(`http://127.0.0.1:${second.ready.http}/api/roles?name%5Beq%5D=${acknowledged[0]}`, { headers: { authorization: `Bearer ${token2}` } });
    const [role] = (await one.json()) as { permissions: unknown[] }[];
    expect(role!.permissions).to.have.length(1);
    second.child.kill('SIGTERM');
    expect(await second.exited).to.equal(0);
  });
});
