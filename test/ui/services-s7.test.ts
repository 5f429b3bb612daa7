// An S7 connection and endpoint created through the schema-driven forms in a real browser,
// against snap7's S7 server (the test kit's child process): the forms come from
// GET /api/resource-types alone, so choosing protocol S7 must offer the S7 settings (rack, slot,
// the port 102 as placeholder) and an endpoint of that connection the S7 address — only that:
// an endpoint shows no address fields until its connection is chosen, and a new endpoint of a
// service with one connection is on it from the start (issue 38 point 2). A read endpoint's QoS
// and retain flag are in view, not under "More settings", and the service page shows them
// beside the values (point 3).
import { expect } from 'chai';
import type { Locator, Page } from 'playwright-core';
import { startGateway, type TestGateway } from '../support/harness.js';
import { startSnap7Server, type Snap7Server } from '../support/snap7-server.js';
import { signIn, useBrowser } from './support/browser.js';

/** Adds a resource of a type with the editor's row; its panel. */
async function addResource(page: Page, type: string, name: string): Promise<Locator> {
  await page.getByLabel('Type of the new resource').selectOption(type);
  await page.getByLabel('Name of the new resource').fill(name);
  await page.getByRole('button', { name: 'Add resource' }).click();
  return page.locator(`[data-resource-name="${name}"]`);
}

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

  it('offers the S7 settings and only the S7 address, applies, shows the first value with its QoS and retain flag, and counts values refused before sending apart', async () => {
    const { page } = b;
    await signIn(page, gw.baseUrl, { path: '/services' });
    await page.getByRole('button', { name: 'New service' }).click();
    await page.getByLabel('Service id').fill('oven');
    await page.getByRole('button', { name: 'Create and edit' }).click();
    await page.getByRole('heading', { name: 'New service oven', level: 1 }).waitFor();

    // An endpoint before any connection: no address fields of a protocol it may not have.
    const ep = await addResource(page, 'Endpoint', 'temperature');
    expect(await ep.getByLabel('Connection').inputValue()).to.equal('');
    await ep.getByText('Choose the connection first: the fields follow its protocol.').waitFor();
    for (const modbus of ['Table', 'Quantity', 'Kind of address']) expect(await ep.getByLabel(modbus).count(), modbus).to.equal(0);

    const conn = await addResource(page, 'Connection', 'plc');
    await conn.getByLabel('Protocol').selectOption('S7');
    expect(await conn.getByLabel('Port', { exact: true }).getAttribute('placeholder')).to.equal('102 (default)');
    expect(await conn.getByLabel('Rack').getAttribute('placeholder')).to.equal('0 (default)');
    expect(await conn.getByLabel('Slot').getAttribute('placeholder')).to.equal('1 (default)');
    await conn.getByLabel('Host').fill('127.0.0.1');
    await conn.getByLabel('Port', { exact: true }).fill(String(plc.port));

    await ep.getByLabel('Connection').selectOption('plc');
    await ep.getByLabel('Operation').selectOption('read');
    await ep.getByLabel('Area').selectOption('DB');
    await ep.getByLabel('DB number').fill('3');
    await ep.getByLabel('Byte offset').fill('4');
    await ep.getByLabel('Type (required)', { exact: true }).selectOption('REAL');
    await ep.getByLabel('Poll interval (ms)').fill('200');
    // QoS and retain in view, beside the poll interval; "More settings" names the rest in their case.
    await ep.getByLabel('QoS', { exact: true }).selectOption('1');
    await ep.getByLabel('Retain', { exact: true }).selectOption('true');
    expect(await ep.getByLabel('QoS', { exact: true }).isVisible()).to.equal(true);
    expect(await ep.locator('details.more > summary').textContent()).to.equal('More settings: description, transform (JSONata), filter (JSONata), target state');

    // A second endpoint: on the service's only connection from the start, with its S7 address only.
    const setpoint = await addResource(page, 'Endpoint', 'setpoint');
    expect(await setpoint.getByLabel('Connection').inputValue()).to.equal('plc');
    await setpoint.getByLabel('Area').waitFor();
    for (const modbus of ['Table', 'Quantity', 'Kind of address']) expect(await setpoint.getByLabel(modbus).count(), modbus).to.equal(0);
    await setpoint.getByLabel('Operation').selectOption('write');
    await setpoint.getByLabel('Area').selectOption('DB');
    await setpoint.getByLabel('DB number').fill('3');
    await setpoint.getByLabel('Byte offset').fill('0');
    await setpoint.getByLabel('Type (required)', { exact: true }).selectOption('INT');

    await page.getByRole('button', { name: 'Check', exact: true }).click();
    await page.getByText(/^No problem found: applying would add oven\.\w+, oven\.\w+, oven\.\w+\.$/).waitFor().catch(async (err: Error) => {
      throw new Error(`${err.message}: ${await page.locator('[role=alert], [role=status]').allTextContents()}`);
    });
    await page.getByRole('button', { name: 'Apply' }).click();
    await page.getByText(/^Applied: added oven\.\w+, oven\.\w+, oven\.\w+\.$/).waitFor();
    const row = page.locator('tr[data-endpoint="oven.temperature"]');
    await row.locator('td.value code').filter({ hasText: '21.5' }).waitFor({ timeout: 15_000 });
    // How the values are published, where they are shown.
    expect(await row.locator('td.value .publish').textContent()).to.equal('published at QoS 1, retained');

    // Three values refused before anything reached the PLC: counted apart from the communication's failures (issue 38 point 4).
    const write = page.locator('tr[data-endpoint="oven.setpoint"]');
    for (const [value, shown] of [['40000', '40000'], ['"warm"', 'warm'], ['1.5', '1\\.5']]) {
      await write.getByLabel('Value for oven.setpoint').fill(value!);
      await write.getByRole('button', { name: 'Write' }).click();
      await write.getByText(new RegExp(`^not written \\(DB3\\.DBW0: an INT takes integers from -32768 to 32767\\): ${shown} at `)).waitFor({ timeout: 10_000 });
    }
    const plcRow = page.locator('tr[data-resource-id="oven.plc"]');
    await plcRow.getByText(/ · \d+ reads?, no failure, 3 values refused before sending · last reading /).waitFor({ timeout: 5000 }).catch(async (err: Error) => {
      throw new Error(`${err.message}: ${await plcRow.textContent()}`);
    });
    expect((await plc.get('DB', 3, 0, 2)).readInt16BE(0)).to.equal(0);

    const stored = await gw.api('GET', '/api/services/oven', { token: await gw.login() });
    expect(stored.body.resources.plc.properties).to.deep.equal({ protocol: 'S7', configuration: { host: '127.0.0.1', port: plc.port } });
    expect(stored.body.resources.temperature.properties).to.deep.include({ qos: 1, retain: true });
    expect(stored.body.resources.temperature.properties.address).to.deep.equal({ area: 'DB', dbNumber: 3, offset: 4, type: 'REAL' });
    expect(stored.body.resources.setpoint.properties).to.deep.equal({ connection: { '!ref': 'plc' }, operation: 'write', address: { area: 'DB', dbNumber: 3, offset: 0, type: 'INT' } });
  });
});
