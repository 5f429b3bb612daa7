// What a fuzz target is (test/fuzz/targets/*.ts; docs/testing.md "Hostile input"): a name, its generated
// cases (structure-aware: valid input built by our own encoders, then mutated; and raw bytes),
// and run(), which feeds one case to the parser under test and throws when the target's own
// oracles are violated (an error other than the typed ones escaped, a valid input decoded
// wrong, a write that should not have happened, a buffer beyond its bound). The runner adds
// the oracles every target shares: time and memory per case, hangs (oracles.ts, fuzz-worker.ts).
import type fc from 'fast-check';

export interface FuzzTarget {
  /** Its folder under test/fuzz/regressions/ and its name for `npm run fuzz -- --target`. */
  name: string;
  /** What it feeds to what, and what it checks (printed by npm run fuzz, listed in docs/testing.md). */
  description: string;
  /** Generated cases, as the bytes run() takes. */
  cases: fc.Arbitrary<Uint8Array>;
  /** Runs one case; throws when an oracle is violated. Async targets settle in microtasks (no real I/O, no timers waited for). */
  run(bytes: Uint8Array): void | Promise<void>;
  /**
   * The case is valid input (what a correct device sends): run() then checks the exact decoding.
   * The suite checks that the generator still makes such cases (a broken generator that only
   * makes garbage would leave the decoding oracle idle).
   */
  valid?(bytes: Uint8Array): boolean;
  /** run() returns a promise. */
  async?: boolean;
  /**
   * Bytes a case may allocate (default oracles.ts: 16 × its length + 64 KiB). A target whose case
   * is several exchanges with the device may add each exchange's fixed cost (never a cost sized
   * by what the device declares).
   */
  allowance?(bytes: Uint8Array): number;
  /**
   * What the memory oracle counts (default 'heap': the V8 heap and external memory). 'buffers':
   * the Buffers made while the case runs (Buffer.alloc*): for targets that run a real broker or
   * gateway on real I/O, whose heap moves with the daemon's own work between the case's awaits.
   */
  memory?: 'heap' | 'buffers';
  /** CPU ms of the fuzzing thread a case of at most 64 KiB may take (default 50, oracles.ts). */
  maxCaseMs?: number;
  /** Before the first case (a broker, a gateway, seeds made by openssl); `cases` is read after it. */
  setup?(): Promise<void>;
  /** After the last case, also after a failure. */
  teardown?(): Promise<void>;
  /**
   * A check over the whole run once its cases are done, in fuzz and replay mode (a differential
   * with a slow reference tool over what was accepted); returns lines for the summary, throws an
   * OracleError whose `bytes` is the case to save.
   */
  afterRun?(): Promise<string[]>;
}

/** An oracle violated by a case: thrown by run() and by the runner's shared checks. */
export class OracleError extends Error {
  constructor(
    readonly kind: 'escaped' | 'wrong' | 'unsafe' | 'slow' | 'memory',
    message: string,
    /** The case to save, when the failure is not the running case's (an afterRun differential). */
    readonly bytes?: Uint8Array,
  ) {
    super(message);
    this.name = 'OracleError';
  }
}

/** Runs `parse`; errors of the allowed types are the parser's refusals, any other escaped it. */
export function onlyTyped<T>(allowed: Array<abstract new (...args: never[]) => Error>, parse: () => T): { value: T } | { refused: Error } {
  try {
    return { value: parse() };
  } catch (err) {
    if (allowed.some((type) => err instanceof type)) return { refused: err as Error };
    throw new OracleError('escaped', `${(err as Error)?.name ?? typeof err} escaped the parser: ${(err as Error)?.message ?? String(err)}`);
  }
}

/** The async form of onlyTyped. */
export async function onlyTypedAsync<T>(allowed: Array<abstract new (...args: never[]) => Error>, parse: () => Promise<T>): Promise<{ value: T } | { refused: Error }> {
  try {
    return { value: await parse() };
  } catch (err) {
    if (err instanceof OracleError) throw err;
    if (allowed.some((type) => err instanceof type)) return { refused: err as Error };
    throw new OracleError('escaped', `${(err as Error)?.name ?? typeof err} escaped the parser: ${(err as Error)?.message ?? String(err)}`);
  }
}
