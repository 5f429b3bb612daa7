// Protocol mapping in a real browser: a Modbus TCP connection to a real peer (test/mapping-support)
// goes from connected to reconnecting, with the reason, when the peer stops, without a reload;
// an endpoint disabled from the page with the result shown; the schemas; the rule sandbox with
// its output and the position of an error.
import { expect } from 'chai';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startModbusServer, type ModbusTestServer } from '../mapping-support.js';
import { startGateway, tempDir, type TestGateway } from '../support/harness.js';
import { expectAccessible, screenshot, signIn, useBrowser } from './support/browser.js';

const service = (port: number) => `description: Press line 3
resources:
  plc:
    type: Connection
    properties:
      protocol: Modbus
      configuration: {host: 127.0.0.1, port: ${port}, unitId: 1, timeoutMs: 1000}
  temperature:
    type: Endpoint
    properties:
      connection: !ref plc
      operation: read
      address: {table: holding, address: 0, quantity: 2}
      pollIntervalMs: 300
      transform: "{'celsius': $[0] / 10}"
  routes:
    type: Mapping
    properties:
      mappings:
        - source: services/line/temperature
          target: dashboard/line/temperature
`;

describe('web UI: protocol mapping and rules', function () {
  this.timeout(40_000);
  const b = useBrowser();
  let gw: TestGateway;
  let peer: ModbusTestServer | undefined;
  let dataDir: string;
  before(async () => {
    peer = await startModbusServer();
    peer.holding[0] = 215;
    dataDir = tempDir();
    mkdirSync(join(dataDir, 'services'));
    writeFileSync(join(dataDir, 'services', 'line.yaml'), service(peer.port));
    gw = await startGateway({ dataDir });
  });
  after(async () => {
    await gw.stop();
    await peer?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('shows a Modbus connection go from connected to reconnecting when its peer stops, without a reload', async () => {
    const { page } = b;
    await signIn(page, gw.baseUrl, { path: '/mapping' });
    const connection = page.locator('tr[data-resource="line.plc"]');
    const endpoint = page.locator('tr[data-resource="line.temperature"]');
    await connection.getByText('connected', { exact: true }).waitFor();
    await endpoint.getByText('enabled', { exact: true }).waitFor();
    expect(await connection.getByText(`127.0.0.1:${peer!.port}`).count()).to.equal(1);
    // What the connection read (the /metrics figures), the last reading, the address in words.
    // (A loaded machine may time a poll out: a failure counted is a figure too.)
    await connection.getByText(/^\d+ reads?, (no failure|\d+ failures?)$/).waitFor();
    await connection.getByText(/^\d+ s ago$/).waitFor();
    expect(await endpoint.getByRole('cell', { name: 'holding 0–1', exact: true }).count()).to.equal(1);
    await page.locator('tr[data-resource="line.routes"]').getByText('enabled', { exact: true }).waitFor();
    await expectAccessible(page, 'the mapping page');
    await screenshot(page, 'mapping');

    let navigations = 0;
    page.on('framenavigated', () => navigations++);
    await peer!.stop();
    peer = undefined;
    await connection.getByText('reconnecting', { exact: true }).waitFor({ timeout: 20_000 });
    expect((await connection.locator('td').nth(3).textContent())!.length).to.be.above(0);
    await endpoint.getByText('enabling', { exact: true }).waitFor({ timeout: 10_000 });
    expect(navigations).to.equal(0);
    await screenshot(page, 'mapping-error');
  });

  it('disables and enables a mapping with the result shown, and shows no schemas', async () => {
    const { page } = b;
    await signIn(page, gw.baseUrl, { path: '/mapping' });
    const mapping = page.locator('tr[data-resource="line.routes"]');
    await mapping.getByText('enabled', { exact: true }).waitFor();
    await page.getByRole('button', { name: 'Disable line.routes' }).click();
    await page.getByText(/disable line\.routes: target disabled, now (disabling|disabled)\./).waitFor();
    await mapping.getByText('disabled', { exact: true }).waitFor();
    expect((await gw.api('GET', '/api/mappings/line.routes', { token: await gw.login() })).body.targetState).to.equal('disabled');
    await page.getByRole('button', { name: 'Enable line.routes' }).click();
    await mapping.getByText('enabled', { exact: true }).waitFor();

    // An operator's page: no developer blocks (the schemas are in the API and the service editor's forms).
    expect(await page.getByText(/JSON Schema|\/schema\)/).count()).to.equal(0);
  });

  it('tries a transformation in the rule sandbox and marks where an expression fails', async () => {
    const { page } = b;
    await signIn(page, gw.baseUrl, { path: '/rules' });
    await page.getByRole('button', { name: 'Run' }).click();
    const output = page.getByLabel('Output');
    await output.waitFor();
    expect(JSON.parse((await output.textContent())!)).to.deep.equal({ machine: 'press-7', celsius: 21.5, alarm: true });
    await expectAccessible(page, 'the rule sandbox');
    await screenshot(page, 'rules');

    await page.getByLabel('Transformation (JSONata)').fill("{'a': $sum(registers}");
    await page.getByRole('button', { name: 'Run' }).click();
    const alert = page.getByRole('alert');
    await alert.waitFor();
    expect(await alert.textContent()).to.match(/Error 400:\s*invalid transformation: .*\(position \d+\)/);
    const marked = page.getByTestId('error-position');
    expect(await marked.locator('mark').count()).to.equal(1);
    expect(await page.getByText(/The expression stops at character \d+ \(line 1\)/).count()).to.equal(1);

    await page.getByLabel('Input (JSON)').fill('{not json');
    await page.getByRole('button', { name: 'Run' }).click();
    await page.getByText(/The input is not JSON/).waitFor();
  });
});
