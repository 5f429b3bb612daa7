// Targets whose cases are structured inputs run against a live part of the gateway (the MQTT
// broker on in-process streams, a real gateway's REST API, the archive reader on a directory
// tree, the certificate parsers beside openssl): a typed input drawn from state made in
// setup, encoded as the bytes the runner saves and replays, and one execution that throws a
// FuzzFinding when an oracle fails. typedTarget() makes a FuzzTarget of it (fuzz-target.ts)
// for the one runner (run-fuzz.ts): async, its memory oracle the Buffers a case makes (the
// heap moves with the live part's own work between awaits), and an exception nobody catches
// while a case runs (an 'error' event without a listener, a rejection nobody awaits: the
// daemon would exit) is a finding of that case.
import type fc from 'fast-check';
import { ALLOC_FACTOR } from './oracles.js';
import { OracleError, type FuzzTarget } from './fuzz-target.js';

/** An oracle of a typed target failed; `cause.input` may hold the bytes of another case to save (afterRun). */
export class FuzzFinding extends OracleError {
  constructor(message: string, options?: { cause?: { input?: Uint8Array } }) {
    super('wrong', message, options?.cause?.input);
    this.name = 'FuzzFinding';
  }
}

export interface TypedTarget<I, S> {
  name: string;
  description: string;
  /** The inputs; given the state of setup (seeds made there). */
  arbitrary(state: S): fc.Arbitrary<I>;
  encode(input: I): Uint8Array;
  decode(bytes: Buffer): I;
  setup(): Promise<S>;
  teardown(state: S): Promise<void>;
  execute(state: S, input: I): Promise<void>;
  /** A check after the run over what it accepted; throws a FuzzFinding whose `cause.input` is the case to save. */
  afterRun?(state: S): Promise<string[]>;
  /** Buffers a case of n bytes may make (default 16 × n + 64 KiB). */
  allowance?(n: number): number;
  /** CPU ms per case of at most 64 KiB (default 50). */
  maxCaseMs?: number;
}

/** Exceptions nobody catches while a case runs: thrown as findings of that case after a turn of the loop. */
function captureUncaught() {
  let uncaught: unknown;
  const onUncaught = (err: unknown) => {
    uncaught ??= err;
  };
  return {
    start() {
      process.on('uncaughtException', onUncaught);
      process.on('unhandledRejection', onUncaught);
    },
    async check(): Promise<void> {
      await new Promise((resolve) => setImmediate(resolve));
      if (uncaught === undefined) return;
      const err = uncaught as Error;
      uncaught = undefined;
      throw new OracleError('escaped', `uncaught ${err?.constructor?.name ?? typeof err}: ${String(err?.message ?? err).slice(0, 300)}`);
    },
    stop() {
      process.removeListener('uncaughtException', onUncaught);
      process.removeListener('unhandledRejection', onUncaught);
    },
  };
}

export function typedTarget<I, S>(t: TypedTarget<I, S>): FuzzTarget {
  let state: S | undefined;
  let cases: fc.Arbitrary<Uint8Array> | undefined;
  const uncaught = captureUncaught();
  const live = (): S => {
    if (state === undefined) throw new Error(`fuzz target ${t.name}: used before its setup`);
    return state;
  };
  return {
    name: t.name,
    description: t.description,
    async: true,
    memory: 'buffers',
    ...(t.maxCaseMs ? { maxCaseMs: t.maxCaseMs } : {}),
    allowance: (bytes) => (t.allowance ? t.allowance(bytes.length) : ALLOC_FACTOR * bytes.length + 64 * 1024),
    get cases() {
      if (!cases) throw new Error(`fuzz target ${t.name}: its cases are made by its setup`);
      return cases;
    },
    async setup() {
      state = await t.setup();
      cases = t.arbitrary(state).map((input) => t.encode(input));
      uncaught.start();
    },
    async teardown() {
      uncaught.stop();
      if (state !== undefined) await t.teardown(state);
    },
    async run(bytes) {
      await t.execute(live(), t.decode(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)));
      await uncaught.check();
    },
    ...(t.afterRun ? { afterRun: () => t.afterRun!(live()) } : {}),
  };
}
