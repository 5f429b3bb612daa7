// The small fuzz runner of the northbound targets (issue 35 B: MQTT ingress, certificates, backup
// archives, the REST API). A target is an input arbitrary (fast-check 4), the bytes an input is
// saved as, and one execution that throws a FuzzFinding when an oracle fails. The runner runs it
// for a time budget from a printed seed, times every execution (a slow one is run twice more and
// is a hang only if all three were slow: the machine is shared), checks the buffers allocated
// per execution against the input's size, and saves each finding's input under
// test/fuzz/regressions/<target>/ (replayed by the tests forever). Kept apart from the southbound
// helpers' runner (test/fuzz/support/) on purpose: the two are unified at merge.
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';

/** An oracle failed: the message says which, the runner saves the input. */
export class FuzzFinding extends Error {
  override readonly name = 'FuzzFinding';
}

export interface FuzzContext {
  /** Buffers allocated by the current execution (Buffer.alloc/allocUnsafe/allocUnsafeSlow), bytes. */
  allocated(): { total: number; largest: number };
}

export interface NorthTarget<I, S = unknown> {
  name: string;
  /** What one execution checks, for the docs and the run's summary. */
  oracle: string;
  /** Executions a CI run of `ciMs` must reach (a slower harness is a bug). */
  floor: number;
  ciMs: number;
  /** The inputs; given the state of setup (seeds made there). */
  arbitrary(state: S): fc.Arbitrary<I>;
  encode(input: I): Buffer;
  decode(bytes: Buffer): I;
  /** Size the execution's work is bounded by (allocation and time oracles). */
  sizeOf(input: I): number;
  setup(): Promise<S>;
  teardown(state: S): Promise<void>;
  execute(state: S, input: I, ctx: FuzzContext): Promise<void>;
  /**
   * Checks after the time box (e.g. a differential with a slow reference tool over what was
   * accepted); returns lines for the summary, throws a FuzzFinding whose `cause.input` holds the
   * encoded input to save.
   */
  afterRun?(state: S): Promise<string[]>;
  /** Per-execution time limit (ms) for inputs up to 64 KiB; default 50. */
  msLimit?: number;
  /** Allocation bound for an input of n bytes; default 16 × n + 64 KiB (docs/testing.md). */
  allocationLimit?: (n: number) => number;
}

export interface FuzzRunResult {
  target: string;
  seed: number;
  executions: number;
  ms: number;
  findings: string[];
  slowestMs: number;
  /** Executions that were slow once but not on their two reruns (a busy machine, not a hang). */
  slowOnce: number;
}

const root = fileURLToPath(new URL('../../..', import.meta.url));
export const regressionsDir = (target: string) => join(root, 'test', 'fuzz', 'regressions', target);

const MAX_TIMED_BYTES = 64 * 1024;

/** Counts the buffers Node's factories hand out while an execution runs (length fields trusted too far show here). */
function meterBuffers() {
  let total = 0;
  let largest = 0;
  const B = Buffer as unknown as Record<'alloc' | 'allocUnsafe' | 'allocUnsafeSlow', (size: number, ...rest: unknown[]) => Buffer>;
  const originals = { alloc: B.alloc, allocUnsafe: B.allocUnsafe, allocUnsafeSlow: B.allocUnsafeSlow };
  for (const name of Object.keys(originals) as Array<keyof typeof originals>) {
    const original = originals[name];
    B[name] = function metered(size: number, ...rest: unknown[]) {
      if (typeof size === 'number') {
        total += size;
        if (size > largest) largest = size;
      }
      return original.call(Buffer, size, ...rest);
    };
  }
  return {
    reset() {
      total = 0;
      largest = 0;
    },
    read: () => ({ total, largest }),
    restore() {
      Object.assign(B, originals);
    },
  };
}

