// A full disk or a read-only data directory never stops the daemon (issue 13 point 1): the
// real daemon process on a small filesystem that the test fills (tmpfs) or that the kernel turns
// read-only after an error (ext4 on a loop file, errors=remount-ro). Writes answer 507 and change
// nothing; reads, logins and the broker keep working; state the broker cannot store is refused
// as MQTT allows; health says so; after a full disk, writes work again once space is freed, with
// no restart and no API write needed to notice.
import { execFileSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { expect } from 'chai';
import type { MqttClient } from 'mqtt';
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

type Daemon = Awaited<ReturnType<typeof startDaemonProcess>>;

function api(daemon: Daemon) {
  const base = `http://127.0.0.1:${daemon.ready.http as number}`;
  const call = async (method: string, path: string, token?: string, body?: unknown) => {
    const send = () =>
      fetch(base + path, {
        method,
        headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
    // A GET after a pause of about the server's keep-alive timeout (5 s) can meet the kept-alive
    // socket just as the server closes it (the client's race, not the daemon's): send it again.
    const res = await send().catch((err: unknown) => {
      if (method !== 'GET' || !/other side closed/.test(String((err as { cause?: unknown }).cause))) throw err;
      return send();
    });
    const text = await res.text();
    return { status: res.status, body: text && (res.headers.get('content-type') ?? '').includes('json') ? JSON.parse(text) : text };
  };
  const login = () => call('POST', '/api/login', undefined, { username: 'admin', password: ADMIN_PASSWORD });
  return { call, login };
}

/** Resolves with the first retained message on `topic`, or undefined when none arrives in `ms`. */
async function retainedOn(port: number, topic: string, ms = 500): Promise<string | undefined> {
  const reader = await connect(port, { username: 'admin', password: ADMIN_PASSWORD });
  try {
    const got = new Promise<string>((resolve) => reader.on('message', (_t, payload) => resolve(payload.toString())));
    await reader.subscribeAsync(topic, { qos: 1 });
    return await Promise.race([got, new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), ms))]);
  } finally {
    await reader.endAsync();
  }
}

/** The checks shared by every way the store stops writing; the daemon is in that state. */
async function expectDegradedButServing(daemon: Daemon, token: string, usersBefore: unknown[], hiddenPath: string): Promise<void> {
  const { call, login } = api(daemon);
  const refused = await call('POST', '/api/users', token, { username: 'written-on-a-broken-disk', identityProvider: 'local' });
  expect(refused.status).to.equal(507);
  expect(refused.body.message).to.match(/cannot store|disk full/);
  expect((await call('POST', '/api/users', token, { username: 'again-on-a-broken-disk', identityProvider: 'local' })).status).to.equal(507);
  expect(daemon.child.exitCode, 'still running').to.equal(null);

  const ready = await call('GET', '/health/ready');
  expect(ready.status).to.equal(503);
  expect(ready.body.checks).to.include({ store: 'failing' });
  expect((await call('GET', '/health')).status).to.equal(200);

  expect((await call('GET', '/api/users/usernames', token)).body).to.deep.equal(usersBefore);
  // A login still works: its token is kept in memory if the store cannot take it.
  const again = await login();
  expect(again.status, 'logins keep working').to.equal(200);
  expect((await call('GET', '/api/session', again.body.token)).status).to.equal(200);

  // The broker keeps delivering; what it would have to store is refused, not acknowledged and lost.
  const port = daemon.ready.mqtt as number;
  const v5 = await connect(port, { username: 'admin', password: ADMIN_PASSWORD, protocolVersion: 5 });
  const live = new Promise<string>((resolve) => v5.on('message', (_t, p) => resolve(p.toString())));
  await v5.subscribeAsync('still/alive', { qos: 1 });
  await v5.publishAsync('still/alive', 'yes', { qos: 1 });
  expect(await live).to.equal('yes');
  const negative = await new Promise<number | undefined>((resolve, reject) =>
    v5.publish('kept/state', 'on a broken disk', { qos: 1, retain: true }, (err, packet) => {
      const code = (err as { code?: number } | undefined)?.code ?? (packet as { reasonCode?: number } | undefined)?.reasonCode;
      return code !== undefined ? resolve(code) : reject(new Error('a retained publish was acknowledged without a reason code'));
    }),
  );
  expect(negative, 'MQTT 5: a PUBACK with an error reason code').to.be.at.least(0x80);
  expect(v5.connected, 'MQTT 5 clients stay connected').to.equal(true);
  const v4: MqttClient = await connect(port, { username: 'admin', password: ADMIN_PASSWORD, clean: false, clientId: 'persistent-on-broken-disk' });
  const suback = await v4.subscribeAsync('kept/#', { qos: 1 }).then(
    (granted) => granted[0]!.qos,
    (err: { packet?: { granted?: number[] } }) => err.packet?.granted?.[0] ?? (err as { code?: number }).code,
  );
  expect(suback, 'a persistent session\'s subscription is refused (SUBACK 0x80)').to.equal(128);
  const closed = new Promise<void>((resolve) => v4.once('close', () => resolve()));
  v4.publish('kept/state', 'on a broken disk', { qos: 0, retain: true });
  await closed; // MQTT 3.1.1 has no negative acknowledgement: the connection closes
  await v5.endAsync();
  expect(await retainedOn(port, 'kept/state'), 'nothing retained').to.equal(undefined);

  const logged = daemon.lines.filter((l) => l.message === 'the store cannot write: writes answer 507 until it can again');
  expect(logged, 'logged once').to.have.length(1);
  expect(JSON.stringify(logged[0])).to.not.include(hiddenPath);
}

