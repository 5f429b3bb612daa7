// The web UI over HTTPS in a real browser (issue 23): headless Chromium trusts the gateway CA and
// nothing else (an NSS database of its own, see launchBrowser: certificate checks stay on), the
// gateway serves plain HTTP to nobody (plainAllowedFrom: [], as for a browser elsewhere on the
// plant network), so the browser is sent from the plain port to HTTPS, signs in there, and the
// topic explorer talks to the broker over wss.
import { expect } from 'chai';
import { ADMIN_PASSWORD, type TestGateway } from '../support/harness.js';
import { collect, connect, endAllClients, subscribe } from '../support/mqtt-test-kit.js';
import { launchBrowser, signIn, useBrowser, useGateway, navigateTo } from './support/browser.js';

/** A plant host name, resolved by the browser to 127.0.0.1 (--host-resolver-rules). */
const GW_HOST = 'gw-hall-b.test';

describe('web UI: HTTPS', function () {
  this.timeout(40_000);
  let gw!: TestGateway;
  // The gateway (and its CA) first: the browser is launched trusting that CA.
  // gw-hall-b.test: a host name in the gateway's certificate, for the HSTS test below.
  useGateway((g) => (gw = g), { http: { plainAllowedFrom: [] }, mqtt: { serverHostnames: [GW_HOST] } });
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
    await navigateTo(page, 'Topics');
    await page.getByText(`Connected to wss://127.0.0.1:${gw.ports.https}/mqtt`).waitFor();
    await page.getByRole('button', { name: 'Subscribe', exact: true }).click();
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

  it('follows HSTS from the HTTPS port to TLS on the plain port: the plain port answers it as HTTPS does', async () => {
    // A browser of its own: Chromium keeps no HSTS for IP addresses or localhost, so the pages
    // are on a host name (mapped to 127.0.0.1), which the requests check of useBrowser does not expect.
    const browser = await launchBrowser({ trustCaFile: gw.caFile, extraArgs: [`--host-resolver-rules=MAP ${GW_HOST} 127.0.0.1`] });
    try {
      const page = await browser.newPage();
      const secure = await page.goto(`https://${GW_HOST}:${gw.ports.https}/`);
      expect(secure!.headers()['strict-transport-security']).to.equal('max-age=31536000');
      // Typed as http:// on the plain port: HSTS makes it https:// on that same port before
      // anything goes out in clear (a request in clear would be redirected to the HTTPS port).
      const sent: string[] = [];
      page.on('request', (r) => sent.push(r.url()));
      const plainPort = `${GW_HOST}:${gw.ports.http}`;
      const upgraded = await page.goto(`http://${plainPort}/users`);
      expect(upgraded!.url()).to.equal(`https://${plainPort}/users`);
      expect(upgraded!.status()).to.equal(200);
      expect((await upgraded!.securityDetails())?.issuer).to.equal('gatewayd CA');
      expect(upgraded!.headers()['strict-transport-security']).to.equal('max-age=31536000');
      // The web UI works there: sign-in, and the topic explorer over wss on that port.
      await page.waitForURL(`https://${plainPort}/signin?next=%2Fusers`);
      await signIn(page, `https://${plainPort}`);
      await page.getByRole('heading', { name: 'Overview' }).waitFor();
      await navigateTo(page, 'Topics');
      await page.getByText(`Connected to wss://${plainPort}/mqtt`).waitFor();
      expect(sent.filter((u) => u.startsWith('http:') || u.startsWith('ws:'))).to.deep.equal([`http://${plainPort}/users`]);
    } finally {
      await browser.close();
    }
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
