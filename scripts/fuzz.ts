// npm run fuzz [-- --minutes N] [--runs R] [--target name ...] [--seed S] [--record]: long runs
// of the in-process fuzz targets (test/fuzz/targets/*.ts: the device answers, Sparkplug DCMDs, MQTT
// ingress and sessions, certificates, backup archives, the REST API; each in a worker under the watchdog of
// test/fuzz/support/run-fuzz.ts), one after another, N minutes each (default 1; --runs R stops a
// target sooner once it ran R cases); every failure
// is saved under test/fuzz/regressions/<target>/ (npm test replays them). Prints each target's
// executions, crashes, hangs and rate, then a JSON summary. --record records seed cases from our
// drivers' traffic with the test kit's devices instead (test/fuzz/support/record-corpus.ts).
import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const targetsDir = fileURLToPath(new URL('../test/fuzz/targets/', import.meta.url));

function parseArgs(argv: string[]): { minutes: number; runs: number | undefined; targets: string[]; seed: number | undefined; record: boolean } {
  let minutes = 1;
  let runs: number | undefined;
  const targets: string[] = [];
  let seed: number | undefined;
  let record = false;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const value = () => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${arg} wants a value`);
      return v;
    };
    if (arg === '--minutes') minutes = Number(value());
    else if (arg === '--target') targets.push(value());
    else if (arg === '--runs') runs = Number(value());
    else if (arg === '--seed') seed = Number(value());
    else if (arg === '--record') record = true;
    else throw new Error(`unknown option ${arg} (npm run fuzz -- --minutes N --runs R --target name --seed S --record)`);
  }
  if (!(minutes > 0)) throw new Error('--minutes wants a positive number');
  if (runs !== undefined && !(Number.isInteger(runs) && runs > 0)) throw new Error('--runs wants a positive whole number');
  return { minutes, runs, targets, seed, record };
}

async function main(): Promise<void> {
  const { minutes, runs, targets, seed, record } = parseArgs(process.argv.slice(2));
  if (record) {
    const { recordCorpus } = await import('../test/fuzz/support/record-corpus.js');
    await recordCorpus();
    return;
  }
  const { runFuzz } = await import('../test/fuzz/support/run-fuzz.js');
  const { runSeed } = await import('../test/fuzz/support/random.js');
  const all = readdirSync(targetsDir)
    .filter((f) => f.endsWith('.js'))
    .map((f) => f.slice(0, -3))
    .sort();
  const unknown = targets.filter((t) => !all.includes(t));
  if (unknown.length) throw new Error(`unknown target ${unknown.join(', ')} (targets: ${all.join(', ')})`);
  const results = [];
  for (const target of targets.length ? targets : all) {
    const s = seed ?? runSeed();
    console.log(`\n== ${target}: ${minutes} min from seed ${s}`);
    const report = await runFuzz({ target, seed: s, timeMs: minutes * 60_000, ...(runs ? { runs } : {}) });
    const rate = report.executions / (report.ms / 1000);
    const perCpu = report.cpuMs > 0 ? report.executions / (report.cpuMs / 1000) : 0;
    console.log(`${target}: ${report.executions} executions in ${(report.ms / 1000).toFixed(0)} s (${rate.toFixed(0)}/s; ${perCpu.toFixed(0)} per CPU second), ${report.crashes} crashes, ${report.hangs} hangs`);
    for (const line of report.lines) console.log(`  ${line}`);
    for (const f of report.failures) console.log(`  ${f.kind}: ${f.error}${f.file ? `\n    saved: ${f.file}` : ''}`);
    results.push({ target, seed: s, executions: report.executions, seconds: Math.round(report.ms / 1000), perSecond: Math.round(rate), perCpuSecond: Math.round(perCpu), crashes: report.crashes, hangs: report.hangs });
  }
  console.log('\n== summary (JSON)');
  console.log(JSON.stringify(results, null, 1));
  if (results.some((r) => r.crashes || r.hangs)) process.exitCode = 1;
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
