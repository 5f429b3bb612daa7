// What run-fuzz.ts (main thread) and fuzz-worker.ts (the worker) pass each other.

export interface WorkerInput {
  /** URL of the target's module (exports `target`). */
  module: string;
  mode: 'fuzz' | 'replay';
  seed: number;
  timeMs: number;
  /** fuzz: stop after this many cases (default: only the time box). */
  runs?: number;
  /** replay: the cases. */
  cases?: Uint8Array[];
  /** Shared with the watchdog: [0] cases started, [1] the current case's length; then its bytes. */
  heartbeat: SharedArrayBuffer;
}

export interface WorkerResult {
  executions: number;
  /** fuzz: fast-check's counterexample, shrunk; replay: every case that failed. */
  failures: Array<{ bytes: Uint8Array; error: string; kind: string; path?: string }>;
  ms: number;
  /** CPU time the worker's thread spent (ms): executions per CPU second do not depend on the machine's load. */
  cpuMs: number;
  /** What the target's afterRun reported. */
  lines?: string[];
}

/** Bytes of the current case kept for the watchdog (cases beyond are cut: still enough to look at). */
export const HEARTBEAT_CASE_BYTES = 1 << 20;
