// The shape of a fuzz target's test file in npm test: its saved regressions replayed, then a
// time-boxed run of generated cases from a printed seed (GATEWAYD_FUZZ_SEED repeats it), which
// must reach a floor of executions (a harness that got slower fails) and find nothing. A
// failure is saved under test/fuzz/regressions/<target>/ and named in the test's message.
import { expect } from 'chai';
import { loadRegressions, runFuzz, type FuzzReport } from './run-fuzz.js';
import { runSeed } from './random.js';

export interface FuzzSuiteOptions {
  target: string;
  /** The time box of the generated run in npm test. */
  timeMs: number;
  /** Executions the time box must reach at least. */
  minExecutions: number;
}

const summary = (r: FuzzReport) =>
  `${r.target} ${r.mode}: seed ${r.seed}, ${r.executions} executions in ${(r.ms / 1000).toFixed(1)} s, ${r.crashes} crashes, ${r.hangs} hangs` + r.failures.map((f) => `\n  ${f.kind}: ${f.error}${f.file ? ` (saved: ${f.file})` : ''}`).join('');

export function fuzzSuite({ target, timeMs, minExecutions }: FuzzSuiteOptions): void {
  describe(`fuzz: ${target}`, function () {
    this.timeout(timeMs + 60_000);

    it('replays every saved regression without a failure', async () => {
      const saved = loadRegressions(target);
      const report = await runFuzz({ target, mode: 'replay', seed: 0, timeMs: 0 });
      expect(report.failures, summary(report)).to.deep.equal([]);
      expect(report.executions).to.equal(saved.length);
    });

    it(`survives ${timeMs / 1000} s of generated cases, at least ${minExecutions} of them`, async () => {
      const seed = runSeed();
      const report = await runFuzz({ target, seed, timeMs });
      console.log(`      ${summary(report)} (GATEWAYD_FUZZ_SEED=${seed} repeats it)`);
      expect(report.failures, summary(report)).to.deep.equal([]);
      expect(report.executions, summary(report)).to.be.at.least(minExecutions);
    });
  });
}