/** One execution with the time and allocation oracles around it. */
async function executeChecked<I, S>(target: NorthTarget<I, S>, state: S, input: I, meter: ReturnType<typeof meterBuffers>, stats: { slowestMs: number; slowOnce: number }, hangMs?: number): Promise<void> {
  const size = target.sizeOf(input);
  const limitMs = hangMs ?? target.msLimit ?? 50;
  const allocationLimit = (target.allocationLimit ?? ((n: number) => 16 * n + 64 * 1024))(size);
  const ctx: FuzzContext = { allocated: () => meter.read() };
  const once = async () => {
    meter.reset();
    const started = performance.now();
    await target.execute(state, input, ctx);
    const ms = performance.now() - started;
    const { total, largest } = meter.read();
    if (total > allocationLimit) throw new FuzzFinding(`allocated ${total} bytes of buffers (largest ${largest}) for an input of ${size} bytes (limit ${allocationLimit})`);
    return ms;
  };
  let ms = await once();
  if (size <= MAX_TIMED_BYTES && ms > limitMs) {
    // A busy machine makes one execution slow now and then; a hang is slow every time.
    ms = Math.min(ms, await once(), await once());
    if (ms > limitMs) throw new FuzzFinding(`took ${ms.toFixed(1)} ms (three runs) for an input of ${size} bytes (limit ${limitMs} ms)`);
    stats.slowOnce++;
  }
  stats.slowestMs = Math.max(stats.slowestMs, ms);
}

/** Exceptions nobody catches while a run or replay goes on: findings of the input that was running. */
function captureUncaught() {
  let uncaught: unknown;
  const onUncaught = (err: unknown) => {
    uncaught ??= err;
  };
  process.on('uncaughtException', onUncaught);
  process.on('unhandledRejection', onUncaught);
  return {
    /** Throws the first one seen since the last check (after a turn of the event loop). */
    async check(): Promise<void> {
      await new Promise((resolve) => setImmediate(resolve));
      if (uncaught === undefined) return;
      const err = uncaught as Error;
      uncaught = undefined;
      throw new FuzzFinding(`uncaught ${err?.constructor?.name ?? typeof err}: ${String(err?.message ?? err).slice(0, 300)}`);
    },
    stop() {
      process.removeListener('uncaughtException', onUncaught);
      process.removeListener('unhandledRejection', onUncaught);
    },
  };
}

function saveFinding(target: string, bytes: Buffer, note: Record<string, unknown>): string {
  const dir = regressionsDir(target);
  mkdirSync(dir, { recursive: true });
  const name = createHash('sha256').update(bytes).digest('hex').slice(0, 16);
  writeFileSync(join(dir, `${name}.bin`), bytes);
  writeFileSync(join(dir, `${name}.json`), `${JSON.stringify(note, null, 1)}\n`);
  return join(dir, `${name}.bin`);
}

/**
 * Runs a target for `timeMs` from `seed`; every finding is saved and reported (the run stops at
 * the first). `hangMs` replaces the target's time limit: long runs on a shared machine look for
 * hangs (> 1 s) rather than the CI limit, whose reruns cannot tell a load of 16 from a slow input.
 */
export async function runNorthTarget<I, S>(target: NorthTarget<I, S>, options: { timeMs: number; seed: number; log?: (line: string) => void; hangMs?: number }): Promise<FuzzRunResult> {
  const log = options.log ?? ((line: string) => console.log(line));
  log(`fuzz ${target.name}: seed ${options.seed}, ${(options.timeMs / 1000).toFixed(0)} s (replay: --target ${target.name} --seed ${options.seed})`);
  const state = await target.setup();
  const meter = meterBuffers();
  const stats = { slowestMs: 0, slowOnce: 0 };
  let executions = 0;
  // An exception nobody catches (an 'error' event without a listener, a rejected promise nobody
  // awaits) would end the process: it is a finding of the input that was running.
  const uncaught = captureUncaught();
  const started = performance.now();
  try {
    const details = await fc.check(
      fc.asyncProperty(target.arbitrary(state), async (input) => {
        executions++;
        await executeChecked(target, state, input, meter, stats, options.hangMs);
        await uncaught.check();
      }),
      { seed: options.seed, numRuns: Number.MAX_SAFE_INTEGER, interruptAfterTimeLimit: options.timeMs, markInterruptAsFailure: false },
    );
    const findings: string[] = [];
    if (details.failed && details.counterexample) {
      const input = details.counterexample[0];
      const bytes = target.encode(input);
      const error = details.errorInstance as Error | undefined;
      const file = saveFinding(target.name, bytes, { target: target.name, seed: details.seed, path: details.counterexamplePath, error: String(error?.message ?? error).slice(0, 2000) });
      findings.push(`${error?.message ?? String(error)} (seed ${details.seed}, path ${details.counterexamplePath}; input saved as ${file})`);
    }
    if (findings.length === 0 && target.afterRun) {
      try {
        for (const line of await target.afterRun(state)) log(`fuzz ${target.name}: ${line}`);
      } catch (err) {
        const input = (err as { cause?: { input?: Buffer } }).cause?.input;
        const file = input ? saveFinding(target.name, input, { target: target.name, seed: details.seed, error: String((err as Error).message).slice(0, 2000) }) : 'not saved';
        findings.push(`${(err as Error).message} (seed ${details.seed}; input saved as ${file})`);
      }
    }
    const ms = performance.now() - started;
    log(`fuzz ${target.name}: ${executions} executions in ${(ms / 1000).toFixed(1)} s (${Math.round(executions / (ms / 1000))}/s), ${findings.length} findings, slowest ${stats.slowestMs.toFixed(1)} ms, ${stats.slowOnce} slow once`);
    return { target: target.name, seed: options.seed, executions, ms, findings, ...stats };
  } finally {
    uncaught.stop();
    meter.restore();
    await target.teardown(state);
  }
}

