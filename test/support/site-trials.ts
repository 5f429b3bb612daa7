// The measured trials of a site (issue 37), shared by test/site-ha.test.ts (which asserts the
// acceptance bounds on one run) and scripts/bench-site.ts (which repeats them and prints the
// figures): revocation at the edges and through RabbitMQ, the loss of PostgreSQL's primary
// under logins and administration, and 1,000 random changes with faults.
import type { MqttClient } from 'mqtt';
import { GOOD_PASSWORD } from './harness.js';
import { connect, withTimeout } from './mqtt-test-kit.js';
import { randomChanges, type ChangeRun } from './site-changes.js';
import type { SiteKit, SiteNode } from './site-kit.js';
import type { SiteUser } from './site-load.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
export const whenClosed = (client: MqttClient) => new Promise<number>((resolve) => (client.disconnected ? resolve(Date.now()) : client.once('close', () => resolve(Date.now()))));

/** Tries an MQTT login; answers true when accepted (the client is ended at once). */
export async function mqttLogin(port: number, host: string, username: string, password: string): Promise<boolean> {
  try {
    const c = await connect(port, { host, username, password, connectTimeout: 5000 });
    await c.endAsync(true);
    return true;
  } catch {
    return false;
  }
}

export const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(sorted.length * p) - 1))]!;

export interface RevocationTrial {
  /** From the deletion's answer to each edge session's close, sorted. */
  edgeCloseMs: number[];
  /** The same for the RabbitMQ connections (closed by the centrals' pushes). */
  rabbitCloseMs: number[];
  /** Whether every edge refused each deleted user's next login. */
  edgesRefuse: boolean;
  /** From the last deletion to the first refused RabbitMQ connect with the user's credentials (-1: none within 15 s). */
  rabbitRefusedAfterMs: number;
}

/** Each user connected at every edge and through RabbitMQ, then deleted at central A. */
export async function revocationTrial(kit: SiteKit, users: SiteUser[]): Promise<RevocationTrial> {
  const a = kit.centrals[0]!;
  const rabbit = kit.rabbit!.node;
  const out: RevocationTrial = { edgeCloseMs: [], rabbitCloseMs: [], edgesRefuse: true, rabbitRefusedAfterMs: -1 };
  let lastDeletedAt = 0;
  for (const u of users) {
    const edgeSessions = await Promise.all(kit.edges.map((e) => connect(e.mqttPort, { host: e.host, username: u.username, password: GOOD_PASSWORD })));
    const viaRabbit = await connect(rabbit.mqttPort, { username: u.username, password: u.token });
    const closed = [...edgeSessions, viaRabbit].map(whenClosed);
    const res = await a.api('DELETE', `/api/users/${u.id}`, { token: await a.adminToken() });
    if (res.status !== 200) throw new Error(`delete ${u.username}: ${res.status} ${JSON.stringify(res.body)}`);
    const t0 = (lastDeletedAt = Date.now());
    const times = await withTimeout(Promise.all(closed), 15_000, 'sessions of a deleted user still open');
    out.edgeCloseMs.push(...times.slice(0, edgeSessions.length).map((t) => t - t0));
    out.rabbitCloseMs.push(times[edgeSessions.length]! - t0);
    for (const e of kit.edges) if (await mqttLogin(e.mqttPort, e.host, u.username, GOOD_PASSWORD)) out.edgesRefuse = false;
  }
  out.edgeCloseMs.sort((x, y) => x - y);
  out.rabbitCloseMs.sort((x, y) => x - y);
  // RabbitMQ's auth cache may still admit the last one's credentials, for its TTL at most.
  const last = users[users.length - 1]!;
  while (Date.now() - lastDeletedAt < 15_000) {
    if (!(await mqttLogin(rabbit.mqttPort, '127.0.0.1', last.username, last.token))) {
      out.rabbitRefusedAfterMs = Date.now() - lastDeletedAt;
      break;
    }
    await sleep(200);
  }
  return out;
}

