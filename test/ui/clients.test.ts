// The MQTT clients page in a real browser: a connected mosquitto_sub (MQTT 5) with its
// subscription, kicked from the page — it exits and its row is gone; the session of a client that
// is away, deleted; a retained message viewed and cleared. axe at desktop and tablet width.
import { expect } from 'chai';
import { ADMIN_PASSWORD, type TestGateway } from '../support/harness.js';
import { connect, endAllClients, startMosquittoSub, subscribe } from '../support/mqtt-test-kit.js';
import { expectAccessible, screenshot, signIn, useBrowser, useGateway } from './support/browser.js';

describe('web UI: MQTT clients', function () {
  this.timeout(60_000);
  const b = useBrowser();
  let gw!: TestGateway;
  useGateway((g) => (gw = g));
  after(() => endAllClients());
  const asAdmin = { username: 'admin', password: ADMIN_PASSWORD };

  it('kicks a connected mosquitto_sub: it exits and is gone from the list', async () => {
    const sub = await startMosquittoSub(['-V', '5', '-h', '127.0.0.1', '-p', String(gw.ports.mqtt), '-u', 'admin', '-P', ADMIN_PASSWORD, '-i', 'line-3-display', '-t', 'line/3/#', '-q', '1']);
    const persistent = await connect(gw.ports.mqtt, { ...asAdmin, clientId: 'press-7', clean: false });
    await subscribe(persistent, 'line/3/press/+/setpoint', 1);
    // A retained state (QoS 1: acknowledged once stored) for the picture.
    await persistent.publishAsync('line/3/press/7/state', '{"mode":"auto","cycle":1832}', { qos: 1, retain: true });
    try {
      const { page } = b;
      await signIn(page, gw.baseUrl, { path: '/clients' });
      await page.getByRole('heading', { name: 'MQTT clients', level: 1 }).waitFor();
      const row = page.locator('tr[data-client="line-3-display"]');
      await row.waitFor();
      expect(await row.textContent()).to.include('MQTT 5');
      expect(await row.locator('td').nth(0).textContent()).to.equal('admin');

      await row.getByRole('button', { name: 'Subscriptions of line-3-display' }).click();
      const dialog = page.getByRole('dialog', { name: 'Subscriptions of line-3-display' });
      await dialog.getByText('line/3/#').waitFor();
      await dialog.getByRole('button', { name: 'Close' }).click();
      await page.locator('tr[data-topic="line/3/press/7/state"]').waitFor();
      await expectAccessible(page, 'the clients page');
      // The search row lines up: both inputs and the Find button on one line, whatever hints follow.
      const search = page.getByRole('search', { name: 'Find connected clients' });
      const top = (l: ReturnType<typeof search.getByRole>) => l.evaluate((el) => Math.round(el.getBoundingClientRect().top));
      const inputs = [await top(search.getByRole('textbox', { name: 'Client id starts with' })), await top(search.getByRole('textbox', { name: 'User' })), await top(search.getByRole('button', { name: 'Find' }))];
      expect(new Set(inputs).size, `tops ${inputs.join(', ')}`).to.equal(1);
      await screenshot(page, 'clients');

      await row.getByRole('button', { name: 'Disconnect line-3-display' }).click();
      await page.getByRole('dialog', { name: 'Disconnect line-3-display' }).getByRole('button', { name: 'Disconnect' }).click();
      await page.getByText('line-3-display disconnected.').waitFor();
      await row.waitFor({ state: 'detached' });
      const exit = await sub.result;
      expect(exit.stdout).to.include('Received DISCONNECT (152)');
      expect(exit.code).to.equal(0);
    } finally {
      sub.kill();
      await persistent.publishAsync('line/3/press/7/state', '', { qos: 1, retain: true });
      await persistent.endAsync();
    }
  });

  it('deletes the session of a client that is away, and views and clears a retained message', async () => {
    const away = await connect(gw.ports.mqtt, { ...asAdmin, clientId: 'packer-2', clean: false });
    await subscribe(away, 'line/4/#', 1);
    await away.endAsync();
    const publisher = await connect(gw.ports.mqtt, asAdmin);
    await publisher.publishAsync('line/4/state', '{"running":true,"speed":42}', { qos: 1, retain: true });
    await publisher.endAsync();

    const { page } = b;
    await signIn(page, gw.baseUrl, { path: '/clients' });
    const session = page.locator('tr[data-session="packer-2"]');
    // Pages read what the store committed: reload until the session is there.
    for (let i = 0; i < 50 && (await session.count()) === 0; i++) {
      await page.getByRole('search', { name: 'Find sessions' }).getByRole('button', { name: 'Find' }).click();
      await page.waitForTimeout(100);
    }
    await session.waitFor();
    expect(await session.locator('td').nth(2).textContent()).to.equal('1'); // the retained state message, queued for it
    await session.getByRole('button', { name: 'Delete the session of packer-2' }).click();
    await page.getByRole('dialog', { name: 'Delete the session of packer-2' }).getByRole('button', { name: 'Delete session' }).click();
    await page.getByText('The session of packer-2 is deleted.').waitFor();
    await session.waitFor({ state: 'detached' });

    const retained = page.locator('tr[data-topic="line/4/state"]');
    const search = page.getByRole('search', { name: 'Find retained messages' });
    await search.getByLabel('Topic filter').fill('line/+/state');
    await search.getByRole('button', { name: 'Find' }).click();
    await retained.waitFor();
    await retained.getByRole('button', { name: 'View line/4/state' }).click();
    const view = page.getByRole('dialog', { name: 'Retained on line/4/state' });
    expect(await view.getByLabel('Payload of line/4/state').textContent()).to.equal('{"running":true,"speed":42}');
    await view.getByRole('button', { name: 'Close' }).click();
    await retained.getByRole('button', { name: 'Clear the retained message of line/4/state' }).click();
    await page.getByRole('dialog', { name: 'Clear line/4/state' }).getByRole('button', { name: 'Clear' }).click();
    await page.getByText('The retained message of line/4/state is cleared.').waitFor();
    await page.getByText('No retained message matches line/+/state.').waitFor();

    await page.setViewportSize({ width: 768, height: 1024 });
    const overflow = (await page.evaluate('document.documentElement.scrollWidth - window.innerWidth')) as number;
    expect(overflow).to.be.at.most(0);
    await expectAccessible(page, 'the clients page on a tablet');
  });
});
