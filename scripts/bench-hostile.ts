// npm run bench -- hostile: the hostile-peer harness (test/support/hostile-harness.ts) at
// length: 90 s of corrupted answers (the issue's measurement) with 20 MQTT fuzz connections at a
// time, then the same devices' attack without the MQTT fuzz clients (what the southbound side
// does on its own). GATEWAYD_BENCH_HOSTILE_SECONDS sets the attack's length (a soak: 1800),
// GATEWAYD_BENCH_HOSTILE_MQTT the fuzz connections at a time, GATEWAYD_BENCH_DAEMON_FLAGS more Node
// flags for the daemon (NODE_OPTIONS), GATEWAYD_BENCH_HOSTILE_DEVICES_ONLY=0 skips the second run,
// GATEWAYD_BENCH_HEAP_PROFILE=<file> writes V8's sampling heap profile at the attack's fullest heap.
import { runHostileHarness, type HostileReport } from '../test/support/hostile-harness.js';
import { runSeed } from '../test/fuzz/support/random.js';

const mib = (n: number) => n.toFixed(1);

function print(name: string, r: HostileReport): void {
  console.log(`hostile ${name}: seed ${r.seed}, ${r.corruptSeconds} s of corrupted answers, MQTT fuzz ${r.mqttFuzz.connections} connections / ${r.mqttFuzz.packets} packets (${r.mqttFuzz.mutated} mutated)`);
  console.log(`  process ${r.pidUnchanged ? 'unchanged' : 'CHANGED'}; /health ${r.health.probes} probes, ${r.health.unanswered} not answered within 500 ms, slowest ${r.health.maxMs} ms; event-loop p99 at most ${r.loopP99MaxMs.toFixed(0)} ms`);
  console.log(`  RSS ${mib(r.rss.startMiB)} MiB at the start, +${r.rss.quartersMiB.map(mib).join(', +')} at each quarter of the attack, peak +${mib(r.rss.peakMiB - r.rss.startMiB)}, ${r.rss.settledAfterMs === undefined ? `not back within 8 MiB (+${mib(r.rss.endMiB - r.rss.startMiB)} at the end)` : `back within 8 MiB ${(r.rss.settledAfterMs / 1000).toFixed(0)} s after the attack`}; heap used ${mib(r.start.heapUsedMiB)} -> ${mib(r.end.heapUsedMiB)} MiB`);
  console.log(`  legitimate QoS 1 pair: ${r.legit.sent} sent, ${r.legit.lost} lost; control device ${r.control.before.toFixed(2)} -> ${r.control.during.toFixed(2)} readings/s (${(r.control.change * 100).toFixed(1)} %)`);
  for (const [id, c] of Object.entries(r.connections)) {
    console.log(`  ${id}: ${c.readsDuringAttack} readings and ${c.failuresDuringAttack} failures during the attack, reopened ${c.reopened} times, true values again ${c.recoveredAfterMs === undefined ? 'NOT within 30 s' : `${(c.recoveredAfterMs / 1000).toFixed(1)} s`} after clean answers, ${c.state}`);
  }
  for (const [protocol, counts] of Object.entries(r.answers)) console.log(`  ${protocol} answers: ${JSON.stringify(counts)}`);
  if (r.stuckConnected.length) console.log(`  connected without readings: ${r.stuckConnected.join('; ')}`);
}

export async function benchHostile(): Promise<Record<string, number>> {
  const seconds = Number(process.env.GATEWAYD_BENCH_HOSTILE_SECONDS ?? 90);
  const mqttConcurrency = Number(process.env.GATEWAYD_BENCH_HOSTILE_MQTT ?? 20);
  const seed = runSeed();
  const log = (l: string) => console.log(`  ${new Date().toISOString()} ${l}`);
  const figures = (r: HostileReport, p: string) => ({
    [`${p}HealthUnanswered`]: r.health.unanswered,
    [`${p}HealthMaxMs`]: r.health.maxMs,
    [`${p}LoopP99MaxMs`]: Math.round(r.loopP99MaxMs),
    [`${p}RssPeakMiB`]: Number((r.rss.peakMiB - r.rss.startMiB).toFixed(1)),
    [`${p}RssEndMiB`]: Number((r.rss.endMiB - r.rss.startMiB).toFixed(1)),
    [`${p}LegitLost`]: r.legit.lost,
    [`${p}ControlChangePercent`]: Number((r.control.change * 100).toFixed(1)),
    [`${p}SlowestRecoveryMs`]: Math.max(...Object.values(r.connections).map((c) => c.recoveredAfterMs ?? Infinity)),
  });
  const flags = process.env.GATEWAYD_BENCH_DAEMON_FLAGS;
  const daemonEnv = flags ? { NODE_OPTIONS: flags } : undefined;
  const heapProfile = process.env.GATEWAYD_BENCH_HEAP_PROFILE;
  const both = await runHostileHarness({ seed, corruptMs: seconds * 1000, mqttConcurrency, log, daemonEnv, ...(heapProfile ? { heapProfile } : {}) });
  print(`devices and MQTT (${mqttConcurrency} at a time)`, both);
  if (process.env.GATEWAYD_BENCH_HOSTILE_DEVICES_ONLY === '0') return { seconds, ...figures(both, 'all') };
  const devices = await runHostileHarness({ seed, corruptMs: seconds * 1000, mqttConcurrency: 0, log, daemonEnv });
  print('devices only', devices);
  return { seconds, ...figures(both, 'all'), ...figures(devices, 'devices') };
}
