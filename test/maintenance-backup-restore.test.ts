// Database backup and restore over real HTTP with real archives (docs/design.md §10, contract
// "maintenance"): round trip, every kind of refused archive, upload limit, locking, pruning,
// restore into a fresh data directory and rollback when the restored store cannot be opened.
import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import sinon from 'sinon';
import * as tar from 'tar';
import { gatewaydVersion } from '../src/maintenance/version.js';
import { DATA_FORMAT_VERSION } from '../src/store/index.js';
import { ADMIN_PASSWORD, GOOD_PASSWORD, startGateway, tempDir, type TestGateway } from './support/harness.js';
import { backupAndDownload, upload, waitIdle, type Status } from './support/maintenance-kit.js';
import { connackOf, connect, connectWithInbox, subscribe } from './support/mqtt-test-kit.js';
import { sessionPresent } from './support/broker-crash-kit.js';

const OTHER_PASSWORD = 'An0ther-Passw0rd';
const BACKUP_ID = new RegExp(`^${gatewaydVersion().replaceAll('.', '\\.')}_\\d{4}-\\d{2}-\\d{2}T\\d{2}-\\d{2}-\\d{2}\\.\\d{3}Z$`);
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

// ------------------------------------------------------------------------------ helpers

/** The entries of a .tar.gz, read with the tar package. */
async function readArchive(archive: Buffer): Promise<{ path: string; type: string; body: Buffer }[]> {
  const entries: { path: string; type: string; body: Buffer }[] = [];
  const parser = new tar.Parser({
    strict: true,
    onReadEntry: (e) => {
      const chunks: Buffer[] = [];
      e.on('data', (c: Buffer) => chunks.push(c));
      e.on('end', () => entries.push({ path: e.path, type: e.type, body: Buffer.concat(chunks) }));
    },
  });
  await new Promise<void>((resolve, reject) => {
    parser.on('end', () => resolve());
    parser.on('error', reject);
    parser.end(archive);
  });
  return entries;
}

interface RawEntry {
  path: string;
  body?: Buffer;
  type?: 'File' | 'Directory' | 'SymbolicLink' | 'Link' | 'CharacterDevice' | 'FIFO';
  linkpath?: string;
}

/** A tar written header by header with the tar package, so any name or type can be made. */
function rawTarGz(entries: RawEntry[]): Buffer {
  const blocks: Buffer[] = [];
  for (const e of entries) {
    const body = e.body ?? Buffer.alloc(0);
    const type = e.type ?? 'File';
    const header = new tar.Header({
      path: e.path,
      mode: type === 'Directory' ? 0o755 : 0o644,
      uid: 0,
      gid: 0,
      size: type === 'File' ? body.length : 0,
      mtime: new Date(0),
      type,
      ...(e.linkpath ? { linkpath: e.linkpath } : {}),
    });
    const block = Buffer.alloc(512);
    header.encode(block, 0);
    blocks.push(block);
    if (type === 'File') blocks.push(body, Buffer.alloc((512 - (body.length % 512)) % 512));
  }
  blocks.push(Buffer.alloc(1024));
  return gzipSync(Buffer.concat(blocks));
}

function manifestFor(store: Buffer, overrides: Record<string, unknown> = {}): Buffer {
  return Buffer.from(
    JSON.stringify({
      format: 'gatewayd-backup',
      formatVersion: 1,
      id: `${gatewaydVersion()}_2024-01-01T00-00-00.000Z`,
      gatewaydVersion: gatewaydVersion(),
      storeSchemaVersion: DATA_FORMAT_VERSION,
      createdAt: '2024-01-01T00:00:00.000Z',
      files: { 'db/data.mdb': { size: store.length, sha256: sha256(store) } },
      ...overrides,
    }),
  );
}

function maintenanceTmpIsEmpty(gw: TestGateway): boolean {
  return readdirSync(join(gw.dataDir, 'tmp', 'maintenance')).length === 0;
}

async function createUser(gw: TestGateway, token: string, username: string, password: string, roles: string[] = []) {
  const res = await gw.api('POST', '/api/users', { token, body: { username, password, identityProvider: 'local', roles } });
  expect(res.status, JSON.stringify(res.body)).to.equal(201);
  return res.body as { id: string };
}

async function canLogin(gw: TestGateway, username: string, password: string): Promise<boolean> {
  const res = await gw.api('POST', '/api/login', { body: { username, password } });
  return res.status === 200;
}