export interface PrimaryLossTrial {
  loginsOk: number;
  /** Logins refused or failed meanwhile, with where and when. */
  loginsFailed: string[];
  /** From the kill to the first change accepted again. */
  adminBackMs: number;
  /** The answers of the changes refused meanwhile, and whether each carried Retry-After. */
  refusals: { status: number; retryAfter: boolean }[];
  /** From the first change accepted after to every replica on one epoch, revision and digest. */
  convergedAfterFirstWriteMs: number;
  epochChanged: boolean;
  acknowledged: number;
  /** Acknowledged changes not found afterwards. */
  missing: string[];
}

/**
 * SIGKILL of the box of PostgreSQL's primary (its Patroni and every PostgreSQL process) while
 * logins go on at each edge, through RabbitMQ and at central B (REST), and central A is asked
 * for a change every 100 ms. The lost box is started again (it rejoins as a standby) in the
 * background: `rejoined` resolves when it did.
 */
export async function primaryLossTrial(kit: SiteKit, users: SiteUser[]): Promise<PrimaryLossTrial & { rejoined: Promise<void> }> {
  const [a, b] = kit.centrals as [SiteNode, SiteNode];
  const rabbit = kit.rabbit!.node;
  await kit.pg.waitStandbys(1, 120_000);
  const before = await kit.converged(15_000);
  let stop = false;
  /** Administration stops at its first change accepted after the loss: convergence is measured from there, on a still site. */
  let stopWrites = false;
  const out: PrimaryLossTrial = { loginsOk: 0, loginsFailed: [], adminBackMs: -1, refusals: [], convergedAfterFirstWriteMs: -1, epochChanged: false, acknowledged: 0, missing: [] };
  const loginLoop = (async () => {
    for (let i = 0; !stop; i++) {
      const u = users[i % users.length]!;
      const tries: [string, Promise<boolean>][] = [
        ...kit.edges.map((e, j) => [e.name, mqttLogin(e.mqttPort, e.host, u.username, j % 2 ? u.token : GOOD_PASSWORD)] as [string, Promise<boolean>]),
        ['rabbitmq', mqttLogin(rabbit.mqttPort, '127.0.0.1', u.username, u.token)],
        ['central-b REST', b.api('POST', '/api/login', { body: { username: u.username, password: GOOD_PASSWORD } }).then((r) => r.status === 200, () => false)],
      ];
      for (const [where, ok] of tries) {
        if (await ok) out.loginsOk++;
        else out.loginsFailed.push(`${where} ${u.username} at ${new Date().toISOString()}`);
      }
      await sleep(100);
    }
  })();
  const acked: string[] = [];
  const writes: { at: number; status: number; retryAfter: boolean }[] = [];
  const writeLoop = (async () => {
    for (let i = 0; !stop && !stopWrites; i++) {
      const username = `loss-${process.pid}-${Date.now()}-${i}`;
      const res = await a
        .api('POST', '/api/users', { token: await a.adminToken(), body: { username, password: GOOD_PASSWORD, identityProvider: 'local', initialPermissions: [{ resource: `w/${i}/#`, operation: 'read', context: 'mqtt' }] }, timeoutMs: 20_000 })
        .catch(() => ({ status: 0, body: {} as Record<string, string>, headers: new Headers() }));
      writes.push({ at: Date.now(), status: res.status, retryAfter: /^\d+$/.test(res.headers.get('retry-after') ?? '') });
      if (res.status === 201) acked.push(res.body.id);
      await sleep(res.status === 201 ? 100 : 500);
    }
  })();
  try {
    await sleep(3000);
    const primary = await kit.pg.waitPrimary(10_000);
    const killedAt = Date.now();
    kit.pg.killBox(primary);
    const rejoined = (async () => {
      await kit.pg.waitPrimary(90_000, primary);
      await kit.pg.startBox(primary);
      await kit.pg.waitStandbys(1, 120_000);
    })();
    rejoined.catch(() => undefined);
    let back: { failedAt: number; okAt: number } | undefined;
    while (!back) {
      const failed = writes.find((w) => w.at > killedAt && w.status !== 201);
      const ok = failed && writes.find((w) => w.at > failed.at && w.status === 201);
      if (ok) back = { failedAt: failed.at, okAt: ok.at };
      else if (Date.now() - killedAt > 90_000) throw new Error(`administration not back within 90 s: ${JSON.stringify(writes.slice(-5))}`);
      else await sleep(50);
    }
    stopWrites = true;
    await writeLoop;
    out.adminBackMs = back.okAt - killedAt;
    out.refusals = writes.filter((w) => w.at > killedAt && w.at <= back!.okAt && w.status !== 201).map((w) => ({ status: w.status, retryAfter: w.retryAfter }));
    const checkFrom = Date.now();
    const converged = await kit.converged(20_000);
    out.convergedAfterFirstWriteMs = checkFrom + converged.ms - back.okAt;
    out.epochChanged = converged.epoch !== before.epoch;
    await sleep(2000);
    stop = true;
    await Promise.all([loginLoop, writeLoop]);
    await kit.converged(15_000);
    out.acknowledged = acked.length;
    for (const id of acked) {
      const res = await b.api('GET', `/api/users/${id}`, { token: await b.adminToken() });
      if (res.status !== 200) out.missing.push(id);
    }
    return { ...out, rejoined };
  } finally {
    stop = true;
    await Promise.all([loginLoop, writeLoop]);
  }
}

