// Sparkplug edge nodes on the mapping page in a real browser: a node waiting for its primary host,
// born once the host's STATE says online (published by a real MQTT client), its device born with
// the last metric values from the test kit's Modbus peer, disabled from the page. axe at desktop
// width.
import { expect } from 'chai';
import { rmSync } from 'node:fs';
import { startModbusServer, type ModbusTestServer } from '../mapping-support.js';
import { ADMIN_PASSWORD, startGateway, tempDir, type TestGateway } from '../support/harness.js';
import { connect, endAllClients } from '../support/mqtt-test-kit.js';
import { expectAccessible, screenshot, signIn, useBrowser } from './support/browser.js';

const service = (port: number) => `description: press 7 for the plant's SCADA
resources:
  plc:
    type: Connection
    properties: {protocol: Modbus, configuration: {host: 127.0.0.1, port: ${port}, timeoutMs: 500}}
  temperature:
    type: Endpoint
    properties: {connection: !ref plc, operation: read, address: {table: holding, address: 5}, pollIntervalMs: 200, transform: "$[0] / 10"}
  edge:
    type: Sparkplug
    properties:
      groupId: site-a
      edgeNodeId: gw1
      runAs: edge-gw1
      primaryHostId: scada
      birthWaitMs: 1000
      devices:
        - deviceId: press-7
          metrics:
            - {name: temperature, endpoint: !ref temperature, datatype: Float}
`;

describe('web UI: Sparkplug edge nodes', function () {
  this.timeout(60_000);
  const b = useBrowser();
  let gw: TestGateway;
  let peer: ModbusTestServer;
  let dataDir: string;
  before(async () => {
    peer = await startModbusServer();
    peer.holding[5] = 215;
    dataDir = tempDir();
    gw = await startGateway({ dataDir });
    await gw.userWith(
      [
        { context: 'mqtt', operation: 'readWrite', resource: 'spBv1.0/site-a/+/gw1/#' },
        { context: 'mqtt', operation: 'read', resource: 'spBv1.0/STATE/+' },
      ],
      'edge-gw1',
    );
    const admin = await gw.login();
    const put = await gw.api('PUT', '/api/services/press', { token: admin, raw: service(peer.port), headers: { 'content-type': 'application/yaml' } });
    expect(put.status, JSON.stringify(put.body)).to.equal(201);
  });
  after(async () => {
    await endAllClients();
    await gw.stop();
    await peer.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('shows the node waiting for its host, then born with its device and metric values, and disables it', async () => {
    const { page } = b;
    await signIn(page, gw.baseUrl, { path: '/mapping' });
    const node = page.locator('article[data-resource="press.edge"]');
    await node.getByText('waiting for host', { exact: true }).waitFor({ timeout: 15_000 });
    expect(await node.textContent()).to.include('primary host scada');

    // The SCADA host says it is offline: the node is away from it for good, and keeps what it
    // reads (without a STATE the first wait is only tentative for a second: a birth within it
    // takes back what was kept, docs/sparkplug.md).
    const host = await connect(gw.ports.mqtt, { username: 'admin', password: ADMIN_PASSWORD, clientId: 'scada-host' });
    const offlineAt = Date.now();
    await host.publishAsync('spBv1.0/STATE/scada', JSON.stringify({ online: false, timestamp: offlineAt }), { qos: 1, retain: true });
    await node.getByText(/^[1-9]\d* kept \(oldest \d+ s ago\) · 0 delivered$/).waitFor({ timeout: 10_000 });
    // It comes online.
    await host.publishAsync('spBv1.0/STATE/scada', JSON.stringify({ online: true, timestamp: Math.max(Date.now(), offlineAt + 1) }), { qos: 1, retain: true });
    await node.locator('dd').nth(1).getByText('born', { exact: true }).waitFor({ timeout: 15_000 });
    const device = node.locator('[data-device="press-7"]');
    await device.getByText('born', { exact: true }).waitFor({ timeout: 15_000 });
    const metric = device.locator('tr[data-metric="temperature"]');
    await metric.locator('td.value code').filter({ hasText: '21.5' }).waitFor({ timeout: 10_000 });
    expect(await metric.getByText('GOOD').count()).to.equal(1);
    // What it read while waiting for its host went out after the births.
    await node.getByText(/^nothing kept · [1-9]\d* delivered$/).waitFor({ timeout: 10_000 });
    await expectAccessible(page, 'the mapping page with a Sparkplug node');
    await screenshot(page, 'sparkplug');

    await node.getByRole('button', { name: 'Disable press.edge' }).click();
    await page.getByText(/disable press\.edge: target disabled, now (disabling|disabled)\./).waitFor();
    await node.locator('dd').first().getByText('disabled', { exact: true }).waitFor({ timeout: 10_000 });
    await node.getByRole('button', { name: 'Enable press.edge' }).click();
    await node.locator('dd').nth(1).getByText('born', { exact: true }).waitFor({ timeout: 15_000 });
    await host.endAsync();
  });

  it('edits the Sparkplug resource with the form its schema gives: nested devices and metrics, endpoint pickers, the kind of via', async () => {
    const { page } = b;
    await signIn(page, gw.baseUrl, { path: '/services/press' });
    // What runs first: the edge node with its session and devices (not "no running endpoint").
    const running = page.getByRole('region', { name: 'What the service runs' }).locator('tr[data-resource-id="press.edge"]');
    await running.getByText('born', { exact: true }).waitFor({ timeout: 15_000 });
    await running.getByText(/^press-7 born · \d+ data messages?$/).waitFor();
    expect(await running.locator('th').textContent()).to.include('Sparkplug edge node');
    const edge = page.locator('[data-resource-name="edge"]');
    // An existing service's panels start folded: open this one.
    await edge.locator('> summary').click();
    expect(await edge.getByRole('textbox', { name: 'Group ID (required)' }).inputValue()).to.equal('site-a');
    expect(await edge.getByLabel('Kind of via').inputValue()).to.equal('0'); // text (local) rather than upstream settings
    const metric = edge.locator('fieldset.item').filter({ hasText: 'Metrics 1' }).last();
    expect(await metric.getByRole('combobox', { name: 'Endpoint (required)' }).inputValue()).to.equal('temperature');
    expect(await metric.getByRole('combobox', { name: 'Data type (required)' }).inputValue()).to.equal('Float');
    await expectAccessible(page, 'the service editor with a Sparkplug resource');
    // Upstream settings instead of the embedded broker: the form offers the settings' fields.
    await edge.getByLabel('Kind of via').selectOption('1');
    await edge.getByRole('textbox', { name: 'Broker URLs (required)' }).waitFor();
    await page.getByRole('button', { name: 'Check', exact: true }).click();
    await page.getByRole('alert').filter({ hasText: 'resources.edge.properties.via' }).waitFor();
  });
});
