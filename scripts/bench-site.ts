// One site, one set of users (issue 37; docs/scaling-out.md "One site, one set of users"): the
// acceptance figures of test/site-ha.test.ts over repeated trials on the same loopback topology
// (test/support/site-kit.ts: PostgreSQL 15 + Patroni + etcd, two central daemons behind haproxy,
// a RabbitMQ 3.10 node, two edge daemons behind TCP proxies):
// 1. kill -9 and SIGSTOP of a central under 20 MQTT connects/s through RabbitMQ: the window of
//    refused connects and the established clients dropped, per trial;
// 2. revocation: a user deleted at a central, until its sessions at each edge and through
//    RabbitMQ are closed, and until RabbitMQ refuses its credentials;
// 3. an edge cut off, restarted 24 h later (libfaketime) without any centre, and the link back;
// 4. 1,000 random changes with central kills, a PostgreSQL switchover and edge cuts;
// 5. the PostgreSQL primary lost (SIGKILL of its box), several times.
//
// Run: npm run bench -- site   (GATEWAYD_BENCH_SITE_TRIALS: trials of 1, 3 and 5, default 5;
// GATEWAYD_BENCH_SITE_CHANGES: changes of 4, default 1000)
import { GOOD_PASSWORD } from '../test/support/harness.js';
import { startSiteKit, type SiteNode } from '../test/support/site-kit.js';
import { createSiteLoad, siteUsers } from '../test/support/site-load.js';
import { convergenceRun, mqttLogin, percentile, primaryLossTrial, revocationTrial } from '../test/support/site-trials.js';

const TRIALS = Number(process.env.GATEWAYD_BENCH_SITE_TRIALS ?? 5);
const CHANGES = Number(process.env.GATEWAYD_BENCH_SITE_CHANGES ?? 1000);

const median = (values: number[]) => percentile([...values].sort((a, b) => a - b), 0.5);
const max = (values: number[]) => Math.max(...values);

