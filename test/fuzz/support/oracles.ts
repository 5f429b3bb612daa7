// The oracles every fuzz target shares, around one run of a case: time (at most 50 ms for a case
// of at most 64 KiB) and memory (the V8 heap and the external memory that holds Buffers grow by
// at most 16 × the case + 64 KiB during the run). A GC during a run can only hide an allocation,
// never invent one; a first run may compile code, so an excess is confirmed by running the case
// again before it counts, and a slow case by the best of three runs (a shared machine pauses).
import v8 from 'node:v8';
import { OracleError, type FuzzTarget } from './fuzz-target.js';

export const MAX_CASE_MS = 50;
export const TIMED_CASE_BYTES = 64 * 1024;
export const ALLOC_FACTOR = 16;
export const ALLOC_SLACK = 64 * 1024;

const allocated = (): number => {
  const h = v8.getHeapStatistics();
  return h.used_heap_size + h.external_memory;
};

/** The bytes a case may allocate: the target's allowance, else 16 × its length + 64 KiB. */
export const allowanceOf = (target: FuzzTarget, bytes: Uint8Array): number => target.allowance?.(bytes) ?? ALLOC_FACTOR * bytes.length + ALLOC_SLACK;

interface Measure {
  ms: number;
  bytes: number;
}

/** The heap and external memory now (what measure() and a target's own phases compare). */
export const allocatedNow = allocated;

/** A memory excess the target measured itself (a phase of its case): confirmed by a rerun too. */
const ownMemoryExcess = (err: unknown) => err instanceof OracleError && err.kind === 'memory';

async function measure(target: FuzzTarget, bytes: Uint8Array): Promise<Measure> {
  const before = allocated();
  const t0 = performance.now();
  try {
    const out = target.run(bytes);
    if (out) await out;
  } catch (err) {
    if (!ownMemoryExcess(err)) throw err;
    const out = target.run(bytes);
    if (out) await out;
  }
  const ms = performance.now() - t0;
  return { ms, bytes: allocated() - before };
}

/** Runs one case with every oracle; throws OracleError (or what run() threw) when one is violated. */
export async function checkCase(target: FuzzTarget, bytes: Uint8Array): Promise<void> {
  const first = await measure(target, bytes);
  if (first.bytes > ALLOC_FACTOR * bytes.length + ALLOC_SLACK && first.bytes > allowanceOf(target, bytes)) {
    const allowance = allowanceOf(target, bytes);
    const again = await measure(target, bytes);
    if (again.bytes > allowance) throw new OracleError('memory', `a case of ${bytes.length} bytes allocated ${again.bytes} bytes (at most ${allowance})`);
  }
  if (first.ms > MAX_CASE_MS && bytes.length <= TIMED_CASE_BYTES) {
    let best = first.ms;
    for (let i = 0; i < 3 && best > MAX_CASE_MS; i++) best = Math.min(best, (await measure(target, bytes)).ms);
    if (best > MAX_CASE_MS) throw new OracleError('slow', `a case of ${bytes.length} bytes took ${best.toFixed(1)} ms (at most ${MAX_CASE_MS})`);
  }
}

/** The sync form, for targets whose run() returns nothing (no await per case: faster). */
export function checkCaseSync(target: FuzzTarget, bytes: Uint8Array): void {
  const run = (): Measure => {
    const before = allocated();
    const t0 = performance.now();
    try {
      target.run(bytes);
    } catch (err) {
      if (!ownMemoryExcess(err)) throw err;
      target.run(bytes);
    }
    return { ms: performance.now() - t0, bytes: allocated() - before };
  };
  const first = run();
  if (first.bytes > ALLOC_FACTOR * bytes.length + ALLOC_SLACK) {
    const allowance = allowanceOf(target, bytes);
    if (first.bytes > allowance && run().bytes > allowance) throw new OracleError('memory', `a case of ${bytes.length} bytes allocated more than ${allowance} bytes, twice`);
  }
  if (first.ms > MAX_CASE_MS && bytes.length <= TIMED_CASE_BYTES) {
    let best = first.ms;
    for (let i = 0; i < 3 && best > MAX_CASE_MS; i++) best = Math.min(best, run().ms);
    if (best > MAX_CASE_MS) throw new OracleError('slow', `a case of ${bytes.length} bytes took ${best.toFixed(1)} ms (at most ${MAX_CASE_MS})`);
  }
}
