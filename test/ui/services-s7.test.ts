// An S7 connection and endpoint created through the schema-driven forms in a real browser,
// against snap7's S7 server (the test kit's child process): the forms come from
// GET /api/resource-types alone, so choosing protocol S7 must offer the S7 settings (rack, slot,
// the port 102 as placeholder) and an endpoint of that connection the S7 address.
import { expect } from 'chai';
import { startGateway, type TestGateway } from '../support/harness.js';
import { startSnap7Server, type Snap7Server } from '../support/snap7-server.js';
import { signIn, useBrowser } from './support/browser.js';

describe('web UI: an S7 service through the forms', function () {
  this.timeout(60_000);
  const b = useBrowser();
  let gw: TestGateway;
  let plc: Snap7Server;
  before(async function () {
    this.timeout(300_000); // may build snap7's addon for this Node
    plc = await startSnap7Server({ dbs: { 3: 16 } });
    const v = Buffer.alloc(4);
    v.writeFloatBE(21.5, 0);
    await plc.set('DB', 3, 4, v);
    gw = await startGateway();
  });
  after(async () => {
    await gw?.stop();
    await plc?.stop();
  });

  it('offers the S7 settings and address for protocol S7, applies, and shows the first value', async () => {
    const { page } = b;
    await signIn(page, gw.baseUrl, { path: '/services' });
    await page.getByRole('button', { name: 'New service' }).click();
    await page.getByLabel('Service id').fill('oven');
    await page.getByRole('button', { name: 'Create and edit' }).click();
    await page.getByRole('heading', { name: 'New service oven', level: 1 }).waitFor();

    await page.getByLabel('Type of the new resource').selectOption('Connection');
    await page.getByLabel('Name of the new resource').fill('plc');
    await page.getByRole('button', { name: 'Add resource' }).click();
    const conn = page.locator('[data-resource-name="plc"]');
    await conn.getByLabel('Protocol').selectOption('S7');
    expect(await conn.getByLabel('Port', { exact: true }).getAttribute('placeholder')).to.equal('102 (default)');
    expect(await conn.getByLabel('Rack').getAttribute('placeholder')).to.equal('0 (default)');
    expect(await conn.getByLabel('Slot').getAttribute('placeholder')).to.equal('1 (default)');
    await conn.getByLabel('Host').fill('127.0.0.1');
    await conn.getByLabel('Port', { exact: true }).fill(String(plc.port));

    await page.getByLabel('Type of the new resource').selectOption('Endpoint');
    await page.getByLabel('Name of the new resource').fill('temperature');
    await page.getByRole('button', { name: 'Add resource' }).click();
    const ep = page.locator('[data-resource-name="temperature"]');
    await ep.getByLabel('Connection').selectOption('plc');
    await ep.getByLabel('Operation').selectOption('read');
    await ep.getByLabel('Area').selectOption('DB');
    await ep.getByLabel('DB number').fill('3');
    await ep.getByLabel('Byte offset').fill('4');
    await ep.getByLabel('Type (required)', { exact: true }).selectOption('REAL');
    await ep.getByLabel('Poll interval (ms)').fill('200');

    await page.getByRole('button', { name: 'Check', exact: true }).click();
    await page.getByText('No problem found: applying would add oven.plc, oven.temperature.').waitFor();
    await page.getByRole('button', { name: 'Apply' }).click();
    await page.getByText('Applied: added oven.plc, oven.temperature.').waitFor();
    const row = page.locator('tr[data-endpoint="oven.temperature"]');
    await row.locator('td.value code').filter({ hasText: '21.5' }).waitFor({ timeout: 15_000 });

    const stored = await gw.api('GET', '/api/services/oven', { token: await gw.login() });
    expect(stored.body.resources.plc.properties).to.deep.equal({ protocol: 'S7', configuration: { host: '127.0.0.1', port: plc.port } });
    expect(stored.body.resources.temperature.properties.address).to.deep.equal({ area: 'DB', dbNumber: 3, offset: 4, type: 'REAL' });
  });
});
