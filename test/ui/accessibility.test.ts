// Accessibility and tablets: axe-core on every page (desktop and tablet width) with no serious
// or critical violation, nothing wider than a tablet screen, the menu on narrow screens, and
// keyboard use (skip link, visible focus, sign-in and navigation without a mouse). Unknown pages
// and API errors are shown, never a blank page.
import { expect } from 'chai';
import { ADMIN_PASSWORD, type TestGateway } from '../support/harness.js';
import { expectAccessible, screenshot, signIn, useBrowser, useGateway } from './support/browser.js';

/** Every page of the UI with the heading it shows. */
const pages: [path: string, heading: string][] = [
  ['/', 'Overview'],
  ['/users', 'Users'],
  ['/users/new', 'New user'],
  ['/roles', 'Roles'],
  ['/roles/new', 'New role'],
  ['/permissions', 'Permissions'],
  ['/devices', 'Devices'],
  ['/maintenance', 'Maintenance'],
  ['/mapping', 'Protocol mapping'],
  ['/rules', 'Rule sandbox'],
  ['/topics', 'Topic explorer'],
  ['/services', 'Services'],
  ['/services/line-3?new=1', 'New service line-3'],
  ['/clients', 'MQTT clients'],
  ['/audit', 'Audit trail'],
  ['/account', 'Your account'],
  ['/mapping/unknown', 'Page not found'],
];

