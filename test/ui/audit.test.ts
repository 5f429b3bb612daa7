// The audit page in a real browser: one's own sign-in and another user's refused grant found
// with the filters, a write to a Modbus device over MQTT found by category and endpoint and read
// as a sentence, pages of the trail, and both exports (JSON lines and CSV) downloaded and read
// back. axe at desktop and tablet width.
import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import type { Page } from 'playwright-core';
import { startModbusServer, until, type ModbusTestServer } from '../mapping-support.js';
import { ADMIN_PASSWORD, type TestGateway } from '../support/harness.js';
import { connect, endAllClients } from '../support/mqtt-test-kit.js';
import { expectAccessible, screenshot, signIn, useBrowser, useGateway } from './support/browser.js';

describe('web UI: audit trail', function () {
  this.timeout(60_000);
  const b = useBrowser();
  let gw!: TestGateway;
  useGateway((g) => (gw = g));

  /** A delegate who may manage roles tries to give a role more than it holds itself: refused, audited. */
  before(async () => {
    const delegate = await gw.userWith([{ context: 'http', resource: '/api/roles/#', operation: 'readWrite' }], 'line-lead');
    const refused = await gw.api('POST', '/api/roles', { token: delegate.token, body: { name: 'everything', isShared: true, permissions: [{ context: 'mqtt', resource: '#', operation: 'readWrite' }] } });
    expect(refused.status).to.equal(403);
  });

  let plc: ModbusTestServer;
  after(async () => {
    await endAllClients();
    await plc?.stop();
  });

  async function filter(page: Page, values: { user?: string; category?: string; action?: string; outcome?: string; endpoint?: string }): Promise<void> {
    await page.getByLabel('User').fill(values.user ?? '');
    await page.getByLabel('Category').selectOption(values.category ?? '');
    await page.getByLabel('Action').selectOption(values.action ?? '');
    await page.getByLabel('Outcome').selectOption(values.outcome ?? '');
    await page.getByLabel('Endpoint').fill(values.endpoint ?? '');
    await page.getByRole('button', { name: 'Apply filters' }).click();
  }

  it("finds one's own sign-in and a refused grant, and exports them as JSON lines and CSV", async () => {
    const { page } = b;
    await signIn(page, gw.baseUrl, { path: '/audit' });
    await page.getByRole('heading', { name: 'Audit trail', level: 1 }).waitFor();
    const rows = page.locator('tbody tr');
    await rows.filter({ has: page.locator('th', { hasText: 'grant refused' }) }).waitFor();
    await screenshot(page, 'audit');

    // One column says who acted, whatever the event (issue 38 point 9): no "By" beside a "User".
    expect(await page.locator('thead th').allTextContents()).to.deep.equal(['Time', 'Action', 'Outcome', 'Who', 'About', 'Source', 'Details']);

    // One's own sign-in (the web UI's login): admin acted, from its address.
    await filter(page, { user: 'admin', action: 'login' });
    const login = rows.filter({ has: page.locator('th', { hasText: /^login$/ }) }).first();
    await login.waitFor();
    expect(await login.locator('td').nth(2).textContent()).to.equal('admin');
    expect(await login.locator('td').nth(3).textContent()).to.equal('');
    expect(await login.locator('td').nth(4).textContent()).to.equal('127.0.0.1');
    expect(await login.textContent()).to.include('success');
    // A user created by admin: admin acted, in the same column; the new user is whom it was about.
    await filter(page, { user: 'line-lead', action: 'user created' });
    const created = rows.filter({ has: page.locator('th', { hasText: /^user created$/ }) }).first();
    await created.waitFor();
    expect(await created.locator('td').nth(2).textContent()).to.equal('admin');
    expect(await created.locator('td').nth(3).textContent()).to.equal('line-lead');
    // The first start's admin: no user created it, the gateway did.
    await filter(page, { user: 'admin', action: 'user created' });
    const firstStart = rows.filter({ has: page.locator('td:nth-child(5)', { hasText: /^admin$/ }) });
    await firstStart.waitFor();
    expect(await firstStart.locator('td').nth(2).textContent()).to.equal('the gateway');

    // The refused grant: who tried, and what was missing.
    await filter(page, { outcome: 'failure' });
    const refusal = rows.filter({ has: page.locator('th', { hasText: 'grant refused' }) });
    await refusal.waitFor();
    expect(await refusal.locator('td').nth(2).textContent()).to.equal('line-lead');
    expect(await refusal.textContent()).to.include('missing: mqtt readWrite #');
    expect(await rows.filter({ hasText: 'success' }).count()).to.equal(0);
    await expectAccessible(page, 'the audit page');

    const jsonl = await download(page, 'Export JSON lines');
    const events = jsonl.trim().split('\n').map((l) => JSON.parse(l) as { action: string; outcome: string; actor?: { username: string } });
    expect(events.map((e) => e.action)).to.include('grant refused');
    expect(events.every((e) => e.outcome === 'failure')).to.equal(true);
    const csv = (await download(page, 'Export CSV')).trim().split('\n');
    expect(csv[0]).to.equal('time,action,outcome,actor,user,source,details');
    expect(csv.some((l) => l.includes('"grant refused","failure","line-lead"'))).to.equal(true);
    await page.getByText(/events? exported as gatewayd-audit-.*\.csv/).waitFor();
  });

  it('finds a write to a field device by category and endpoint, in words', async () => {
    const { page } = b;
    plc = await startModbusServer();
    const admin = await gw.login();
    const yaml = `resources:\n  plc: {type: Connection, properties: {protocol: Modbus, configuration: {host: 127.0.0.1, port: ${plc.port}}}}\n  valve: {type: Endpoint, properties: {connection: !ref plc, operation: write, address: {table: holding, address: 7}}}\n`;
    expect((await gw.api('PUT', '/api/services/line', { token: admin, raw: yaml, headers: { 'content-type': 'application/yaml' } })).status).to.equal(201);
    await gw.mapping.runtime()!.waitFor(() => gw.mapping.runtime()!.getEndpoint('line.valve').currentState === 'enabled');
    const hmi = await connect(gw.ports.mqtt, { clientId: 'hmi-3', username: 'admin', password: ADMIN_PASSWORD });
    await hmi.publishAsync('services/line/valve/set', '4321', { qos: 1 });
    await until(() => (plc.holding[7] === 4321 ? true : undefined));

    await signIn(page, gw.baseUrl, { path: '/audit' });
    await filter(page, { category: 'control', endpoint: 'line.valve' });
    const row = page.locator('tbody tr').filter({ has: page.locator('th', { hasText: 'endpoint written' }) });
    // The newest event is on the unfiltered page too: wait for the filtered page, one event.
    await until(async () => ((await page.locator('tbody tr').count()) === 1 ? true : undefined), 10_000, 'the filtered page');
    await row.getByText('wrote 4321 to line.valve by admin (client hmi-3)').waitFor();
    // Who acted in the same column as a sign-in's; the source is the MQTT client's address and id.
    expect(await row.locator('td').nth(2).textContent()).to.equal('admin');
    expect(await row.locator('td').nth(4).textContent()).to.match(/^(::ffff:)?127\.0\.0\.1 · client hmi-3$/);
    await expectAccessible(page, 'the audit page with a control action');
    // The filter row: every label on one line, every input on the next.
    const tops = (await page.evaluate(`[...document.querySelectorAll('form.filters input, form.filters select')].map((el) => Math.round(el.getBoundingClientRect().top))`)) as number[];
    const labels = (await page.evaluate(`[...document.querySelectorAll('form.filters label')].map((el) => Math.round(el.getBoundingClientRect().top))`)) as number[];
    expect(new Set(tops.slice(0, 4)).size, `inputs at ${tops.join(', ')}`).to.equal(1);
    expect(new Set(labels.slice(0, 4)).size, `labels at ${labels.join(', ')}`).to.equal(1);
  });

  it('pages through the trail newest first', async () => {
    const { page } = b;
    for (let i = 0; i < 55; i++) await gw.login();
    await signIn(page, gw.baseUrl, { path: '/audit' });
    const rows = page.locator('tbody tr');
    await rows.nth(49).waitFor();
    expect(await rows.count()).to.equal(50);
    const firstTime = await rows.first().getAttribute('data-action');
    expect(firstTime).to.equal('login');
    await page.getByRole('button', { name: 'Older events' }).click();
    await page.getByText('Page 2').waitFor();
    expect(await rows.count()).to.be.above(0);
    await page.getByRole('button', { name: 'Newer events' }).click();
    await page.getByText('Page 1').waitFor();
    await page.setViewportSize({ width: 768, height: 1024 });
    const overflow = (await page.evaluate('document.documentElement.scrollWidth - window.innerWidth')) as number;
    expect(overflow).to.be.at.most(0);
    await expectAccessible(page, 'the audit page on a tablet');
  });
});

async function download(page: Page, button: string): Promise<string> {
  const [file] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: button }).click()]);
  const path = await file.path();
  return readFileSync(path, 'utf8');
}
