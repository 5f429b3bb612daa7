// Directory and single sign-on in a real browser: an LDAP user (real slapd) signs in on the
// same form as a local user; the SSO button appears when the identity provider is enabled, goes
// through a real OpenID provider (oidc-provider) and lands back with the token in the fragment,
// which the page takes and removes; an error the redirect carries is shown on the sign-in page.
// SSO runs on the HTTPS origin (the default redirect URI): that browser trusts the gateway CA.
import { expect } from 'chai';
import { startGateway, type TestGateway } from '../support/harness.js';
import { startOidcProvider, type TestOidcProvider } from '../support/oidc-provider.js';
import { groupDn, ldapOverrides, startSlapd, userDn, type Slapd } from '../support/slapd.js';
import { expectAccessible, screenshot, storageOf, useBrowser } from './support/browser.js';

describe('web UI: LDAP and single sign-on', function () {
  this.timeout(40_000);

  describe('LDAP', () => {
    const b = useBrowser();
    let slapd: Slapd;
    let gw: TestGateway;
    before(async () => {
      slapd = await startSlapd();
      await slapd.addUser('lena', 'Lena-dir-pw1');
      await slapd.addGroup('operators', [userDn('lena')]);
      gw = await startGateway({ overrides: ldapOverrides(slapd) });
      const admin = await gw.login();
      const role = await gw.api('POST', '/api/roles', {
        token: admin,
        body: { name: 'operators', isShared: true, ldapGroupDn: groupDn('operators'), permissions: [{ resource: '/api/connections', operation: 'read', context: 'http' }] },
      });
      expect(role.status).to.equal(201);
    });
    after(async () => {
      await gw?.stop();
      await slapd?.destroy();
    });

    it('signs in a directory user on the same form, with the roles of its groups', async () => {
      const { page } = b;
      await page.goto(`${gw.baseUrl}/signin`);
      await page.getByLabel('Username').fill('lena');
      await page.getByLabel('Password').fill('wrong-password');
      await page.getByRole('button', { name: 'Sign in', exact: true }).click();
      await page.getByText('invalid username or password').waitFor();
      await page.getByLabel('Password').fill('Lena-dir-pw1');
      await page.getByRole('button', { name: 'Sign in', exact: true }).click();
      await page.getByText('Signed in as lena').waitFor();
      // Its group gives it the mapping area, nothing else.
      const nav = page.getByRole('navigation', { name: 'Main' });
      await nav.getByRole('link', { name: 'Mapping', includeHidden: true }).waitFor({ state: 'attached' });
      expect(await nav.getByRole('link', { name: 'Users', includeHidden: true }).count()).to.equal(0);
      const admin = await gw.login();
      const lena = (await gw.api('GET', '/api/listUsers?username%5Beq%5D=lena', { token: admin })).body.users[0];
      expect(lena.identityProvider).to.equal('ldap');
    });
  });

  describe('OpenID Connect', () => {
    let op: TestOidcProvider;
    let gw: TestGateway;
    before(async () => {
      op = await startOidcProvider({ accounts: [{ sub: 'sub-olga', preferred_username: 'olga', groups: ['engineers'] }, { sub: 'sub-nobody', preferred_username: 'nobody', groups: [] }] });
      gw = await startGateway({
        overrides: { idp: { enabled: true, issuer: op.issuer, clientId: op.clientId, clientSecret: op.clientSecret, redirectUri: '', scopes: 'openid profile groups', groupsClaim: 'groups', adminUiUrl: '/' } },
      });
      op.registerClient([`${gw.httpsUrl}/api/idp/redirect`]);
      const admin = await gw.login();
      const role = await gw.api('POST', '/api/roles', {
        token: admin,
        body: { name: 'engineers', isShared: true, idpGroupIds: 'engineers', permissions: [{ resource: '/api/listUsers', operation: 'read', context: 'http' }] },
      });
      expect(role.status).to.equal(201);
    });
    after(async () => {
      await gw?.stop();
      await op?.stop();
    });
    // After the gateway (and its CA) exist.
    const b = useBrowser({ trustCaFile: () => gw.caFile });

    it('offers the SSO button, goes through the provider and lands back on the page asked for, signed in', async () => {
      const { page } = b;
      op.loginAs = 'sub-olga';
      await page.goto(`${gw.httpsUrl}/users`);
      const sso = page.getByRole('link', { name: 'Sign in with single sign-on' });
      await sso.waitFor();
      await page.waitForURL(`${gw.httpsUrl}/signin?next=%2Fusers`);
      await expectAccessible(page, 'the sign-in page with SSO');
      await screenshot(page, 'sign-in-sso');
      await sso.click();
      await page.getByText('Signed in as olga').or(page.getByRole('heading', { name: 'Users', level: 1 })).first().waitFor();
      await page.getByRole('heading', { name: 'Users', level: 1 }).waitFor();
      // The token came in the fragment: gone from the address bar, kept in sessionStorage only.
      expect(page.url()).to.equal(`${gw.httpsUrl}/users`);
      const stored = await storageOf(page);
      expect(JSON.parse(stored.session['gatewayd.session']!).token).to.be.a('string');
      expect(stored.local).to.deep.equal({});
      expect(stored.cookie).to.equal('');
      expect(b.requests.some((u) => u.startsWith(op.issuer))).to.equal(true);
    });

    it('shows the error a failed SSO redirect carries on the sign-in page', async () => {
      const { page } = b;
      op.loginAs = 'sub-nobody';
      await page.goto(`${gw.httpsUrl}/signin`);
      await page.getByRole('link', { name: 'Sign in with single sign-on' }).click();
      const alert = page.getByRole('alert');
      await alert.waitFor();
      expect(await alert.textContent()).to.match(/Single sign-on failed: .+/);
      expect(page.url()).to.equal(`${gw.httpsUrl}/signin`);
      expect((await storageOf(page)).session['gatewayd.session']).to.equal(undefined);

      await page.goto(`${gw.httpsUrl}/#error=${encodeURIComponent('the provider said no')}`);
      await page.getByText('Single sign-on failed: the provider said no').waitFor();
      expect(new URL(page.url()).hash).to.equal('');
    });

    it('finishes on HTTPS a sign-on started on the plain port (loopback)', async () => {
      const { page } = b;
      op.loginAs = 'sub-olga';
      await page.goto(`${gw.baseUrl}/signin`);
      await page.getByRole('link', { name: 'Sign in with single sign-on' }).click();
      await page.getByText('Signed in as olga').waitFor();
      expect(new URL(page.url()).origin).to.equal(gw.httpsUrl);
      expect(JSON.parse((await storageOf(page)).session['gatewayd.session']!).token).to.be.a('string');
    });
  });
});
