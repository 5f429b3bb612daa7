// Random administration of a site for the convergence runs (issue 37): users, roles, permissions,
// role assignments, passwords and sessions changed through the centrals' REST API by a few
// writers at once, each change sent to a central that answers (the other one when a central is
// down, again when the site's PostgreSQL is failing over). A change counts once a central
// accepted it (2xx); a refusal (4xx: a race between writers, e.g. a user deleted meanwhile) is
// tallied, not counted.
import { GOOD_PASSWORD } from './harness.js';
import type { SiteNode } from './site-kit.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface ChangeRun {
  /** Definitive answers, by status (the 2xx ones are the changes). */
  statuses: Record<number, number>;
  /** Attempts that got no definitive answer (503, a central down) and were sent again. */
  retried: number;
}

/**
 * Makes `total` changes with `writers` writers; `onProgress(n)` is called after the n-th change
 * (the caller injects faults there; writers go on meanwhile).
 */
export async function randomChanges(opts: { centrals: SiteNode[]; total: number; writers: number; seed: number; onProgress?: (n: number) => void }): Promise<ChangeRun> {
  let seed = opts.seed >>> 0;
  const random = () => {
    // mulberry32: a run can be replayed from its seed.
    seed = (seed + 0x6d2b79f5) >>> 0;
    let t = seed;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const pick = <T>(list: T[]): T | undefined => list[Math.floor(random() * list.length)];
  const grant = () => ({ resource: `conv/${Math.floor(random() * 20)}/${pick(['#', '+', 'x'])}`, operation: pick(['read', 'write', 'readWrite'] as const)!, context: 'mqtt' as const });
  const users: { id: string; username: string; password: string }[] = [];
  const roles: string[] = [];
  let made = 0;
  let done = 0;
  const run: ChangeRun = { statuses: {}, retried: 0 };
  const tokens = new Map<SiteNode, string>();

  async function send(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
    for (let attempt = 0; attempt < 400; attempt++) {
      const central = attempt % 2 === 0 ? pick(opts.centrals)! : opts.centrals.find((c) => c !== opts.centrals[0]) ?? opts.centrals[0]!;
      const target = central.running() ? central : opts.centrals.find((c) => c.running());
      if (!target) {
        await sleep(200);
        continue;
      }
      try {
        if (!tokens.has(target)) tokens.set(target, await target.adminToken());
        const res = await target.api(method, path, { token: tokens.get(target)!, ...(body !== undefined ? { body } : {}), timeoutMs: 15_000 });
        if (res.status === 401) tokens.delete(target);
        if (res.status >= 500 || res.status === 401) {
          run.retried++;
          await sleep(res.status === 503 ? 300 : 100);
          continue;
        }
        return res;
      } catch {
        tokens.delete(target);
        run.retried++;
        await sleep(200);
      }
    }
    throw new Error(`${method} ${path}: no definitive answer from the centrals`);
  }

  const ops: (() => Promise<{ status: number; body: any } | undefined>)[] = [
    async () => {
      const username = `conv-${opts.seed}-${made++}`;
      const res = await send('POST', '/api/users', { username, password: GOOD_PASSWORD, identityProvider: 'local', initialPermissions: [grant()], roles: roles.length && random() < 0.5 ? [pick(roles)!] : [] });
      if (res.status === 201) users.push({ id: res.body.id, username, password: GOOD_PASSWORD });
      return res;
    },
    async () => {
      const u = pick(users);
      return u && send('PUT', `/api/users/${u.id}`, { permissions: [grant(), grant()].filter((g, i, all) => all.findIndex((x) => JSON.stringify(x) === JSON.stringify(g)) === i) });
    },
    async () => {
      const u = pick(users);
      if (!u) return undefined;
      const res = await send('DELETE', `/api/users/${u.id}`);
      if (res.status === 200 || res.status === 404) users.splice(users.indexOf(u), 1);
      return res;
    },
    async () => {
      const res = await send('POST', '/api/roles', { name: `conv-role-${opts.seed}-${made++}`, isShared: true, permissions: [grant()] });
      if (res.status === 201) roles.push(res.body.id);
      return res;
    },
    async () => {
      const r = pick(roles);
      return r ? send('POST', `/api/roles/${r}/permissions`, grant()) : undefined;
    },
    async () => {
      const r = pick(roles);
      if (!r) return undefined;
      const res = await send('DELETE', `/api/roles/${r}`);
      if (res.status === 200 || res.status === 404) roles.splice(roles.indexOf(r), 1);
      return res;
    },
    async () => {
      const u = pick(users);
      const r = pick(roles);
      return u && r ? send('POST', `/api/users/${u.id}/roles`, { roleId: r }) : undefined;
    },
    async () => {
      const u = pick(users);
      if (!u) return undefined;
      const password = `Pw-${Math.floor(random() * 1e9)}-Changed`;
      const res = await send('PUT', `/api/users/${u.id}`, { password });
      if (res.status === 200) u.password = password;
      return res;
    },
    async () => {
      const u = pick(users);
      if (!u) return undefined;
      // A session token: a record of the site too.
      const central = opts.centrals.find((c) => c.running());
      if (!central) return undefined;
      const res = await central.api('POST', '/api/login', { body: { username: u.username, password: u.password } }).catch(() => undefined);
      return res && res.status < 500 ? res : undefined;
    },
  ];

  async function writer(): Promise<void> {
    while (done < opts.total) {
      const res = await pick(ops)!();
      if (!res) continue;
      run.statuses[res.status] = (run.statuses[res.status] ?? 0) + 1;
      if (res.status >= 400 && process.env.SITE_CHANGES_DEBUG) console.log('refused', res.status, JSON.stringify(res.body).slice(0, 160));
      if (res.status >= 300 || done >= opts.total) continue;
      done++;
      opts.onProgress?.(done);
    }
  }
  await Promise.all(Array.from({ length: opts.writers }, writer));
  return run;
}
