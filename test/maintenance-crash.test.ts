// Crash safety of backup and restore: the daemon runs as a child process and is killed with
// SIGKILL in the middle of a backup, in the middle of a restore and right as the swap starts;
// after a restart the store opens and holds the old or the restored data entirely, and no
// half-written archive is offered. The recovery rule itself is checked on prepared directories.
import { expect } from 'chai';
import type { ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { createSilentLogger } from '../src/log/index.js';
import { STATUS_KEY } from '../src/maintenance/maintenance-service.js';
import { recoverMaintenanceFiles } from '../src/maintenance/recovery.js';
import { openStore } from '../src/store/index.js';
import { ADMIN_PASSWORD, GOOD_PASSWORD, startDaemonProcess, startGateway, tempDir } from './support/harness.js';

/** A daemon child process with a tiny HTTP client. */
class Daemon {
  private constructor(
    readonly child: ChildProcess,
    readonly base: string,
    readonly exited: Promise<number | null>,
  ) {}

  static async start(dataDir: string, env: Record<string, string> = {}): Promise<Daemon> {
    const d = await startDaemonProcess(dataDir, env);
    return new Daemon(d.child, `http://127.0.0.1:${d.ready.http}`, d.exited);
  }

  async api(method: string, path: string, token?: string, body?: unknown | FormData): Promise<{ status: number; body: any }> {
    const headers: Record<string, string> = {};
    if (token) headers.authorization = `Bearer ${token}`;
    let payload: string | FormData | undefined;
    if (body instanceof FormData) payload = body;
    else if (body !== undefined) {
      payload = JSON.stringify(body);
      headers['content-type'] = 'application/json';
    }
    const res = await fetch(this.base + path, { method, headers, body: payload as never });
    const text = await res.text();
    return { status: res.status, body: (res.headers.get('content-type') ?? '').includes('json') && text ? JSON.parse(text) : text };
  }

  async login(username = 'admin', password = ADMIN_PASSWORD): Promise<string> {
    for (let i = 0; i < 500; i++) {
      const res = await this.api('POST', '/api/login', undefined, { username, password });
      if (res.status === 200) return res.body.token;
      if (res.status !== 423) throw new Error(`login ${username}: ${res.status} ${JSON.stringify(res.body)}`);
      await delay(20);
    }
    throw new Error('login kept answering 423');
  }

  async createUser(token: string, username: string): Promise<void> {
    const res = await this.api('POST', '/api/users', token, { username, password: GOOD_PASSWORD, identityProvider: 'local' });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
  }

  async usernames(token: string): Promise<string[]> {
    const res = await this.api('GET', '/api/users/usernames', token);
    expect(res.status).to.equal(200);
    return (res.body as { username: string }[]).map((u) => u.username).sort();
  }

  async waitIdle(): Promise<any> {
    let token = await this.login();
    for (let i = 0; i < 1500; i++) {
      const res = await this.api('GET', '/api/maintenance/db', token);
      if (res.status === 401) token = await this.login();
      else if (res.status === 200 && !res.body.running) return res.body;
      await delay(20);
    }
    throw new Error('maintenance did not become idle');
  }

  async kill(): Promise<void> {
    this.child.kill('SIGKILL');
    await this.exited;
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    this.child.kill('SIGTERM');
    await this.exited;
  }
}

/** Polls a condition on the file system (bounded). */
async function until(what: string, condition: () => boolean): Promise<void> {
  for (let i = 0; i < 1000; i++) {
    if (condition()) return;
    await delay(10);
  }
  throw new Error(`timed out waiting for ${what}`);
}

function archiveForm(archive: Buffer): FormData {
  const form = new FormData();
  form.append('file', new Blob([new Uint8Array(archive)], { type: 'application/gzip' }), 'backup.tar.gz');
  return form;
}

/** An archive holding the users admin and `username`, made by an in-process gateway. */
async function archiveWithUser(username: string): Promise<Buffer> {
  const gw = await startGateway();
  try {
    const admin = await gw.login();
    const created = await gw.api('POST', '/api/users', { token: admin, body: { username, password: GOOD_PASSWORD, identityProvider: 'local' } });
    expect(created.status).to.equal(201);
    expect((await gw.api('POST', '/api/maintenance/db/backup', { token: admin })).status).to.equal(202);
    for (let i = 0; i < 1500; i++) {
      const s = await gw.api('GET', '/api/maintenance/db', { token: admin });
      if (!s.body.running) break;
      await delay(20);
    }
    const res = await fetch(`${gw.baseUrl}/api/maintenance/db/backup`, { headers: { authorization: `Bearer ${admin}` } });
    expect(res.status).to.equal(200);
    return Buffer.from(await res.arrayBuffer());
  } finally {
    await gw.stop();
  }
}

const SLOW_IO = { GATEWAYD_SET__MAINTENANCE__IO_BYTES_PER_SECOND: '64' };

describe('maintenance: crash safety', function () {
  this.timeout(60_000);
  const dirs: string[] = [];
  const daemons: Daemon[] = [];
  const dataDir = () => {
    const d = tempDir('gatewayd-crash-');
    dirs.push(d);
    return d;
  };
  const start = async (dir: string, env: Record<string, string> = {}) => {
    const d = await Daemon.start(dir, env);
    daemons.push(d);
    return d;
  };
  afterEach(async () => {
    for (const d of daemons.splice(0)) await d.stop();
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  it('SIGKILL during a backup: the store opens with its data, the half-written archive is gone, the backup reads "interrupted"', async () => {
    const dir = dataDir();
    const slow = await start(dir, SLOW_IO);
    const token = await slow.login();
    await slow.createUser(token, 'before-crash');
    const started = await slow.api('POST', '/api/maintenance/db/backup', token);
    expect(started.status).to.equal(202);
    // The archive is being written (64 bytes/s keeps it there): kill now.
    const partial = join(dir, 'backups', `.${started.body}.tar.gz.partial`);
    await until('the partial archive', () => existsSync(partial) && statSync(partial).size > 0);
    await slow.kill();
    expect(existsSync(partial)).to.equal(true);

    const d = await start(dir);
    const status = await d.waitIdle();
    expect(status.backup).to.include({ id: started.body, succeeded: false });
    expect(status.backup.statusMessage).to.match(/interrupted/);
    expect(status.backup.endDate).to.be.a('string');
    expect(readdirSync(join(dir, 'backups'))).to.deep.equal([]);
    const admin = await d.login();
    expect((await d.api('GET', '/api/maintenance/db/backup', admin)).status).to.equal(404);
    expect(await d.usernames(admin)).to.deep.equal(['admin', 'before-crash']);
    // And a new backup completes.
    expect((await d.api('POST', '/api/maintenance/db/backup', admin)).status).to.equal(202);
    const after = await d.waitIdle();
    expect(after.backup.succeeded, after.backup.statusMessage).to.equal(true);
    expect(readdirSync(join(dir, 'backups'))).to.deep.equal([`${after.backup.id}.tar.gz`]);
  });

  it('SIGKILL while a restore extracts: the old store stays entirely, staging is cleaned, the restore reads "interrupted"', async () => {
    const archive = await archiveWithUser('restored-user');
    const dir = dataDir();
    const slow = await start(dir, SLOW_IO);
    const token = await slow.login();
    await slow.createUser(token, 'old-user');
    const request = slow.api('POST', '/api/maintenance/db/restore', token, archiveForm(archive)).catch((err: unknown) => err);
    const work = join(dir, 'tmp', 'maintenance');
    await until('the extraction', () =>
      readdirSync(work).some((n) => n.startsWith('restore-') && existsSync(join(work, n, 'db', 'data.mdb')) && statSync(join(work, n, 'db', 'data.mdb')).size > 0),
    );
    await slow.kill();
    expect(await request).to.be.instanceOf(Error);

    const d = await start(dir);
    const status = await d.waitIdle();
    expect(status.restore.succeeded).to.equal(false);
    expect(status.restore.statusMessage).to.match(/interrupted/);
    const admin = await d.login();
    expect(await d.usernames(admin)).to.deep.equal(['admin', 'old-user']);
    expect(readdirSync(work)).to.deep.equal([]);
    expect(existsSync(join(dir, 'db.staged'))).to.equal(false);
  });

  it('SIGKILL as the swap starts: after restart the store is entirely old or entirely restored, and the status says which', async () => {
    const archive = await archiveWithUser('restored-user');
    const dir = dataDir();
    const d1 = await start(dir);
    const token = await d1.login();
    await d1.createUser(token, 'old-user');
    const res = await d1.api('POST', '/api/maintenance/db/restore', token, archiveForm(archive));
    expect(res.status).to.equal(202);
    await d1.kill();

    const d2 = await start(dir);
    const status = await d2.waitIdle();
    const admin = await d2.login();
    const names = await d2.usernames(admin);
    if (status.restore.succeeded) expect(names).to.deep.equal(['admin', 'restored-user']);
    else {
      expect(names).to.deep.equal(['admin', 'old-user']);
      expect(status.restore.statusMessage).to.match(/interrupted/);
    }
    expect(existsSync(join(dir, 'db.staged'))).to.equal(false);
    expect(await d2.login('restored-user', GOOD_PASSWORD).then(() => true, () => false)).to.equal(status.restore.succeeded);
  });

  describe('the recovery rule on prepared directories', () => {
    /** A real store whose meta holds a marker. */
    async function storeWithMarker(dir: string, marker: string): Promise<void> {
      const s = openStore({ dir });
      await s.meta.put('test-marker', marker);
      await s.close();
    }
    async function markerOf(dir: string): Promise<unknown> {
      const s = openStore({ dir });
      try {
        return s.meta.get('test-marker');
      } finally {
        await s.close();
      }
    }
    const log = createSilentLogger();

    it('db missing, db.staged present: the swap is completed', async () => {
      const d = dataDir();
      await storeWithMarker(join(d, 'db.staged'), 'restored');
      await storeWithMarker(join(d, 'db.before-restore'), 'old');
      expect(recoverMaintenanceFiles({ dataDir: d, log }).action).to.equal('completed-swap');
      expect(await markerOf(join(d, 'db'))).to.equal('restored');
      expect(await markerOf(join(d, 'db.before-restore'))).to.equal('old');
      expect(existsSync(join(d, 'db.staged'))).to.equal(false);
    });

    it('db missing, only db.before-restore: the previous store is put back', async () => {
      const d = dataDir();
      await storeWithMarker(join(d, 'db.before-restore'), 'old');
      expect(recoverMaintenanceFiles({ dataDir: d, log }).action).to.equal('rolled-back');
      expect(await markerOf(join(d, 'db'))).to.equal('old');
      expect(existsSync(join(d, 'db.before-restore'))).to.equal(false);
    });

    it('db present, db.staged present: the staged copy is discarded', async () => {
      const d = dataDir();
      await storeWithMarker(join(d, 'db'), 'live');
      await storeWithMarker(join(d, 'db.staged'), 'restored');
      expect(recoverMaintenanceFiles({ dataDir: d, log }).action).to.equal('discarded-staged');
      expect(await markerOf(join(d, 'db'))).to.equal('live');
      expect(existsSync(join(d, 'db.staged'))).to.equal(false);
    });

    /** The store directory of a gateway that held `username`, with its status record replaced. */
    async function gatewayStore(username: string, status?: unknown): Promise<string> {
      const gw = await startGateway({ keepDataDir: true });
      dirs.push(gw.dataDir);
      const admin = await gw.login();
      const res = await gw.api('POST', '/api/users', { token: admin, body: { username, password: GOOD_PASSWORD, identityProvider: 'local' } });
      expect(res.status).to.equal(201);
      await gw.stop();
      const db = join(gw.dataDir, 'db');
      if (status) {
        const s = openStore({ dir: db });
        await s.kv.put(STATUS_KEY, status);
        await s.close();
      }
      return db;
    }

    it('a daemon killed mid-swap comes up on the restored store and reports the restore as succeeded', async () => {
      const d = dataDir();
      const swapping = { restore: { id: 'r-1', startDate: '2024-01-01T00:00:00.000Z', running: true, phase: 'swapping', statusMessage: 'restore running', backupId: 'b-1' } };
      renameSync(await gatewayStore('restored-user', swapping), join(d, 'db.staged'));
      renameSync(await gatewayStore('old-user'), join(d, 'db.before-restore'));
      const gw = await startGateway({ dataDir: d });
      try {
        const admin = await gw.login();
        const status = await gw.api('GET', '/api/maintenance/db', { token: admin });
        expect(status.body.running).to.equal(false);
        expect(status.body.restore).to.include({ id: 'r-1', succeeded: true });
        expect(status.body.restore.statusMessage).to.match(/restored backup b-1 \(the swap was completed at start-up/);
        const names = await gw.api('GET', '/api/users/usernames', { token: admin });
        expect(names.body.map((u: { username: string }) => u.username).sort()).to.deep.equal(['admin', 'restored-user']);
        expect(existsSync(join(d, 'db.before-restore'))).to.equal(true);
      } finally {
        await gw.stop();
      }
    });

    it('a daemon killed before the swap comes up on the old store and reports the restore as interrupted', async () => {
      const d = dataDir();
      const checking = { restore: { id: 'r-2', startDate: '2024-01-01T00:00:00.000Z', running: true, statusMessage: 'restore running: checking the archive' } };
      renameSync(await gatewayStore('old-user', checking), join(d, 'db'));
      renameSync(await gatewayStore('restored-user'), join(d, 'db.staged'));
      const gw = await startGateway({ dataDir: d });
      try {
        const admin = await gw.login();
        const status = await gw.api('GET', '/api/maintenance/db', { token: admin });
        expect(status.body.restore).to.include({ id: 'r-2', succeeded: false });
        expect(status.body.restore.statusMessage).to.match(/interrupted/);
        const names = await gw.api('GET', '/api/users/usernames', { token: admin });
        expect(names.body.map((u: { username: string }) => u.username).sort()).to.deep.equal(['admin', 'old-user']);
        expect(existsSync(join(d, 'db.staged'))).to.equal(false);
      } finally {
        await gw.stop();
      }
    });

    it('removes partial archives and maintenance temp files, keeps complete archives and other files', async () => {
      const d = dataDir();
      await storeWithMarker(join(d, 'db'), 'live');
      mkdirSync(join(d, 'backups'));
      writeFileSync(join(d, 'backups', '0.1.0_2024-01-01T00-00-00.000Z.tar.gz'), 'complete');
      writeFileSync(join(d, 'backups', '.0.1.0_2024-01-02T00-00-00.000Z.tar.gz.partial'), 'half');
      mkdirSync(join(d, 'tmp', 'maintenance', 'restore-x', 'db'), { recursive: true });
      writeFileSync(join(d, 'tmp', 'maintenance', 'upload-1'), 'upload');
      writeFileSync(join(d, 'tmp', 'other-part'), 'not ours');
      const report = recoverMaintenanceFiles({ dataDir: d, log });
      expect(report).to.deep.equal({ action: 'none', removedPartialArchives: ['.0.1.0_2024-01-02T00-00-00.000Z.tar.gz.partial'] });
      expect(readdirSync(join(d, 'backups'))).to.deep.equal(['0.1.0_2024-01-01T00-00-00.000Z.tar.gz']);
      expect(readdirSync(join(d, 'tmp', 'maintenance'))).to.deep.equal([]);
      expect(readFileSync(join(d, 'tmp', 'other-part'), 'utf8')).to.equal('not ours');
    });
  });
});
