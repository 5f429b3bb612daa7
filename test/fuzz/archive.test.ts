// Fuzz: backup archives (issue 35 B) — the reader on its own (targets/archive.ts), then the
// restore upload of a real gateway with hostile archives drawn from the same generator, a gzip
// bomb and malformed multipart bodies: a 400/413/415 and nothing changed (the store digest,
// nothing left in the data directory's temporary place, the lock released), never a 5xx; the
// real backup of the same gateway is still accepted afterwards (the control).
import { promises as fsp, readdirSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import fc from 'fast-check';
import sinon from 'sinon';
import { ArchiveError, checkAndExtractArchive } from '../../src/maintenance/archive.js';
import { DATA_FORMAT_VERSION } from '../../src/store/index.js';
import { startGateway, tempDir, type TestGateway } from '../support/harness.js';
import { storeDigest } from '../support/store-digest.js';
import { backupAndDownload, upload, waitIdle } from '../support/maintenance-kit.js';
import { fuzzSuite } from './support/fuzz-suite.js';
import { archiveArb, gzipBomb, manifestFor, tarOf } from './wire/tar-corpus.js';
import { gzipSync } from 'node:zlib';

fuzzSuite({ target: 'archive', timeMs: 6_000, minPerCpuSecond: 40, minExecutions: 100 });

/** The store's digest but the maintenance status record: a refused restore is recorded there on purpose. */
const digest = (gw: TestGateway) => storeDigest(gw, (db, key) => db === 'kv' && JSON.stringify(key) === '["maintenance","status"]');

describe('archive reader: races and bombs', function () {
  this.timeout(60_000);
  let dir: string;
  beforeEach(() => {
    dir = tempDir('gatewayd-archive-');
  });
  afterEach(async () => {
    sinon.restore();
    await fsp.rm(dir, { recursive: true, force: true });
  });

  /** A tiny archive of a manifest and a store file, written to `<dir>/upload`, and an empty `<dir>/staging`. */
  async function smallArchive(): Promise<{ file: string; staging: string }> {
    const store = Buffer.from('not a store');
    const archive = gzipSync(tarOf([{ name: 'manifest.json', type: '0', body: Buffer.from(JSON.stringify(manifestFor(store, DATA_FORMAT_VERSION))) }, { name: 'db/data.mdb', type: '0', body: store }]));
    const file = join(dir, 'upload');
    const staging = join(dir, 'staging');
    await fsp.writeFile(file, archive);
    await fsp.mkdir(staging);
    return { file, staging };
  }

  /** Where a stubbed file system call waits: `reached` once one arrives, `release()` lets it go on. */
  function holdPoint() {
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let arrived!: () => void;
    const reached = new Promise<void>((resolve) => (arrived = resolve));
    return { release, released, arrived, reached };
  }

  /**
   * Restores `file` into `staging` and gives the restore up (the abort) once `held` is reached:
   * the answer must wait for the held call (`waitingFor` says which), then be "aborted";
   * `afterAnswer` checks the staging directory before the caller removes it (as the restore's
   * caller does), and no error may go uncaught afterwards.
   */
  async function abortWhileHeld(file: string, staging: string, held: ReturnType<typeof holdPoint>, waitingFor: string, afterAnswer: () => void): Promise<void> {
    const uncaught: unknown[] = [];
    const onUncaught = (err: unknown) => uncaught.push(err);
    process.prependListener('uncaughtException', onUncaught);
    const abort = new AbortController();
    try {
      const outcome = checkAndExtractArchive({ file, destDir: staging, checkManifest: () => {}, bytesPerSecond: 0, signal: abort.signal }).catch((err: unknown) => err);
      await held.reached;
      abort.abort();
      let settled = false;
      void outcome.then(() => (settled = true));
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(settled, waitingFor).to.equal(false);
      held.release();
      expect(String(await outcome)).to.match(/aborted/);
      afterAnswer();
      await fsp.rm(staging, { recursive: true, force: true });
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(uncaught.map(String)).to.deep.equal([]);
    } finally {
      held.release();
      process.removeListener('uncaughtException', onUncaught);
    }
  }

  it('opens no file for the store once the restore was given up while its free space was asked (an unpiped stream ended the process with ENOENT: archive target, seed 3)', async () => {
    const { file, staging } = await smallArchive();
    // The store entry waits for statfs, whose answer is held: the restore removes the staging
    // directory once the extraction answered.
    const held = holdPoint();
    const statfs = fsp.statfs.bind(fsp);
    sinon.stub(fsp, 'statfs').callsFake(async (path: Parameters<typeof fsp.statfs>[0]) => {
      const answer = await statfs(path);
      held.arrived();
      await held.released;
      return answer as never;
    });
    // It answers once nothing of it can touch the staging directory any more: after the free
    // space came back, with no file opened for the store.
    await abortWhileHeld(file, staging, held, 'not before its free-space question is answered', () => {
      expect(readdirSync(staging), 'no file opened for the store').to.deep.equal([]);
    });
    expect(readdirSync(dir)).to.deep.equal(['upload']);
  });

  it('answers only once the store file it opened is closed, when the restore is given up while that file opens (Node 24: the ENOENT of an open still under way after the answer, CI seed 2040427612)', async () => {
    const { file, staging } = await smallArchive();
    // The store file's open is held; the restore ends (the abort) meanwhile.
    const held = holdPoint();
    const open = fsp.open.bind(fsp);
    sinon.stub(fsp, 'open').callsFake(async (...args: Parameters<typeof fsp.open>) => {
      if (String(args[0]) === join(staging, 'data.mdb')) {
        held.arrived();
        await held.released;
      }
      return open(...args);
    });
    const openIntoStaging = () =>
      readdirSync('/proc/self/fd').filter((fd) => {
        try {
          return readlinkSync(join('/proc/self/fd', fd)).startsWith(staging);
        } catch {
          return false; // the directory's own descriptor, gone meanwhile
        }
      });
    await abortWhileHeld(file, staging, held, 'not while its file is still opening', () => {
      expect(openIntoStaging(), 'no descriptor left open in the staging directory').to.deep.equal([]);
    });
  });

  it('refuses a 10 GiB gzip bomb (10 MiB of gzip) from its tar header, writing nothing, within a second', async () => {
    const store = Buffer.alloc(0);
    const bomb = gzipBomb(10, Buffer.from(JSON.stringify(manifestFor(store, DATA_FORMAT_VERSION))));
    expect(bomb.length).to.be.below(16 * 1024 * 1024);
    const file = join(dir, 'bomb.tar.gz');
    const staging = join(dir, 'staging');
    await fsp.writeFile(file, bomb);
    await fsp.mkdir(staging);
    const started = performance.now();
    const refused = await checkAndExtractArchive({ file, destDir: staging, checkManifest: () => {}, bytesPerSecond: 0 }).catch((err: unknown) => err);
    expect(performance.now() - started).to.be.below(1000);
    expect(refused).to.be.instanceOf(ArchiveError);
    expect((refused as Error).message).to.match(/db\/data\.mdb would be 10737418240 bytes from an archive of \d+: more than 100 times its size/);
    expect(readdirSync(staging)).to.deep.equal([]);
  });
});

describe('restore upload with hostile archives', function () {
  this.timeout(180_000);
  let gw: TestGateway;
  let admin: string;
  let backup: Buffer;
  before(async () => {
    gw = await startGateway();
    admin = await gw.login();
    backup = (await backupAndDownload(gw, admin)).archive;
  });
  after(() => gw.stop());

  const tmpLeft = () => readdirSync(join(gw.dataDir, 'tmp', 'maintenance'));

  async function refusedUnchanged(label: string, send: () => Promise<{ status: number; body: unknown }>): Promise<number> {
    const before = digest(gw);
    const res = await send();
    expect([400, 413, 415], `${label}: ${res.status} ${JSON.stringify(res.body).slice(0, 300)}`).to.include(res.status);
    // Polled with the same token (waitIdle logs in: a token more in the store).
    let running = true;
    for (let i = 0; i < 500 && running; i++) {
      running = (await gw.api('GET', '/api/maintenance/db', { token: admin })).body.running !== false;
      if (running) await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(running, `${label}: the restore still runs`).to.equal(false);
    expect(digest(gw), `${label}: the store changed`).to.equal(before);
    expect(tmpLeft(), `${label}: left in tmp/maintenance`).to.deep.equal([]);
    return res.status;
  }

  it('answers 400 and changes nothing for 40 generated hostile archives, and for a gzip bomb', async () => {
    const seed = Number(process.env.GATEWAYD_FUZZ_SEED ?? 35);
    const archives = fc.sample(archiveArb(DATA_FORMAT_VERSION), { numRuns: 40, seed });
    const problems: string[] = [];
    for (const [i, a] of archives.entries()) {
      try {
        await refusedUnchanged(`archive ${i} (seed ${seed})`, () => upload(gw, admin, a.bytes));
      } catch (err) {
        problems.push((err as Error).message);
      }
    }
    await refusedUnchanged('gzip bomb', () => upload(gw, admin, gzipBomb(2, Buffer.from(JSON.stringify(manifestFor(Buffer.alloc(0), DATA_FORMAT_VERSION))))));
    expect(problems).to.deep.equal([]);
  });

  it('answers 4xx and changes nothing for malformed multipart bodies', async () => {
    const boundary = 'fuzzboundary';
    const head = (name: string, filename = 'b.tar.gz') => `--${boundary}\r\nContent-Disposition: form-data; name="${name}"; filename="${filename}"\r\nContent-Type: application/gzip\r\n\r\n`;
    const bodies: Array<[string, string | Buffer, string]> = [
      ['no closing boundary', Buffer.concat([Buffer.from(head('file')), backup]), `multipart/form-data; boundary=${boundary}`],
      ['an empty field name', Buffer.concat([Buffer.from(head('')), backup, Buffer.from(`\r\n--${boundary}--\r\n`)]), `multipart/form-data; boundary=${boundary}`],
      ['two files', Buffer.concat([Buffer.from(head('file')), backup, Buffer.from(`\r\n`), Buffer.from(head('file')), backup, Buffer.from(`\r\n--${boundary}--\r\n`)]), `multipart/form-data; boundary=${boundary}`],
      ['another field name', Buffer.concat([Buffer.from(head('archive')), backup, Buffer.from(`\r\n--${boundary}--\r\n`)]), `multipart/form-data; boundary=${boundary}`],
      ['no boundary parameter', Buffer.concat([Buffer.from(head('file')), backup]), 'multipart/form-data'],
      ['a wrong boundary', Buffer.concat([Buffer.from(head('file')), backup, Buffer.from(`\r\n--${boundary}--\r\n`)]), 'multipart/form-data; boundary=other'],
      ['JSON instead', '{"file":"x"}', 'application/json'],
      ['the archive as the raw body', backup, 'application/gzip'],
      ['a header without its blank line', `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="b"\r\n`, `multipart/form-data; boundary=${boundary}`],
      ['200 fields', Array.from({ length: 200 }, (_, i) => `--${boundary}\r\nContent-Disposition: form-data; name="f${i}"\r\n\r\nx\r\n`).join('') + `--${boundary}--\r\n`, `multipart/form-data; boundary=${boundary}`],
      ['a filename with a path', Buffer.concat([Buffer.from(head('file', '../../../etc/passwd')), Buffer.from('x'), Buffer.from(`\r\n--${boundary}--\r\n`)]), `multipart/form-data; boundary=${boundary}`],
    ];
    for (const [label, body, contentType] of bodies) {
      await refusedUnchanged(label, () => gw.api('POST', '/api/maintenance/db/restore', { token: admin, raw: body, headers: { 'content-type': contentType } }));
    }
  });

  it('still accepts the real backup afterwards (control)', async () => {
    const res = await upload(gw, admin, backup);
    expect(res.status, JSON.stringify(res.body)).to.equal(202);
    const status = await waitIdle(gw);
    expect(status.restore?.succeeded, status.restore?.statusMessage).to.equal(true);
  });
});
