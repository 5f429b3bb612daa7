// Services in a real browser, against the test kit's Modbus peer: a connection and a read
// endpoint created entirely through the forms (every problem of the check marked at its field),
// applied, and the endpoint's first value seen without leaving the page; the YAML tab edits the
// whole file (a write endpoint added there writes a register and shows its set/result); the
// list shows the service and deletes it. axe at desktop width on the list and the editor.
import { expect } from 'chai';
import { rmSync } from 'node:fs';
import { startModbusServer, type ModbusTestServer } from '../mapping-support.js';
import { startGateway, tempDir, type TestGateway } from '../support/harness.js';
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
    expect(await plc.getByLabel('protocol').inputValue()).to.equal('Modbus');
    expect(await plc.getByLabel('Kind of configuration').inputValue()).to.equal('Modbus');

    // Checked before the host is given: the problem is marked at the host field.
    await page.getByRole('button', { name: 'Check', exact: true }).click();
    const host = plc.getByLabel('host');
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
    await plc.getByLabel('port').fill(String(peer.port));
    await plc.getByLabel('timeoutMs').fill('1000');

    // An endpoint: its connection is picked from the service's connections; its address form follows the connection's protocol.
    await page.getByLabel('Type of the new resource').selectOption('Endpoint');
    await page.getByLabel('Name of the new resource').fill('temperature');
    await page.getByRole('button', { name: 'Add resource' }).click();
    const temperature = page.locator('[data-resource-name="temperature"]');
    await temperature.getByLabel('connection').selectOption('plc');
    await temperature.getByLabel('operation').selectOption('read');
    await temperature.getByLabel('table').selectOption('holding');
    await temperature.getByRole('textbox', { name: 'address (required)', exact: true }).fill('0');
    await temperature.getByLabel('quantity').fill('1');
    await temperature.getByLabel('pollIntervalMs').fill('300');

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
    await screenshot(page, 'service-editor');

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
    await row.getByText('written', { exact: true }).waitFor({ timeout: 10_000 });
    expect(peer.holding[5]).to.equal(42);

    // The form shows what the YAML added.
    await page.getByRole('tab', { name: 'Resources' }).click();
    const setpoint = page.locator('[data-resource-name="setpoint"]');
    expect(await setpoint.getByLabel('operation').inputValue()).to.equal('write');
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
