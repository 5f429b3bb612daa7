// The reporter of scripts/run-tests.ts: mocha's spec layout (suites, ✔ / - / N) per test), but
// one failure numbering and one epilogue for all the runs of `npm test`. Each run adds its counts
// and failures to a shared tally; printSummary() prints the epilogue once, at the very end.
import Mocha from 'mocha';

const { Base } = Mocha.reporters;
const { EVENT_RUN_BEGIN, EVENT_SUITE_BEGIN, EVENT_SUITE_END, EVENT_TEST_PASS, EVENT_TEST_PENDING, EVENT_TEST_FAIL, EVENT_RUN_END } = Mocha.Runner.constants;

/** A failure as Base.list prints it: a test, a hook, or a file that could not be loaded. */
export interface ReportedFailure {
  titlePath(): string[];
  err?: unknown;
}

export interface Tally {
  passes: number;
  pending: number;
  failed: ReportedFailure[];
}

export function createTally(): Tally {
  return { passes: 0, pending: 0, failed: [] };
}

/** A reporter class (what mocha.reporter() takes) that reports into `tally`. */
export function tallyingSpecReporter(tally: Tally): typeof Base {
  return class TallyingSpec extends Base {
    constructor(runner: Mocha.Runner, options?: Mocha.MochaOptions) {
      super(runner, options);
      let indents = 0;
      const indent = () => '  '.repeat(Math.max(0, indents - 1));
      const log = (...args: unknown[]) => Base.consoleLog(...args);
      runner.on(EVENT_RUN_BEGIN, () => log());
      runner.on(EVENT_SUITE_BEGIN, (suite) => {
        indents++;
        log(Base.color('suite', '%s%s'), indent(), suite.title);
      });
      runner.on(EVENT_SUITE_END, () => {
        indents--;
        if (indents === 1) log();
      });
      runner.on(EVENT_TEST_PENDING, (test) => log(indent() + Base.color('pending', '  - %s'), test.title));
      runner.on(EVENT_TEST_PASS, (test) => {
        const line = indent() + Base.color('checkmark', `  ${Base.symbols.ok}`) + Base.color('pass', ' %s');
        if (test.speed === 'fast') log(line, test.title);
        else log(line + Base.color(test.speed ?? 'slow', ' (%dms)'), test.title, test.duration);
      });
      // Base's own listener has already collected this failure: its number counts earlier runs' too.
      runner.on(EVENT_TEST_FAIL, (test) => log(indent() + Base.color('fail', '  %d) %s'), tally.failed.length + this.failures.length, test.title));
      runner.once(EVENT_RUN_END, () => {
        tally.passes += this.stats.passes;
        tally.pending += this.stats.pending;
        tally.failed.push(...this.failures);
      });
    }
  };
}

/** Mocha's epilogue over every run: "N passing (time)", "N pending", "N failing" and the list. */
export function printSummary(tally: Tally, durationMs: number): void {
  const summary = Object.create(Base.prototype) as Mocha.reporters.Base;
  Object.assign(summary, {
    stats: { passes: tally.passes, pending: tally.pending, failures: tally.failed.length, duration: durationMs },
    failures: tally.failed,
  });
  Base.prototype.epilogue.call(summary);
}
