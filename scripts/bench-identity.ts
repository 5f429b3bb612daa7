// Identity benchmark of the real gateway (in-process, temp data directory, HTTP on 127.0.0.1:0):
//  (a) permission decisions/s through the permission engine (cache, LRU refresh, trie) for a
//      user holding 10, 1,000 and 100,000 direct permissions, and the 10 / 100,000 ratio;
//  (b) with 100,000 users in the store: requests/s and p50/p99 latency of
//      GET /api/users/{id} and GET /api/listUsers?pageNumber=500&rowsPerPage=100 over real
//      HTTP (keep-alive agent, CONCURRENCY requests in flight, a fixed number of requests);
//  (c) POST /api/login per second for a user hashed at the default scrypt cost (logN 15)
//      and at the test cost (logN 10).
//
// The 100,000 users are inserted through UserService.createMany (the code path of
// POST /api/users/batch: each user with its private role and every index) in 10 store
// transactions of 10,000 users. They have no password, so no scrypt runs while inserting.
// The login users get their hash from the same scrypt-kdf hasher, at the chosen cost.
//
// Everything is bounded: fixed request counts, a fixed number of decision passes, and a
// deadline that stops the HTTP and login loops early (reported) if the host is very slow.
// Run: node .build/idt/scripts/bench-identity.js   (or dist/scripts/bench-identity.js)
import { Agent } from 'node:http';
import { pathToFileURL } from 'node:url';

import { createPasswordHasher } from '../src/auth/passwords.js';
import type { PermissionInput } from '../src/roles/role-service.js';
import type { UserCreateInput } from '../src/users/user-service.js';
import { httpCall, now, percentile, startBenchGateway, type HttpResult } from './bench-support.js';

const ADMIN_PASSWORD = 'Bench-Adm1n-Password';
const USER_PASSWORD = 'Bench-Us3r-Password';
const PERMISSION_SIZES = [10, 1_000, 100_000] as const;
const USERS = 100_000;
const USERS_PER_TRANSACTION = 10_000;
const CONCURRENCY = 8;
const GET_USER_REQUESTS = 4_000;
const LIST_USERS_REQUESTS = 400;
const LOGINS = { 15: 32, 10: 200 } as const;
const DECISION_POOL = 4_096; // a power of two
const DECISIONS_PER_PASS = 1_000_000;
const DECISION_PASSES = 3;
const BUDGET_MS = 100_000; // whole run, well under 2 minutes

// ------------------------------------------------------------------------------- helpers

function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 4294967296;
  };
}

/** n mqtt permissions shaped like a plant: lines x machines, every 10th with a `+`. */
function plantPermissions(n: number): { permissions: PermissionInput[]; topics: string[] } {
  const machines = Math.max(1, Math.min(100, Math.round(Math.sqrt(n))));
  const lines = Math.ceil(n / machines);
  const permissions: PermissionInput[] = [];
  for (let i = 0; i < lines && permissions.length < n; i++) {
    for (let j = 0; j < machines && permissions.length < n; j++) {
      const resource = j % 10 === 9 ? `plant/line${i}/+/sensor${j}/value` : `plant/line${i}/machine${j}/#`;
      permissions.push({ resource, operation: j % 3 === 0 ? 'readWrite' : 'read', context: 'mqtt' });
    }
  }
  // Five-level topics; one in eight misses (a line outside the granted range).
  const rnd = lcg(42);
  const topics = Array.from({ length: DECISION_POOL }, (_, k) => {
    const i = Math.floor(rnd() * lines) + (k % 8 === 7 ? lines : 0);
    const j = Math.floor(rnd() * machines);
    return `plant/line${i}/machine${j}/sensor${j}/value`;
  });
  return { permissions, topics };
}

interface LoadResult {
  requests: number;
  perSecond: number;
  p50: number;
  p99: number;
  truncated: boolean;
}

