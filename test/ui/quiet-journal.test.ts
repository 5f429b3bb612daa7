// A quiet journal (issue 30 point 3, docs/operations.md "Logs"): at `info` with the defaults the
// web UI's polling — the overview's charts and cards, the mapping page's states, a service's live
// states — writes no line at all, while a Modbus endpoint polls its device underneath; one line
// per HTTP request appears at `debug`, and at `info` only with `log.requests: true`. The real
// pages in Chromium against the real daemon, the polls counted from the page's own requests.
import { expect } from 'chai';
import { startModbusServer, until, type ModbusTestServer } from '../mapping-support.js';
import { startGateway, type TestGateway } from '../support/harness.js';
import { signIn, useBrowser } from './support/browser.js';

const service = (port: number) => `
resources:
  plc:
    type: Connection
    properties: {protocol: Modbus, configuration: {host: 127.0.0.1, port: ${port}, timeoutMs: 5000}}
  temperature:
    type: Endpoint
    properties: {connection: !ref plc, operation: read, address: {table: holding, address: 0}, pollIntervalMs: 100}
  setpoint:
    type: Endpoint
    properties: {connection: !ref plc, operation: write, address: {table: holding, address: 1}}
`;

/** The journal at the defaults: level info, log.requests false (the harness logs at debug with requests). */
const DEFAULT_LOG = { log: { level: 'info', requests: false }, dashboard: { intervalSeconds: 1 } };

describe('web UI: a quiet journal', function () {
  this.timeout(60_000);
  const b = useBrowser();
  let peer: ModbusTestServer;
  before(async () => {
    peer = await startModbusServer();
    peer.holding[0] = 215;
  });
  after(() => peer.stop());

  async function gatewayWithService(overrides: Record<string, unknown>): Promise<TestGateway> {
    const gw = await startGateway({ overrides });
    const admin = await gw.login();
    const put = await gw.api('PUT', '/api/services/line', { token: admin, raw: service(peer.port), headers: { 'content-type': 'application/yaml' } });
    expect(put.status, JSON.stringify(put.body)).to.equal(201);
    await gw.mapping.runtime()!.waitFor(() => gw.mapping.runtime()!.getEndpoint('line.temperature').currentState === 'enabled');
    return gw;
  }

  /** Waits until the page asked `path` `n` more times (its polling), counted from now. */
  async function polls(path: RegExp, n: number): Promise<void> {
    const from = b.requests.length;
    await until(() => (b.requests.slice(from).filter((u) => path.test(new URL(u).pathname)).length >= n ? true : undefined), 20_000, `${n} polls of ${path}`);
  }

  it('at info with the defaults, the overview, mapping and service pages poll without writing a line', async () => {
    const gw = await gatewayWithService(DEFAULT_LOG);
    try {
      const { page } = b;
      await signIn(page, gw.baseUrl);
      await page.getByRole('heading', { name: 'Gateway activity' }).waitFor();
      // Everything written from here on: the pages below, each polled a few times.
      const from = gw.logs().length;
      await polls(/^\/api\/dashboard$/, 3);

      await page.goto(`${gw.baseUrl}/mapping`);
      await page.locator('tr[data-resource="line.temperature"]').getByText('enabled', { exact: true }).waitFor();
      await polls(/^\/api\/connections$/, 3);

      await page.goto(`${gw.baseUrl}/services/line`);
      await page.locator('tr[data-endpoint="line.temperature"]').getByText('enabled', { exact: true }).first().waitFor();
      await polls(/^\/api\/endpoints$/, 3);

      const written = gw.logs().slice(from);
      // State changes are the journal's business, not polls: the live values' MQTT connection
      // connecting, and the device's connection should a loaded machine time a poll out.
      const stateChange = (l: Record<string, unknown>) => (l.message === 'mqtt client connected' && String(l.clientId).startsWith('gatewayd-live')) || (l.part === 'mapping' && /^connection (connected|lost|failed)/.test(String(l.message)));
      const lines = written.filter((l) => !stateChange(l));
      expect(lines, JSON.stringify(lines, null, 1)).to.deep.equal([]);
      // The device was polled meanwhile, and the pages did ask: this was not a silent gateway.
      expect(peer.requests).to.be.greaterThan(10);
      expect(b.requests.filter((u) => u.includes('/api/')).length).to.be.greaterThan(15);
    } finally {
      await gw.stop();
    }
  });

  it('writes one line per request at debug, and at info with log.requests: true', async () => {
    for (const [log, level] of [[{ level: 'debug', requests: false }, 'debug'], [{ level: 'info', requests: true }, 'info']] as const) {
      const gw = await gatewayWithService({ ...DEFAULT_LOG, log });
      try {
        const admin = await gw.login();
        const from = gw.logs().length;
        expect((await gw.api('GET', '/api/connections', { token: admin })).status).to.equal(200);
        const line = await until(() => gw.logs().slice(from).find((l) => l.message === 'request' && l.path === '/api/connections'));
        expect(line, JSON.stringify(log)).to.include({ level, method: 'GET', status: 200, user: 'admin' });
      } finally {
        await gw.stop();
      }
    }
  });
});
