// run-alone: measures the daemon's RSS, event-loop delay, /health latency and a control device's poll rate
// Hostile peers in front of the running daemon (issue 35 C; test/support/hostile-harness.ts):
// S7 (snap7), EtherNet/IP (the test kit's CIP server) and Modbus devices behind proxies that
// corrupt a third of their answers for 25 s (bit flips, length fields, truncation, garbage,
// replays, trickles, stalls, silence, resets), MQTT clients sending mutated packets, a control
// Modbus device on a clean connection and a legitimate QoS 1 publisher/subscriber pair; the
// daemon watched from outside. npm run bench -- hostile runs the same for 90 s and longer.
import { expect } from 'chai';
import { runHostileHarness, type HostileReport } from './support/hostile-harness.js';
import { runSeed } from './fuzz/support/random.js';

describe('the daemon with hostile devices and MQTT clients in front of it', function () {
  this.timeout(170_000);
  let report: HostileReport;
  const seed = runSeed();
  const figures = () => `seed ${seed} (GATEWAYD_FUZZ_SEED=${seed} repeats the proxies' choices): ${JSON.stringify(report)}`;

  before(async function () {
    this.timeout(170_000);
    report = await runHostileHarness({ seed, corruptMs: 25_000, mqttConcurrency: 2 });
    console.log(`      ${figures()}`);
  });

  it('really attacked: every proxied protocol had answers corrupted, and MQTT packets were mutated', () => {
    for (const [protocol, counts] of Object.entries(report.answers)) {
      const treated = counts.mutate + counts.garbage + counts.replay + counts.trickle + counts.stall + counts.silence + counts.reset;
      expect(treated, `${protocol} answers treated`).to.be.at.least(5);
    }
    expect(report.mqttFuzz.mutated).to.be.at.least(100);
  });

  it('keeps the same process, answering /health with 200 within 500 ms every second', () => {
    expect(report.pidUnchanged, figures()).to.equal(true);
    expect(report.health.probes).to.be.at.least(30);
    expect(report.health.unanswered, figures()).to.equal(0);
  });

  it('keeps the event loop responsive: p99 delay below 100 ms in every scrape', () => {
    expect(report.loopP99MaxMs, figures()).to.be.below(100);
  });

  it('loses none of the legitimate QoS 1 messages', () => {
    expect(report.legit.sent).to.be.at.least(200);
    expect(report.legit.lost, figures()).to.equal(0);
  });

  it('polls the control device on its clean connection at its rate (±10 %)', () => {
    expect(Math.abs(report.control.change), figures()).to.be.at.most(0.1);
  });

  it('never leaves a connection connected without readings, and every endpoint publishes its true value within 10 s of clean answers', () => {
    expect(report.stuckConnected, figures()).to.deep.equal([]);
    for (const [id, c] of Object.entries(report.connections)) {
      expect(c.recoveredAfterMs, `${id}: ${figures()}`).to.be.a('number').at.most(10_000);
      expect(c.state, id).to.equal('connected');
    }
  });

  // The settle criterion is on what the daemon holds after a full GC (heap used + external,
  // asked through its inspector), not on RSS: after the attack V8 keeps the heap pages it grew
  // to and glibc's malloc the arenas the Buffers used, freed but not returned for minutes (on
  // Node 24 the RSS stayed +16 MiB while the heap in use was back within 2 MiB). A leak, which
  // RSS could not tell from that, is what this measures: memory still reachable. The RSS peak
  // stays bounded, and handles (sockets, timers) kept per connection would show in the counts.
  it('keeps its memory: RSS at most 32 MiB above the start during the attack; what it holds after a GC back within 8 MiB in 30 s of quiet, no sockets or timers left behind', () => {
    expect(report.rss.peakMiB - report.rss.startMiB, figures()).to.be.at.most(32);
    expect(report.held.settledAfterMs, figures()).to.be.a('number').at.most(30_000);
    const { start, end } = report.held;
    for (const kind of ['TCPSocketWrap', 'Timeout']) expect(end.resources[kind] ?? 0, `${kind}: ${figures()}`).to.be.at.most((start.resources[kind] ?? 0) + 8);
  });
});