describe('web UI: accessibility, keyboard and tablets', function () {
  this.timeout(60_000);
  const b = useBrowser();
  let gw!: TestGateway;
  useGateway((g) => (gw = g));

  it('passes axe on every page at desktop width, and never loads a whole table of users, roles or permissions', async () => {
    const { page } = b;
    const calls: string[] = [];
    page.on('request', (r) => {
      const url = new URL(r.url());
      if (url.pathname.startsWith('/api/')) calls.push(`${r.method()} ${url.pathname}`);
    });
    await signIn(page, gw.baseUrl);
    const admin = await gw.login();
    const adminUser = (await gw.api('GET', '/api/listUsers?username%5Beq%5D=admin', { token: admin })).body.users[0];
    const adminRole = adminUser.roles.find((r: { isShared: boolean }) => r.isShared);
    const detail: [string, string][] = [
      [`/users/${adminUser.id}`, 'User admin'],
      [`/roles/${encodeURIComponent(adminRole.id)}`, `Role ${adminRole.name}`],
    ];
    for (const [path, heading] of [...pages, ...detail]) {
      await page.goto(gw.baseUrl + path);
      await page.getByRole('heading', { name: heading, level: 1 }).waitFor();
      await page.locator('.loading').first().waitFor({ state: 'detached' });
      await expectAccessible(page, path);
    }
    // The paged calls only (listUsers, roles/page, permissions/page): a gateway may hold thousands of devices.
    const wholeTables = ['/api/users', '/api/users/usernames', '/api/users/ids', '/api/roles', '/api/roles/names', '/api/permissions', '/api/permissions/ids'];
    expect(calls.filter((c) => wholeTables.some((t) => c === `GET ${t}`))).to.deep.equal([]);
    expect(calls).to.include.members(['GET /api/listUsers', 'GET /api/roles/page', 'GET /api/permissions/page']);
  });

  it('fits its navigation on one line of a 1366 px laptop, in groups that open and close', async () => {
    const { page } = b;
    await page.setViewportSize({ width: 1366, height: 768 });
    await signIn(page, gw.baseUrl);
    const nav = page.getByRole('navigation', { name: 'Main' });
    // One row: the brand, every entry of the navigation and the account are centred on one line.
    const middles = (await page.evaluate(`[...document.querySelectorAll('header.top .brand, header.top nav > ul > li, header.top .who')].map((el) => { const r = el.getBoundingClientRect(); return r.top + r.height / 2; })`)) as number[];
    expect(middles.length).to.be.greaterThan(5);
    expect(Math.max(...middles) - Math.min(...middles), `rows centred at ${middles.join(', ')}`).to.be.below(4);
    expect(await page.locator('header.top').evaluate((el) => el.getBoundingClientRect().height)).to.be.below(70);
    expect(await nav.getByRole('button').allTextContents()).to.deep.equal(['Access', 'Protocols', 'Broker', 'System']);
    // A group opens below its button, one at a time, and passes axe open.
    await nav.getByRole('button', { name: 'Protocols' }).click();
    await nav.getByRole('link', { name: 'Services' }).waitFor();
    await expectAccessible(page, 'the navigation with a group open');
    await nav.getByRole('button', { name: 'Broker' }).click();
    await nav.getByRole('link', { name: 'Clients' }).waitFor();
    expect(await nav.getByRole('link', { name: 'Services' }).isVisible()).to.equal(false);
    // A click elsewhere closes it; its page marks its group as the current one.
    await page.getByRole('heading', { name: 'Overview' }).click();
    expect(await nav.getByRole('link', { name: 'Clients' }).isVisible()).to.equal(false);
    await nav.getByRole('button', { name: 'Broker' }).click();
    await nav.getByRole('link', { name: 'Clients' }).click();
    await page.getByRole('heading', { name: 'MQTT clients', level: 1 }).waitFor();
    expect(await nav.getByRole('button', { name: 'Broker' }).textContent()).to.include('current page');
  });

  it('fits a tablet in portrait, with the navigation behind a menu button, and passes axe there', async () => {
    const { page } = b;
    await page.setViewportSize({ width: 768, height: 1024 });
    await signIn(page, gw.baseUrl);
    const menu = page.getByRole('button', { name: 'Menu' });
    const nav = page.getByRole('navigation', { name: 'Main' });
    expect(await menu.getAttribute('aria-expanded')).to.equal('false');
    expect(await nav.isVisible()).to.equal(false);
    await menu.click();
    expect(await menu.getAttribute('aria-expanded')).to.equal('true');
    await nav.getByRole('link', { name: 'Devices' }).click();
    await page.getByRole('heading', { name: 'Devices', level: 1 }).waitFor();
    expect(await nav.isVisible()).to.equal(false);
    await screenshot(page, 'tablet-devices');
    for (const [path, heading] of pages) {
      await page.goto(gw.baseUrl + path);
      await page.getByRole('heading', { name: heading, level: 1 }).waitFor();
      await page.locator('.loading').first().waitFor({ state: 'detached' });
      const overflow = (await page.evaluate('document.documentElement.scrollWidth - window.innerWidth')) as number;
      expect(overflow, `${path} is wider than the screen`).to.be.at.most(0);
      await expectAccessible(page, `${path} on a tablet`);
    }
  });

  it('works by keyboard: skip link, visible focus, sign-in and navigation without a mouse', async () => {
    const { page } = b;
    await page.goto(`${gw.baseUrl}/signin`);
    // The username field has the focus on arrival.
    const username = page.getByLabel('Username');
    await username.waitFor();
    expect(await username.evaluate((el) => el === el.ownerDocument.activeElement)).to.equal(true);
    await page.keyboard.type('admin');
    await page.keyboard.press('Tab');
    await page.keyboard.type(ADMIN_PASSWORD);
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Overview' }).waitFor();

    // On a freshly loaded page the first Tab reaches the skip link.
    await page.reload();
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
    await page.keyboard.press('Tab');
    const skip = page.getByRole('link', { name: 'Skip to content' });
    expect(await skip.evaluate((el) => el === el.ownerDocument.activeElement)).to.equal(true);
    expect(await skip.isVisible()).to.equal(true);
    const outline = (await skip.evaluate((el) => el.ownerDocument.defaultView!.getComputedStyle(el).outlineStyle)) as string;
    expect(outline).not.to.equal('none');
    await page.keyboard.press('Enter');
    await page.locator('#main:focus').waitFor();

    // Tab through the navigation to its Access group, open it with Enter; Escape closes it and
    // leaves the focus on its button; open again, Tab to Roles and open that with Enter.
    await page.getByRole('link', { name: 'gatewayd' }).focus();
    const focused = () => page.evaluate('document.activeElement && document.activeElement.textContent') as Promise<string | null>;
    for (let i = 0; i < 6 && (await focused()) !== 'Access'; i++) await page.keyboard.press('Tab');
    const access = page.getByRole('button', { name: 'Access' });
    expect(await access.getAttribute('aria-expanded')).to.equal('false');
    await page.keyboard.press('Enter');
    expect(await access.getAttribute('aria-expanded')).to.equal('true');
    await page.getByRole('link', { name: 'Roles' }).waitFor();
    await page.keyboard.press('Escape');
    expect(await access.getAttribute('aria-expanded')).to.equal('false');
    expect(await access.evaluate((el) => el === el.ownerDocument.activeElement)).to.equal(true);
    await page.keyboard.press('Enter');
    for (let i = 0; i < 6 && (await focused()) !== 'Roles'; i++) await page.keyboard.press('Tab');
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Roles', level: 1 }).waitFor();
    // Focus moved to the new page's content.
    await page.locator('#main:focus').waitFor();

    // A dialog takes the focus and gives it back on Escape.
    await page.goto(`${gw.baseUrl}/devices`);
    await page.getByRole('button', { name: 'Open registration' }).click();
    const lock = page.getByRole('button', { name: 'Lock now' });
    await lock.focus();
    await page.keyboard.press('Enter');
    const dialog = page.getByRole('dialog', { name: 'Lock the registration' });
    await dialog.waitFor();
    expect(await page.evaluate('document.activeElement && document.activeElement.closest("dialog") !== null')).to.equal(true);
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'hidden' });
    expect(await lock.evaluate((el) => el === el.ownerDocument.activeElement)).to.equal(true);
  });

  it('never shows a blank page: an unknown page and an API error are explained', async () => {
    const { page } = b;
    await signIn(page, gw.baseUrl, { path: '/users/a/b' });
    await page.getByRole('heading', { name: 'Page not found' }).waitFor();
    await page.goto(`${gw.baseUrl}/users/no-such-user`);
    const alert = page.getByRole('alert');
    await alert.waitFor();
    expect(await alert.textContent()).to.match(/Error 404:\s*\S+/);
    await page.goto(`${gw.baseUrl}/roles/no-such-role`);
    expect(await page.getByRole('alert').textContent()).to.match(/Error 404:\s*\S+/);
  });
});