/** `total` calls of `call(k)`, `concurrency` in flight; stops early (truncated) at `deadline`. */
async function load(total: number, concurrency: number, deadline: number, call: (k: number) => Promise<HttpResult>, expect: number): Promise<LoadResult> {
  const latencies: number[] = [];
  let next = 0;
  let truncated = false;
  const t0 = now();
  const worker = async () => {
    for (;;) {
      if (next >= total) return;
      if (now() > deadline) {
        truncated = true;
        return;
      }
      const k = next++;
      const s = now();
      const res = await call(k);
      latencies.push(now() - s);
      if (res.status !== expect) throw new Error(`request ${k}: expected ${expect}, got ${res.status} ${res.body.toString('utf8').slice(0, 200)}`);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  const seconds = (now() - t0) / 1000;
  latencies.sort((a, b) => a - b);
  return { requests: latencies.length, perSecond: latencies.length / seconds, p50: percentile(latencies, 50), p99: percentile(latencies, 99), truncated };
}

const fmtRate = (r: number) => (r >= 1e6 ? `${(r / 1e6).toFixed(2)}M` : r >= 1e4 ? `${(r / 1e3).toFixed(0)}k` : r >= 100 ? r.toFixed(0) : r.toFixed(1));

// ------------------------------------------------------------------------------- benchmark
export async function benchIdentity(): Promise<Record<string, number>> {
  const started = now();
  const deadline = started + BUDGET_MS;
  // The daemon's default cost: the admin (and the logN-15 login user) hash at it.
  const bench = await startBenchGateway({ adminPassword: ADMIN_PASSWORD, passwordHashCost: 15, prefix: 'gatewayd-bench-identity-' });
  const { gateway, port } = bench;
  const agent = new Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  const results: Record<string, number> = {};
  const rows: [string, string][] = [];
  try {
    const { users, engine, store } = gateway.services;

    // (a) decisions through the engine --------------------------------------------------
    const cases: { n: number; userId: string; topics: string[] }[] = [];
    for (const n of PERMISSION_SIZES) {
      const { permissions, topics } = plantPermissions(n);
      const user = await users.create({ username: `perm-${n}`, identityProvider: 'local', initialPermissions: permissions });
      const t0 = now();
      engine.setOf(user.id); // compile and cache the set once, as the first request would
      results[`engine.${n}.buildMs`] = now() - t0;
      cases.push({ n, userId: user.id, topics });
    }
    const best = cases.map(() => 0);
    for (let pass = 0; pass < DECISION_PASSES; pass++) {
      cases.forEach((c, i) => {
        let allowed = 0;
        const t0 = now();
        for (let k = 0; k < DECISIONS_PER_PASS; k++) {
          if (engine.allows(c.userId, 'mqtt', 'read', c.topics[k & (DECISION_POOL - 1)]!)) allowed++;
        }
        const rate = DECISIONS_PER_PASS / ((now() - t0) / 1000);
        if (allowed === 0) throw new Error(`no decision allowed for ${c.n} permissions: broken fixture`);
        best[i] = Math.max(best[i]!, rate);
      });
    }
    cases.forEach((c, i) => {
      results[`engine.${c.n}.decisionsPerSecond`] = best[i]!;
      rows.push([`engine decisions/s, ${c.n} permissions`, `${fmtRate(best[i]!)} (set built in ${results[`engine.${c.n}.buildMs`]!.toFixed(1)} ms)`]);
    });
    results['engine.ratio10to100000'] = best[0]! / best[2]!;
    rows.push(['engine cost 100,000 vs 10 permissions', `${results['engine.ratio10to100000']!.toFixed(2)}x`]);

    // (b) 100,000 users, then HTTP --------------------------------------------------------
    const t0 = now();
    for (let base = 0; base < USERS; base += USERS_PER_TRANSACTION) {
      const batch: UserCreateInput[] = [];
      for (let k = base; k < Math.min(USERS, base + USERS_PER_TRANSACTION); k++) {
        batch.push({ username: `device-${String(k).padStart(6, '0')}`, identityProvider: 'local', autoGenerated: k % 10 === 0 });
      }
      await users.createMany(batch);
    }
    results['store.insertUsersPerSecond'] = USERS / ((now() - t0) / 1000);
    const totalUsers = (store.usernames.getStats() as { entryCount: number }).entryCount;
    results['store.users'] = totalUsers;
    rows.push([`insert ${USERS.toLocaleString('en')} users (createMany, ${USERS / USERS_PER_TRANSACTION} txns)`, `${((now() - t0) / 1000).toFixed(1)} s, ${fmtRate(results['store.insertUsersPerSecond'])} users/s`]);

    const login = async (username: string, password: string) => {
      const res = await httpCall(agent, port, 'POST', '/api/login', {}, JSON.stringify({ username, password }));
      if (res.status !== 200) throw new Error(`login ${username}: ${res.status} ${res.body.toString('utf8')}`);
      return JSON.parse(res.body.toString('utf8')).token as string;
    };
    const auth = { authorization: `Bearer ${await login('admin', ADMIN_PASSWORD)}` };
    const ids = users.ids();
    const rnd = lcg(7);
    const sampleIds = Array.from({ length: 1024 }, () => ids[Math.floor(rnd() * ids.length)]!);

    const httpDeadline = Math.min(deadline, now() + 40_000);
    // Warm-up (JIT, connections), not measured.
    await load(200, CONCURRENCY, httpDeadline, (k) => httpCall(agent, port, 'GET', `/api/users/${sampleIds[k & 1023]}`, auth), 200);
    const getUser = await load(GET_USER_REQUESTS, CONCURRENCY, httpDeadline, (k) => httpCall(agent, port, 'GET', `/api/users/${sampleIds[k & 1023]}`, auth), 200);
    const page = await httpCall(agent, port, 'GET', '/api/listUsers?pageNumber=500&rowsPerPage=100', auth);
    const parsed = JSON.parse(page.body.toString('utf8')) as { users: unknown[]; pagination: { totalRows: number; totalRowsInPage: number } };
    if (parsed.pagination.totalRows !== totalUsers || parsed.users.length !== 100) {
      throw new Error(`listUsers page 500: unexpected ${JSON.stringify(parsed.pagination)}`);
    }
    const listUsers = await load(LIST_USERS_REQUESTS, CONCURRENCY, httpDeadline, () => httpCall(agent, port, 'GET', '/api/listUsers?pageNumber=500&rowsPerPage=100', auth), 200);
    for (const [name, r] of [['getUser', getUser], ['listUsersPage500', listUsers]] as const) {
      results[`http.${name}.requestsPerSecond`] = r.perSecond;
      results[`http.${name}.p50Ms`] = r.p50;
      results[`http.${name}.p99Ms`] = r.p99;
      results[`http.${name}.requests`] = r.requests;
    }
    const httpRow = (label: string, r: LoadResult) =>
      rows.push([label, `${fmtRate(r.perSecond)} req/s, p50 ${r.p50.toFixed(2)} ms, p99 ${r.p99.toFixed(2)} ms (${r.requests} req${r.truncated ? ', cut by deadline' : ''})`]);
    httpRow(`GET /api/users/{id}, ${totalUsers.toLocaleString('en')} users, ${CONCURRENCY} in flight`, getUser);
    httpRow('GET /api/listUsers?pageNumber=500&rowsPerPage=100', listUsers);

    // (c) logins -----------------------------------------------------------------------------
    for (const logN of [15, 10] as const) {
      const user = await users.create({ username: `login-${logN}`, identityProvider: 'local' });
      const passwordHash = await createPasswordHasher({ logN }).hash(USER_PASSWORD);
      await store.transaction(() => {
        const record = store.users.get(user.id)!;
        store.users.put(user.id, { ...record, passwordHash, grantTypes: [{ method: 'password', isRequired: true }] });
      });
      await login(`login-${logN}`, USER_PASSWORD); // warm-up
      const body = JSON.stringify({ username: `login-${logN}`, password: USER_PASSWORD });
      const r = await load(LOGINS[logN], CONCURRENCY, Math.min(deadline, now() + 20_000), () => httpCall(agent, port, 'POST', '/api/login', {}, body), 200);
      results[`login.logN${logN}.perSecond`] = r.perSecond;
      results[`login.logN${logN}.p50Ms`] = r.p50;
      results[`login.logN${logN}.p99Ms`] = r.p99;
      rows.push([`POST /api/login, scrypt logN ${logN}${logN === 15 ? ' (default)' : ' (tests)'}`, `${fmtRate(r.perSecond)} logins/s, p50 ${r.p50.toFixed(1)} ms, p99 ${r.p99.toFixed(1)} ms (${r.requests} req${r.truncated ? ', cut by deadline' : ''})`]);
    }
  } finally {
    agent.destroy();
    await bench.stop();
  }
  results.totalSeconds = (now() - started) / 1000;
  const width = Math.max(...rows.map(([k]) => k.length));
  console.log(`gatewayd identity benchmark (node ${process.version}, ${results.totalSeconds.toFixed(1)} s)`);
  for (const [k, v] of rows) console.log(`  ${k.padEnd(width)}  ${v}`);
  return results;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  benchIdentity().then(
    () => process.exit(0),
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
}
