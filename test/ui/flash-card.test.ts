// The overview's flash card in a real browser (issue 38 point 6): the write rate in the unit of the
// charts beside it (KiB/s, never KB/s) over a window it names; the projected life by the README's
// formula (the same number the API's rate gives); the assumptions, which of them are defaults and
// the settings that change them; and the wear budget: fast with what is left, then spent (after
// acknowledgements that waited for the flash emptied a small allowance) with the interval they
// now wait for. The flash's samples are taken by hand here (the daemon takes one a minute).
import { expect } from 'chai';
import { ADMIN_PASSWORD, startGateway, type TestGateway } from '../support/harness.js';
import { connect, endAllClients, subscribe } from '../support/mqtt-test-kit.js';
import { expectAccessible, signIn, useBrowser } from './support/browser.js';

describe('web UI: the flash card', function () {
  this.timeout(60_000);
  const b = useBrowser();
  let gw: TestGateway;
  const BURST = 400_000;
  before(async () => {
    gw = await startGateway({ overrides: { dashboard: { intervalSeconds: 1 }, storage: { flash: { capacityBytes: 16e9, burstBytes: BURST } } } });
  });
  after(async () => {
    await endAllClients();
    await gw.stop();
  });

  const card = () => b.page.locator('section[aria-labelledby="card-flash"]');
  const fact = (name: string) => card().locator(`dt:text-is("${name}") + dd`);

  it('names its unit, window and assumptions, projects by the README\'s formula, and shows the wear budget fast, then spent', async () => {
    const { page } = b;
    const wear = gw.services.flashWear;
    wear.sample();
    await signIn(page, gw.baseUrl);
    await card().locator('dl.facts').waitFor();
    expect(await fact('Written').textContent()).to.match(/^measuring/);
    const assumed = await fact('Assumed').textContent();
    expect(assumed, 'the capacity was set: not called a default').to.not.include('capacityBytes');
    expect(assumed).to.include('storage.flash.ratedWriteCycles, storage.flash.writeAmplification are the default; set them from the flash\'s datasheet');
    expect(await fact('Projected life').textContent()).to.include('16 GB flash, rated for 1,000 write cycles, write amplification 3');
    expect(await card().locator('dl').getAttribute('data-flash-budget')).to.equal('fast');
    expect(await fact('Wear budget').textContent()).to.match(/^fast acknowledgements: [\d.]+ KiB of 391 KiB left \(storage\.flash\.burstBytes\); it refills at 17 KiB\/s, the rate at which the flash lasts the 10 years wanted \(storage\.flash\.lifeYears\)$/);

    // Acknowledgements that wait for the flash: a persistent subscriber away, a publisher with one
    // message in flight. Each gets a journal frame of its own at once, until the budget is spent.
    const away = await connect(gw.ports.mqtt, { username: 'admin', password: ADMIN_PASSWORD, clientId: 'flash-card-away', clean: false });
    await subscribe(away, 'card/#', 1);
    await away.endAsync();
    const publisher = await connect(gw.ports.mqtt, { username: 'admin', password: ADMIN_PASSWORD });
    for (let i = 0; i < 150 && gw.services.storage.stats().budget.mode === 'fast'; i++) await publisher.publishAsync('card/x', `m${i}`, { qos: 1 });
    expect(gw.services.storage.stats().budget.mode).to.equal('spent');
    await new Promise((r) => setTimeout(r, 1100));
    wear.sample();

    await page.reload();
    await card().locator('dl.facts').waitFor();
    const written = await fact('Written').textContent();
    // The charts' unit (binary), and the window said.
    expect(written).to.match(/^[\d.]+ (B|KiB|MiB)\/s, the mean of the last \d+ s \(the chart "Written to flash" shows each sample\)$/);
    expect(written).to.not.match(/KB\/s/);
    const chart = await page.locator('figure[data-series="flashWrites"] .value').textContent();
    expect(chart, 'the chart beside it in the same unit').to.match(/(B|KiB|MiB)\/s$/);
    // The README's method: capacity × cycles ÷ (amplification × rate), from the rate the API gives.
    const { body } = await gw.api<{ flash: { writtenBytesPerSecond: number; projectedYears: number } }>('GET', '/api/dashboard', { token: await gw.login() });
    const expected = (16e9 * 1000) / (3 * body.flash.writtenBytesPerSecond * 365.25 * 86400);
    expect(body.flash.projectedYears).to.be.closeTo(expected, expected * 1e-9);
    expect(await fact('Projected life').textContent()).to.match(/^(\d+(\.\d)? years|more than 100 years) at that rate of a 16 GB flash/);
    expect(await card().locator('dl').getAttribute('data-flash-budget')).to.equal('spent');
    expect(await fact('Wear budget').textContent()).to.match(
      /^spent since .+: acknowledgements that wait for the flash wait for the commit interval \(500 ms, storage\.commitIntervalMs\), until a tenth of the allowance is back \(in about [\d.]+ (s|min|h)\); it refills at 17 KiB\/s/,
    );
    await expectAccessible(page, 'the overview with the flash card');
    await publisher.endAsync();
  });
});
