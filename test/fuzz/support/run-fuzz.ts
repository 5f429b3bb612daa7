// Runs a fuzz target (test/fuzz/targets/<name>.ts) in a worker thread under a watchdog, for the
// test suite (fuzz-suite.ts) and for long runs (scripts/fuzz.ts): the worker counts the cases it
// starts in shared memory; a count that stands still for hangMs is a hang, the worker is
// stopped and the case it was on is saved. Every failure is saved as bytes under
// test/fuzz/regressions/<target>/ (with a .json of what failed, the seed and fast-check's path),
// which the suite replays on every run.
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { HEARTBEAT_CASE_BYTES, type WorkerInput, type WorkerResult } from './worker-contract.js';

const repoRoot = fileURLToPath(new URL('../../../..', import.meta.url));
/** Where failures are kept: in the source tree, committed, replayed forever. */
export const regressionsDir = (target: string) => join(repoRoot, 'test/fuzz/regressions', target);
const targetModule = (target: string) => new URL(`../targets/${target}.js`, import.meta.url).href;
const workerFile = new URL('./fuzz-worker.js', import.meta.url);
/** How long a worker may take to load its target before its first case. */
const STARTUP_MS = 60_000;

export interface FuzzReport {
  target: string;
  mode: 'fuzz' | 'replay';
  seed: number;
  executions: number;
  ms: number;
  /** CPU time of the fuzzing thread (ms; 0 when the watchdog stopped it). */
  cpuMs: number;
  /** Cases that broke an oracle (crash: an error escaped, a wrong result, an unsafe write, too slow, too much memory). */
  crashes: number;
  /** Cases that never returned (the watchdog stopped the worker). */
  hangs: number;
  /** What failed, and where its bytes were saved. */
  failures: Array<{ kind: string; error: string; file?: string }>;
  /** What the target's afterRun reported. */
  lines: string[];
}

export interface FuzzOptions {
  target: string;
  mode?: 'fuzz' | 'replay';
  seed: number;
  timeMs: number;
  /**
   * A case still running after this long is a hang (default 5 s): the watchdog is for cases that
   * never return; slow ones are the 50 ms oracle's. Far above it, because the machine is shared.
   */
  hangMs?: number;
  /** Save failures under test/fuzz/regressions (default true; replays never save). */
  save?: boolean;
  /** Stop after this many cases (default: only the time box). */
  runs?: number;
}

/** Saves a failing case; returns its file (named by its hash, so a case is saved once). */
export function saveRegression(target: string, bytes: Uint8Array, meta: Record<string, unknown>): string {
  const dir = regressionsDir(target);
  mkdirSync(dir, { recursive: true });
  const name = createHash('sha256').update(bytes).digest('hex').slice(0, 16);
  const file = join(dir, `${name}.bin`);
  writeFileSync(file, bytes);
  writeFileSync(join(dir, `${name}.json`), JSON.stringify({ target, found: new Date().toISOString(), ...meta }, null, 2) + '\n');
  return file;
}

/** The saved regressions of a target (bytes), oldest name first. */
export function loadRegressions(target: string): Array<{ file: string; bytes: Uint8Array }> {
  const dir = regressionsDir(target);
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((f) => f.endsWith('.bin'))
    .sort()
    .map((f) => ({ file: join(dir, f), bytes: new Uint8Array(readFileSync(join(dir, f))) }));
}

export async function runFuzz(options: FuzzOptions): Promise<FuzzReport> {
  const { target, seed, timeMs, hangMs = 5000, save = true } = options;
  const mode = options.mode ?? 'fuzz';
  const heartbeat = new SharedArrayBuffer(8 + HEARTBEAT_CASE_BYTES);
  const beat = new Int32Array(heartbeat, 0, 2);
  const cases = mode === 'replay' ? loadRegressions(target).map((r) => r.bytes) : undefined;
  const input: WorkerInput = { module: targetModule(target), mode, seed, timeMs, heartbeat, ...(cases ? { cases } : {}), ...(options.runs ? { runs: options.runs } : {}) };
  const worker = new Worker(workerFile, { workerData: input });
  const t0 = performance.now();
  const report: FuzzReport = { target, mode, seed, executions: 0, ms: 0, cpuMs: 0, crashes: 0, hangs: 0, failures: [], lines: [] };
  const record = (kind: string, error: string, bytes: Uint8Array, path?: string) => {
    const file = save && mode === 'fuzz' ? saveRegression(target, bytes, { kind, error, seed, ...(path ? { path } : {}) }) : undefined;
    report.failures.push({ kind, error, ...(file ? { file } : {}) });
    if (kind === 'hang') report.hangs++;
    else report.crashes++;
  };
  await new Promise<void>((resolve) => {
    let seen = -1;
    let still = performance.now();
    const watchdog = setInterval(() => {
      const count = Atomics.load(beat, 0);
      if (count !== seen) {
        seen = count;
        still = performance.now();
        return;
      }
      const length = Atomics.load(beat, 1);
      // Before and during its first case, and between cases (a target's setup, afterRun and
      // teardown: a broker started, openssl asked), the worker gets the start-up time.
      if (performance.now() - still < (count <= 1 || length < 0 ? STARTUP_MS : hangMs)) return;
      clearInterval(watchdog);
      const bytes = new Uint8Array(heartbeat, 8, Math.max(0, length)).slice();
      report.executions = count;
      record('hang', length < 0 ? `the target's setup, afterRun or teardown ran for more than ${STARTUP_MS} ms` : `a case ran for more than ${hangMs} ms`, bytes);
      void worker.terminate().then(() => resolve());
    }, Math.max(10, Math.floor(hangMs / 4)));
    worker.once('message', (result: WorkerResult) => {
      clearInterval(watchdog);
      report.executions = result.executions;
      report.cpuMs = result.cpuMs;
      report.lines = result.lines ?? [];
      for (const f of result.failures) record(f.kind, f.error, f.bytes, f.path);
      void worker.terminate().then(() => resolve());
    });
    worker.once('error', (err) => {
      clearInterval(watchdog);
      report.executions = Atomics.load(beat, 0);
      const length = Atomics.load(beat, 1);
      record('escaped', `the worker died: ${err.message}`, new Uint8Array(heartbeat, 8, Math.max(0, length)).slice());
      resolve();
    });
  });
  report.ms = performance.now() - t0;
  return report;
}
