// The data directory's format (issue 39 point 2, docs/design.md §16): an older format is copied
// (backups/before-upgrade) and migrated in one transaction, idempotently, and said in the log; a
// newer one is refused in one line with exit 78 and never opened for writing; backups carry the
// format, an older archive is migrated when restored. The "older" store here is the format-1 layout
// made from today's: what releases before 1.0.0 wrote (the audit index without its category and
// endpoint keys); test/upgrade-from-releases.test.ts runs the real earlier releases.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { gunzipSync } from 'node:zlib';
import { expect } from 'chai';
import sinon from 'sinon';
import { addMissingAuditIndexKeys, openAuditDatabases } from '../src/audit/audit-reindex.js';
import { MIGRATIONS, readDataFormat, stepsFrom } from '../src/data-format/index.js';
import { createLogger } from '../src/log/index.js';
import { backupBytes, beforeUpgradeArchives, upgradeDataDirectory } from '../src/maintenance/data-upgrade.js';
import { maintenancePaths } from '../src/maintenance/paths.js';
import { gatewaydVersion } from '../src/maintenance/version.js';
import { DATA_FORMAT_VERSION, DataFormatError, FORMAT_KEY, FORMAT_WRITTEN_BY_KEY, OLDEST_DATA_FORMAT, openStore, STORE_FILE, type IndexKey } from '../src/store/index.js';
import { daemonTestEnv, mainScript, startGateway, tempDir, type TestGateway } from './support/harness.js';
import { upload, waitIdle } from './support/maintenance-kit.js';

/** A logger whose JSON lines the test reads. */
function recordingLogger() {
  const lines: Record<string, any>[] = [];
  const log = createLogger({ level: 'info', stream: new Writable({ write: (c, _e, cb) => (lines.push(JSON.parse(String(c))), cb()) }) });
  return { log, lines };
}

/** Data directories the tests made, removed at the end. */
const made: string[] = [];

const sha256 = (file: string) => createHash('sha256').update(readFileSync(file)).digest('hex');

/**
 * A data directory as a release before 1.0.0 left it: a gateway ran (logins and a user made
 * audit events), then the store gets format 1's layout: no category (c) or endpoint (e) index
 * keys in the audit trail, format number 1, no writer recorded.
 */
async function formatOneDataDir(): Promise<{ dataDir: string; removedKeys: number; records: number }> {
  const gw = await startGateway({ keepDataDir: true });
  const admin = await gw.login();
  await gw.api('POST', '/api/users', { token: admin, body: { username: 'oldtimer', password: 'Str0ng-Password', identityProvider: 'local' } });
  await gw.api('POST', '/api/login', { body: { username: 'oldtimer', password: 'wrong-password' } });
  const dataDir = gw.dataDir;
  made.push(dataDir);
  await gw.stop();
  const store = openStore({ dir: join(dataDir, 'db') });
  const { records, index } = openAuditDatabases(store);
  const newer = [...index.getKeys()].filter((k) => (k as IndexKey)[0] === 'c' || (k as IndexKey)[0] === 'e') as IndexKey[];
  await store.transaction(() => {
    for (const k of newer) void index.remove(k);
    void store.meta.put(FORMAT_KEY, 1);
    void store.meta.remove(FORMAT_WRITTEN_BY_KEY);
  });
  const count = [...records.getKeys()].length;
  await store.close();
  return { dataDir, removedKeys: newer.length, records: count };
}

/** Index keys by tag in a data directory's store. */
function indexTags(dataDir: string): Record<string, number> {
  const store = openStore({ dir: join(dataDir, 'db'), acceptOlderFormat: true });
  try {
    const tags: Record<string, number> = {};
    for (const k of openAuditDatabases(store).index.getKeys()) tags[String((k as IndexKey)[0])] = (tags[String((k as IndexKey)[0])] ?? 0) + 1;
    return tags;
  } finally {
    void store.close();
  }
}

/** The manifest of a .tar.gz archive (its first entry). */
function manifestOf(archive: string): Record<string, any> {
  const tar = gunzipSync(readFileSync(archive));
  const size = parseInt(tar.subarray(124, 136).toString('utf8').replace(/\0.*$/, '').trim(), 8);
  expect(tar.subarray(0, 100).toString('utf8').replace(/\0.*$/s, '')).to.equal('manifest.json');
  return JSON.parse(tar.subarray(512, 512 + size).toString('utf8'));
}

