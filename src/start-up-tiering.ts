import v8 from 'node:v8';

/**
 * Keeps V8's optimizing compiler (TurboFan) off while the daemon loads and starts, and turns it
 * back on at ready (docs/footprint.md). Start-up code runs once, so optimizing it buys nothing,
 * yet TurboFan's start-up compilations left about 6 MiB that malloc keeps and touched about
 * 4 MiB of the compiler's own code in the Node binary; without them the daemon is ready sooner
 * and idles 8-10 MiB smaller. From ready on, hot code (the broker, the API) is optimized as with
 * Node's defaults. The entry (main.ts) pauses it before it imports the rest of the daemon.
 *
 * A command line that already turns the optimizer off (an operator's choice) is left alone.
 */
const OPTIMIZER_OFF_FLAGS = ['--no-opt', '--no-turbofan', '--jitless', '--lite-mode', '--max-opt=0', '--max-opt=1', '--max-opt=2'];

/**
 * Maglev, V8's mid-tier optimizer, is on by default from V8 12 (Node 22) on. It is paused too:
 * code that Maglev compiles while TurboFan is off never tiers up to TurboFan later (seen on
 * Node 24), so start-up paths that stay hot (store, logger) would be stuck below TurboFan.
 */
function maglevOn(flags: string[]): boolean {
  if (flags.includes('--no-maglev')) return false;
  if (flags.includes('--maglev')) return true;
  return Number(process.versions.v8.split('.')[0]) >= 12;
}

let pausedHere = false;
let maglevPausedHere = false;

/** The V8 flags of this process: its command line and NODE_OPTIONS. */
function commandLineFlags(): string[] {
  const fromEnv = (process.env.NODE_OPTIONS ?? '').split(/\s+/).filter(Boolean);
  return [...process.execArgv, ...fromEnv].map((flag) => flag.replaceAll('_', '-'));
}

/** Turns the optimizing compilers off, unless the command line already did. */
export function pauseOptimizer(): void {
  const flags = commandLineFlags();
  if (flags.some((flag) => OPTIMIZER_OFF_FLAGS.includes(flag))) return;
  v8.setFlagsFromString('--no-opt');
  pausedHere = true;
  if (maglevOn(flags)) {
    v8.setFlagsFromString('--no-maglev');
    maglevPausedHere = true;
  }
}

/** Turns the optimizing compilers back on, if this module turned them off. */
export function resumeOptimizer(): void {
  if (!pausedHere) return;
  v8.setFlagsFromString('--opt');
  if (maglevPausedHere) v8.setFlagsFromString('--maglev');
  pausedHere = false;
  maglevPausedHere = false;
}