describe('storage faults', function () {
  this.timeout(90_000);
  afterEach(() => endAllClients());

  describe('a full disk', () => {
    let mountPoint: string;
    let mounted = false;

    before(function () {
      mountPoint = mkdtempSync(join(tmpdir(), 'gatewayd-fulldisk-'));
      try {
        execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=24m', 'tmpfs', mountPoint], { stdio: 'pipe' });
        mounted = true;
      } catch {
        // Only root (or a user namespace) may mount: say why instead of pretending.
        this.skip();
      }
    });
    after(() => {
      if (mounted) execFileSync('umount', ['-l', mountPoint]);
      rmSync(mountPoint, { recursive: true, force: true });
    });

    it('answers 507 to writes, keeps reads, logins and MQTT going, shows it in health, and recovers when space is freed', async () => {
      const daemon = await startDaemonProcess(join(mountPoint, 'data'), { GATEWAYD_SET__HEALTH__MIN_FREE_DISK_BYTES: '1048576' });
      const { call, login } = api(daemon);
      try {
        const token = (await login()).body.token as string;
        const before = (await call('GET', '/api/users/usernames', token)).body as unknown[];
        const port = daemon.ready.mqtt as number;
        const offline = await connect(port, { username: 'admin', password: ADMIN_PASSWORD, clean: false, clientId: 'offline-on-full-disk' });
        await offline.subscribeAsync('queued/#', { qos: 1 });
        await offline.endAsync();
        fill(join(mountPoint, 'filler'), 64 * 1024 * 1024);

        // The broker is the first to find out: messages queued for the offline session cannot be
        // stored. The commit journal, written in full when it was made, takes them until it runs
        // full (8 MiB: about 400 of these); the compaction into LMDB that follows fails. Every
        // publisher still gets its PUBACK (a held acknowledgement must not wait forever for a
        // flush that never comes), and the store's health learns of it.
        const flooder = await connect(port, { username: 'admin', password: ADMIN_PASSWORD });
        const payload = Buffer.alloc(16 * 1024, 1);
        let failing = false;
        for (let i = 0; i < 900 && !failing; i++) {
          await Promise.race([
            flooder.publishAsync('queued/x', payload, { qos: 1 }),
            new Promise((_resolve, reject) => setTimeout(() => reject(new Error(`PUBACK ${i} held for 5 s`)), 5000)),
          ]);
          if (i % 10 === 9) failing = (await call('GET', '/health/ready')).body.checks.store === 'failing';
        }
        expect(failing, 'a failed broker write marks the store unwritable').to.equal(true);
        await flooder.endAsync();
        await expectDegradedButServing(daemon, token, before, mountPoint);
        expect((await call('GET', '/health/ready')).body.checks).to.include({ disk: 'failing' });

        rmSync(join(mountPoint, 'filler'));
        // No API write comes: the store's own probe notices that writes work again.
        let ready = 0;
        for (let i = 0; i < 100 && ready !== 200; i++) {
          ready = (await call('GET', '/health/ready')).status;
          if (ready !== 200) await new Promise((r) => setTimeout(r, 100));
        }
        expect(ready, 'ready again without a restart').to.equal(200);
        expect(daemon.lines.some((l) => l.message === 'the store writes again')).to.equal(true);
        const created = await call('POST', '/api/users', token, { username: 'written-after-freeing', identityProvider: 'local' });
        expect(created.status, JSON.stringify(created.body)).to.equal(201);
        const names = ((await call('GET', '/api/users/usernames', token)).body as { username: string }[]).map((u) => u.username);
        expect(names).to.include('written-after-freeing').and.not.include('written-on-a-broken-disk');
        const publisher = await connect(daemon.ready.mqtt as number, { username: 'admin', password: ADMIN_PASSWORD });
        await publisher.publishAsync('kept/state', 'after freeing', { qos: 1, retain: true });
        await publisher.endAsync();
        expect(await retainedOn(daemon.ready.mqtt as number, 'kept/state', 5000)).to.equal('after freeing');
      } finally {
        daemon.child.kill('SIGTERM');
        await daemon.exited;
      }
    });
  });

  describe('a data directory the kernel turns read-only', () => {
    const work = mkdtempSync(join(tmpdir(), 'gatewayd-rofs-'));
    const image = join(work, 'fs.img');
    const mountPoint = join(work, 'mnt');
    let mounted = false;

    before(function () {
      try {
        execFileSync('truncate', ['-s', '48M', image]);
        execFileSync('mkfs.ext4', ['-q', '-F', image], { stdio: 'pipe' });
        execFileSync('mkdir', ['-p', mountPoint]);
        execFileSync('mount', ['-o', 'loop,errors=remount-ro', image, mountPoint], { stdio: 'pipe' });
        mounted = true;
      } catch {
        // Needs root, mkfs.ext4 and a loop device: skip where the machine has none.
        this.skip();
      }
    });
    after(() => {
      if (mounted) execFileSync('umount', ['-l', mountPoint]);
      rmSync(work, { recursive: true, force: true });
    });

    it('answers 507 to writes and keeps reads, logins and MQTT going', async function () {
      const device = execFileSync('findmnt', ['-n', '-o', 'SOURCE', mountPoint], { encoding: 'utf8' }).trim();
      const daemon = await startDaemonProcess(join(mountPoint, 'data'));
      const { call, login } = api(daemon);
      try {
        const token = (await login()).body.token as string;
        const before = (await call('GET', '/api/users/usernames', token)).body as unknown[];
        // What a failing SD card or eMMC does: ext4 meets an error and remounts itself read-only
        // under the running daemon (a plain remount would be refused while files are open).
        execFileSync('sh', ['-c', `echo gatewayd-test > /sys/fs/ext4/${basename(device)}/trigger_fs_error`]);
        expect(execFileSync('findmnt', ['-n', '-o', 'OPTIONS', mountPoint], { encoding: 'utf8' })).to.match(/\bro\b|emergency_ro/);
        await expectDegradedButServing(daemon, token, before, mountPoint);
      } finally {
        daemon.child.kill('SIGTERM');
        await daemon.exited;
      }
    });
  });
});
