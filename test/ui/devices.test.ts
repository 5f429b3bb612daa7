// Devices in a real browser: the registration window with its live countdown, a device asking
// with a CSR (made by openssl) shown with its subject, confirmed with grant types, collecting a
// certificate that chains to the gateway CA downloaded from the page; a request rejected; the
// window locked; trusted certificates added (pasted and uploaded), viewed and deleted.
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { GOOD_PASSWORD, type TestGateway } from '../support/harness.js';
import { expectAccessible, screenshot, signIn, useBrowser, useGateway } from './support/browser.js';

const run = promisify(execFile);

describe('web UI: devices', function () {
  this.timeout(30_000);
  const b = useBrowser();
  let gw!: TestGateway;
  let admin: string;
  let dir: string;
  useGateway((g) => (gw = g));
  before(async () => {
    admin = await gw.login();
    dir = mkdtempSync(join(tmpdir(), 'gatewayd-ui-devices-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  const register = (body: Record<string, unknown>) => gw.api('POST', '/api/client-registry/register', { body });

  it('opens the window with a live countdown, confirms a device that then gets a certificate of the gateway CA, rejects another, locks', async () => {
    const { page } = b;
    await signIn(page, gw.baseUrl, { path: '/devices' });
    const window = page.getByRole('region', { name: 'Registration window' });
    await window.getByText('locked', { exact: true }).waitFor();
    await page.getByLabel('Open for').selectOption({ label: '5 minutes' });
    await page.getByRole('button', { name: 'Open registration' }).click();
    await page.getByText('Registration is open for 5 minutes.').waitFor();
    const timer = window.getByRole('timer');
    const first = (await timer.textContent())!;
    expect(first).to.match(/^[45]:\d\d min$/);
    // Live: the countdown moves on its own.
    await timer.filter({ hasNotText: first }).waitFor({ timeout: 5000 });
    expect((await gw.api('GET', '/api/client-registry/status', { token: admin })).body.status).to.equal('open');

    // A device asks with a CSR; another with a password.
    const key = join(dir, 'press.key');
    const csr = join(dir, 'press.csr');
    await run('openssl', ['req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-subj', '/CN=press-7/O=Acme/OU=Line 3', '-keyout', key, '-out', csr]);
    const request = {
      username: 'press-7',
      csr: Buffer.from(readFileSync(csr, 'utf8')).toString('base64'),
      context: 'press 7, line 3',
      permissions: [{ resource: 'presses/7/#', operation: 'readWrite', context: 'mqtt' }],
    };
    expect((await register(request)).status).to.equal(202);
    expect((await register({ username: 'sensor-9', password: GOOD_PASSWORD, context: 'cold store' })).status).to.equal(202);

    // The list follows without a reload.
    const row = page.getByRole('row', { name: /press-7/ });
    await row.getByText('Subject: CN=press-7, O=Acme, OU=Line 3').waitFor();
    await row.getByText('press 7, line 3').waitFor();
    await row.getByText('Permissions: mqtt readWrite presses/7/#').waitFor();
    await page.getByRole('row', { name: /sensor-9/ }).waitFor();
    await expectAccessible(page, 'the devices page');
    await screenshot(page, 'devices');

    await page.getByRole('button', { name: 'Confirm press-7' }).click();
    const dialog = page.getByRole('dialog', { name: 'Confirm press-7' });
    expect(await dialog.getByLabel('Client certificate').isChecked()).to.equal(true);
    expect(await dialog.getByLabel('Password').isChecked()).to.equal(false);
    await expectAccessible(page, 'the confirm dialog');
    await dialog.getByRole('button', { name: 'Confirm press-7' }).click();
    await page.getByText('press-7 was confirmed; the device gets its certificate at its next request.').waitFor();

    // The device polls and gets a certificate signed by the CA the page offers for download.
    const granted = await register(request);
    expect(granted.status).to.equal(201);
    writeFileSync(join(dir, 'press.pem'), Buffer.from(granted.body.certificate, 'base64'));
    const [saved] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Download the gateway CA certificate' }).click()]);
    expect(saved.suggestedFilename()).to.equal('gatewayd-ca.pem');
    await saved.saveAs(join(dir, 'ca.pem'));
    expect(readFileSync(join(dir, 'ca.pem'), 'utf8')).to.match(/^-----BEGIN CERTIFICATE-----/);
    const verify = await run('openssl', ['verify', '-CAfile', join(dir, 'ca.pem'), join(dir, 'press.pem')]);
    expect(verify.stdout).to.match(/press\.pem: OK/);
    const user = (await gw.api('GET', '/api/listUsers?username%5Beq%5D=press-7', { token: admin })).body.users[0];
    expect(user.grantTypes.map((g: { method: string }) => g.method)).to.deep.equal(['certificate']);
    expect(user.roles.flatMap((r: { permissions: { resource: string }[] }) => r.permissions.map((p) => p.resource))).to.deep.equal(['presses/7/#']);

    await page.getByRole('button', { name: 'Reject sensor-9' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Reject request' }).click();
    await page.getByText('The request of sensor-9 was rejected.').waitFor();
    expect((await gw.api('GET', '/api/client-registry', { token: admin })).body.map((r: { username: string }) => r.username)).not.to.include('sensor-9');

    await window.getByRole('button', { name: 'Lock now' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Lock' }).click();
    await window.getByText('locked', { exact: true }).waitFor();
    expect((await gw.api('GET', '/api/client-registry/status', { token: admin })).body.status).to.equal('locked');
  });

  it('adds trusted certificates by paste and by file, views and deletes them; the gateway CA stays', async () => {
    const { page } = b;
    const make = async (cn: string) => {
      const file = join(dir, `${cn}.pem`);
      await run('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '30', '-subj', `/CN=${cn}/O=Plant`, '-keyout', join(dir, `${cn}.key`), '-out', file]);
      return file;
    };
    const pasted = await make('line-ca-1');
    const uploaded = await make('line-ca-2');
    await signIn(page, gw.baseUrl, { path: '/devices' });
    const panel = page.getByRole('region', { name: 'Trusted certificates' });
    await panel.getByText('the gateway CA', { exact: true }).waitFor();
    expect(await panel.getByRole('button', { name: /^Delete/ }).count()).to.equal(0);

    await page.getByLabel('PEM certificates').fill('not a certificate');
    await page.getByRole('button', { name: 'Add certificates' }).click();
    expect(await page.getByRole('alert').textContent()).to.match(/Error 400:/);

    await page.getByLabel('PEM certificates').fill(readFileSync(pasted, 'utf8'));
    await page.getByRole('button', { name: 'Add certificates' }).click();
    await page.getByText('Added line-ca-1, Plant.').waitFor();
    await page.getByLabel('Or read them from a file').setInputFiles(uploaded);
    await page.getByText('Read line-ca-2.pem: 1 certificate.').waitFor();
    await page.getByRole('button', { name: 'Add certificates' }).click();
    await page.getByText('Added line-ca-2, Plant.').waitFor();
    expect((await gw.api('GET', '/api/certificates', { token: admin })).body).to.have.lengthOf(3);

    await panel.getByRole('button', { name: 'View line-ca-1, Plant' }).click();
    const view = page.getByRole('dialog', { name: 'Certificate line-ca-1, Plant' });
    const pem = view.getByLabel('PEM');
    await pem.waitFor();
    expect((await pem.textContent())!.trim()).to.equal(readFileSync(pasted, 'utf8').trim());
    await expectAccessible(page, 'the certificate dialog');
    await view.getByRole('button', { name: 'Close' }).click();

    await panel.getByRole('button', { name: 'Delete line-ca-1, Plant' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Delete certificate' }).click();
    await panel.getByRole('button', { name: 'View line-ca-1, Plant' }).waitFor({ state: 'detached' });
    const left = (await gw.api('GET', '/api/certificates', { token: admin })).body.map((c: { issuedTo: { commonName: string } }) => c.issuedTo.commonName);
    expect(left).to.have.lengthOf(2);
    expect(left).not.to.include('line-ca-1');
  });
});
