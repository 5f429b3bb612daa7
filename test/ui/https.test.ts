// The web UI over HTTPS in a real browser (issue 23): headless Chromium trusts the gateway CA and
// nothing else (an NSS database of its own, see launchBrowser: certificate checks stay on), the
// gateway serves plain HTTP to nobody (plainAllowedFrom: [], as for a browser elsewhere on the
// plant network), so the browser is sent from the plain port to HTTPS, signs in there, and the
// topic explorer talks to the broker over wss.
import { expect } from 'chai';
import { ADMIN_PASSWORD, type TestGateway } from '../support/harness.js';
import { collect, connect, endAllClients, subscribe } from '../support/mqtt-test-kit.js';
import { launchBrowser, signIn, useBrowser, useGateway } from './support/browser.js';

describe('web UI: HTTPS', function () {
  this.timeout(40_000);
  let gw!: TestGateway;
  // The gateway (and its CA) first: the browser is launched trusting that CA.
  useGateway((g) => (gw = g), { http: { plainAllowedFrom: [] } });
  const b = useBrowser({ trustCaFile: () => gw.caFile });
  afterEach(() => endAllClients());

  it('sends a browser from the plain port to HTTPS, signs in trusting only the gateway CA, and explores topics over wss', async () => {
    const { page, requests } = b;
    const first = await page.goto(`${gw.baseUrl}/users`);
    // Redirected before anything of the UI was served in clear.
    expect(first!.url()).to.equal(`${gw.httpsUrl}/users`);
    expect(first!.request().redirectedFrom()?.url()).to.equal(`${gw.baseUrl}/users`);
    const tls = await first!.securityDetails();
    expect(tls?.protocol).to.match(/^TLS 1\.[23]$/);
    expect(tls?.issuer).to.equal('gatewayd CA');
    expect(first!.headers()['strict-transport-security']).to.equal('max-age=31536000');
    await page.waitForURL(`${gw.httpsUrl}/signin?next=%2Fusers`);

    await signIn(page, gw.httpsUrl);
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
    await page.getByRole('link', { name: 'Topics' }).click();
    await page.getByText(`Connected to wss://127.0.0.1:${gw.ports.https}/mqtt`).waitFor();
    await page.getByRole('button', { name: 'Subscribe' }).click();
    await page.getByText('subscribed', { exact: true }).waitFor();

    const device = await connect(gw.ports.mqtt, { username: 'admin', password: ADMIN_PASSWORD });
    const inbox = collect(device);
    expect(await subscribe(device, 'hall-b/#', 1)).to.deep.equal([1]);
    await device.publishAsync('hall-b/press-2/temperature', '48.5', { qos: 1 });
    await page.locator('[data-topic="hall-b/press-2/temperature"]').getByText('48.5', { exact: true }).waitFor();
    await page.getByLabel('Topic', { exact: true }).fill('hall-b/ui/test');
    await page.getByLabel('Payload').fill('over wss');
    await page.getByRole('button', { name: 'Publish' }).click();
    expect((await inbox.until((m) => m.topic === 'hall-b/ui/test')).payload).to.equal('over wss');

    // Only the first navigation touched the plain port; the rest was https and wss.
    const clear = requests.filter((u) => u.startsWith('http:') || u.startsWith('ws:'));
    expect(clear).to.deep.equal([`${gw.baseUrl}/users`]);
    expect(requests).to.include(`wss://127.0.0.1:${gw.ports.https}/mqtt`);
  });

  it('is refused by a browser that does not trust the gateway CA (the trust above is the CA, not a switch)', async () => {
    const untrusting = await launchBrowser();
    try {
      const page = await untrusting.newPage();
      let error: Error | undefined;
      try {
        await page.goto(`${gw.httpsUrl}/`);
      } catch (err) {
        error = err as Error;
      }
      expect(error?.message).to.match(/ERR_CERT_AUTHORITY_INVALID/);
    } finally {
      await untrusting.close();
    }
  });
});
