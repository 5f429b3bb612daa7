// The topic explorer in a real browser: its chunk (mqtt.js) loads only when the page opens; it
// connects to /mqtt over WebSocket with the session token, shows the topic tree with the last
// value and a rate, publishes a test message; and it gets exactly what the broker allows the
// signed-in user (a refused subscription, a refused publish that closes the connection).
import { expect } from 'chai';
import { ADMIN_PASSWORD, GOOD_PASSWORD, type TestGateway } from '../support/harness.js';
import { collect, connect, endAllClients, subscribe } from '../support/mqtt-test-kit.js';
import { expectAccessible, screenshot, signIn, useBrowser, useGateway, navigateTo } from './support/browser.js';

describe('web UI: topic explorer', function () {
  this.timeout(30_000);
  const b = useBrowser();
  let gw!: TestGateway;
  useGateway((g) => (gw = g));
  afterEach(() => endAllClients());

  const publisher = () => connect(gw.ports.mqtt, { username: 'admin', password: ADMIN_PASSWORD });

  it('loads only when opened, subscribes over /mqtt with the session token, shows the tree, publishes', async () => {
    const { page, requests } = b;
    await signIn(page, gw.baseUrl);
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
    expect(requests.filter((u) => /\/assets\/topics-/.test(u)), 'explorer chunk on the first page').to.deep.equal([]);
    expect(requests.filter((u) => u.startsWith('ws'))).to.deep.equal([]);

    // What is retained shows as the page opens, without a click: it subscribes to what the user may read.
    const pub = await publisher();
    await pub.publishAsync('factory/press-3/mode', 'auto', { qos: 1, retain: true });
    await navigateTo(page, 'Topics');
    await page.getByText('Connected to ws://127.0.0.1').waitFor();
    expect(requests.filter((u) => /\/assets\/topics-[\w]+\.js$/.test(u))).to.have.lengthOf(1);
    expect(requests).to.include(`ws://127.0.0.1:${gw.ports.http}/mqtt`);
    await page.getByText('subscribed', { exact: true }).waitFor();
    const mode = page.locator('[data-topic="factory/press-3/mode"]');
    await mode.getByText('auto', { exact: true }).waitFor();
    await mode.getByText('retained', { exact: true }).waitFor();

    await page.getByRole('button', { name: 'Subscribe', exact: true }).click();
    for (const v of ['21.4', '21.5']) await pub.publishAsync('factory/press-7/temperature', v, { qos: 1 });
    await pub.publishAsync('factory/press-7/state', JSON.stringify({ running: true }), { qos: 1, retain: true });
    const temperature = page.locator('[data-topic="factory/press-7/temperature"]');
    await temperature.getByText('21.5', { exact: true }).waitFor();
    await temperature.getByText(/^2 msg · \d+\.\d msg\/s$/).waitFor();
    await page.locator('[data-topic="factory/press-7/state"]').getByText('{"running":true}').waitFor();
    await page.getByRole('group').filter({ hasText: 'press-7' }).first().waitFor();

    const watcher = await publisher();
    const inbox = collect(watcher);
    expect(await subscribe(watcher, 'factory/ui/#', 1)).to.deep.equal([1]);
    await page.getByLabel('Topic', { exact: true }).fill('factory/ui/test');
    await page.getByLabel('Payload').fill('hello from the UI');
    await page.getByRole('button', { name: 'Publish' }).click();
    await page.getByText('Published to “factory/ui/test”; the broker acknowledged it.').waitFor();
    expect((await inbox.until((m) => m.topic === 'factory/ui/test')).payload).to.equal('hello from the UI');
    await page.locator('[data-topic="factory/ui/test"]').getByText('hello from the UI').waitFor();
    await expectAccessible(page, 'the topic explorer');
    await screenshot(page, 'topics');
  });

  it('gets only what the broker allows the signed-in user: a refused subscription, a refused publish', async () => {
    const { page } = b;
    const user = await gw.userWith(
      [
        { resource: 'factory/#', operation: 'read', context: 'mqtt' },
        { resource: 'factory/ui/#', operation: 'write', context: 'mqtt' },
      ],
      'line-viewer',
    );
    await signIn(page, gw.baseUrl, { username: user.username, password: GOOD_PASSWORD, path: '/topics' });
    await page.getByText('Connected to ws://127.0.0.1').waitFor();
    // Subscribed at once to what it may read: factory/#, not everything.
    expect(await page.locator('ul.subs code').allTextContents()).to.deep.equal(['factory/#']);
    await page.getByText('subscribed', { exact: true }).waitFor();
    await page.getByRole('button', { name: 'Subscribe', exact: true }).click();
    await page.getByText('refused by the broker: no read permission').waitFor();
    await page.getByRole('button', { name: 'Unsubscribe #' }).click();

    const pub = await publisher();
    await pub.publishAsync('secret/recipe', 'hidden', { qos: 1 });
    await pub.publishAsync('factory/line/marker', 'visible', { qos: 1 });
    await page.locator('[data-topic="factory/line/marker"]').getByText('visible').waitFor();
    expect(await page.locator('[data-topic="secret/recipe"]').count()).to.equal(0);

    // MQTT 3.1.1 cannot refuse one publish: the broker closes the connection, the page says why and reconnects.
    await page.getByLabel('Topic', { exact: true }).fill('secret/recipe');
    await page.getByLabel('Payload').fill('overwrite');
    await page.getByRole('button', { name: 'Publish' }).click();
    await page.getByText('you may not publish to “secret/recipe”').waitFor();
    await page.getByText('Connected to ws://127.0.0.1').waitFor({ timeout: 10_000 });
    await pub.publishAsync('factory/line/marker', 'again', { qos: 1 });
    await page.locator('[data-topic="factory/line/marker"]').getByText('again').waitFor();
  });
});
