// The overview's charts in a real browser: loaded as a chunk of their own with the overview
// (not with the first page), and moving while a test publisher (mqtt.js, a real client of the
// broker) runs — the messages-in chart's last value rises above zero and its line changes
// without a reload. The gateway samples every second here (dashboard.intervalSeconds).
import { expect } from 'chai';
import type { Page } from 'playwright-core';
import { ADMIN_PASSWORD, startGateway, type TestGateway } from '../support/harness.js';
import { connect, endAllClients } from '../support/mqtt-test-kit.js';
import { expectAccessible, screenshot, signIn, useBrowser } from './support/browser.js';

/** Every chart's value scale: three labels, distinct, the last one 0 (issue 38 point 7). */
async function expectDistinctScales(page: Page): Promise<void> {
  const figures = page.locator('figure.chart');
  const n = await figures.count();
  expect(n).to.be.above(5);
  for (let i = 0; i < n; i++) {
    const labels = await figures.nth(i).locator('.y-axis span').allTextContents();
    const where = `${await figures.nth(i).getAttribute('data-series')}: ${labels.join(', ')}`;
    expect(labels, where).to.have.length(3);
    expect(new Set(labels).size, where).to.equal(3);
    expect(labels[2], where).to.match(/^0\b/);
  }
}

describe('web UI: dashboard', function () {
  this.timeout(60_000);
  const b = useBrowser();
  let gw: TestGateway;
  before(async () => {
    gw = await startGateway({ overrides: { dashboard: { intervalSeconds: 1, windowSeconds: 3600 } } });
  });
  after(async () => {
    await endAllClients();
    await gw.stop();
  });

  it('draws the last hour on the overview, and the charts move while a publisher runs', async () => {
    const { page, requests } = b;
    await signIn(page, gw.baseUrl);
    const messagesIn = page.locator('figure[data-series="messagesIn"]');
    const clients = page.locator('figure[data-series="clients"]');
    await messagesIn.waitFor();
    expect(requests.some((u) => /\/assets\/dashboard-charts-[\w]+\.js$/.test(u))).to.equal(true);
    for (const id of ['clients', 'messagesIn', 'messagesOut', 'bytesIn', 'bytesOut', 'dropped', 'loginFailures', 'cpu', 'rss', 'freeDisk']) {
      expect(await page.locator(`figure[data-series="${id}"] svg[role="img"]`).getAttribute('aria-label'), id).to.match(/over the last hour: now /);
    }

    // Idle: every chart's value scale has three distinct labels from 0 (not "1 B/s, 1 B/s, 0 B/s").
    await expectDistinctScales(page);

    // The line as it is before anything is published (nothing yet, or a flat zero).
    const lineBefore = (await messagesIn.locator('polyline').count()) ? await messagesIn.locator('polyline').last().getAttribute('points') : null;
    const publisher = await connect(gw.ports.mqtt, { username: 'admin', password: ADMIN_PASSWORD });
    let sent = 0;
    // Bursts of changing size, so the line has a shape.
    const timer = setInterval(() => {
      const burst = 1 + (Math.floor(sent / 150) % 4);
      for (let i = 0; i < burst; i++) publisher.publish('line/3/press/temperature', String(20 + (sent++ % 10)), { qos: 0 });
    }, 20);
    try {
      // The next samples carry the publisher: messages in per second above zero, one more client.
      // A function, not a string: the page's CSP forbids eval.
      const atLeast = ([id, min]: [string, number]) => {
        const doc = (globalThis as unknown as { document: { querySelector(s: string): { getAttribute(n: string): string | null } | null } }).document;
        return Number(doc.querySelector(`figure[data-series="${id}"]`)?.getAttribute('data-last')) >= min;
      };
      await page.waitForFunction(atLeast, ['messagesIn', 0.01] as [string, number], { timeout: 20_000 });
      await page.waitForFunction(atLeast, ['clients', 1] as [string, number], { timeout: 10_000 });
      const lineAfter = await messagesIn.locator('polyline').last().getAttribute('points');
      expect(lineAfter).to.not.equal(lineBefore);
      expect(await clients.locator('.value').textContent()).to.match(/^\d+$/);
      expect(await messagesIn.locator('.value').textContent()).to.match(/\/s$/);
      // A value scale from 0 to a round top at least the highest value, and a time axis in clock times.
      const top = Number(await messagesIn.getAttribute('data-top'));
      expect(top).to.be.at.least(Number(await messagesIn.getAttribute('data-last')));
      const scale = await messagesIn.locator('.y-axis span').allTextContents();
      expect(scale).to.have.length(3);
      expect(scale[0]).to.match(/\/s$/);
      expect(scale[2]).to.match(/^0k?\/s$/);
      // Nice-number ticks: the top is two steps of 1, 2, 2.5 or 5 times a power of ten.
      const mantissa = top / 2 / 10 ** Math.floor(Math.log10(top / 2));
      expect([1, 2, 2.5, 5].some((m) => Math.abs(m - mantissa) < 1e-9), `top ${top}`).to.equal(true);
      await expectDistinctScales(page);
      const ticks = await messagesIn.locator('.x-axis span').allTextContents();
      expect(ticks).to.have.length(3);
      for (const t of ticks) expect(t).to.match(/^\d{1,2}:\d{2}(:\d{2})?( [AP]M)?$/);
      await expectAccessible(page, 'the overview with its charts');
      // A few seconds of history for the picture.
      await page.waitForFunction(([id, n]: [string, number]) => {
        const doc = (globalThis as unknown as { document: { querySelector(s: string): { getAttribute(n: string): string | null } | null } }).document;
        return Number(doc.querySelector(`figure[data-series="${id}"]`)?.getAttribute('data-samples')) >= n;
      }, ['messagesIn', 6] as [string, number], { timeout: 20_000 });
      await screenshot(page, 'dashboard');
    } finally {
      clearInterval(timer);
      publisher.end();
    }
  });
});