describe('the data format', function () {
  this.timeout(60_000);
  after(() => {
    for (const dir of made) rmSync(dir, { recursive: true, force: true });
  });

  it('every format from the oldest to this build has its migration step, in order', () => {
    expect(DATA_FORMAT_VERSION).to.equal(2);
    expect(stepsFrom(OLDEST_DATA_FORMAT).map((s) => s.to)).to.deep.equal(MIGRATIONS.map((m) => m.to));
    expect(stepsFrom(DATA_FORMAT_VERSION)).to.deep.equal([]);
  });

  describe('an older format at start', () => {
    let old: Awaited<ReturnType<typeof formatOneDataDir>>;
    before(async () => {
      old = await formatOneDataDir();
    });

    it('is copied as it is, then migrated in one transaction, said in the log; the next start finds it current', async () => {
      expect(old.removedKeys, 'the made-up format 1 lacks category keys').to.be.greaterThan(0);
      expect(readDataFormat(join(old.dataDir, 'db'))).to.deep.equal({ format: 1 });
      const { log, lines } = recordingLogger();
      const outcome = await upgradeDataDirectory({ dataDir: old.dataDir, log });
      expect(outcome.action).to.equal('migrated');
      if (outcome.action !== 'migrated') return;

      // The copy: format 1 as it was, a complete backup archive of its own.
      const p = maintenancePaths(old.dataDir);
      expect(outcome.backup).to.match(new RegExp(`^${p.beforeUpgrade}/format-1_\\d{4}-.*Z\\.tar\\.gz$`));
      expect(readdirSync(p.beforeUpgrade)).to.deep.equal([outcome.backup.slice(p.beforeUpgrade.length + 1)]);
      expect(manifestOf(outcome.backup)).to.include({ format: 'gatewayd-backup', storeSchemaVersion: 1, gatewaydVersion: gatewaydVersion() });
      expect(statSync(outcome.backup).mode & 0o777).to.equal(0o600);
      expect(await backupBytes(p)).to.equal(statSync(outcome.backup).size);

      // The store: format 2, written by this release, every record indexed by category again.
      expect(readDataFormat(join(old.dataDir, 'db'))).to.deep.equal({ format: DATA_FORMAT_VERSION, writtenBy: gatewaydVersion() });
      expect(outcome.migration.steps).to.have.lengthOf(1);
      expect(outcome.migration.steps[0]!.counts).to.deep.equal({ auditRecords: old.records, auditIndexKeysAdded: old.removedKeys });
      expect(indexTags(old.dataDir).c).to.equal(old.records);

      // The log: both steps, at any level (lifecycle lines).
      expect(lines.map((l) => l.message)).to.include.members(['data format upgrade: copying the data as it is first', 'data format migrated']);
      const migrated = lines.find((l) => l.message === 'data format migrated')!;
      expect(migrated).to.include({ from: 1, to: DATA_FORMAT_VERSION, backup: outcome.backup });

      // Again: nothing to do, no second copy.
      expect(await upgradeDataDirectory({ dataDir: old.dataDir, log })).to.deep.equal({ action: 'current' });
      expect(readdirSync(p.beforeUpgrade)).to.have.lengthOf(1);
    });

    it('the step is idempotent: run on a store it already changed, it adds nothing', async () => {
      const store = openStore({ dir: join(old.dataDir, 'db') });
      try {
        const dbs = openAuditDatabases(store);
        const counts = await store.transaction(() => addMissingAuditIndexKeys(dbs));
        expect(counts).to.deep.equal({ auditRecords: old.records, auditIndexKeysAdded: 0 });
      } finally {
        await store.close();
      }
    });
  });

  it('a migration cut in the middle commits nothing: the store stays format 1 as it was, a start afterwards migrates (one copy kept)', async () => {
    const old = await formatOneDataDir();
    const before = indexTags(old.dataDir);
    const step = MIGRATIONS[0]!;
    // The step writes its keys, then fails (a bug, a full disk): the transaction must undo them.
    const fault = sinon.stub(step, 'prepare').callsFake((store) => {
      const run = fault.wrappedMethod.call(step, store);
      return () => {
        run();
        throw new Error('fault injected after the step wrote');
      };
    });
    try {
      const { log } = recordingLogger();
      const err = await upgradeDataDirectory({ dataDir: old.dataDir, log, now: () => new Date('2026-01-01T00:00:00Z') }).then(() => undefined, (e: unknown) => e);
      expect(err).to.be.instanceOf(DataFormatError);
      expect((err as Error).message).to.match(/from data format 1 to 2 failed while migrating \(fault injected after the step wrote\); the data is unchanged \(format 1\)/);
    } finally {
      fault.restore();
    }
    expect(readDataFormat(join(old.dataDir, 'db'))).to.deep.equal({ format: 1 });
    expect(indexTags(old.dataDir)).to.deep.equal(before);

    const { log } = recordingLogger();
    const outcome = await upgradeDataDirectory({ dataDir: old.dataDir, log });
    expect(outcome.action).to.equal('migrated');
    // The copy of the failed try is replaced by the one taken right before this migration.
    const archives = beforeUpgradeArchives(maintenancePaths(old.dataDir));
    expect(archives.map((a) => a.file)).to.deep.equal([(outcome as { backup: string }).backup]);
    expect(indexTags(old.dataDir).c).to.equal(old.records);
  });

  describe('a newer format', () => {
    let dataDir: string;
    let storeFile: string;
    before(async () => {
      const gw = await startGateway({ keepDataDir: true });
      dataDir = gw.dataDir;
      made.push(dataDir);
      await gw.stop();
      const store = openStore({ dir: join(dataDir, 'db') });
      await store.transaction(() => {
        void store.meta.put(FORMAT_KEY, DATA_FORMAT_VERSION + 1);
        void store.meta.put(FORMAT_WRITTEN_BY_KEY, '9.9.9');
      });
      await store.close();
      storeFile = join(dataDir, 'db', STORE_FILE);
    });

    it('the daemon refuses it in one line, exit 78, naming both formats, the release that wrote it and the copy to go back to; the store file is not written', async () => {
      // The copy a 9.9.9 took before it migrated this directory from this build's format.
      const p = maintenancePaths(dataDir);
      const copy = join(p.beforeUpgrade, `format-${DATA_FORMAT_VERSION}_2026-05-01T10-00-00.000Z.tar.gz`);
      mkdirSync(p.beforeUpgrade, { recursive: true });
      writeFileSync(copy, 'an archive');
      writeFileSync(join(p.beforeUpgrade, `format-${DATA_FORMAT_VERSION}_2025-05-01T10-00-00.000Z.tar.gz`), 'an older one');
      const hash = sha256(storeFile);
      const mtime = statSync(storeFile).mtimeMs;
      // What a start would clean up after the newer release is left to it too.
      const partial = join(p.backups, '.9.9.9_2026-05-01T10-00-00.000Z.tar.gz.partial');
      writeFileSync(partial, 'half');

      const child = spawn(process.execPath, [mainScript], { env: daemonTestEnv(dataDir), stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d) => (stdout += d));
      child.stderr.on('data', (d) => (stderr += d));
      const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
      expect(code).to.equal(78);
      const lines = stderr.split('\n').filter((l) => l && !l.includes('warning: Node'));
      expect(lines).to.have.lengthOf(1);
      expect(lines[0]).to.equal(
        `gatewayd: the data directory ${dataDir} holds data format ${DATA_FORMAT_VERSION + 1}, written by gatewayd 9.9.9; gatewayd ${gatewaydVersion()} reads data formats 1 to ${DATA_FORMAT_VERSION}: ` +
          `run gatewayd 9.9.9 or later on it, or go back to the data of before that upgrade: stop gatewayd, move ${join(dataDir, 'db')} aside and unpack ${copy} into ${dataDir} ` +
          `(tar -xzf <archive> -C ${dataDir} db/data.mdb); see docs/operations.md "Rolling back"`,
      );
      expect(stdout).to.not.include('"ready"');
      expect(sha256(storeFile)).to.equal(hash);
      expect(statSync(storeFile).mtimeMs).to.equal(mtime);
      expect(readDataFormat(join(dataDir, 'db'))).to.deep.equal({ format: DATA_FORMAT_VERSION + 1, writtenBy: '9.9.9' });
      expect(existsSync(partial), "the newer release's half-written archive").to.equal(true);
    });

    it('without a copy to go back to, the line says to restore a backup of this format or older', async () => {
      const p = maintenancePaths(dataDir);
      const err = await upgradeDataDirectory({ dataDir: join(dataDir, 'nowhere-else'), log: recordingLogger().log }).then(() => undefined, (e: unknown) => e);
      expect(err, 'an empty directory is a new one').to.equal(undefined);
      for (const a of beforeUpgradeArchives(p)) rmSync(a.file);
      const refused = await upgradeDataDirectory({ dataDir, log: recordingLogger().log }).then(() => undefined, (e: unknown) => e);
      expect(refused).to.be.instanceOf(DataFormatError);
      expect((refused as Error).message).to.match(new RegExp(`restore a backup of data format ${DATA_FORMAT_VERSION} or older \\(there is none in ${p.beforeUpgrade}\\); see docs/operations.md "Rolling back"$`));
    });
  });

  describe('backups and restores', () => {
    let gw: TestGateway;
    let formatOneArchive: Buffer;
    let old: Awaited<ReturnType<typeof formatOneDataDir>>;
    before(async () => {
      old = await formatOneDataDir();
      const { log } = recordingLogger();
      const outcome = await upgradeDataDirectory({ dataDir: old.dataDir, log });
      formatOneArchive = readFileSync((outcome as { backup: string }).backup);
      gw = await startGateway();
    });
    after(() => gw?.stop());

    it('the copy taken before the upgrade restores on this release: its format 1 is migrated when staged, the old records are found by category', async () => {
      const admin = await gw.login();
      const res = await upload(gw, admin, formatOneArchive, 'format-1.tar.gz');
      expect(res.status, JSON.stringify(res.body)).to.equal(202);
      const status = await waitIdle(gw);
      expect(status.restore?.succeeded, status.restore?.statusMessage).to.equal(true);
      expect(status.restore?.statusMessage).to.include(`its data format 1 migrated to ${DATA_FORMAT_VERSION}`);
      expect(readDataFormat(join(gw.dataDir, 'db'))).to.deep.equal({ format: DATA_FORMAT_VERSION, writtenBy: gatewaydVersion() });
      const token = await gw.login();
      const failures = await gw.api('GET', '/api/audit?category=sign-in&outcome=failure&limit=50', { token });
      expect(failures.status, JSON.stringify(failures.body)).to.equal(200);
      expect(failures.body.items.map((r: { user?: string }) => r.user), 'the failed login recorded by format 1').to.include('oldtimer');
      expect((await gw.waitForLog((l) => l.message === "restore: the archive's data format migrated"))).to.include({ from: 1, to: DATA_FORMAT_VERSION });
    });

    it('gatewayd_backup_bytes counts the archives, the copies taken before upgrades included', async () => {
      const gw2 = await startGateway({ dataDir: old.dataDir });
      try {
        const admin = await gw2.login();
        const metrics = await fetch(`${gw2.baseUrl}/metrics`, { headers: { authorization: `Bearer ${admin}` } });
        const text = await metrics.text();
        const bytes = beforeUpgradeArchives(maintenancePaths(old.dataDir)).reduce((n, a) => n + statSync(a.file).size, 0);
        expect(bytes).to.be.greaterThan(0);
        expect(text).to.match(new RegExp(`^gatewayd_backup_bytes ${bytes}$`, 'm'));
      } finally {
        await gw2.stop();
      }
    });
  });

  it('gatewayd --version prints the release and the data format and exits 0: no configuration read, no data directory made', async () => {
    const parent = tempDir();
    made.push(parent);
    const dataDir = join(parent, 'not-made');
    const child = spawn(process.execPath, [mainScript, '--version'], {
      env: { ...daemonTestEnv(dataDir), GATEWAYD_CONFIG: join(dataDir, 'missing.json'), GATEWAYD_HTTP_PORT: 'not a port' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect([code, stdout, stderr]).to.deep.equal([0, `gatewayd ${gatewaydVersion()} (data format ${DATA_FORMAT_VERSION})\n`, '']);
    expect(gatewaydVersion()).to.equal(JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')).version);
    expect(existsSync(dataDir)).to.equal(false);
  });
});
