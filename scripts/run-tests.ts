// `npm test`: the whole suite in two groups, one summary. Most test files spend their time waiting
// (daemons, brokers, browsers, timers), so they run in parallel worker processes (mocha --parallel).
// A file whose first lines hold a `// run-alone: <why>` comment runs after them, alone, in this
// process: it measures the machine (CPU time, durations compared, a process's memory) or observes
// state other test files change (the checkout). One epilogue counts both groups ("N passing",
// "N pending", "N failing" and the failures), as .ci/run reads it; any failure exits non-zero.
//
//   npm test                                      every dist/test/**/*.test.js
//   npm test -- dist/test/a.test.js ...           these files, grouped the same way
//   npm test -- --jobs 4                          parallel worker processes (default 3)
//   npm test -- --timings                         and each file's wall time, slowest first
//
// A single file without grouping: npx mocha dist/test/<file>.test.js (.mocharc.json applies).
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import Mocha from 'mocha';
import { createTally, printSummary, tallyingSpecReporter } from './run-tests-reporter.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const testDir = join(root, 'dist/test');
/** The marker is looked for in a file's head, where its header comment is. */
const RUN_ALONE = /^\/\/ run-alone: \S/m;
/** A parallel file that takes minutes goes to the head of the queue, not to the tail of the run. */
const RUN_FIRST = /^\/\/ run-first: \S/m;
const HEAD_BYTES = 4096;
/** Two cores, and most of a test's time is spent waiting: three workers keep both busy. */
const DEFAULT_JOBS = 3;

function parseArgs(argv: string[]): { files: string[]; jobs: number; timings: boolean } {
  const files: string[] = [];
  let jobs = DEFAULT_JOBS;
  let timings = false;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--timings') timings = true;
    else if (arg === '--jobs' || arg.startsWith('--jobs=')) {
      const value = arg === '--jobs' ? argv[++i] : arg.slice('--jobs='.length);
      jobs = Number(value);
      if (!Number.isInteger(jobs) || jobs < 1) throw new Error(`--jobs wants a whole number of at least 1, got ${JSON.stringify(value)}`);
    } else if (arg.startsWith('-')) {
      throw new Error(`unknown option ${arg} (run-tests takes test files, --jobs N and --timings)`);
    } else files.push(resolve(arg));
  }
  return { files, jobs, timings };
}

function allTestFiles(): string[] {
  return (readdirSync(testDir, { recursive: true }) as string[])
    .filter((f) => f.endsWith('.test.js'))
    .map((f) => join(testDir, f))
    .sort();
}

function runsAlone(file: string): boolean {
  return RUN_ALONE.test(readFileSync(file, 'utf8').slice(0, HEAD_BYTES));
}

function runsFirst(file: string): boolean {
  return RUN_FIRST.test(readFileSync(file, 'utf8').slice(0, HEAD_BYTES));
}

/** .mocharc.json, as the mocha command line reads it for single files; `exit` and source maps are this script's. */
function mochaOptions(): Mocha.MochaOptions {
  const rc = JSON.parse(readFileSync(join(root, '.mocharc.json'), 'utf8')) as Record<string, unknown>;
  const { exit: _exit, 'enable-source-maps': _sourceMaps, ...options } = rc;
  return options as Mocha.MochaOptions;
}

/** Runs mocha; resolves with the time each file's last test ended (in parallel mode: when its worker's report came). */
function run(mocha: Mocha): Promise<Map<string, number>> {
  return new Promise((resolve) => {
    const ended = new Map<string, number>();
    const runner = mocha.run(() => resolve(ended));
    const { EVENT_TEST_END, EVENT_TEST_FAIL } = Mocha.Runner.constants;
    // A failed hook is reported, not ended: it counts as its file's end too.
    const note = (runnable: Mocha.Runnable) => runnable.file && ended.set(runnable.file, Date.now());
    runner.on(EVENT_TEST_END, note).on(EVENT_TEST_FAIL, note);
  });
}

interface FileTime {
  ms: number;
  /** When it ended, from the start of `npm test`'s runs. */
  endedAt: number;
}

/**
 * Each file's wall time in the worker pool. Workers take files in queue order, one at a time, so
 * the k-th file of the queue (k >= jobs) starts when the (k - jobs + 1)-th report comes in.
 */
function poolTimes(queue: string[], ended: Map<string, number>, jobs: number, startedAt: number): Map<string, FileTime> {
  const reports = [...ended.values()].sort((a, b) => a - b);
  const times = new Map<string, FileTime>();
  queue.forEach((file, k) => {
    const end = ended.get(file);
    const start = k < jobs ? startedAt : reports[k - jobs];
    if (end !== undefined && start !== undefined) times.set(file, { ms: end - start, endedAt: end - startedAt });
  });
  return times;
}

function printTimes(times: Map<string, FileTime>, phases: string): void {
  console.log(`  ${phases}; wall time per file, slowest first (parallel files: while sharing the machine), and when it ended:`);
  for (const [file, t] of [...times].sort((a, b) => b[1].ms - a[1].ms)) {
    console.log(`  ${(t.ms / 1000).toFixed(1).padStart(6)} s  ${relative(testDir, file).padEnd(48)} ${(t.endedAt / 1000).toFixed(0).padStart(5)} s`);
  }
  console.log();
}

async function main(): Promise<number> {
  const { files, jobs, timings } = parseArgs(process.argv.slice(2));
  const chosen = files.length ? files : allTestFiles();
  const alone = chosen.filter(runsAlone);
  const inParallel = chosen.filter((f) => !alone.includes(f));
  const parallel = [...inParallel.filter(runsFirst), ...inParallel.filter((f) => !runsFirst(f))];
  const tally = createTally();
  const reporter = tallyingSpecReporter(tally);
  const started = Date.now();
  let times = new Map<string, FileTime>();

  if (parallel.length) {
    const mocha = new Mocha({ ...mochaOptions(), parallel: true, jobs });
    mocha.reporter(reporter);
    for (const f of parallel) mocha.addFile(f);
    times = poolTimes(parallel, await run(mocha), jobs, started);
  }
  const parallelMs = Date.now() - started;
  if (alone.length) console.log(`\n  run alone, one after another: ${alone.map((f) => relative(testDir, f)).join(', ')}`);
  for (const file of alone) {
    const mocha = new Mocha(mochaOptions());
    mocha.reporter(reporter);
    mocha.addFile(file);
    try {
      await mocha.loadFilesAsync();
    } catch (err) {
      // It ran none of its tests: a failure of its own, and the other files still run.
      tally.failed.push({ titlePath: () => [`loading ${relative(root, file)}`], err });
      continue;
    }
    const fileStarted = Date.now();
    await run(mocha);
    times.set(file, { ms: Date.now() - fileStarted, endedAt: Date.now() - started });
  }

  printSummary(tally, Date.now() - started);
  const phases = `${parallel.length} files in parallel (${jobs} workers) ${(parallelMs / 1000).toFixed(0)} s, ${alone.length} alone ${((Date.now() - started - parallelMs) / 1000).toFixed(0)} s`;
  if (timings) printTimes(times, phases);
  return tally.failed.length > 0 ? 1 : 0;
}

main().then(
  // Leftover handles (a client a test forgot, a worker's pipe) must not keep `npm test` open:
  // what mocha's --exit does for a single run.
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