/** Every saved input of a target, run once more with the same oracles; the failures. */
export async function replayNorthRegressions<I, S>(target: NorthTarget<I, S>): Promise<{ replayed: number; failures: string[] }> {
  let files: string[] = [];
  try {
    files = readdirSync(regressionsDir(target.name)).filter((f) => f.endsWith('.bin')).sort();
  } catch {
    return { replayed: 0, failures: [] };
  }
  const state = await target.setup();
  const meter = meterBuffers();
  const uncaught = captureUncaught();
  const failures: string[] = [];
  try {
    for (const file of files) {
      try {
        await executeChecked(target, state, target.decode(readFileSync(join(regressionsDir(target.name), file))), meter, { slowestMs: 0, slowOnce: 0 });
        // What fails later (an 'error' event of a stream left behind) needs a moment to show.
        await new Promise((resolve) => setTimeout(resolve, 20));
        await uncaught.check();
      } catch (err) {
        failures.push(`${file}: ${(err as Error).message}`);
      }
    }
    // A finding of the differential after the run (a CSR openssl refuses) fails there on replay too.
    if (target.afterRun) await target.afterRun(state).catch((err: Error) => failures.push(`after the replay: ${err.message}`));
  } finally {
    uncaught.stop();
    meter.restore();
    await target.teardown(state);
  }
  return { replayed: files.length, failures };
}

/** The seed of a CI run: given, or derived from the time (printed either way, so a failure replays). */
export function fuzzSeed(given?: string | number): number {
  const n = Number(given ?? process.env.GATEWAYD_FUZZ_SEED ?? NaN);
  return Number.isInteger(n) ? n : Date.now() % 2_147_483_647;
}

/**
 * The mocha suite of a target (test/fuzz/*.test.ts): its saved findings replayed, then a
 * time-boxed run from a printed seed (GATEWAYD_FUZZ_SEED replays one) that must find nothing and
 * reach the target's floor of executions.
 */
export function northFuzzSuite(load: () => Promise<NorthTarget<any, any>>, name: string): void {
  describe(`fuzz: ${name}`, function () {
    let target: NorthTarget<any, any>;
    before(async function () {
      this.timeout(60_000);
      target = await load();
    });

    it('replays every saved finding without a failure', async function () {
      this.timeout(120_000);
      const { failures } = await replayNorthRegressions(target);
      if (failures.length) throw new Error(failures.join('\n'));
    });

    it('finds nothing in its time box and reaches its floor of executions', async function () {
      this.timeout(target.ciMs + 120_000);
      const lines: string[] = [];
      const result = await runNorthTarget(target, { timeMs: target.ciMs, seed: fuzzSeed(), log: (line) => lines.push(line) });
      for (const line of lines) console.log(`      ${line}`);
      if (result.findings.length) throw new Error(result.findings.join('\n'));
      if (result.executions < target.floor) throw new Error(`${result.executions} executions in ${target.ciMs} ms, below the floor of ${target.floor}`);
    });
  });
}
