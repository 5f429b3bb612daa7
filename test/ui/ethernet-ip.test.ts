// The service editor's forms for EtherNet/IP, in a real browser against the test kit's CIP
// server: the connection's settings and the endpoint's tag address come from the schemas
// (GET /api/resource-types); applied, the tag's first value shows on the page. The tag's type
// is optional: left unset, the controller's type is read.
import { expect } from 'chai';
import { rmSync } from 'node:fs';
import { startCipServer, type CipTestServer } from '../support/cip-server.js';
import { startGateway, tempDir, type TestGateway } from '../support/harness.js';
import { signIn, useBrowser } from './support/browser.js';

describe('web UI: an EtherNet/IP service', function () {
  this.timeout(60_000);
  const b = useBrowser();
  let gw: TestGateway;
  let plc: CipTestServer;
  let dataDir: string;
  before(async () => {
    plc = await startCipServer({ tags: { 'Program:Main.Speed': { type: 'DINT', value: 1487 } } });
    dataDir = tempDir();
    gw = await startGateway({ dataDir });
  });
  after(async () => {
    await gw.stop();
    await plc.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('creates an EtherNetIp connection and a tag endpoint with the forms and shows the first value', async () => {
    const { page } = b;
    await signIn(page, gw.baseUrl, { path: '/services' });
    await page.getByRole('button', { name: 'New service' }).click();
    await page.getByLabel('Service id').fill('cell');
    await page.getByRole('button', { name: 'Create and edit' }).click();
    await page.getByRole('heading', { name: 'New service cell', level: 1 }).waitFor();

    await page.getByLabel('Type of the new resource').selectOption('Connection');
    await page.getByLabel('Name of the new resource').fill('plc');
    await page.getByRole('button', { name: 'Add resource' }).click();
    const conn = page.locator('[data-resource-name="plc"]');
    await conn.getByLabel('Protocol').selectOption('EtherNetIp');
    // One kind of configuration for this protocol: its fields at once, no choice of kinds.
    expect(await conn.getByLabel('Kind of connection settings').count()).to.equal(0);
    await conn.getByLabel('Host').fill('127.0.0.1');
    await conn.getByLabel('Port', { exact: true }).fill(String(plc.port));
    await conn.getByLabel('Slot').fill('0');

    await page.getByLabel('Type of the new resource').selectOption('Endpoint');
    await page.getByLabel('Name of the new resource').fill('speed');
    await page.getByRole('button', { name: 'Add resource' }).click();
    const speed = page.locator('[data-resource-name="speed"]');
    await speed.getByLabel('Connection').selectOption('plc');
    await speed.getByLabel('Operation').selectOption('read');
    await speed.getByLabel('Tag').fill('Program:Main.Speed');
    // The type is optional (not set: the tag is read as the controller types it).
    expect(await speed.getByRole('combobox', { name: 'Type', exact: true }).count()).to.equal(1);
    await speed.getByLabel('Poll interval (ms)').fill('200');

    await page.getByRole('button', { name: 'Check', exact: true }).click();
    await page.getByText('No problem found: applying would add cell.plc, cell.speed.').waitFor();
    await page.getByRole('button', { name: 'Apply' }).click();
    await page.getByText('Applied: added cell.plc, cell.speed.').waitFor();
    const row = page.locator('tr[data-endpoint="cell.speed"]');
    await row.locator('td.value code').filter({ hasText: '1487' }).waitFor({ timeout: 15_000 });

    const admin = await gw.login();
    const stored = await gw.api('GET', '/api/services/cell', { token: admin });
    expect(stored.body.resources.plc.properties).to.deep.include({ protocol: 'EtherNetIp' });
    expect(stored.body.resources.speed.properties.address).to.deep.equal({ tag: 'Program:Main.Speed' });
  });
});