export async function benchSite(): Promise<Record<string, number>> {
  const results: Record<string, number> = {};
  const started = Date.now();
  const kit = await startSiteKit({ edges: [{}, {}], rabbit: { cacheTtlMs: 5000 } });
  console.log(`site: topology ready in ${((Date.now() - started) / 1000).toFixed(0)} s (PostgreSQL 15 + Patroni + etcd, 2 centrals behind haproxy, RabbitMQ, 2 edges)`);
  const [a, b] = kit.centrals as [SiteNode, SiteNode];
  const [e1] = kit.edges as [SiteNode, SiteNode];
  try {
    // 1. A central lost under load.
    const load = await createSiteLoad({ kit, users: 160 });
    try {
      for (const [how, victim] of [['kill', a], ['stop', b]] as const) {
        const windows: number[] = [];
        const dropped: number[] = [];
        for (let t = 0; t < TRIALS; t++) {
          let trial;
          try {
            trial = await load.trial({ connectsPerSecond: 20, warmupMs: 3000, afterMs: 8000, fault: async () => (how === 'kill' ? victim.kill() : victim.pause()) });
          } finally {
            if (how === 'kill') await victim.start();
            else victim.resume();
          }
          await kit.converged(30_000);
          windows.push(trial.refusedWindowMs);
          dropped.push(trial.dropped);
          console.log(`site: ${how === 'kill' ? 'kill -9' : 'SIGSTOP'} of ${victim.name}, trial ${t + 1}: ${trial.connects} connects, ${trial.refused} refused over ${trial.refusedWindowMs} ms, ${trial.dropped} established dropped`);
        }
        results[`${how}RefusedWindowMaxMs`] = max(windows);
        results[`${how}EstablishedDropped`] = dropped.reduce((x, y) => x + y, 0);
      }
    } finally {
      await load.close();
    }

    // 2. Revocation.
    const users = await siteUsers(a, 10 * TRIALS, (n) => [{ resource: `bench/rev/${n}/#`, operation: 'readWrite', context: 'mqtt' }]);
    await kit.converged(15_000);
    const rev = await revocationTrial(kit, users);
    results.revocationEdgeP50Ms = percentile(rev.edgeCloseMs, 0.5);
    results.revocationEdgeP99Ms = percentile(rev.edgeCloseMs, 0.99);
    results.revocationRabbitP99Ms = percentile(rev.rabbitCloseMs, 0.99);
    results.rabbitRefusedAfterMs = rev.rabbitRefusedAfterMs;
    console.log(`site: revocation of ${users.length} users: edge sessions closed p50 ${results.revocationEdgeP50Ms} ms, p99 ${results.revocationEdgeP99Ms} ms; RabbitMQ connections p99 ${results.revocationRabbitP99Ms} ms; RabbitMQ refuses the credentials after ${rev.rabbitRefusedAfterMs} ms (auth cache 5 s)`);

    // 3. An edge cut off for a day.
    const [kept] = await siteUsers(a, 1, () => [{ resource: 'bench/cut/#', operation: 'readWrite', context: 'mqtt' }]);
    await kit.converged(15_000);
    await e1.stop();
    const usual = (await e1.start()).readyMs;
    await kit.converged(15_000);
    kit.cutEdge(0);
    const [gone] = await siteUsers(a, 1, () => [{ resource: 'bench/gone/#', operation: 'read', context: 'mqtt' }]);
    await e1.stop();
    const withoutCentre = (await e1.start()).readyMs;
    await e1.stop();
    const dayLater = (await e1.start({ faketime: '+24h' })).readyMs;
    const stillIn = await mqttLogin(e1.mqttPort, e1.host, kept!.username, GOOD_PASSWORD);
    kit.restoreEdge(0);
    const applied = await kit.converged(15_000);
    const knowsNew = await mqttLogin(e1.mqttPort, e1.host, gone!.username, GOOD_PASSWORD);
    results.edgeRestartUsualMs = usual;
    results.edgeRestartWithoutCentreMs = withoutCentre;
    results.edgeRestartDayLaterMs = dayLater;
    results.edgeLinkBackAppliedMs = applied.ms;
    console.log(`site: edge restart ${usual} ms usually, ${withoutCentre} ms without any centre, ${dayLater} ms a day later (libfaketime; a site user signs in: ${stillIn}); link back: replicas equal after ${applied.ms} ms (the user created meanwhile signs in: ${knowsNew})`);

    // 4. Convergence.
    const conv = await convergenceRun(kit, CHANGES, 37);
    const digests = new Set([...Object.values(conv.recomputed), conv.digest]);
    results.changes = CHANGES;
    results.changesPerSecond = Math.round((CHANGES * 1000) / conv.ms);
    results.convergedAfterLastChangeMs = conv.convergedMs;
    results.replicaDigests = digests.size;
    console.log(`site: ${CHANGES} changes in ${(conv.ms / 1000).toFixed(1)} s (${results.changesPerSecond}/s with 4 writers, kills, a switchover and cuts; answers ${JSON.stringify(conv.statuses)}, ${conv.retried} sent again); every replica equal ${conv.convergedMs} ms after the last; distinct digests: ${digests.size}`);

    // 5. The PostgreSQL primary lost.
    const pgUsers = await siteUsers(a, 40, (n) => [{ resource: `bench/pg/${n}/#`, operation: 'readWrite', context: 'mqtt' }]);
    const adminBack: number[] = [];
    const converged: number[] = [];
    let failedLogins = 0;
    let missing = 0;
    let refusalsNot503 = 0;
    for (let t = 0; t < TRIALS; t++) {
      const trial = await primaryLossTrial(kit, pgUsers);
      adminBack.push(trial.adminBackMs);
      converged.push(trial.convergedAfterFirstWriteMs);
      failedLogins += trial.loginsFailed.length;
      missing += trial.missing.length;
      refusalsNot503 += trial.refusals.filter((r) => r.status !== 503 || !r.retryAfter).length;
      console.log(`site: PostgreSQL primary lost, trial ${t + 1}: ${trial.loginsOk} logins ok, ${trial.loginsFailed.length} failed; administration back after ${trial.adminBackMs} ms (${trial.refusals.length} refusals); replicas equal ${trial.convergedAfterFirstWriteMs} ms after the first change after; ${trial.acknowledged} acknowledged, ${trial.missing.length} missing`);
      await trial.rejoined;
    }
    results.primaryLossAdminBackMedianMs = median(adminBack);
    results.primaryLossAdminBackMaxMs = max(adminBack);
    results.primaryLossConvergedMaxMs = max(converged);
    results.primaryLossFailedLogins = failedLogins;
    results.primaryLossMissingChanges = missing;
    results.primaryLossRefusalsNot503 = refusalsNot503;
  } finally {
    await kit.destroy();
  }
  return results;
}