async function usernames(gw: TestGateway, token: string): Promise<string[]> {
  const res = await gw.api('GET', '/api/users/usernames', { token });
  expect(res.status).to.equal(200);
  return (res.body as { username: string }[]).map((u) => u.username).sort();
}

// ------------------------------------------------------------------------------ tests

describe('maintenance: backup and restore', function () {
  this.timeout(60_000);

  describe('the broker state', () => {
    let bgw: TestGateway;
    let token: string;
    before(async () => {
      bgw = await startGateway();
      token = await bgw.login();
    });
    after(() => bgw?.stop());

    it('brings back the broker state of the backup: retained messages, persistent sessions and their queues as they were', async () => {
      const admin = { username: 'admin', password: ADMIN_PASSWORD };
      const device = { ...admin, clientId: 'restore-device', clean: false };
      const quiet = { ...admin, clientId: 'restore-quiet', protocolVersion: 5 as const, clean: false, properties: { sessionExpiryInterval: 3600 } };
      const late = { ...admin, clientId: 'restore-late', clean: false };
      const first = await connect(bgw.ports.mqtt, device);
      expect(await subscribe(first, 'plant/cmd/#', 1)).to.deep.equal([1]);
      await first.endAsync();
      await (await connect(bgw.ports.mqtt, quiet)).endAsync();
      const publisher = await connect(bgw.ports.mqtt, admin);
      await publisher.publishAsync('plant/valve', 'open', { qos: 1, retain: true });
      await publisher.publishAsync('plant/cmd/1', 'before the backup', { qos: 1 });
      const { archive } = await backupAndDownload(bgw, token);
      await publisher.publishAsync('plant/valve', 'closed', { qos: 1, retain: true });
      await publisher.publishAsync('plant/new', 'not in the backup', { qos: 1, retain: true });
      await publisher.publishAsync('plant/cmd/2', 'after the backup', { qos: 1 });
      await publisher.endAsync();
      await (await connect(bgw.ports.mqtt, late)).endAsync();
      expect((await upload(bgw, token, archive)).status).to.equal(202);
      const status = await waitIdle(bgw);
      expect(status.restore?.succeeded, status.restore?.statusMessage).to.equal(true);

      const back = await connectWithInbox(bgw.ports.mqtt, device);
      expect(sessionPresent(back.client), 'the session of the backup').to.equal(true);
      await back.inbox.until((m) => m.topic === 'plant/cmd/1');
      expect(await connackOf(bgw.ports.mqtt, quiet), 'a session without subscriptions of the backup').to.deep.equal({ sessionPresent: true, code: 0 });
      expect(await connackOf(bgw.ports.mqtt, late), 'a session made after the backup').to.deep.equal({ sessionPresent: false, code: 0 });
      const reader = await connectWithInbox(bgw.ports.mqtt, admin);
      await subscribe(reader.client, 'plant/#', 1);
      expect((await reader.inbox.until((m) => m.topic === 'plant/valve')).payload).to.equal('open');
      // A marker published now arrives after anything retained or queued.
      const marker = await connect(bgw.ports.mqtt, admin);
      await marker.publishAsync('plant/cmd/marker', 'm', { qos: 1 });
      await back.inbox.until((m) => m.topic === 'plant/cmd/marker');
      await reader.inbox.until((m) => m.topic === 'plant/cmd/marker');
      expect(back.inbox.messages.map((m) => m.payload), 'the queue of the backup').to.deep.equal(['before the backup', 'm']);
      expect(reader.inbox.messages.map((m) => m.topic), 'retained topics of the backup').to.not.include('plant/new');
      await Promise.all([back.client.endAsync(), reader.client.endAsync(), marker.endAsync()]);
    });
  });

  describe('round trip on one gateway', () => {
    let gw: TestGateway;
    let admin: string;
    let dataDir: string;
    before(async () => {
      gw = await startGateway({ keepDataDir: true });
      dataDir = gw.dataDir;
      admin = await gw.login();
    });
    after(async () => {
      await gw?.stop();
      rmSync(dataDir, { recursive: true, force: true });
    });

    it('GET /api/maintenance/db reports nothing yet, and download is 404 without an archive', async () => {
      const status = await gw.api('GET', '/api/maintenance/db', { token: admin });
      expect(status.status).to.equal(200);
      expect(status.body).to.deep.equal({ running: false });
      const dl = await gw.api('GET', '/api/maintenance/db/backup', { token: admin });
      expect(dl.status).to.equal(404);
      expect(dl.body.message).to.match(/no backup archive/);
    });

    it('backs up, restores exactly the backed-up state, and logs in with the old password', async () => {
      // State A: a role and a user holding it.
      const role = await gw.api('POST', '/api/roles', {
        token: admin,
        body: { name: 'operators', isShared: true, permissions: [{ resource: '/api/roles/#', operation: 'read', context: 'http' }] },
      });
      expect(role.status, JSON.stringify(role.body)).to.be.oneOf([200, 201]);
      const alice = await createUser(gw, admin, 'alice', GOOD_PASSWORD, [role.body.id]);

      const { id, archive, res } = await backupAndDownload(gw, admin);
      expect(id).to.match(BACKUP_ID);
      expect(res.headers.get('content-type')).to.equal('application/gzip');
      expect(res.headers.get('content-disposition')).to.equal(`attachment; filename="${id}.tar.gz"`);
      expect(readdirSync(join(gw.dataDir, 'backups'))).to.deep.equal([`${id}.tar.gz`]);

      // The archive: exactly the manifest and the store, checksums that match.
      const entries = await readArchive(archive);
      expect(entries.map((e) => e.path)).to.deep.equal(['manifest.json', 'db/data.mdb']);
      const manifest = JSON.parse(entries[0]!.body.toString('utf8'));
      expect(manifest).to.include({ format: 'gatewayd-backup', id, gatewaydVersion: gatewaydVersion(), storeSchemaVersion: DATA_FORMAT_VERSION });
      expect(Date.parse(manifest.createdAt)).to.be.a('number').and.not.NaN;
      expect(manifest.files['db/data.mdb']).to.deep.equal({ size: entries[1]!.body.length, sha256: sha256(entries[1]!.body) });

      // State B: alice deleted, bob and a role added, bob logged in.
      expect((await gw.api('DELETE', `/api/users/${alice.id}`, { token: admin })).status).to.equal(200);
      const bob = await createUser(gw, admin, 'bob', OTHER_PASSWORD);
      const late = await gw.api('POST', '/api/roles', { token: admin, body: { name: 'late-role', isShared: true } });
      expect(late.status).to.be.oneOf([200, 201]);
      const bobToken = await gw.login('bob', OTHER_PASSWORD);
      expect(await usernames(gw, admin)).to.deep.equal(['admin', 'bob']);

      const revoked: string[] = [];
      const unsubscribe = gw.services.events.on((change) => change.kind === 'revoked' && revoked.push(change.userId));
      const restore = await upload(gw, admin, archive);
      expect(restore.status, JSON.stringify(restore.body)).to.equal(202);
      expect(restore.body).to.equal('');
      const status = await waitIdle(gw);
      unsubscribe();
      // Every user of the replaced store was revoked (their MQTT sessions close).
      expect(revoked).to.include(bob.id);
      expect(status.restore?.succeeded, status.restore?.statusMessage).to.equal(true);
      expect(status.restore?.statusMessage).to.contain(id);
      expect(status.restore?.endDate).to.be.a('string');
      // The last backup is still reported after the restore.
      expect(status.backup?.id).to.equal(id);

      // Exactly state A again.
      const token = await gw.login();
      expect(await usernames(gw, token)).to.deep.equal(['admin', 'alice']);
      expect(await canLogin(gw, 'alice', GOOD_PASSWORD)).to.equal(true);
      expect(await canLogin(gw, 'bob', OTHER_PASSWORD)).to.equal(false);
      const roles = await gw.api('GET', '/api/roles/names', { token });
      const roleNames = (roles.body as ({ name: string } | string)[]).map((r) => (typeof r === 'string' ? r : r.name));
      expect(roleNames).to.include('operators').and.not.include('late-role');
      // Tokens issued after the backup are gone; the permission cache reloaded from the new store.
      expect((await gw.api('GET', '/api/users/ids', { token: bobToken })).status).to.equal(401);
      const aliceToken = await gw.login('alice', GOOD_PASSWORD);
      expect((await gw.api('GET', '/api/roles', { token: aliceToken })).status).to.equal(200);
      expect((await gw.api('GET', '/api/users/ids', { token: aliceToken })).status).to.equal(403);

      // The previous store is kept, nothing is left behind.
      expect(existsSync(join(gw.dataDir, 'db.before-restore', 'data.mdb'))).to.equal(true);
      expect(existsSync(join(gw.dataDir, 'db.staged'))).to.equal(false);
      expect(maintenanceTmpIsEmpty(gw)).to.equal(true);
      const audit = gw.logs().filter((l) => l.audit).map((l) => l.message);
      expect(audit).to.include.members(['database backup started', 'database backup completed', 'database restore started', 'database restore completed']);
    });

    it('the status survives a restart (kept in the store)', async () => {
      const before = await waitIdle(gw);
      await gw.stop();
      gw = await startGateway({ dataDir });
      const after = await waitIdle(gw);
      expect(after).to.deep.equal(before);
    });
  });

  describe('refused archives change nothing', () => {
    let gw: TestGateway;
    let admin: string;
    let storeFile: Buffer;
    let goodManifest: Buffer;

    before(async () => {
      gw = await startGateway();
      admin = await gw.login();
      await createUser(gw, admin, 'marker', GOOD_PASSWORD);
      const { archive } = await backupAndDownload(gw, admin);
      const entries = await readArchive(archive);
      goodManifest = entries.find((e) => e.path === 'manifest.json')!.body;
      storeFile = entries.find((e) => e.path === 'db/data.mdb')!.body;
      // After the backup: a user that a (wrong) restore would remove.
      await createUser(gw, admin, 'after-backup', GOOD_PASSWORD);
    });
    after(async () => gw?.stop());

    async function expectRefused(archive: Buffer, reason: RegExp): Promise<void> {
      const res = await upload(gw, admin, archive);
      expect(res.status, JSON.stringify(res.body)).to.equal(400);
      expect(res.body.statusCode).to.equal(400);
      expect(res.body.message).to.match(/^restore refused: /).and.match(reason);
      const status = await gw.api<Status>('GET', '/api/maintenance/db', { token: admin });
      expect(status.body.running).to.equal(false);
      expect(status.body.restore?.succeeded).to.equal(false);
      expect(status.body.restore?.statusMessage).to.match(reason);
      // The live store is untouched: same users, the same token still works.
      expect(await usernames(gw, admin)).to.deep.equal(['admin', 'after-backup', 'marker']);
      expect(existsSync(join(gw.dataDir, 'db.staged'))).to.equal(false);
      expect(existsSync(join(gw.dataDir, 'db.before-restore'))).to.equal(false);
      expect(maintenanceTmpIsEmpty(gw)).to.equal(true);
    }

    const good = () => [
      { path: 'manifest.json', body: goodManifest },
      { path: 'db/data.mdb', body: storeFile },
    ];

    it('an entry with ".."', async () => {
      await expectRefused(rawTarGz([...good(), { path: '../evil.sh', body: Buffer.from('#!/bin/sh\n') }]), /"\.\." path segment/);
      await expectRefused(rawTarGz([{ path: 'db/../manifest.json', body: goodManifest }, good()[1]!]), /"\.\." path segment/);
    });

    it('an absolute entry', async () => {
      await expectRefused(rawTarGz([...good(), { path: '/etc/cron.d/evil', body: Buffer.from('x') }]), /absolute path/);
    });

    it('a symlink (made with the tar command line) and a hard link', async () => {
      const dir = tempDir('gatewayd-tar-');
      mkdirSync(join(dir, 'db'));
      writeFileSync(join(dir, 'manifest.json'), goodManifest);
      symlinkSync('/etc/passwd', join(dir, 'db', 'data.mdb'));
      execFileSync('tar', ['-czf', join(dir, 'link.tar.gz'), '-C', dir, 'manifest.json', 'db/data.mdb']);
      const linkArchive = readFileSync(join(dir, 'link.tar.gz'));
      rmSync(dir, { recursive: true, force: true });
      await expectRefused(linkArchive, /is a link; links are not allowed/);
      await expectRefused(rawTarGz([good()[0]!, { path: 'db/data.mdb', type: 'Link', linkpath: 'manifest.json' }]), /links are not allowed/);
    });

    it('a device or FIFO entry', async () => {
      await expectRefused(rawTarGz([...good(), { path: 'db/console', type: 'CharacterDevice' }]), /device or FIFO/);
      await expectRefused(rawTarGz([...good(), { path: 'db/fifo', type: 'FIFO' }]), /device or FIFO/);
    });

    it('a truncated archive', async () => {
      const archive = rawTarGz(good());
      await expectRefused(archive.subarray(0, Math.floor(archive.length / 2)), /not valid gzip|not a valid tar|truncated|unexpected end/i);
      // A complete gzip stream around a tar cut inside the store file.
      const tarOnly = gunzipSync(archive);
      await expectRefused(gzipSync(tarOnly.subarray(0, tarOnly.length - 4096)), /not a valid tar: Truncated input/i);
    });

    it('a wrong checksum', async () => {
      const tampered = Buffer.from(storeFile);
      tampered[tampered.length - 1] = tampered[tampered.length - 1]! ^ 0xff;
      await expectRefused(rawTarGz([good()[0]!, { path: 'db/data.mdb', body: tampered }]), /checksum mismatch for db\/data\.mdb/);
    });

    it('a missing manifest', async () => {
      await expectRefused(rawTarGz([good()[1]!]), /manifest\.json is missing/);
    });

    it('an invalid manifest', async () => {
      await expectRefused(rawTarGz([{ path: 'manifest.json', body: Buffer.from('{not json') }, good()[1]!]), /manifest\.json is not valid JSON/);
      await expectRefused(rawTarGz([{ path: 'manifest.json', body: manifestFor(storeFile, { files: {} }) }, good()[1]!]), /files must list exactly/);
    });

    it('an extra entry, or a duplicate entry', async () => {
      await expectRefused(rawTarGz([...good(), { path: 'db/extra.mdb', body: Buffer.from('x') }]), /unexpected entry "db\/extra\.mdb"/);
      await expectRefused(rawTarGz([...good(), good()[1]!]), /appears more than once/);
    });

    it('a newer data format is refused naming both formats and the release that reads it; a format no release writes too', async () => {
      const manifest = manifestFor(storeFile, { storeSchemaVersion: DATA_FORMAT_VERSION + 1, gatewaydVersion: '9.0.0' });
      await expectRefused(
        rawTarGz([{ path: 'manifest.json', body: manifest }, good()[1]!]),
        new RegExp(`data format ${DATA_FORMAT_VERSION + 1} \\(written by gatewayd 9\\.0\\.0\\); this gatewayd ${gatewaydVersion().replaceAll('.', '\\.')} reads data format ${DATA_FORMAT_VERSION} and older: restore it with gatewayd 9\\.0\\.0 or later`),
      );
      await expectRefused(rawTarGz([{ path: 'manifest.json', body: manifestFor(storeFile, { storeSchemaVersion: 0 }) }, good()[1]!]), /data format 0 .* restores data formats 1 to \d+/);
    });

    it('a manifest whose data format is not the store\'s is refused', async () => {
      await expectRefused(rawTarGz([{ path: 'manifest.json', body: manifestFor(storeFile, { storeSchemaVersion: 1 }) }, good()[1]!]), new RegExp(`the store in the archive has data format ${DATA_FORMAT_VERSION}; its manifest says 1`));
    });

    it('a file that is not gzip', async () => {
      await expectRefused(Buffer.from('this is not an archive\n'.repeat(10)), /not a gzip-compressed tar/);
      // A plain (uncompressed) tar is not accepted either.
      await expectRefused(gunzipSync(rawTarGz(good())), /not a gzip-compressed tar/);
    });

    it('a store file that is not an LMDB store, with a matching checksum (checked in a separate process)', async () => {
      const garbage = Buffer.alloc(64 * 1024, 7);
      await expectRefused(rawTarGz([{ path: 'manifest.json', body: manifestFor(garbage) }, { path: 'db/data.mdb', body: garbage }]), /the store in the archive (is corrupt|cannot be used)/);
      // The daemon is still alive and serving.
      expect((await gw.api('GET', '/api/users/ids', { token: admin })).status).to.equal(200);
    });

    it('a request without the file field is 400 and releases the lock', async () => {
      const form = new FormData();
      form.append('other', 'x');
      const res = await gw.api('POST', '/api/maintenance/db/restore', { token: admin, raw: form });
      expect(res.status).to.equal(400);
      expect(res.body.message).to.match(/'file'/);
      const next = await upload(gw, admin, Buffer.from('plain'));
      expect(next.status).to.equal(400);
    });

    it('the same archive, unmodified, is accepted (control)', async () => {
      const res = await upload(gw, admin, rawTarGz(good()));
      expect(res.status, JSON.stringify(res.body)).to.equal(202);
      const status = await waitIdle(gw);
      expect(status.restore?.succeeded, status.restore?.statusMessage).to.equal(true);
      admin = await gw.login();
      expect(await usernames(gw, admin)).to.deep.equal(['admin', 'marker']);
    });
  });

  describe('limits, locking and permissions', () => {
    it('413 for an upload beyond maintenance.uploadLimitBytes; the temporary file is removed', async () => {
      const gw = await startGateway({ overrides: { maintenance: { uploadLimitBytes: 2048 } } });
      try {
        const admin = await gw.login();
        const res = await upload(gw, admin, Buffer.alloc(64 * 1024, 1));
        expect(res.status).to.equal(413);
        expect(res.body).to.include({ statusCode: 413, error: 'Payload Too Large' });
        expect(res.body.message).to.match(/upload limit of 2048 bytes/);
        const status = await waitIdle(gw);
        expect(status.restore?.succeeded).to.equal(false);
        expect(status.restore?.statusMessage).to.match(/upload limit/);
        expect(maintenanceTmpIsEmpty(gw)).to.equal(true);
        // The lock is free again.
        expect((await gw.api('POST', '/api/maintenance/db/backup', { token: admin })).status).to.equal(202);
        await waitIdle(gw);
      } finally {
        await gw.stop();
      }
    });

    it('423 for backup, download and restore while a backup runs; the rest of the API stays available', async () => {
      // 100 bytes/s: the archive (> 1 kB) cannot be written in less than 10 s.
      const gw = await startGateway({ overrides: { maintenance: { ioBytesPerSecond: 100 } }, keepDataDir: true });
      const dataDir = gw.dataDir;
      let restarted: TestGateway | undefined;
      try {
        const admin = await gw.login();
        const started = await gw.api('POST', '/api/maintenance/db/backup', { token: admin });
        expect(started.status).to.equal(202);
        expect(started.body).to.match(BACKUP_ID);

        const again = await gw.api('POST', '/api/maintenance/db/backup', { token: admin });
        expect(again.status).to.equal(423);
        expect(again.body).to.include({ statusCode: 423, error: 'Locked' });
        expect((await gw.api('GET', '/api/maintenance/db/backup', { token: admin })).status).to.equal(423);
        expect((await upload(gw, admin, Buffer.from('x'))).status).to.equal(423);

        const status = await gw.api<Status>('GET', '/api/maintenance/db', { token: admin });
        expect(status.status).to.equal(200);
        expect(status.body.running).to.equal(true);
        expect(status.body.backup).to.include({ id: started.body });
        expect(status.body.backup).to.not.have.property('succeeded');
        // Reads and writes go on.
        await createUser(gw, admin, 'during-backup', GOOD_PASSWORD);
        expect(await usernames(gw, admin)).to.deep.equal(['admin', 'during-backup']);

        // Stopping aborts the backup: no archive, recorded as failed.
        await gw.stop();
        expect(readdirSync(join(dataDir, 'backups'))).to.deep.equal([]);
        restarted = await startGateway({ dataDir });
        const after = await waitIdle(restarted);
        expect(after.backup).to.include({ id: started.body, succeeded: false });
        expect(after.backup?.statusMessage).to.match(/aborted because gatewayd is stopping/);
        expect((await restarted.api('GET', '/api/maintenance/db/backup', { token: await restarted.login() })).status).to.equal(404);
      } finally {
        await restarted?.stop();
        rmSync(dataDir, { recursive: true, force: true });
      }
    });

    it('backup, restore and download need the permission on their path; 403 comes before any upload', async () => {
      const gw = await startGateway();
      try {
        const reader = await gw.userWith([{ resource: '/api/maintenance/#', operation: 'read', context: 'http' }]);
        expect((await gw.api('GET', '/api/maintenance/db', { token: reader.token })).status).to.equal(200);
        expect((await gw.api('POST', '/api/maintenance/db/backup', { token: reader.token })).status).to.equal(403);
        expect((await upload(gw, reader.token, Buffer.alloc(1024))).status).to.equal(403);
        expect((await upload(gw, '', Buffer.alloc(1024))).status).to.equal(401);
        // Nothing was recorded or left behind, the lock is free.
        const status = await gw.api<Status>('GET', '/api/maintenance/db', { token: reader.token });
        expect(status.body).to.deep.equal({ running: false });
        expect(maintenanceTmpIsEmpty(gw)).to.equal(true);
      } finally {
        await gw.stop();
      }
    });

    it('keeps maintenance.backupsToKeep archives and downloads the newest', async () => {
      const gw = await startGateway({ overrides: { maintenance: { backupsToKeep: 2 } } });
      try {
        const admin = await gw.login();
        const ids: string[] = [];
        for (let i = 0; i < 3; i++) ids.push((await backupAndDownload(gw, admin)).id);
        expect(new Set(ids).size).to.equal(3);
        expect(readdirSync(join(gw.dataDir, 'backups')).sort()).to.deep.equal(ids.slice(1).map((id) => `${id}.tar.gz`).sort());
        const res = await fetch(`${gw.baseUrl}/api/maintenance/db/backup`, { headers: { authorization: `Bearer ${admin}` } });
        expect(res.headers.get('content-disposition')).to.equal(`attachment; filename="${ids[2]}.tar.gz"`);
        await res.arrayBuffer();
      } finally {
        await gw.stop();
      }
    });
  });

  describe('restore into another data directory', () => {
    it('restores an archive (repacked with the tar command line) on a fresh gateway', async () => {
      const source = await startGateway();
      let archive: Buffer;
      try {
        const admin = await source.login();
        await createUser(source, admin, 'carol', OTHER_PASSWORD);
        archive = (await backupAndDownload(source, admin)).archive;
      } finally {
        await source.stop();
      }
      // Unpack and pack again with GNU tar: operators may do that; the layout is what counts.
      const dir = tempDir('gatewayd-repack-');
      writeFileSync(join(dir, 'in.tar.gz'), archive);
      mkdirSync(join(dir, 'x'));
      execFileSync('tar', ['-xzf', join(dir, 'in.tar.gz'), '-C', join(dir, 'x')]);
      execFileSync('tar', ['-czf', join(dir, 'out.tar.gz'), '-C', join(dir, 'x'), 'manifest.json', 'db']);
      const repacked = readFileSync(join(dir, 'out.tar.gz'));
      rmSync(dir, { recursive: true, force: true });

      const fresh = await startGateway();
      try {
        const admin = await fresh.login();
        expect(await usernames(fresh, admin)).to.deep.equal(['admin']);
        const res = await upload(fresh, admin, repacked);
        expect(res.status, JSON.stringify(res.body)).to.equal(202);
        const status = await waitIdle(fresh);
        expect(status.restore?.succeeded, status.restore?.statusMessage).to.equal(true);
        expect(await canLogin(fresh, 'carol', OTHER_PASSWORD)).to.equal(true);
        expect(await usernames(fresh, await fresh.login())).to.deep.equal(['admin', 'carol']);
      } finally {
        await fresh.stop();
      }
    });
  });

  describe('rollback', () => {
    it('puts the previous store back when the restored store cannot be opened', async () => {
      const gw = await startGateway();
      try {
        let admin = await gw.login();
        const { archive } = await backupAndDownload(gw, admin);
        await createUser(gw, admin, 'kept', GOOD_PASSWORD);
        const store = gw.services.store;
        const original = store.reopen.bind(store);
        // The first reopen swaps the files, then fails as if LMDB could not open the new store.
        const stub = sinon.stub(store, 'reopen');
        stub.onFirstCall().callsFake((swap) =>
          original(async (dir) => {
            await swap(dir);
            throw new Error('simulated open failure');
          }),
        );
        stub.callsFake(original);
        try {
          expect((await upload(gw, admin, archive)).status).to.equal(202);
          const status = await waitIdle(gw);
          expect(stub.callCount).to.equal(2);
          expect(status.restore?.succeeded).to.equal(false);
          expect(status.restore?.statusMessage).to.match(/could not be opened \(simulated open failure\); the previous store was put back/);
        } finally {
          stub.restore();
        }
        admin = await gw.login();
        expect(await usernames(gw, admin)).to.deep.equal(['admin', 'kept']);
        expect(existsSync(join(gw.dataDir, 'db.staged'))).to.equal(false);
        expect(maintenanceTmpIsEmpty(gw)).to.equal(true);
      } finally {
        await gw.stop();
      }
    });
  });
});
