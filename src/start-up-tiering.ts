import v8 from 'node:v8';

/**
 * Keeps V8's optimizing compiler (TurboFan) off while the daemon loads and starts, and turns it
 * back on at ready (README "Footprint"). Start-up code runs once, so optimizing it buys nothing,
 * yet TurboFan's start-up compilations left about 6 MiB that malloc keeps and touched about
 * 4 MiB of the compiler's own code in the Node binary; without them the daemon is ready sooner
 * and idles 8-10 MiB smaller. From ready on, hot code (the broker, the API) is optimized as with
 * Node's defaults. The entry (main.ts) pauses it before it imports the rest of the daemon.
 *
 * A command line that already turns the optimizer off (an operator's choice) is left alone.
 */
const OPTIMIZER_OFF_FLAGS = ['--no-opt', '--no-turbofan', '--jitless', '--lite-mode', '--max-opt=0', '--max-opt=1', '--max-opt=2'];

let pausedHere = false;

/** Turns the optimizing compiler off, unless the command line already did. */
export function pauseOptimizer(): void {
  if (process.execArgv.some((flag) => OPTIMIZER_OFF_FLAGS.includes(flag.replaceAll('_', '-')))) return;
  v8.setFlagsFromString('--no-opt');
  pausedHere = true;
}

/** Turns the optimizing compiler back on, if this module turned it off. */
export function resumeOptimizer(): void {
  if (!pausedHere) return;
  v8.setFlagsFromString('--opt');
  pausedHere = false;
}
