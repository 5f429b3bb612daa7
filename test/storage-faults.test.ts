// A full disk never stops the daemon (issue 13 point 1): the real daemon process on a small
// tmpfs that the test fills for real. Writes answer 507 and change nothing; reads, logins and
// the broker keep working; health says so; writes work again once space is freed, no restart.
import { execFileSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { ADMIN_PASSWORD, startDaemonProcess } from './support/harness.js';
import { connect, endAllClients } from './support/mqtt-test-kit.js';

/** Writes zeros into `file` until the filesystem is full (bounded by `maxBytes`). */
function fill(file: string, maxBytes: number): void {
  const fd = openSync(file, 'w');
  const chunk = Buffer.alloc(256 * 1024);
  try {
    for (let written = 0; written < maxBytes; written += chunk.length) writeSync(fd, chunk);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
  } finally {
    closeSync(fd);
  }
}

describe('a full disk', function () {
  this.timeout(60_000);
  let mountPoint: string;
  let mounted = false;

  before(function () {
    mountPoint = mkdtempSync(join(tmpdir(), 'gatewayd-fulldisk-'));
    try {
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=24m', 'tmpfs', mountPoint], { stdio: 'pipe' });
      mounted = true;
    } catch (err) {
      // Only root (or a user namespace) may mount: say why instead of pretending.
      this.skip();
    }
  });
  after(() => {
    if (mounted) execFileSync('umount', ['-l', mountPoint]);
    rmSync(mountPoint, { recursive: true, force: true });
  });

  it('answers 507 to writes, keeps reads, logins and MQTT going, shows it in health, and recovers when space is freed', async () => {
    const dataDir = join(mountPoint, 'data');
    const daemon = await startDaemonProcess(dataDir, { GATEWAYD_SET__HEALTH__MIN_FREE_DISK_BYTES: '1048576' });
    const base = `http://127.0.0.1:${daemon.ready.http as number}`;
    const call = async (method: string, path: string, token?: string, body?: unknown) => {
      const res = await fetch(base + path, {
        method,
        headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
      const text = await res.text();
      return { status: res.status, body: text && (res.headers.get('content-type') ?? '').includes('json') ? JSON.parse(text) : text };
    };
    const login = () => call('POST', '/api/login', undefined, { username: 'admin', password: ADMIN_PASSWORD });
    try {
      const token = (await login()).body.token as string;
      const before = (await call('GET', '/api/users/usernames', token)).body as unknown[];
      fill(join(mountPoint, 'filler'), 64 * 1024 * 1024);

      const refused = await call('POST', '/api/users', token, { username: 'written-on-a-full-disk', identityProvider: 'local' });
      expect(refused.status).to.equal(507);
      expect(refused.body.message).to.match(/cannot store|disk full/);
      expect((await call('POST', '/api/users', token, { username: 'again-on-a-full-disk', identityProvider: 'local' })).status).to.equal(507);
      expect(daemon.child.exitCode, 'still running').to.equal(null);

      const ready = await call('GET', '/health/ready');
      expect(ready.status).to.equal(503);
      expect(ready.body.checks).to.include({ store: 'failing', disk: 'failing' });
      expect((await call('GET', '/health')).status).to.equal(200);

      expect((await call('GET', '/api/users/usernames', token)).body).to.deep.equal(before);
      // A login still works: its token is kept in memory if the store cannot take it (a small
      // write may also fit in pages the store already has).
      const again = await login();
      expect(again.status, 'logins keep working').to.equal(200);
      expect((await call('GET', '/api/session', again.body.token)).status).to.equal(200);

      const mqtt = await connect(daemon.ready.mqtt as number, { username: 'admin', password: ADMIN_PASSWORD });
      await mqtt.publishAsync('still/alive', 'yes', { qos: 0 });
      await mqtt.endAsync();

      const logged = daemon.lines.filter((l) => l.message === 'the store cannot write: writes answer 507 until space is freed');
      expect(logged, 'logged once').to.have.length(1);
      expect(JSON.stringify(logged[0])).to.not.include(mountPoint);

      rmSync(join(mountPoint, 'filler'));
      const created = await call('POST', '/api/users', token, { username: 'written-after-freeing', identityProvider: 'local' });
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
      expect((await call('GET', '/health/ready')).status).to.equal(200);
      expect(daemon.lines.some((l) => l.message === 'the store writes again')).to.equal(true);
      const names = ((await call('GET', '/api/users/usernames', token)).body as { username: string }[]).map((u) => u.username);
      expect(names).to.include('written-after-freeing').and.not.include('written-on-a-full-disk');
    } finally {
      await endAllClients();
      daemon.child.kill('SIGTERM');
      await daemon.exited;
    }
  });
});
