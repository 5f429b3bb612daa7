// Keeps V8's heap small on an idle gateway without making a busy one pay (docs/footprint.md,
// which also says why each V8 setting changed here is safe on Node 22 and 24).
//
// V8 grows its young generation (to 2 × 16 MiB on 64-bit) when scavenges find many survivors,
// and shrinks it only in a collection that finds the allocation rate low: below 1 byte/µs over
// its last 5 seconds. Start-up (loading modules: nearly everything survives) grew it to the
// maximum, and an idle daemon allocates too little for a collection to come and shrink it: those
// pages, and the old generation's share of what start-up promoted meanwhile, stayed committed
// (idle RSS 84 MiB instead of 65). Bounding it on the command line (--max-semi-space-size=2
// --optimize-for-size, until issue 20) bounds it for good: under load a 2 MiB nursery fills in a
// fraction of a millisecond, and every scavenge promotes what is still in flight (issue 20: +72 %
// broker CPU per QoS 0 message, +22 % per QoS 1). So:
// - during start-up only, the young generation does not grow (--semi-space-growth-factor=1, set
//   by the entry before the daemon's modules load, V8's default 2 restored at ready);
// - at ready + START_COLLECTION_MS, the start-up garbage is collected: on V8 12+ (Node 22, 24) by
//   the memory-reducing full collection V8 runs when memory is short (gc()'s 'last-resort'
//   flavour: compacts the old generation and shrinks the young one), on Node 20 by two full
//   collections (the first frees, and often leaves the old generation's pages a quarter empty;
//   the second compacts them) — once the event loop was idle over the last START_COLLECTION_MS:
//   after a reboot the devices' connect storm starts at ready, and two full collections in its
//   middle (110 ms of pauses, measured) made its CONNACK p99;
// - every CHECK_MS afterwards, when the young generation is larger than at rest (it grew under
//   load), one minor collection: a scavenge, well under a millisecond, after which V8 shrinks it
//   if, and only if, the daemon has been idle. Under load that is one scavenge among thousands.
//   When it did shrink (the daemon went idle after a load), one full collection as above returns
//   the old generation's share of that load too.
// - from ready on, the young generation grows under load up to YOUNG_CEILING_BYTES, not to what V8
//   would size it from the host's memory: V8 derives its maximum from the RAM it sees (2 × 16 MiB
//   on Node 22, 2 × 64 MiB on Node 24 with 24 GiB), so under the same load the same daemon would
//   take up to 112 MiB more on a large host than on a gateway. After each collection (a 'gc'
//   performance entry) the growth factor is set to 1 once the ceiling is reached, and back to 2
//   once V8 shrank it below (idle): V8 grows it only inside a scavenge, and only after as many
//   bytes have survived since its last growth as it holds, so the switch comes between two
//   growths unless a load that keeps nearly all it allocates made them back to back before the
//   entry arrived (then one doubling past the ceiling: 32 MiB).
// A command line that sets the young generation itself (an operator's choice) is left alone.
// Node exposes gc() only behind --expose-gc: set at ready, it shows gc() in a new context only
// (V8 installs the extension when a context is created), never to the daemon's own modules.
import v8 from 'node:v8';
import { performance, PerformanceObserver } from 'node:perf_hooks';
import { runInNewContext } from 'node:vm';

const START_COLLECTION_MS = 1000;
/** The event loop's busy share under which the process counts as idle (an idle daemon: well under 1 %). */
const IDLE_UTILIZATION = 0.1;
const CHECK_MS = 10_000;
/** Young generation at rest: V8 starts it at 1 MiB per semi-space. */
const YOUNG_AT_REST_BYTES = 2 * 1024 * 1024;
/**
 * The young generation's ceiling under load: 2 × 8 MiB. Broker CPU per delivery with it, against
 * Node 24's 2 × 64 MiB on a 24 GiB host: QoS 0 +6 to +8 %, QoS 1 +0 to +5 % (docs/footprint.md).
 */
export const YOUNG_CEILING_BYTES = 16 * 1024 * 1024;
const YOUNG_GENERATION_FLAGS = ['--semi-space-growth-factor', '--max-semi-space-size', '--min-semi-space-size', '--semi-space-size', '--optimize-for-size'];

let heldHere = false;

