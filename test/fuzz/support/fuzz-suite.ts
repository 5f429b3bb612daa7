// The shape of a fuzz target's test file in npm test: its saved regressions replayed, then a
// time-boxed run of generated cases from a printed seed (GATEWAYD_FUZZ_SEED repeats it), which
// must find nothing and reach a floor of executions per CPU second of the fuzzing thread (a
// harness that got slower fails; a machine busy with other work does not). A failure is saved
// under test/fuzz/regressions/<target>/ and named in the test's message.
import { expect } from 'chai';
import fc from 'fast-check';
import type { FuzzTarget } from './fuzz-target.js';
import { loadRegressions, runFuzz, type FuzzReport } from './run-fuzz.js';
import { runSeed } from './random.js';

export interface FuzzSuiteOptions {
  target: string;
  /** The time box of the generated run in npm test. */
  timeMs: number;
  /** Executions per CPU second of the fuzzing thread, at least. */
  minPerCpuSecond: number;
  /**
   * Executions a box runs however busy the machine (default 200): a target whose case waits for
   * a live broker or gateway over real I/O (MQTT sessions, REST) runs fewer on a loaded machine.
   */
  minExecutions?: number;
}

const MIN_EXECUTIONS = 200;

const perCpuSecond = (r: FuzzReport) => (r.cpuMs > 0 ? (r.executions * 1000) / r.cpuMs : 0);
const summary = (r: FuzzReport) =>
  `${r.target} ${r.mode}: seed ${r.seed}, ${r.executions} executions in ${(r.ms / 1000).toFixed(1)} s (${(r.cpuMs / 1000).toFixed(1)} s of CPU: ${perCpuSecond(r).toFixed(0)}/CPU s), ${r.crashes} crashes, ${r.hangs} hangs` + r.failures.map((f) => `\n  ${f.kind}: ${f.error}${f.file ? ` (saved: ${f.file})` : ''}`).join('');

export function fuzzSuite({ target, timeMs, minPerCpuSecond, minExecutions = MIN_EXECUTIONS }: FuzzSuiteOptions): void {
  describe(`fuzz: ${target}`, function () {
    this.timeout(timeMs + 60_000);

    it('generates valid cases among the mutated ones (the exact-decoding oracle has work)', async () => {
      const { target: t } = (await import(`../targets/${target}.js`)) as { target: FuzzTarget };
      if (!t.valid) return;
      const sample = fc.sample(t.cases, { numRuns: 400, seed: 42 });
      const valid = sample.filter((c) => t.valid!(c)).length;
      expect(valid, `${valid} valid cases of ${sample.length}`).to.be.at.least(sample.length / 20);
    });

    it('replays every saved regression without a failure', async () => {
      const saved = loadRegressions(target);
      const report = await runFuzz({ target, mode: 'replay', seed: 0, timeMs: 0 });
      expect(report.failures, summary(report)).to.deep.equal([]);
      expect(report.executions).to.equal(saved.length);
    });

    it(`survives ${timeMs / 1000} s of generated cases, at least ${minPerCpuSecond} per CPU second`, async () => {
      const seed = runSeed();
      const report = await runFuzz({ target, seed, timeMs });
      console.log(`      ${summary(report)} (GATEWAYD_FUZZ_SEED=${seed} repeats it)${report.lines.map((l) => `\n      ${l}`).join('')}`);
      expect(report.failures, summary(report)).to.deep.equal([]);
      expect(report.executions, summary(report)).to.be.at.least(minExecutions);
      expect(perCpuSecond(report), summary(report)).to.be.at.least(minPerCpuSecond);
    });
  });
}
