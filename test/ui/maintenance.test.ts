// Maintenance in a real browser: the policies, a backup with its progress (the store's snapshot
// held until the page shows it running) and the download of the archive, a restore of that
// archive (upload with progress, then the outcome read from
// GET /api/maintenance/db, which stays readable during the swap), and a refused archive.
import { expect } from 'chai';
import sinon from 'sinon';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { gatewaydVersion } from '../../src/maintenance/version.js';
import { GOOD_PASSWORD, type TestGateway } from '../support/harness.js';
import { expectAccessible, screenshot, signIn, useBrowser, useGateway } from './support/browser.js';

describe('web UI: maintenance', function () {
  this.timeout(40_000);
  const b = useBrowser();
  let gw!: TestGateway;
  let dir: string;
  useGateway((g) => (gw = g));
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'gatewayd-ui-maintenance-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('backs up, downloads the archive and restores it, showing progress and the outcome', async () => {
    const { page } = b;
    await signIn(page, gw.baseUrl, { path: '/maintenance' });
    await page.getByText('at least 8 characters').waitFor();
    await page.getByText('No backup yet.').waitFor();
    // The store's snapshot is held until the page has shown the backup running.
    const store = gw.services.store;
    const snapshot = store.backup.bind(store);
    let releaseBackup!: () => void;
    const backupHeld = new Promise<void>((resolve) => (releaseBackup = resolve));
    const hold = sinon.stub(store, 'backup').callsFake(async (dest) => {
      await backupHeld;
      return snapshot(dest);
    });
    try {
      await page.getByRole('button', { name: 'Start a backup' }).click();
      await page.getByRole('progressbar', { name: 'backup in progress' }).waitFor();
      await page.getByText(/Backup running: .+\(\d+ s\)/).waitFor();
      expect(await page.getByRole('button', { name: 'Start a backup' }).isDisabled()).to.equal(true);
    } finally {
      releaseBackup();
    }
    await page.getByText(/Last backup succeeded/).waitFor({ timeout: 20_000 });
    hold.restore();

    const [archive] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Download the newest backup' }).click()]);
    expect(archive.suggestedFilename()).to.match(new RegExp(`^${gatewaydVersion().replaceAll('.', '\\.')}_.+\\.tar\\.gz$`));
    const path = join(dir, archive.suggestedFilename());
    await archive.saveAs(path);
    expect(gunzipSync(readFileSync(path)).length).to.be.above(1024);

    // Something the restore must take away again.
    await gw.userWith([], 'after-backup');
    const admin = await gw.login();
    expect((await gw.api('GET', '/api/listUsers?username%5Beq%5D=after-backup', { token: admin })).body.users).to.have.lengthOf(1);

    // The upload is held (the archive is a few KB: on loopback it would be gone at once) so that
    // the page is seen showing its progress before the gateway answers.
    let releaseUpload!: () => void;
    const held = new Promise<void>((resolve) => (releaseUpload = resolve));
    await page.route('**/api/maintenance/db/restore', async (route) => {
      await held;
      await route.continue();
    });
    await page.getByLabel('Backup archive (.tar.gz)').setInputFiles(path);
    await page.getByRole('button', { name: 'Restore from this archive' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Restore' }).click();
    const progress = page.getByRole('progressbar', { name: 'Upload progress' });
    await progress.waitFor();
    await page.getByText(/Uploading: \d{1,3} %/).waitFor();
    expect(Number(await progress.getAttribute('value'))).to.be.within(0, 1);
    expect(await page.getByRole('button', { name: 'Restore from this archive' }).isDisabled()).to.equal(true);
    releaseUpload();
    await progress.waitFor({ state: 'detached' });
    await page.getByText(/Last restore succeeded/).waitFor({ timeout: 20_000 });
    await page.getByText('The archive was accepted; the store is being restored.').waitFor();
    expect(await page.getByRole('alert').count()).to.equal(0);
    await expectAccessible(page, 'the maintenance page');
    // The page as an operator finds it: the outcomes of the last backup and restore.
    await page.reload();
    await page.getByText(/Last restore succeeded/).waitFor();
    await screenshot(page, 'maintenance');

    const after = await gw.login();
    expect((await gw.api('GET', '/api/listUsers?username%5Beq%5D=after-backup', { token: after })).body.users).to.have.lengthOf(0);
    expect(await gw.login('after-backup', GOOD_PASSWORD).catch((e: Error) => e.message)).to.match(/login of after-backup failed: 401/);
  });

  it('shows why an archive was refused, and nothing changes', async () => {
    const { page } = b;
    const bogus = join(dir, 'bogus.tar.gz');
    writeFileSync(bogus, 'this is not a gzip archive');
    const admin = await gw.login();
    const before = (await gw.api('GET', '/api/listUsers', { token: admin })).body.pagination.totalRows as number;
    await signIn(page, gw.baseUrl, { path: '/maintenance' });
    await page.getByLabel('Backup archive (.tar.gz)').setInputFiles(bogus);
    await page.getByRole('button', { name: 'Restore from this archive' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Restore' }).click();
    const refused = page.getByRole('alert').filter({ hasText: 'The archive was refused' });
    await refused.waitFor();
    expect(await refused.textContent()).to.match(/The archive was refused:\s*restore refused: /);
    await page.getByText(/Last restore failed/).waitFor();
    expect((await gw.api('GET', '/api/listUsers', { token: admin })).body.pagination.totalRows).to.equal(before);
  });
});
