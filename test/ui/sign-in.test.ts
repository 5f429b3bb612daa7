// Sign-in in a real browser against the real daemon: password, the MFA step (TOTP from the
// independent oathtool, and a backup code), the enrolment the policy enforces (QR code, backup
// codes once), session expiry and revocation (back to sign-in, then to the page the user was
// on), sign-out, the password change with its policy rules, and where the token is kept.
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { promisify } from 'node:util';
import { ADMIN_PASSWORD, GOOD_PASSWORD, type TestGateway } from '../support/harness.js';
import { expectAccessible, screenshot, signIn, storageOf, useBrowser, useGateway } from './support/browser.js';

const run = promisify(execFile);

/** The TOTP of a base32 secret from oathtool, `stepsAhead` 30 s steps from now (a replayed step is refused). */
async function totp(secret: string, stepsAhead = 0): Promise<string> {
  const at = Math.floor(Date.now() / 1000) + stepsAhead * 30;
  const { stdout } = await run('oathtool', ['--totp', '-b', secret, '--now', `@${at}`]);
  return stdout.trim();
}

describe('web UI: sign-in and session', function () {
  this.timeout(30_000);
  const b = useBrowser();
  let gw!: TestGateway;
  useGateway((g) => (gw = g));

  async function adminId(): Promise<string> {
    const res = await gw.api('GET', '/api/listUsers?username%5Beq%5D=admin', { token: await gw.login() });
    return res.body.users[0].id as string;
  }

  /** A user enrolled in MFA through the API (the enrollment UI has its own test); returns its TOTP secret. */
  async function enrolledUser(username: string): Promise<{ secret: string; codes: string[] }> {
    const u = await gw.userWith([{ resource: '/api/session', operation: 'read', context: 'http' }], username);
    const enable = await gw.api('POST', '/api/mfa/enable', { token: u.token });
    const secret = new URL(enable.body.uri).searchParams.get('secret')!;
    const validate = await gw.api('POST', '/api/mfa/validate', { token: u.token, body: { otp: await totp(secret) } });
    expect(validate.status).to.equal(200);
    return { secret, codes: validate.body.backupCodes };
  }

  it('signs in, keeps the token in sessionStorage only, survives a reload, and signs out', async () => {
    const { page } = b;
    await page.goto(gw.baseUrl + '/');
    await page.getByRole('heading', { name: 'Sign in' }).waitFor();
    await page.waitForURL(`${gw.baseUrl}/signin?next=%2F`);
    // The footer names the release, as GET /health does (issue 39).
    const release = (await gw.api('GET', '/health')).body.version as string;
    expect(await page.getByRole('contentinfo').textContent()).to.equal(`gatewayd ${release}`);
    await expectAccessible(page, 'the sign-in page');
    await screenshot(page, 'sign-in');

    await signIn(page, gw.baseUrl);
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
    await page.getByText('Signed in as admin').waitFor();
    const stored = await storageOf(page);
    expect(Object.keys(stored.session)).to.deep.equal(['gatewayd.session']);
    const token = JSON.parse(stored.session['gatewayd.session']!).token as string;
    expect((await gw.api('GET', '/api/session', { token })).status).to.equal(200);
    expect(stored.local).to.deep.equal({});
    expect(stored.cookie).to.equal('');
    const tokens = await gw.api('GET', `/api/users/${await adminId()}/tokens`, { token });
    expect(tokens.body.map((t: { label?: string }) => t.label)).to.include('web UI');
    await page.getByRole('heading', { name: 'Users' }).first().waitFor();
    expect(await page.getByRole('contentinfo').textContent()).to.equal(`gatewayd ${release}`);
    await expectAccessible(page, 'the overview');
    await screenshot(page, 'overview');

    await page.reload();
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByText('You are signed out.').waitFor();
    expect(await storageOf(page).then((s) => s.session)).to.deep.equal({});
    expect((await gw.api('GET', '/api/session', { token })).status).to.equal(401);
  });

  it('shows the API message for a wrong password and stays on the sign-in page', async () => {
    const { page } = b;
    await page.goto(gw.baseUrl + '/signin');
    await page.getByLabel('Username').fill('admin');
    await page.getByLabel('Password').fill('not-the-password');
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    const alert = page.getByRole('alert');
    await alert.waitFor();
    expect(await alert.textContent()).to.match(/Error 401:\s*invalid username or password/);
    expect(new URL(page.url()).pathname).to.equal('/signin');
  });

  it('asks for the second factor of an enrolled user: an authenticator code, or a backup code', async () => {
    const { page } = b;
    const { secret, codes } = await enrolledUser('mfa-carol');
    await page.goto(gw.baseUrl + '/account');
    await page.getByLabel('Username').fill('mfa-carol');
    await page.getByLabel('Password').fill(GOOD_PASSWORD);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await page.getByRole('heading', { name: 'Two-factor authentication' }).waitFor();
    await expectAccessible(page, 'the MFA step');
    await screenshot(page, 'sign-in-mfa');
    await page.getByLabel('Authentication code').fill('000000' === (await totp(secret, 1)) ? '111111' : '000000');
    await page.getByRole('button', { name: 'Verify' }).click();
    await page.getByText('invalid OTP or backup code').waitFor();
    // The next step's code: the current one was used up by the enrolment (replay protection).
    await page.getByLabel('Authentication code').fill(await totp(secret, 1));
    await page.getByRole('button', { name: 'Verify' }).click();
    // Back to the page asked for before signing in.
    await page.getByRole('heading', { name: 'Your account' }).waitFor();
    expect(new URL(page.url()).pathname).to.equal('/account');

    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('Username').fill('mfa-carol');
    await page.getByLabel('Password').fill(GOOD_PASSWORD);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await page.getByRole('button', { name: 'Use a backup code instead' }).click();
    await page.getByLabel('Backup code').fill(codes[0]!);
    await page.getByRole('button', { name: 'Verify' }).click();
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
  });

  it('walks a user through the enforced enrolment: QR code, first code, backup codes once, then sign-in with the factor', async () => {
    const { page } = b;
    const admin = await gw.login();
    const created = await gw.api('POST', '/api/users', {
      token: admin,
      body: { username: 'enforced-dave', password: GOOD_PASSWORD, identityProvider: 'local', enforceMFAEnrollment: true },
    });
    expect(created.status).to.equal(201);
    await page.goto(gw.baseUrl + '/signin');
    await page.getByLabel('Username').fill('enforced-dave');
    await page.getByLabel('Password').fill(GOOD_PASSWORD);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await page.getByRole('heading', { name: 'Set up two-factor authentication' }).waitFor();
    await page.getByRole('button', { name: 'Set up two-factor authentication' }).click();
    const qr = page.getByRole('img', { name: 'QR code for two-factor authentication of enforced-dave' });
    await qr.waitFor();
    expect(await qr.locator('path').getAttribute('d')).to.match(/^M\d+ \d+h1v1h-1z/);
    const secret = (await page.getByTestId('mfa-secret').textContent())!.trim();
    expect(secret).to.match(/^[A-Z2-7]{16,}$/);
    await expectAccessible(page, 'the MFA enrolment');
    await screenshot(page, 'mfa-enrollment');

    await page.getByLabel('Code from the app').fill(await totp(secret));
    await page.getByRole('button', { name: 'Confirm the code' }).click();
    const codes = page.getByRole('list', { name: 'Backup codes' }).getByRole('listitem');
    await page.getByRole('heading', { name: 'Two-factor authentication is set up' }).waitFor();
    expect(await codes.count()).to.equal(10);
    const first = (await codes.first().textContent())!.trim();
    expect(first).to.match(/^[2-9A-Z]{10}$/);
    await page.getByRole('button', { name: 'Continue to sign in' }).click();
    await page.getByText('Two-factor authentication is set up. Sign in with your password').waitFor();
    await page.getByLabel('Username').fill('enforced-dave');
    await page.getByLabel('Password').fill(GOOD_PASSWORD);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await page.getByLabel('Authentication code').fill(await totp(secret, 1));
    await page.getByRole('button', { name: 'Verify' }).click();
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
    // The backup codes were shown once: they are not on any page now.
    expect(await page.getByText(first).count()).to.equal(0);
  });

  it('turns on two-factor authentication from the account page, makes new backup codes, and turns it off with a result shown', async () => {
    const { page } = b;
    const u = await gw.userWith([], 'mfa-frank');
    await signIn(page, gw.baseUrl, { username: u.username, password: GOOD_PASSWORD, path: '/account' });
    const panel = page.getByRole('region', { name: 'Two-factor authentication' });
    await panel.getByRole('button', { name: 'Set up two-factor authentication' }).click();
    const secret = (await panel.getByTestId('mfa-secret').textContent())!.trim();
    await panel.getByLabel('Code from the app').fill(await totp(secret));
    await panel.getByRole('button', { name: 'Confirm the code' }).click();
    const codes = panel.getByRole('list', { name: 'Backup codes' }).getByRole('listitem');
    await codes.first().waitFor();
    expect(await codes.count()).to.equal(10);
    const firstCodes = await codes.allTextContents();
    await panel.getByRole('button', { name: 'I have saved the codes' }).click();
    await panel.getByText('Your sign-in asks for a code from your authenticator app.').waitFor();

    // New backup codes, asked with the app's next code (the enrolment used this step's).
    await panel.getByLabel('Code from your app').first().fill(await totp(secret, 1));
    await panel.getByRole('button', { name: 'Make new backup codes' }).click();
    await codes.first().waitFor();
    const newCodes = (await codes.allTextContents()).map((c) => c.trim());
    expect(newCodes).to.have.lengthOf(10);
    expect(newCodes.filter((c) => firstCodes.map((f) => f.trim()).includes(c))).to.deep.equal([]);
    await panel.getByRole('button', { name: 'I have saved the codes' }).click();

    // Off, with one of the new backup codes: the page says so and offers the set-up again.
    const off = panel.locator('form').filter({ has: page.getByRole('button', { name: 'Turn off two-factor authentication' }) });
    await off.getByRole('button', { name: 'Use a backup code' }).click();
    await off.getByLabel('Backup code').fill(newCodes[0]!);
    await off.getByRole('button', { name: 'Turn off two-factor authentication' }).click();
    await panel.getByText('Two-factor authentication is off.').waitFor();
    await panel.getByRole('button', { name: 'Set up two-factor authentication' }).waitFor();
    const login = await gw.api('POST', '/api/login', { body: { username: u.username, password: GOOD_PASSWORD } });
    expect(login.status).to.equal(200);
    expect(login.body.token).to.be.a('string');
  });

  it('goes back to sign-in when the session expires, then to the page the user was on', async () => {
    const { page } = b;
    const login = await gw.api('POST', '/api/login', { body: { username: 'admin', password: ADMIN_PASSWORD, expireTimeInHours: 4 / 3600 } });
    expect(login.status).to.equal(200);
    await page.goto(gw.baseUrl + '/signin');
    await page.evaluate(`sessionStorage.setItem('gatewayd.session', JSON.stringify({ token: ${JSON.stringify(login.body.token)} }))`);
    await page.goto(gw.baseUrl + '/account');
    await page.getByRole('heading', { name: 'Your account' }).waitFor();
    // The expiry timer fires at expiresAt (4 s) without any click.
    await page.getByText('Your session expired. Sign in again to continue.').waitFor({ timeout: 15_000 });
    expect(page.url()).to.equal(`${gw.baseUrl}/signin?next=%2Faccount`);
    await page.getByLabel('Username').fill('admin');
    await page.getByLabel('Password').fill(ADMIN_PASSWORD);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await page.getByRole('heading', { name: 'Your account' }).waitFor();
    expect(new URL(page.url()).pathname).to.equal('/account');
  });

  it('goes back to sign-in when the token is revoked elsewhere, keeping the page', async () => {
    const { page } = b;
    await signIn(page, gw.baseUrl, { path: '/users' });
    await page.getByRole('heading', { name: 'Users', level: 1 }).waitFor();
    // Revoke just the UI's token (by its fingerprint, the SHA-256 of the token).
    const uiToken = JSON.parse((await storageOf(page)).session['gatewayd.session']!).token as string;
    const fingerprint = createHash('sha256').update(uiToken).digest('hex');
    const revoked = await gw.api('DELETE', `/api/users/${await adminId()}/tokens?tokenId=${fingerprint}`, { token: await gw.login() });
    expect(revoked.status).to.equal(200);
    await page.getByRole('link', { name: 'Overview' }).click();
    await page.getByText('Your session has ended. Sign in again to continue.').waitFor();
    expect(page.url()).to.equal(`${gw.baseUrl}/signin?next=%2F`);
  });

  it('changes the own password, showing the policy rules as the user types', async () => {
    const { page } = b;
    const u = await gw.userWith([], 'pw-erin');
    await signIn(page, gw.baseUrl, { username: u.username, password: GOOD_PASSWORD, path: '/account' });
    await page.getByRole('heading', { name: 'Change your password' }).waitFor();
    await page.getByLabel('New password', { exact: true }).fill('abc');
    await page.getByText('Password policy: 1 of 4 rules met').waitFor();
    await page.getByLabel('New password', { exact: true }).fill('Abcdefg1');
    await page.getByText('Password policy: 4 of 4 rules met').waitFor();
    await page.getByLabel('New password again').fill('Abcdefg2');
    await page.getByText('The two new passwords differ.').waitFor();
    await page.getByLabel('New password again').fill('Abcdefg1');
    await page.getByLabel('Current password').fill('wrong-password');
    await page.getByRole('button', { name: 'Change password' }).click();
    await page.getByText('current password is wrong').waitFor();
    // A wrong current password answers 401 but does not end the session.
    expect(new URL(page.url()).pathname).to.equal('/account');
    await page.getByLabel('New password', { exact: true }).fill('short');
    await page.getByLabel('New password again').fill('short');
    await page.getByLabel('Current password').fill(GOOD_PASSWORD);
    await page.getByRole('button', { name: 'Change password' }).click();
    await page.getByText(/password breaks the password policy rule/).waitFor();
    await page.getByLabel('New password', { exact: true }).fill('Abcdefg1');
    await page.getByLabel('New password again').fill('Abcdefg1');
    await page.getByRole('button', { name: 'Change password' }).click();
    await page.getByText('Your password was changed.').waitFor();
    await expectAccessible(page, 'the account page');
    await screenshot(page, 'account');
    expect(await gw.login(u.username, 'Abcdefg1')).to.be.a('string');
  });
});
