// A real PostgreSQL 15 cluster with automatic failover for the site tests (issue 37): Debian's
// postgresql-15 managed by Patroni 3.0 on an etcd 3.4 cluster of three members, each "box" its
// own loopback address (127.0.1.x; the whole 127/8 is on lo). PostgreSQL refuses to run as root,
// so etcd, Patroni and PostgreSQL run as user `postgres`, in one temp dir per kit, on free ports.
//
// Why Patroni and not pg_auto_failover: synchronous_mode keeps every acknowledged commit on the
// standby that is promoted (a lost primary loses no admin change), failsafe_mode keeps a
// primary writable when only etcd is lost (patroni#977), the DCS is three etcd members (no single
// monitor whose loss stops failovers) and the timings are a few settings: ttl 20, loop_wait 2,
// retry_timeout 9 give failovers of ~21-25 s on a shared 2-core machine.
//
// "Box loss" is what the tests make: killBox(i) sends SIGKILL to box i's Patroni and every
// process of its PostgreSQL (by pid: the postmaster from postmaster.pid and its children),
// stopBox(i) SIGSTOP (a hung box), startBox(i) brings Patroni back, which rejoins as a standby
// (pg_rewind).
import { spawn, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { liveGroups, systemUserIds } from './system-processes.js';
import { freePort } from './free-port.js';

const PG_BIN = '/usr/lib/postgresql/15/bin';

export interface PatroniMember {
  name: string;
  role: string;
  state: string;
  host: string;
  port: number;
  timeline?: number;
  lag?: number | string;
}

export interface PgCluster {
  /** "host:port" of every PostgreSQL, box order. */
  hosts: string[];
  user: string;
  password: string;
  database: string;
  superuser: { user: string; password: string };
  dir: string;
  members(): Promise<PatroniMember[]>;
  /** Index of the box whose PostgreSQL is the leader, once one is (and answers writes). */
  waitPrimary(timeoutMs: number, not?: number): Promise<number>;
  /** Resolves when `count` standbys stream from the leader. */
  waitStandbys(count: number, timeoutMs: number): Promise<void>;
  killBox(i: number): void;
  stopBox(i: number): void;
  continueBox(i: number): void;
  startBox(i: number): Promise<void>;
  /** A planned switchover to another box (a failover in a few seconds, for the convergence run). */
  switchover(): Promise<number>;
  /** Runs SQL as the superuser on the leader. */
  sql(text: string, params?: unknown[]): Promise<Record<string, unknown>[]>;
  log(i: number): string;
  destroy(): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));


/** A port free on `host`, below the ephemeral range (test/support/free-port.ts). */
export const freePortOn = (host: string): Promise<number> => freePort(host);

/** pids whose parent is `ppid` (from /proc). */
function childrenOf(ppid: number): number[] {
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(fields[1]) === ppid) out.push(Number(entry));
    } catch {}
  }
  return out;
}

/**
 * `standbys: false`: resolves once the primary serves the site's database; the standbys come up
 * meanwhile (a test that needs one waits with waitStandbys).
 */
