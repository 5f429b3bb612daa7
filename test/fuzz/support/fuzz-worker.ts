// One fuzz target in a worker thread (started by run-fuzz.ts), so that a case that never
// returns (a synchronous loop that does not advance) can be stopped and saved: before each case
// the worker copies it into shared memory and counts it; the main thread's watchdog sees the
// count stand still. Modes: `fuzz` (fast-check generates cases for timeMs from `seed`) and
// `replay` (the given cases, the saved regressions). A target's setup runs before its first case,
// its afterRun after the last, its teardown in the end. Posts one result message at the end.
import { parentPort, workerData } from 'node:worker_threads';
import fc from 'fast-check';
import { checkCase, checkCaseSync, threadCpuMs } from './oracles.js';
import type { FuzzTarget } from './fuzz-target.js';
import type { WorkerInput, WorkerResult } from './worker-contract.js';

const input = workerData as WorkerInput;
const beat = new Int32Array(input.heartbeat, 0, 2);
const current = new Uint8Array(input.heartbeat, 8);

function started(bytes: Uint8Array): void {
  const n = Math.min(bytes.length, current.length);
  current.set(bytes.subarray(0, n));
  Atomics.store(beat, 1, n);
  Atomics.add(beat, 0, 1);
}

const describe = (err: unknown) => ({ error: err instanceof Error ? `${err.name}: ${err.message}` : String(err), kind: (err as { kind?: string })?.kind ?? 'escaped' });

/** Between cases (setup, afterRun, teardown): the watchdog gives these its start-up time, not a case's. */
const betweenCases = () => Atomics.store(beat, 1, -1);

async function main(): Promise<WorkerResult> {
  const { target } = (await import(input.module)) as { target: FuzzTarget };
  betweenCases();
  await target.setup?.();
  try {
    const result = await runCases(target);
    betweenCases();
    // The run's own differential (afterRun), when its cases found nothing: in replay mode too, so
    // that a saved finding of it fails again.
    if (target.afterRun && (input.mode === 'replay' || result.failures.length === 0)) {
      try {
        result.lines = await target.afterRun();
      } catch (err) {
        result.failures.push({ bytes: (err as { bytes?: Uint8Array }).bytes ?? new Uint8Array(), ...describe(err) });
      }
    }
    return result;
  } finally {
    await target.teardown?.();
  }
}

async function runCases(target: FuzzTarget): Promise<WorkerResult> {
  const t0 = performance.now();
  const cpu0 = threadCpuMs();
  let executions = 0;
  const failures: WorkerResult['failures'] = [];
  if (input.mode === 'replay') {
    for (const bytes of input.cases ?? []) {
      started(bytes);
      executions++;
      try {
        if (target.async) await checkCase(target, bytes);
        else checkCaseSync(target, bytes);
      } catch (err) {
        failures.push({ bytes, ...describe(err) });
      }
    }
    return { executions, failures, ms: performance.now() - t0, cpuMs: threadCpuMs() - cpu0 };
  }
  const options = { seed: input.seed, numRuns: input.runs ?? Number.MAX_SAFE_INTEGER, plugins: [fc.interruptAfterTimeLimit(input.timeMs)] };
  const details = target.async
    ? await fc.check(
        fc.asyncProperty(target.cases, async (bytes) => {
          started(bytes);
          executions++;
          await checkCase(target, bytes);
        }),
        options,
      )
    : fc.check(
        fc.property(target.cases, (bytes) => {
          started(bytes);
          executions++;
          checkCaseSync(target, bytes);
        }),
        options,
      );
  const counterexample = details.counterexample as [Uint8Array] | null;
  if (details.failed && counterexample) failures.push({ bytes: counterexample[0], ...describe(details.errorInstance), ...(details.counterexamplePath ? { path: details.counterexamplePath } : {}) });
  else if (details.failed) failures.push({ bytes: new Uint8Array(), error: 'fast-check stopped without a counterexample', kind: 'escaped' });
  return { executions, failures, ms: performance.now() - t0, cpuMs: threadCpuMs() - cpu0 };
}

main().then(
  (result) => parentPort!.postMessage(result),
  (err: unknown) => parentPort!.postMessage({ executions: 0, failures: [{ bytes: new Uint8Array(), error: `the target could not run: ${String((err as Error)?.stack ?? err)}`, kind: 'escaped' }], ms: 0, cpuMs: 0 } satisfies WorkerResult),
);
