// run-alone: it waits for V8's background compiler within a time budget, which other test files would eat into.
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';

const tiering = fileURLToPath(new URL('../src/start-up-tiering.js', import.meta.url));

// A hot function in a fresh Node process (V8 flags are per process): is it optimized while the
// optimizer is paused, and by TurboFan after it is resumed? %GetOptimizationStatus bit 4 (16) is
// "optimized" by any tier (Maglev is on by default from Node 22), bit 6 (64) "TurboFanned".
const probe = `
const { pauseOptimizer, resumeOptimizer } = await import(${JSON.stringify(tiering)});
const optimized = (f) => (%GetOptimizationStatus(f) & 16) !== 0;
const turbofanned = (f) => (%GetOptimizationStatus(f) & 64) !== 0;
function hot(f) { let t = 0; for (let i = 0; i < 3e5; i++) t += f(i); for (let i = 0; i < 3e5; i++) t += f(i); return t; }
// The driver itself is never optimized: optimized, it would inline f and call it no more, and
// whether f tiers up on its own would depend on which of the two V8 compiled first (a race the
// full suite on Node 24 lost once: f never TurboFanned).
%NeverOptimizeFunction(hot);
pauseOptimizer();
const a = (x) => x * 2 + 1;
hot(a);
const paused = optimized(a);
const pausedTurbofan = turbofanned(a);
resumeOptimizer();
// TurboFan compiles on a background thread: on a loaded machine (the full suite on Node 24 once
// missed a 40-round window) the job may land much later, so the hot loop repeats until it has,
// bounded by time rather than by a count of rounds.
// With the optimizer off on the command line nothing is ever optimized: a second shows it.
const budgetMs = process.execArgv.includes('--no-opt') ? 1000 : 10000;
const untilTurbofanned = (f) => { const deadline = Date.now() + budgetMs; while (!turbofanned(f) && Date.now() < deadline) hot(f); };
untilTurbofanned(a);
const b = (x) => x * 3 + 1;
untilTurbofanned(b);
console.log(JSON.stringify({ paused: process.execArgv.includes('--no-opt') ? pausedTurbofan : paused, startUpCodeLater: turbofanned(a), newCode: turbofanned(b) }));
`;

function run(flags: string[]): { paused: boolean; startUpCodeLater: boolean; newCode: boolean } {
  const out = execFileSync(process.execPath, ['--allow-natives-syntax', ...flags, '--input-type=module', '-e', probe], { encoding: 'utf8', timeout: 30_000 });
  return JSON.parse(out.trim()) as { paused: boolean; startUpCodeLater: boolean; newCode: boolean };
}

describe('start-up tiering (the optimizer paused until ready)', function () {
  this.timeout(60_000);
  it('optimizes nothing while paused, and both start-up code and new code once resumed', () => {
    expect(run([])).to.deep.equal({ paused: false, startUpCodeLater: true, newCode: true });
  });

  it('leaves an optimizer turned off on the command line off', () => {
    expect(run(['--no-opt'])).to.deep.equal({ paused: false, startUpCodeLater: false, newCode: false });
  });

  // Why switching the compilers at run time is safe (docs/footprint.md): V8 reads --turbofan
  // and --maglev when it decides to queue a function for optimization, not while a queued job
  // runs on a compiler thread. Switched back and forth while jobs are under way, every result
  // stays right and the process lives.
  it('switching while optimizations are under way on compiler threads changes no result', () => {
    const stress = `
const { pauseOptimizer, resumeOptimizer } = await import(${JSON.stringify(tiering)});
const fns = Array.from({ length: 200 }, (_, k) => new Function('x', 'return (x * ' + (k + 3) + ' + ' + k + ') % 1000003;'));
let wrong = 0;
for (let round = 0; round < 40; round++) {
  if (round % 2) pauseOptimizer(); else resumeOptimizer();
  for (let k = 0; k < fns.length; k++) {
    const f = fns[k];
    for (let i = 0; i < 2000; i++) if (f(i) !== (i * (k + 3) + k) % 1000003) wrong++;
  }
}
resumeOptimizer();
const turbofanned = fns.filter((f) => (%GetOptimizationStatus(f) & 64) !== 0).length;
console.log(JSON.stringify({ wrong, turbofanned }));
`;
    const out = execFileSync(process.execPath, ['--allow-natives-syntax', '--input-type=module', '-e', stress], { encoding: 'utf8', timeout: 60_000 });
    const r = JSON.parse(out.trim()) as { wrong: number; turbofanned: number };
    expect(r.wrong).to.equal(0);
    // Compilations did happen meanwhile (else the switches were never under way with a job).
    expect(r.turbofanned).to.be.greaterThan(0);
  });
});