export interface ConvergenceRun extends ChangeRun {
  ms: number;
  /** After the last change, until every replica holds one epoch, revision and digest. */
  convergedMs: number;
  epochChanged: boolean;
  /** Each replica's digest recomputed from its records, by node. */
  recomputed: Record<string, string>;
  digest: string;
}

/**
 * `total` random changes by 4 writers, with central A killed at 15% (back at 30%), edge 1 cut
 * at 40% (back at 65%), a PostgreSQL switchover at 50%, edge 2 cut at 70% (back at 90%), central
 * B killed at 75% (back at 85%).
 */
export async function convergenceRun(kit: SiteKit, total: number, seed: number): Promise<ConvergenceRun> {
  const [a, b] = kit.centrals as [SiteNode, SiteNode];
  await kit.pg.waitStandbys(1, 120_000);
  const before = await kit.converged(15_000);
  const at = (share: number) => Math.max(1, Math.round(total * share));
  const faults = new Map<number, () => Promise<unknown>>([
    [at(0.15), () => a.kill()],
    [at(0.3), () => a.start()],
    [at(0.4), async () => kit.cutEdge(0)],
    [at(0.5), async () => (await kit.pg.switchover(), kit.pg.waitPrimary(60_000))],
    [at(0.65), async () => kit.restoreEdge(0)],
    [at(0.7), async () => kit.cutEdge(1)],
    [at(0.75), () => b.kill()],
    [at(0.85), () => b.start()],
    [at(0.9), async () => kit.restoreEdge(1)],
  ]);
  const pending: Promise<Error | undefined>[] = [];
  const started = Date.now();
  let run: ChangeRun;
  try {
    run = await randomChanges({
      centrals: kit.centrals,
      total,
      writers: 4,
      seed,
      onProgress: (n) => {
        const fault = faults.get(n);
        if (fault) pending.push(fault().then(() => undefined, (err: Error) => err));
      },
    });
    for (const failed of await Promise.all(pending)) if (failed) throw failed;
  } finally {
    kit.restoreEdge(0);
    kit.restoreEdge(1);
    for (const c of kit.centrals) if (!c.running()) await c.start();
  }
  const ms = Date.now() - started;
  const end = await kit.converged(30_000);
  const recomputed: Record<string, string> = {};
  for (const node of [...kit.centrals, ...kit.edges]) {
    recomputed[node.name] = (await node.api('GET', '/api/site?verify=true', { token: await node.adminToken() })).body.recomputedDigest;
  }
  return { ...run, ms, convergedMs: end.ms, epochChanged: end.epoch !== before.epoch, recomputed, digest: end.digest };
}