function commandLineFlags(): string[] {
  const fromEnv = (process.env.NODE_OPTIONS ?? '').split(/\s+/).filter(Boolean);
  return [...process.execArgv, ...fromEnv].map((flag) => flag.replaceAll('_', '-'));
}

/** Did the command line size the heap itself (an operator's choice, left alone)? */
function sizedOnCommandLine(): boolean {
  return commandLineFlags().some((flag) => YOUNG_GENERATION_FLAGS.some((name) => flag === name || flag.startsWith(`${name}=`)));
}

/** Start-up: the young generation stays at its initial size (call before the daemon's modules load). */
export function holdYoungGeneration(): void {
  if (sizedOnCommandLine()) return;
  v8.setFlagsFromString('--semi-space-growth-factor=1');
  heldHere = true;
}

/** Ready: the young generation grows as V8 sees fit again. */
export function releaseYoungGeneration(): void {
  if (!heldHere) return;
  v8.setFlagsFromString('--semi-space-growth-factor=2');
  heldHere = false;
}

/**
 * Ready: the young generation grows under load up to `ceilingBytes`, then no further until V8
 * shrinks it (an idle process). Returns the function that stops it.
 */
export function capYoungGeneration(ceilingBytes = YOUNG_CEILING_BYTES): () => void {
  if (sizedOnCommandLine()) return () => {};
  let atCeiling = false;
  const follow = () => {
    const reached = youngGenerationBytes() >= ceilingBytes;
    if (reached === atCeiling) return;
    atCeiling = reached;
    v8.setFlagsFromString(`--semi-space-growth-factor=${reached ? 1 : 2}`);
  };
  const observer = new PerformanceObserver(follow);
  observer.observe({ entryTypes: ['gc'] });
  follow();
  return () => {
    observer.disconnect();
    if (atCeiling) v8.setFlagsFromString('--semi-space-growth-factor=2');
    atCeiling = false;
  };
}

type Gc = (options?: { type: 'minor' | 'major'; execution?: 'sync'; flavor?: 'regular' | 'last-resort' }) => void;

function exposeGc(): Gc | undefined {
  try {
    v8.setFlagsFromString('--expose-gc');
    return runInNewContext('gc') as Gc;
  } catch {
    return undefined;
  }
}

/** Committed bytes of V8's young generation (its new space: the semi-spaces; young large objects come and go). */
export function youngGenerationBytes(): number {
  return v8.getHeapSpaceStatistics().find((space) => space.space_name === 'new_space')?.space_size ?? 0;
}

/** Memory-reducing full collections where V8 offers them through gc() (V8 12+: Node 22 and later). */
const REDUCING_GC = Number(process.versions.v8.split('.')[0]) >= 12;

/** Starts the collections of an idle daemon (call at ready); returns the function that stops them. */
export function collectWhenIdle(timing: { startMs: number; checkMs: number; onFullCollection?: () => void } = { startMs: START_COLLECTION_MS, checkMs: CHECK_MS }): () => void {
  const gc = exposeGc();
  if (!gc) return () => {};
  const fullGc = REDUCING_GC
    ? () => gc({ type: 'major', execution: 'sync', flavor: 'last-resort' })
    : () => {
        gc();
        gc();
      };
  let check: NodeJS.Timeout | undefined;
  let start: NodeJS.Timeout | undefined;
  let since = performance.eventLoopUtilization();
  // Only memory is at stake: a failure stops the collections, never the daemon.
  const first = () => {
    const busy = performance.eventLoopUtilization(since).utilization;
    since = performance.eventLoopUtilization();
    if (busy >= IDLE_UTILIZATION) {
      start = setTimeout(first, timing.startMs);
      start.unref();
      return;
    }
    try {
      fullGc();
      timing.onFullCollection?.();
    } catch {
      return;
    }
    check = setInterval(() => {
      try {
        if (youngGenerationBytes() <= YOUNG_AT_REST_BYTES) return;
        gc({ type: 'minor' });
        // V8 shrank it: the daemon has gone idle after a load. Once per such change, the old
        // generation's garbage of that load (clients come and gone, promoted messages) goes too.
        if (youngGenerationBytes() <= YOUNG_AT_REST_BYTES) fullGc();
      } catch {
        clearInterval(check);
      }
    }, timing.checkMs);
    check.unref();
  };
  start = setTimeout(first, timing.startMs);
  start.unref();
  return () => {
    clearTimeout(start);
    clearInterval(check);
  };
}
