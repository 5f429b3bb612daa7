// Wear made visible (src/storage/flash-wear.ts): the projected life of the flash from the write
// rate of the last hour, the warning once it falls under storage.flash.warnBelowYears (only over a
// full window, once), and the figures on /api/dashboard of a running gateway.
import { expect } from 'chai';
import { createFlashWear, projectedYears, readProcessWriteBytes, WRITE_AMPLIFICATION } from '../src/storage/index.js';
import { capturedLog } from './support/captured-log.js';
import { startGateway } from './support/harness.js';

const logSink = () => capturedLog();

describe('flash wear', () => {
  const tlc8 = { capacityBytes: 8e9, ratedWriteCycles: 1000, warnBelowYears: 5 };

  it('projects the life of the flash: capacity × cycles / (write amplification × rate)', () => {
    // The reference: 4 KB/s keeps an 8 GB TLC eMMC about 21 years at amplification 3... check the formula itself.
    const years = projectedYears(tlc8, 4000);
    expect(years).to.be.closeTo((8e9 * 1000) / (WRITE_AMPLIFICATION * 4000 * 365.25 * 86400), 1e-9);
    expect(years).to.be.within(21, 22);
    expect(projectedYears(tlc8, 3e6), '3 MB/s: about ten days').to.be.within(9 / 365, 11 / 365);
    expect(projectedYears(tlc8, 0)).to.equal(Infinity);
  });

  it('reads the kernel\'s count of this process\'s writes', () => {
    expect(readProcessWriteBytes()).to.be.a('number');
  });

  it('warns once, and only once a full hour of samples shows a rate that wears the flash out early', () => {
    const { log, lines } = logSink();
    let now = 0;
    let written = 0;
    const wear = createFlashWear({ flash: tlc8, log, readWrittenBytes: () => written, now: () => now });
    const tick = (bytesPerSecond: number) => {
      now += 60_000;
      written += bytesPerSecond * 60;
      wear.sample();
    };
    wear.sample();
    for (let i = 0; i < 59; i++) tick(100_000); // 100 KB/s: under a year
    expect(wear.projection().projectedYears).to.be.below(1);
    expect(lines.filter((l) => String(l.message).startsWith('flash wear')), 'not before a full hour').to.have.length(0);
    tick(100_000);
    tick(100_000);
    const warnings = lines.filter((l) => String(l.message).startsWith('flash wear'));
    expect(warnings).to.have.length(1);
    expect(warnings[0]).to.include({ level: 'warn', warnBelowYears: 5 });
    expect(wear.projection()).to.include({ windowSeconds: 3600, capacityBytes: 8e9, ratedWriteCycles: 1000, writeAmplification: 3 });
    expect(wear.projection().writtenBytesPerSecond).to.equal(100_000);
  });

  it('does not warn at a rate the flash survives, nor with the warning switched off', () => {
    for (const [rate, warnBelowYears] of [[1000, 5], [1e6, 0]] as const) {
      const { log, lines } = logSink();
      let now = 0;
      let written = 0;
      const wear = createFlashWear({ flash: { ...tlc8, warnBelowYears }, log, readWrittenBytes: () => written, now: () => now });
      for (let i = 0; i <= 61; i++) {
        now += 60_000;
        written += rate * 60;
        wear.sample();
      }
      expect(lines).to.have.length(0);
    }
  });

  it('leaves start-up out: the first sample is one period after the start; and says which assumptions are defaults', async () => {
    const { log } = logSink();
    let written = 5_000_000; // what start-up wrote before the part started
    const wear = createFlashWear({ flash: { ...tlc8, capacityBytes: 16e9 }, log, readWrittenBytes: () => written, sampleMs: 100 });
    await wear.part.start();
    try {
      written += 1_000_000; // more start-up, within the first period
      expect(wear.projection().writtenBytesPerSecond, 'no sample at the start').to.equal(null);
      await new Promise((r) => setTimeout(r, 150));
      const first = written;
      written += 4000;
      await new Promise((r) => setTimeout(r, 300));
      const p = wear.projection();
      // 4 KB over a few tenths of a second: some KB/s; with start-up's megabyte in it, megabytes a second.
      expect(p.writtenBytesPerSecond, 'only what came after the first sample').to.be.above(0).and.below(100_000);
      expect(written - first).to.equal(4000);
      expect(p.defaults).to.deep.equal(['ratedWriteCycles', 'writeAmplification', 'lifeYears']);
      expect(p).to.include({ capacityBytes: 16e9, lifeYears: 10 });
    } finally {
      await wear.part.stop();
    }
  });

  it('answers the figures with the dashboard of a running gateway', async function () {
    this.timeout(30_000);
    const gw = await startGateway({ overrides: { storage: { flash: { capacityBytes: 16e9, ratedWriteCycles: 20000, warnBelowYears: 5 } } } });
    try {
      const admin = await gw.login();
      const res = await gw.api<{ flash?: Record<string, unknown> }>('GET', '/api/dashboard', { token: admin });
      expect(res.status).to.equal(200);
      expect(res.body.flash).to.include({ capacityBytes: 16e9, ratedWriteCycles: 20000, writeAmplification: 3, lifeYears: 10, commitIntervalMs: 500 });
      expect(res.body.flash!.defaults).to.deep.equal(['writeAmplification', 'lifeYears']);
      expect(res.body.flash!.budget).to.include({ mode: 'fast', burstBytes: 320_000_000, spentCount: 0 });
    } finally {
      await gw.stop();
    }
  });
});
