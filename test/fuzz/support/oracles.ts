// The oracles every fuzz target shares, around one run of a case: time (at most 50 ms of the
// thread's CPU for a case of at most 64 KiB: CPU, not wall time, so a busy machine that
// preempts the fuzzer does not make a case slow) and memory (the V8 heap and the external memory that holds Buffers grow by
// at most 16 × the case + 64 KiB during the run). A GC during a run can only hide an allocation,
// never invent one; the JIT compiles on the heap at some runs, so an excess counts only when it
// is there in four runs of the case, and a slow case by the best of four (a shared machine pauses).
// A target on a real broker or gateway counts the Buffers its case makes instead of the heap
// (FuzzTarget.memory) and may have another CPU limit per case (FuzzTarget.maxCaseMs).
import v8 from 'node:v8';
import { OracleError, type FuzzTarget } from './fuzz-target.js';

export const MAX_CASE_MS = 50;
export const TIMED_CASE_BYTES = 64 * 1024;
export const ALLOC_FACTOR = 16;
export const ALLOC_SLACK = 64 * 1024;

const heapAndExternal = (): number => {
  const h = v8.getHeapStatistics();
  return h.used_heap_size + h.external_memory;
};

/**
 * Bytes of the Buffers Node's factories handed out so far in this thread (Buffer.alloc,
 * allocUnsafe, allocUnsafeSlow, counted once the first 'buffers' target asks): a length field
 * trusted beyond what arrived shows here, whatever else the heap does meanwhile.
 */
let buffersMade = 0;
let metering = false;
function meterBuffers(): void {
  if (metering) return;
  metering = true;
  const B = Buffer as unknown as Record<'alloc' | 'allocUnsafe' | 'allocUnsafeSlow', (size: number, ...rest: unknown[]) => Buffer>;
  for (const name of ['alloc', 'allocUnsafe', 'allocUnsafeSlow'] as const) {
    const original = B[name];
    B[name] = function metered(size: number, ...rest: unknown[]) {
      if (typeof size === 'number') buffersMade += size;
      return original.call(Buffer, size, ...rest);
    };
  }
}

/** The memory counter a target's oracle reads (see FuzzTarget.memory). */
function counterOf(target: FuzzTarget): () => number {
  if (target.memory !== 'buffers') return heapAndExternal;
  meterBuffers();
  return () => buffersMade;
}

/** The bytes a case may allocate: the target's allowance, else 16 × its length + 64 KiB. */
export const allowanceOf = (target: FuzzTarget, bytes: Uint8Array): number => target.allowance?.(bytes) ?? ALLOC_FACTOR * bytes.length + ALLOC_SLACK;

/** process.threadCpuUsage: Node 22.19 and 23.9 on (CI's Nodes); older ones count the whole process. */
const cpuUsage = (process as unknown as { threadCpuUsage?: () => NodeJS.CpuUsage }).threadCpuUsage?.bind(process) ?? (() => process.cpuUsage());

/** CPU time of this thread (ms): what a case costs, whatever else the machine runs. */
export const threadCpuMs = (): number => {
  const u = cpuUsage();
  return (u.user + u.system) / 1000;
};

interface Measure {
  ms: number;
  bytes: number;
}

/** The heap and external memory now (what measure() and a target's own phases compare). */
export const allocatedNow = heapAndExternal;

/** A memory excess the target measured itself (a phase of its case): confirmed by reruns too. */
const ownMemoryExcess = (err: unknown) => err instanceof OracleError && err.kind === 'memory';
/**
 * Runs a memory excess is confirmed by: the JIT compiles a hot path on the heap at some run
 * (Node 24 tiers up at other counts than 22), a real excess is there every time.
 */
const CONFIRMATIONS = 3;

async function measure(target: FuzzTarget, bytes: Uint8Array): Promise<Measure> {
  const allocated = counterOf(target);
  for (let attempt = 0; ; attempt++) {
    const before = allocated();
    const t0 = threadCpuMs();
    try {
      const out = target.run(bytes);
      if (out) await out;
      return { ms: threadCpuMs() - t0, bytes: allocated() - before };
    } catch (err) {
      if (!ownMemoryExcess(err) || attempt >= CONFIRMATIONS) throw err;
    }
  }
}

/** Runs one case with every oracle; throws OracleError (or what run() threw) when one is violated. */
export async function checkCase(target: FuzzTarget, bytes: Uint8Array): Promise<void> {
  const first = await measure(target, bytes);
  if (first.bytes > ALLOC_FACTOR * bytes.length + ALLOC_SLACK) {
    const allowance = allowanceOf(target, bytes);
    let least = first.bytes;
    for (let i = 0; i < CONFIRMATIONS && least > allowance; i++) least = Math.min(least, (await measure(target, bytes)).bytes);
    if (least > allowance) throw new OracleError('memory', `a case of ${bytes.length} bytes allocated ${least} bytes (at most ${allowance}), ${CONFIRMATIONS + 1} times`);
  }
  const maxMs = target.maxCaseMs ?? MAX_CASE_MS;
  if (first.ms > maxMs && bytes.length <= TIMED_CASE_BYTES) {
    let best = first.ms;
    for (let i = 0; i < 3 && best > maxMs; i++) best = Math.min(best, (await measure(target, bytes)).ms);
    if (best > maxMs) throw new OracleError('slow', `a case of ${bytes.length} bytes took ${best.toFixed(1)} ms of CPU (at most ${maxMs})`);
  }
}

/** The sync form, for targets whose run() returns nothing (no await per case: faster). */
export function checkCaseSync(target: FuzzTarget, bytes: Uint8Array): void {
  const allocated = counterOf(target);
  const run = (): Measure => {
    for (let attempt = 0; ; attempt++) {
      const before = allocated();
      const t0 = threadCpuMs();
      try {
        target.run(bytes);
        return { ms: threadCpuMs() - t0, bytes: allocated() - before };
      } catch (err) {
        if (!ownMemoryExcess(err) || attempt >= CONFIRMATIONS) throw err;
      }
    }
  };
  const first = run();
  if (first.bytes > ALLOC_FACTOR * bytes.length + ALLOC_SLACK) {
    const allowance = allowanceOf(target, bytes);
    let least = first.bytes;
    for (let i = 0; i < CONFIRMATIONS && least > allowance; i++) least = Math.min(least, run().bytes);
    if (least > allowance) throw new OracleError('memory', `a case of ${bytes.length} bytes allocated ${least} bytes (at most ${allowance}), ${CONFIRMATIONS + 1} times`);
  }
  const maxMs = target.maxCaseMs ?? MAX_CASE_MS;
  if (first.ms > maxMs && bytes.length <= TIMED_CASE_BYTES) {
    let best = first.ms;
    for (let i = 0; i < 3 && best > maxMs; i++) best = Math.min(best, run().ms);
    if (best > maxMs) throw new OracleError('slow', `a case of ${bytes.length} bytes took ${best.toFixed(1)} ms of CPU (at most ${maxMs})`);
  }
}
