// Services in a real browser, against the test kit's Modbus peer: a connection and a read
// endpoint created entirely through the forms (every problem of the check marked at its field),
// applied, and the endpoint's first value seen without leaving the page; the YAML tab edits the
// whole file (a write endpoint added there writes a register and shows its set/result); a
// restart keeps a write endpoint's last write (from the audit trail); the list shows the
// service and deletes it. axe at desktop width on the list and the editor.
import { expect } from 'chai';
import { rmSync } from 'node:fs';
import { startModbusServer, type ModbusTestServer } from '../mapping-support.js';
import { ADMIN_PASSWORD, startGateway, tempDir, type TestGateway } from '../support/harness.js';
import { connect, endAllClients } from '../support/mqtt-test-kit.js';
import { freePort } from '../support/free-port.js';
import { bridgeService, putService } from '../bridges-support.js';
import { expectAccessible, screenshot, signIn, useBrowser } from './support/browser.js';

describe('web UI: services', function () {
  this.timeout(60_000);
  const b = useBrowser();
  let gw: TestGateway;
  let peer: ModbusTestServer;
  let dataDir: string;
  before(async () => {
    peer = await startModbusServer();
    peer.holding[0] = 215;
    dataDir = tempDir();
    gw = await startGateway({ dataDir });
  });
  after(async () => {
    await endAllClients();
    await gw.stop();
    await peer.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('creates a Modbus connection and endpoint with the forms, checks, applies and shows the first value', async () => {
    const { page } = b;
    await signIn(page, gw.baseUrl, { path: '/services' });
    await page.getByRole('heading', { name: 'Services', level: 1 }).waitFor();
    await page.getByText('No service yet.').waitFor();
    await expectAccessible(page, 'the services page');
    await page.getByRole('button', { name: 'New service' }).click();
    await page.getByLabel('Service id').fill('press');
    await page.getByRole('button', { name: 'Create and edit' }).click();
    await page.getByRole('heading', { name: 'New service press', level: 1 }).waitFor();

    // A connection: Modbus TCP is the first kind offered.
    await page.getByLabel('Type of the new resource').selectOption('Connection');
    await page.getByLabel('Name of the new resource').fill('plc');
    await page.getByRole('button', { name: 'Add resource' }).click();
    const plc = page.locator('[data-resource-name="plc"]');
    expect(await plc.getByLabel('Protocol').inputValue()).to.equal('Modbus');
    expect(await plc.getByLabel('Kind of connection settings').inputValue()).to.equal('Modbus');

    // Checked before the host is given: the problem is marked at the host field.
    await page.getByRole('button', { name: 'Check', exact: true }).click();
    const host = plc.getByLabel('Host');
    await plc.locator('p.invalid').filter({ hasText: "must have required property 'host'" }).waitFor();
    expect(await host.getAttribute('aria-invalid')).to.equal('true');
    expect(await host.getAttribute('aria-describedby')).to.include('-invalid');
    const summary = page.getByRole('alert').filter({ hasText: '1 problem' });
    await summary.waitFor();
    // By keyboard: the problem's link in the summary takes the focus to its field.
    await summary.getByRole('link').focus();
    await page.keyboard.press('Enter');
    expect(await host.evaluate((el) => el === el.ownerDocument.activeElement)).to.equal(true);

    await host.fill('127.0.0.1');
    await plc.getByLabel('Port', { exact: true }).fill(String(peer.port));
    await plc.getByLabel('Timeout (ms)').fill('1000');

    // An endpoint: its connection is picked from the service's connections; its address form follows the connection's protocol.
    await page.getByLabel('Type of the new resource').selectOption('Endpoint');
    await page.getByLabel('Name of the new resource').fill('temperature');
    await page.getByRole('button', { name: 'Add resource' }).click();
    const temperature = page.locator('[data-resource-name="temperature"]');
    await temperature.getByLabel('Connection').selectOption('plc');
    await temperature.getByLabel('Operation').selectOption('read');
    await temperature.getByLabel('Table').selectOption('holding');
    await temperature.getByRole('textbox', { name: 'Address (required)', exact: true }).fill('0');
    await temperature.getByLabel('Quantity').fill('1');
    await temperature.getByLabel('Poll interval (ms)').fill('300');

    await page.getByRole('button', { name: 'Check', exact: true }).click();
    await page.getByText('No problem found: applying would add press.plc, press.temperature.').waitFor();
    await expectAccessible(page, 'the service editor');

    await page.getByRole('button', { name: 'Apply' }).click();
    await page.getByText('Applied: added press.plc, press.temperature.').waitFor();
    // The first value, on this page.
    const row = page.locator('tr[data-endpoint="press.temperature"]');
    await row.locator('td.value code').filter({ hasText: '215' }).waitFor({ timeout: 15_000 });
    expect(await page.evaluate('location.pathname')).to.equal('/services/press');
    await row.getByText('enabled', { exact: true }).waitFor();
    peer.holding[0] = 230;
    await row.locator('svg.sparkline').waitFor({ timeout: 10_000 });
    await screenshot(page, 'service-new');

    // What the gateway stored is the file the form described.
    const admin = await gw.login();
    const stored = await gw.api('GET', '/api/services/press', { token: admin });
    expect(stored.body.resources.temperature).to.deep.equal({
      type: 'Endpoint',
      properties: { connection: { '!ref': 'plc' }, operation: 'read', address: { table: 'holding', address: 0, quantity: 1 }, pollIntervalMs: 300 },
    });
  });

  it('edits the whole file in the YAML tab: a write endpoint writes a register and shows its set/result', async () => {
    const { page } = b;
    await signIn(page, gw.baseUrl, { path: '/services/press' });
    await page.getByRole('heading', { name: 'Service press', level: 1 }).waitFor();
    // Tabs by keyboard: the arrow keys move between them.
    await page.getByRole('tab', { name: 'Resources' }).focus();
    await page.keyboard.press('ArrowRight');
    expect(await page.getByRole('tab', { name: 'YAML' }).getAttribute('aria-selected')).to.equal('true');
    expect(await page.evaluate('document.activeElement && document.activeElement.textContent')).to.equal('YAML');
    const yaml = page.getByLabel('Service file (YAML)');
    const text = await yaml.inputValue();
    expect(text).to.include('connection: !ref plc');
    await yaml.fill(`# Press line 3\n${text}  setpoint:\n    type: Endpoint\n    properties:\n      connection: !ref plc\n      operation: write\n      address: {table: holding, address: 5}\n`);
    await page.getByRole('button', { name: 'Apply' }).click();
    await page.getByText('Applied: added press.setpoint.').waitFor();
    const admin = await gw.login();
    // Applied from the YAML tab: the file keeps its comment.
    expect((await gw.api('GET', '/api/services/press', { token: admin, headers: { accept: 'application/yaml' } })).body).to.match(/^# Press line 3\n/);

    const row = page.locator('tr[data-endpoint="press.setpoint"]');
    await row.getByLabel('Value for press.setpoint').fill('42');
    await row.getByRole('button', { name: 'Write' }).click();
    // The result in words, with who wrote it (the endpoint's last write, as its audit event says).
    await row.getByText(/^written 42 at \d\d:\d\d:\d\d by admin \(client gatewayd-live-\w+\)$/).waitFor({ timeout: 10_000 });
    expect(peer.holding[5]).to.equal(42);
    // A write made elsewhere over MQTT shows there too.
    const hmi = await connect(gw.ports.mqtt, { clientId: 'hmi-7', username: 'admin', password: ADMIN_PASSWORD });
    await hmi.publishAsync('services/press/setpoint/set', '4321', { qos: 1 });
    await row.getByText(/^written 4321 at \d\d:\d\d:\d\d by admin \(client hmi-7\)$/).waitFor({ timeout: 10_000 });
    expect(peer.holding[5]).to.equal(4321);
    await hmi.endAsync();

    // The form shows what the YAML added.
    await page.getByRole('tab', { name: 'Resources' }).click();
    const setpoint = page.locator('[data-resource-name="setpoint"]');
    await setpoint.locator('summary').first().click();
    expect(await setpoint.getByLabel('Operation').inputValue()).to.equal('write');
    // Only the fields that apply: no poll interval for a write; filter and transform folded away.
    expect(await setpoint.getByLabel('Poll interval (ms)').count()).to.equal(0);
    expect(await setpoint.getByLabel('Filter (JSONata)').isVisible()).to.equal(false);
    await setpoint.getByText('More settings: description, transform (JSONata), filter (JSONata), target state').waitFor();
    expect(await setpoint.locator('summary').first().textContent()).to.include('write · holding 5 · on plc');
  });

  it("shows a write endpoint's last write again after a restart, from the audit trail", async () => {
    const { page } = b;
    await gw.services.audit.settled();
    await gw.stop();
    gw = await startGateway({ dataDir });
    // The API: the newest write event of the endpoint, as the running endpoint had it.
    const admin = await gw.login();
    await gw.mapping.runtime()!.waitFor(() => gw.mapping.runtime()!.getEndpoint('press.setpoint').currentState === 'enabled');
    const view = await gw.api('GET', '/api/endpoints/press.setpoint', { token: admin });
    expect(view.body.lastWrite, JSON.stringify(view.body)).to.deep.include({ ok: true, value: 4321, by: 'admin', clientId: 'hmi-7' });
    // The page: the same words as before the restart.
    await signIn(page, gw.baseUrl, { path: '/services/press' });
    const row = page.locator('tr[data-endpoint="press.setpoint"]');
    await row.getByText(/^written 4321 at \d\d:\d\d:\d\d by admin \(client hmi-7\)$/).waitFor({ timeout: 10_000 });
  });

  it('shows a 3-resource service on a 1366×768 laptop: what runs first, the configuration folded, deletion apart', async () => {
    const { page } = b;
    await page.setViewportSize({ width: 1366, height: 768 });
    await signIn(page, gw.baseUrl, { path: '/services/press' });
    const now = page.getByRole('region', { name: 'What the service runs' });
    for (const id of ['press.plc', 'press.temperature', 'press.setpoint']) await now.locator(`tr[data-resource-id="${id}"]`).getByText(/^(connected|enabled)$/).waitFor();
    const plcRow = now.locator('tr[data-resource-id="press.plc"]');
    await plcRow.getByText(/127\.0\.0\.1:\d+ · \d+ reads?(, \d+ writes?)?, no failure · last reading \d+ s ago/).waitFor({ timeout: 5000 }).catch(async (err: Error) => {
      throw new Error(`${err.message}: ${await plcRow.textContent()}`);
    });
    expect(await now.locator('tr[data-resource-id="press.temperature"] th').textContent()).to.include('Endpoint, read holding 0');
    // What runs comes before the configuration; deleting is a section of its own, after it.
    const top = async (selector: string) => page.locator(selector).first().evaluate((el) => el.getBoundingClientRect().top);
    expect(await top('#now-title')).to.be.below(await top('#config-title'));
    expect(await top('#config-title')).to.be.below(await top('#delete-title'));
    expect(await page.locator('.editor-actions').getByRole('button', { name: /delete/i }).count()).to.equal(0);
    const height = (await page.evaluate('document.documentElement.scrollHeight')) as number;
    expect(height, 'the page height').to.be.below(1300);
    await expectAccessible(page, 'a service on a laptop');
    await screenshot(page, 'service-editor');
    // Every panel open: still far from the 3,241 px of one long form.
    for (const name of ['plc', 'temperature', 'setpoint']) await page.locator(`[data-resource-name="${name}"] > summary`).click();
    await screenshot(page, 'service-editor-open');
    expect((await page.evaluate('document.documentElement.scrollHeight')) as number).to.be.below(2800);
    await expectAccessible(page, 'a service with its panels open');
  });

  it("shows a bridge-only service's bridge with its state, queue and what it forwarded", async () => {
    const { page } = b;
    const admin = await gw.login();
    await putService(gw, admin, 'uplink', bridgeService('up', { urls: [`mqtt://127.0.0.1:${await freePort()}`], runAs: 'admin', topics: [{ pattern: 'plant/#', direction: 'out' }] }));
    await signIn(page, gw.baseUrl, { path: '/services/uplink' });
    const row = page.getByRole('region', { name: 'What the service runs' }).locator('tr[data-resource-id="uplink.up"]');
    await row.getByText(/^(connecting|reconnecting)$/).waitFor();
    await row.getByText(/mqtt:\/\/127\.0\.0\.1:\d+ · queue 0 messages · 0 forwarded, 0 in/).waitFor();
    expect(await row.locator('th').textContent()).to.include('Bridge');
    expect(await page.getByText(/no running endpoint/i).count()).to.equal(0);
    await expectAccessible(page, 'a bridge-only service');
    expect((await gw.api('DELETE', '/api/services/uplink', { token: admin })).status).to.equal(200);
  });

  it('lists the service with its state and resources, and deletes it', async () => {
    const { page } = b;
    await signIn(page, gw.baseUrl, { path: '/services' });
    const row = page.locator('tr[data-service="press"]');
    await row.getByText('applied').waitFor();
    expect(await row.textContent()).to.include('1 connection, 2 endpoints');
    await screenshot(page, 'services');
    await page.getByRole('button', { name: 'Delete service press' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Delete service' }).click();
    await page.getByText(/Service press deleted; stopped: .*press\.plc/).waitFor();
    await row.waitFor({ state: 'detached' });
    const admin = await gw.login();
    expect((await gw.api('GET', '/api/connections', { token: admin })).body).to.deep.equal([]);
  });
});
