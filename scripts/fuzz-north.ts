// npm run fuzz:north -- [--minutes N] [--target name] [--seed S] [--hang-ms M]: the northbound fuzz
// targets (test/fuzz/north-targets.ts) for N minutes each (default 1), from a printed seed; each
// finding's input is saved under test/fuzz/regressions/<target>/ and the run exits 1. The time
// oracle is the targets' CI limit (50 ms per input up to 64 KiB) unless --hang-ms sets another
// (long runs on a shared machine: 1000, a hang). Temporary entry point: the lead folds these
// targets into `npm run fuzz` at merge.
import { northTargets } from '../test/fuzz/north-targets.js';
import { fuzzSeed, runNorthTarget } from '../test/fuzz/north-support.js';

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

async function main(): Promise<number> {
  const minutes = Number(arg('minutes') ?? 1);
  const only = arg('target');
  const seed = fuzzSeed(arg('seed'));
  const names = only ? [only] : Object.keys(northTargets);
  let findings = 0;
  const summary: Record<string, unknown>[] = [];
  for (const name of names) {
    const load = northTargets[name];
    if (!load) throw new Error(`no fuzz target ${name} (targets: ${Object.keys(northTargets).join(', ')})`);
    const hang = arg('hang-ms');
    const result = await runNorthTarget(await load(), { timeMs: minutes * 60_000, seed, ...(hang ? { hangMs: Number(hang) } : {}) });
    findings += result.findings.length;
    for (const f of result.findings) console.log(`FINDING ${name}: ${f}`);
    summary.push({ target: name, seed, executions: result.executions, seconds: Math.round(result.ms / 1000), perSecond: Math.round(result.executions / (result.ms / 1000)), findings: result.findings.length, slowestMs: Number(result.slowestMs.toFixed(1)), slowOnce: result.slowOnce });
  }
  console.log(JSON.stringify(summary, null, 1));
  return findings ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
