// Memory under malformed MQTT (issue 35 point 3), at length: the daemon as `npm start` starts it,
// a legitimate QoS 1 publisher/subscriber pair, and GATEWAYD_BENCH_MALFORMED_CLIENTS (6,000)
// short connections sending mutated packets, GATEWAYD_BENCH_MALFORMED_CONCURRENCY (20) at a time
// (test/support/malformed-mqtt-load.ts). Prints the daemon's RSS at start, its peak, and 30 s
// after the last malformed client, and what the pair lost. The short variant runs in npm test
// (test/mqtt-malformed-memory.test.ts).
//
// Run: npm run bench -- mqtt-malformed   (GATEWAYD_BENCH_MALFORMED_HASH_COST=10: the tests' scrypt cost;
// GATEWAYD_BENCH_BEFORE=<checkout>: that build's daemon instead)
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { FUZZ_USER } from '../test/fuzz/wire/mqtt-corpus.js';
import { ADMIN_PASSWORD, startDaemonProcess, tempDir } from '../test/support/harness.js';
import { rssBytes, runMalformedClients, startLegitimatePair, watchRss, type ClientKind } from '../test/support/malformed-mqtt-load.js';

const TOTAL = Number(process.env.GATEWAYD_BENCH_MALFORMED_CLIENTS ?? 6000);
const CONCURRENCY = Number(process.env.GATEWAYD_BENCH_MALFORMED_CONCURRENCY ?? 20);
const QUIET_MS = Number(process.env.GATEWAYD_BENCH_MALFORMED_QUIET_MS ?? 30_000);
const SETTLE_MS = 5000;
/** scrypt logN of the daemon: the shipped 15 (each wrong password's derivation holds 32 MiB) unless told. */
const HASH_COST = process.env.GATEWAYD_BENCH_MALFORMED_HASH_COST ?? '15';
/** Another checkout (built) to measure instead, for before/after figures. */
const BEFORE = process.env.GATEWAYD_BENCH_BEFORE;
/** mutated (default); valid (a right CONNECT and DISCONNECT: the cost of connection churn itself, for comparison); silent (no bytes). */
const KIND = (process.env.GATEWAYD_BENCH_MALFORMED_KIND ?? 'mutated') as ClientKind;
const MiB = 1024 * 1024;

export async function createFuzzUser(httpPort: number): Promise<void> {
  const base = `http://127.0.0.1:${httpPort}`;
  const login = await fetch(`${base}/api/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: 'admin', password: ADMIN_PASSWORD }) });
  const { token } = (await login.json()) as { token: string };
  const created = await fetch(`${base}/api/users`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ ...FUZZ_USER, identityProvider: 'local', initialPermissions: [{ resource: '#', operation: 'readWrite', context: 'mqtt' }] }),
  });
  if (created.status !== 201) throw new Error(`creating the fuzz user: ${created.status} ${await created.text()}`);
}

export async function benchMqttMalformed(): Promise<Record<string, number>> {
  const dataDir = tempDir('gatewayd-bench-malformed-');
  const daemon = await startDaemonProcess(dataDir, { GATEWAYD_SET__LOG__LEVEL: 'warn', GATEWAYD_SET__AUTH__PASSWORD_HASH_COST: HASH_COST }, BEFORE ? { script: join(BEFORE, 'dist/src/main.js') } : {});
  const pid = daemon.child.pid!;
  try {
    await createFuzzUser(daemon.ready.http as number);
    const port = daemon.ready.mqtt as number;
    const pair = await startLegitimatePair(port, FUZZ_USER);
    await new Promise((r) => setTimeout(r, SETTLE_MS));
    const start = rssBytes(pid);
    const watch = watchRss(pid);
    const load = await runMalformedClients(port, { total: TOTAL, concurrency: CONCURRENCY, seed: Number(process.env.GATEWAYD_BENCH_MALFORMED_SEED ?? 35), kind: KIND });
    const peak = watch.peak();
    const endOfLoad = rssBytes(pid);
    const lost = await pair.finish();
    await new Promise((r) => setTimeout(r, QUIET_MS));
    const quiet = rssBytes(pid);
    watch.stop();
    const alive = daemon.child.exitCode === null;
    console.log(
      `mqtt-malformed: ${load.connections} ${KIND} connections (${CONCURRENCY} at once, scrypt logN ${HASH_COST}) in ${(load.ms / 1000).toFixed(1)} s; RSS start ${(start / MiB).toFixed(1)} MiB, ` +
        `peak +${((peak - start) / MiB).toFixed(1)} MiB, end of load +${((endOfLoad - start) / MiB).toFixed(1)}, ${QUIET_MS / 1000} s later +${((quiet - start) / MiB).toFixed(1)} MiB; ` +
        `pair: ${lost.received}/${lost.published} received, ${lost.duplicates} duplicates, ${lost.outOfOrder} out of order; daemon ${alive ? 'alive' : 'DEAD'}`,
    );
    return {
      connections: load.connections,
      seconds: load.ms / 1000,
      rssStartMiB: start / MiB,
      rssPeakDeltaMiB: (peak - start) / MiB,
      rssQuietDeltaMiB: (quiet - start) / MiB,
      published: lost.published,
      received: lost.received,
    };
  } finally {
    daemon.child.kill('SIGTERM');
    await daemon.exited;
    rmSync(dataDir, { recursive: true, force: true });
  }
}