export async function startPgCluster(options: { boxes?: string[]; etcdBoxes?: string[]; standbys?: boolean } = {}): Promise<PgCluster> {
  const boxes = options.boxes ?? ['127.0.1.1', '127.0.1.2'];
  const etcdBoxes = options.etcdBoxes ?? ['127.0.1.1', '127.0.1.2', '127.0.1.3'];
  const ids = systemUserIds('postgres', 'postgresql-15');
  const dir = mkdtempSync(join(tmpdir(), 'gatewayd-pg-'));
  chownSync(dir, ids.uid, ids.gid);
  const own = (path: string) => chownSync(path, ids.uid, ids.gid);
  const scope = `gw${randomBytes(3).toString('hex')}`;
  const superuser = { user: 'postgres', password: randomBytes(12).toString('hex') };
  const replication = { user: 'replicator', password: randomBytes(12).toString('hex') };
  const rewind = { user: 'rewinder', password: randomBytes(12).toString('hex') };
  const app = { user: 'gatewayd', password: randomBytes(12).toString('hex'), database: 'gatewayd_site' };
  const outputs = new Map<string, string>();
  const children: ChildProcess[] = [];

  function launch(name: string, command: string, args: string[]): ChildProcess {
    const child = spawn(command, args, { cwd: dir, uid: ids.uid, gid: ids.gid, detached: true, stdio: ['ignore', 'pipe', 'pipe'], env: { PATH: `${PG_BIN}:/usr/bin:/bin`, LANG: 'C.UTF-8', LC_ALL: 'C.UTF-8', HOME: dir } });
    liveGroups.add(child.pid!);
    const keep = (chunk: Buffer) => outputs.set(name, ((outputs.get(name) ?? '') + chunk.toString()).slice(-30_000));
    child.stdout!.on('data', keep);
    child.stderr!.on('data', keep);
    child.once('exit', () => liveGroups.delete(child.pid!));
    children.push(child);
    return child;
  }

  // etcd: three members, one per box.
  const etcd = await Promise.all(etcdBoxes.map(async (host, i) => ({ host, name: `e${i}`, client: await freePortOn(host), peer: await freePortOn(host) })));
  const initialCluster = etcd.map((e) => `${e.name}=http://${e.host}:${e.peer}`).join(',');
  for (const e of etcd) {
    const data = join(dir, `etcd-${e.name}`);
    launch(`etcd-${e.name}`, '/usr/bin/etcd', [
      '--name', e.name, '--data-dir', data,
      '--listen-client-urls', `http://${e.host}:${e.client}`, '--advertise-client-urls', `http://${e.host}:${e.client}`,
      '--listen-peer-urls', `http://${e.host}:${e.peer}`, '--initial-advertise-peer-urls', `http://${e.host}:${e.peer}`,
      '--initial-cluster', initialCluster, '--initial-cluster-state', 'new', '--initial-cluster-token', scope,
      '--log-level', 'warn',
    ]);
  }
  const etcdHosts = etcd.map((e) => `${e.host}:${e.client}`).join(',');

  const members = await Promise.all(boxes.map(async (host, i) => ({ host, name: `pg${i}`, port: await freePortOn(host), rest: await freePortOn(host), data: join(dir, `pg${i}`) })));
  const patroni: (ChildProcess | undefined)[] = [];
  for (const m of members) {
    mkdirSync(m.data, { mode: 0o700 });
    own(m.data);
    const config = `scope: ${scope}
name: ${m.name}
log: {level: WARNING}
restapi: {listen: '${m.host}:${m.rest}', connect_address: '${m.host}:${m.rest}'}
etcd3: {hosts: '${etcdHosts}'}
bootstrap:
  dcs:
    ttl: 20
    loop_wait: 2
    retry_timeout: 9
    maximum_lag_on_failover: 1048576
    synchronous_mode: true
    failsafe_mode: true
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters: {wal_log_hints: 'on', max_connections: 60, shared_buffers: 16MB, wal_keep_size: 64MB}
  initdb: [{encoding: UTF8}, {auth: md5}]
  pg_hba:
    - local all all trust
    - host replication ${replication.user} 127.0.0.0/8 md5
    - host all all 127.0.0.0/8 md5
postgresql:
  listen: '${m.host}:${m.port}'
  connect_address: '${m.host}:${m.port}'
  data_dir: ${join(m.data, 'data')}
  bin_dir: ${PG_BIN}
  pgpass: ${join(m.data, 'pgpass')}
  authentication:
    replication: {username: ${replication.user}, password: ${replication.password}}
    superuser: {username: ${superuser.user}, password: ${superuser.password}}
    rewind: {username: ${rewind.user}, password: ${rewind.password}}
  parameters: {unix_socket_directories: '${m.data}'}
  # A standby's base backup asks for a fast checkpoint (a spread one takes minutes).
  basebackup: [{checkpoint: fast}]
`;
    const file = join(m.data, 'patroni.yml');
    writeFileSync(file, config, { mode: 0o600 });
    own(file);
  }
  const startPatroni = (i: number) => {
    const m = members[i]!;
    patroni[i] = launch(m.name, '/usr/bin/patroni', [join(m.data, 'patroni.yml')]);
  };

  async function rest<T>(i: number, path: string, init?: RequestInit, timeoutMs = 2000): Promise<T> {
    const m = members[i]!;
    const res = await fetch(`http://${m.host}:${m.rest}${path}`, { ...init, signal: AbortSignal.timeout(timeoutMs) });
    const text = await res.text();
    if (!res.ok) throw new Error(`${path}: ${res.status} ${text}`);
    // Most answers are JSON; /switchover answers a sentence ("Successfully switched over...").
    try {
      return (text ? JSON.parse(text) : null) as T;
    } catch {
      return text as T;
    }
  }
  async function clusterMembers(): Promise<PatroniMember[]> {
    for (let i = 0; i < members.length; i++) {
      try {
        return (await rest<{ members: PatroniMember[] }>(i, '/cluster')).members;
      } catch {}
    }
    return [];
  }
  const boxOf = (name: string) => members.findIndex((m) => m.name === name);

  async function superClient(i: number) {
    const { default: pg } = await import('pg');
    const m = members[i]!;
    const client = new pg.Client({ host: m.host, port: m.port, user: superuser.user, password: superuser.password, database: 'postgres', connectionTimeoutMillis: 2000, query_timeout: 10_000 });
    client.on('error', () => undefined);
    await client.connect();
    return client;
  }

  const kit: PgCluster = {
    hosts: members.map((m) => `${m.host}:${m.port}`),
    user: app.user,
    password: app.password,
    database: app.database,
    superuser,
    dir,
    members: clusterMembers,
    async waitPrimary(timeoutMs, not) {
      const deadline = Date.now() + timeoutMs;
      while (Date.now() < deadline) {
        const leader = (await clusterMembers()).find((m) => m.role === 'leader' && m.state === 'running');
        const i = leader ? boxOf(leader.name) : -1;
        if (i >= 0 && i !== not) {
          try {
            const c = await superClient(i);
            try {
              const r = await c.query('SELECT pg_is_in_recovery() AS r');
              if (!r.rows[0].r) return i;
            } finally {
              await c.end().catch(() => undefined);
            }
          } catch {}
        }
        await sleep(200);
      }
      throw new Error(`no PostgreSQL leader within ${timeoutMs} ms: ${JSON.stringify(await clusterMembers())}\n${[...outputs.entries()].map(([k, v]) => `--- ${k}\n${v.slice(-2000)}`).join('\n')}`);
    },
    async waitStandbys(count, timeoutMs) {
      const deadline = Date.now() + timeoutMs;
      while (Date.now() < deadline) {
        const list = await clusterMembers();
        const streaming = list.filter((m) => (m.role === 'replica' || m.role === 'sync_standby') && (m.state === 'running' || m.state === 'streaming'));
        if (streaming.length >= count) return;
        await sleep(250);
      }
      throw new Error(`fewer than ${count} standbys within ${timeoutMs} ms: ${JSON.stringify(await clusterMembers())}\n${[...outputs.entries()].map(([k, v]) => `--- ${k}\n${v.slice(-3000)}`).join('\n')}`);
    },
    killBox(i) {
      signalBox(i, 'SIGKILL');
    },
    stopBox(i) {
      signalBox(i, 'SIGSTOP');
    },
    continueBox(i) {
      signalBox(i, 'SIGCONT');
    },
    async startBox(i) {
      const old = patroni[i];
      if (old && old.exitCode === null && old.signalCode === null) await new Promise((r) => old.once('exit', r));
      startPatroni(i);
    },
    async switchover() {
      const list = await clusterMembers();
      const leader = list.find((m) => m.role === 'leader');
      const candidate = list.find((m) => m.role === 'sync_standby' || m.role === 'replica');
      if (!leader || !candidate) throw new Error(`no switchover possible: ${JSON.stringify(list)}`);
      // Answered once the candidate leads (or the switchover failed).
      await rest(boxOf(leader.name), '/switchover', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ leader: leader.name, candidate: candidate.name }) }, 60_000);
      return boxOf(candidate.name);
    },
    async sql(text, params) {
      const i = await kit.waitPrimary(60_000);
      const c = await superClient(i);
      try {
        return (await c.query(text, params as unknown[])).rows as Record<string, unknown>[];
      } finally {
        await c.end().catch(() => undefined);
      }
    },
    log: (i) => outputs.get(members[i]!.name) ?? '',
    async destroy() {
      // Everything goes with its temp dir: no clean shutdown to wait for.
      await Promise.all(
        children.map((child) => {
          if (child.exitCode !== null || child.signalCode !== null) return undefined;
          try {
            process.kill(-child.pid!, 'SIGKILL');
          } catch {}
          return Promise.race([new Promise((r) => child.once('exit', r)), sleep(5000)]);
        }),
      );
      for (let i = 0; i < members.length; i++) kit.killBox(i);
      for (const child of children) {
        try {
          process.kill(-child.pid!, 'SIGKILL');
        } catch {}
        liveGroups.delete(child.pid!);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };

  /** Box i's Patroni (while it runs) and PostgreSQL processes, by pid: never a pid reused by another program. */
  function signalBox(i: number, signal: NodeJS.Signals): void {
    const m = members[i]!;
    const pids: number[] = [];
    const p = patroni[i];
    if (p?.pid && p.exitCode === null && p.signalCode === null) pids.push(p.pid);
    const pidFile = join(m.data, 'data', 'postmaster.pid');
    if (existsSync(pidFile)) {
      const postmaster = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
      // A stale pid file (the postmaster killed before) names a pid that may be another's now.
      let ours = false;
      try {
        ours = postmaster > 0 && readFileSync(`/proc/${postmaster}/cmdline`, 'utf8').includes(join(m.data, 'data'));
      } catch {}
      if (ours) pids.push(postmaster, ...childrenOf(postmaster));
    }
    for (const pid of pids) {
      try {
        process.kill(pid, signal);
      } catch {}
    }
  }

  try {
    // All at once: the first to take the leader key bootstraps, the others wait and clone it.
    for (let i = 0; i < members.length; i++) startPatroni(i);
    await kit.waitPrimary(90_000);
    // The site's database and its owner (what an operator creates once; docs/scaling-out.md).
    await kit.sql(`CREATE ROLE ${app.user} LOGIN PASSWORD '${app.password}'`);
    await kit.sql(`GRANT pg_monitor TO ${app.user}`);
    await kit.sql(`CREATE DATABASE ${app.database} OWNER ${app.user}`);
    if (options.standbys !== false) await kit.waitStandbys(members.length - 1, 90_000);
  } catch (err) {
    await kit.destroy();
    throw err;
  }
  return kit;
}
