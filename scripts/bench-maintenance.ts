// Maintenance benchmark of the real gateway (in-process, temp data directory, HTTP on
// 127.0.0.1:0) with 100,000 users in the store:
//  - backup: time from POST /api/maintenance/db/backup to the recorded end, archive size,
//    store file size;
//  - restore of that archive: time to the 202 (upload, checks, extraction, store check in a
//    child process, staging) and to the end of the swap;
//  - latency (p50/p99) of GET /api/users/{id} at idle and while a backup runs (sequential
//    requests on a keep-alive connection; backups are repeated until enough samples exist).
//
// The users are inserted through UserService.createMany (each with its private role and
// indexes) in transactions of 10,000, without passwords, so no scrypt runs. Bounded: fixed
// sample counts, at most MAX_BACKUPS_WHILE_SAMPLING backups, and a deadline.
// Run: node dist/scripts/bench-maintenance.js
import { readdirSync, statSync } from 'node:fs';
import { Agent } from 'node:http';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

import type { UserCreateInput } from '../src/users/user-service.js';
import { httpCall, now, percentile, startBenchGateway } from './bench-support.js';

const ADMIN_PASSWORD = 'Bench-Adm1n-Password';
const USERS = 100_000;
const USERS_PER_TRANSACTION = 10_000;
const IDLE_SAMPLES = 2_000;
const BUSY_SAMPLES = 2_000;
const MAX_BACKUPS_WHILE_SAMPLING = 5;
const BUDGET_MS = 110_000;

function multipart(field: string, fileName: string, content: Buffer): { body: Buffer; contentType: string } {
  const boundary = `----gatewayd-bench-${Date.now()}`;
  const head = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${field}"; filename="${fileName}"\r\nContent-Type: application/gzip\r\n\r\n`);
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  return { body: Buffer.concat([head, content, tail]), contentType: `multipart/form-data; boundary=${boundary}` };
}

export async function benchMaintenance(): Promise<Record<string, number>> {
  const deadline = now() + BUDGET_MS;
  const bench = await startBenchGateway({ adminPassword: ADMIN_PASSWORD, passwordHashCost: 10, prefix: 'gatewayd-bench-maintenance-' });
  const { gateway, port, dataDir } = bench;
  const agent = new Agent({ keepAlive: true, maxSockets: 4 });
  const results: Record<string, number> = {};
  const rows: [string, string][] = [];
  try {
    const call = (method: string, path: string, token?: string, body?: Buffer, contentType = 'application/json') =>
      httpCall(agent, port, method, path, { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body ? { 'content-type': contentType } : {}) }, body);
    const login = async (): Promise<string> => {
      for (let i = 0; i < 2000; i++) {
        const res = await call('POST', '/api/login', undefined, Buffer.from(JSON.stringify({ username: 'admin', password: ADMIN_PASSWORD })));
        if (res.status === 200) return (JSON.parse(res.body.toString('utf8')) as { token: string }).token;
        if (res.status !== 423) throw new Error(`login: ${res.status} ${res.body.toString('utf8')}`);
        await new Promise((r) => setTimeout(r, 10));
      }
      throw new Error('login kept answering 423');
    };
    /** Polls the status until nothing runs; returns it. Logs in again after a restore. */
    let token = await login();
    const waitIdle = async (): Promise<{ backup?: { succeeded?: boolean; startDate: string; endDate?: string; statusMessage: string }; restore?: { succeeded?: boolean; statusMessage: string } }> => {
      for (;;) {
        if (now() > deadline) throw new Error('benchmark deadline passed while waiting for maintenance');
        const res = await call('GET', '/api/maintenance/db', token);
        if (res.status === 401) token = await login();
        else if (res.status === 200) {
          const status = JSON.parse(res.body.toString('utf8'));
          if (!status.running) return status;
        }
        await new Promise((r) => setTimeout(r, 10));
      }
    };

    // 100,000 users ---------------------------------------------------------------------
    const { users } = gateway.services;
    const t0 = now();
    const ids: string[] = [];
    for (let base = 0; base < USERS; base += USERS_PER_TRANSACTION) {
      const batch: UserCreateInput[] = [];
      for (let i = base; i < base + USERS_PER_TRANSACTION; i++) batch.push({ username: `user-${String(i).padStart(6, '0')}`, identityProvider: 'local' });
      for (const u of await users.createMany(batch)) if (ids.length < 4096) ids.push(u.id);
    }
    results.insertUsersMs = now() - t0;
    const storeBytes = statSync(join(dataDir, 'db', 'data.mdb')).size;
    results.storeFileBytes = storeBytes;
    rows.push([`insert ${USERS.toLocaleString('en')} users`, `${(results.insertUsersMs / 1000).toFixed(1)} s (store file ${(storeBytes / 1048576).toFixed(1)} MiB)`]);

    const getUser = async (k: number): Promise<number> => {
      const s = now();
      const res = await call('GET', `/api/users/${ids[k % ids.length]}`, token);
      if (res.status !== 200) throw new Error(`GET /api/users/{id}: ${res.status}`);
      return now() - s;
    };

    // Latency at idle -------------------------------------------------------------------
    for (let k = 0; k < 200; k++) await getUser(k); // warm-up
    const idle: number[] = [];
    for (let k = 0; k < IDLE_SAMPLES && now() < deadline; k++) idle.push(await getUser(k));
    idle.sort((a, b) => a - b);

    // Backup ----------------------------------------------------------------------------
    const b0 = now();
    const started = await call('POST', '/api/maintenance/db/backup', token);
    if (started.status !== 202) throw new Error(`backup: ${started.status} ${started.body.toString('utf8')}`);
    const backupId = JSON.parse(started.body.toString('utf8')) as string;
    // Sample latency while it runs.
    const busy: number[] = [];
    let backupsWhileSampling = 1;
    let k = 0;
    let firstBackupMs = NaN;
    for (;;) {
      const status = JSON.parse((await call('GET', '/api/maintenance/db', token)).body.toString('utf8')) as { running: boolean };
      if (!status.running) {
        if (Number.isNaN(firstBackupMs)) firstBackupMs = now() - b0;
        if (busy.length >= BUSY_SAMPLES || backupsWhileSampling >= MAX_BACKUPS_WHILE_SAMPLING || now() > deadline) break;
        const again = await call('POST', '/api/maintenance/db/backup', token);
        if (again.status !== 202) throw new Error(`backup: ${again.status}`);
        backupsWhileSampling++;
        continue;
      }
      for (let i = 0; i < 20; i++) busy.push(await getUser(k++));
    }
    const finalStatus = await waitIdle();
    if (!finalStatus.backup?.succeeded) throw new Error(`backup failed: ${finalStatus.backup?.statusMessage}`);
    busy.sort((a, b) => a - b);
    const archives = readdirSync(join(dataDir, 'backups')).filter((n) => n.endsWith('.tar.gz'));
    const firstArchive = archives.find((n) => n.startsWith(backupId)) ?? archives[0]!;
    const archiveBytes = statSync(join(dataDir, 'backups', firstArchive)).size;
    results.backupMs = firstBackupMs;
    results.archiveBytes = archiveBytes;
    rows.push(['backup (POST to end)', `${(firstBackupMs / 1000).toFixed(2)} s, archive ${(archiveBytes / 1048576).toFixed(2)} MiB (${((archiveBytes / storeBytes) * 100).toFixed(1)}% of the store file)`]);

    // Restore ---------------------------------------------------------------------------
    const download = await call('GET', '/api/maintenance/db/backup', token);
    if (download.status !== 200) throw new Error(`download: ${download.status}`);
    const form = multipart('file', 'backup.tar.gz', download.body);
    const r0 = now();
    const restore = await call('POST', '/api/maintenance/db/restore', token, form.body, form.contentType);
    if (restore.status !== 202) throw new Error(`restore: ${restore.status} ${restore.body.toString('utf8')}`);
    results.restoreAcceptedMs = now() - r0;
    const restored = await waitIdle();
    results.restoreMs = now() - r0;
    if (!restored.restore?.succeeded) throw new Error(`restore failed: ${restored.restore?.statusMessage}`);
    const count = await call('GET', '/api/users/ids', token);
    const restoredUsers = (JSON.parse(count.body.toString('utf8')) as string[]).length;
    if (restoredUsers !== USERS + 1) throw new Error(`restored store holds ${restoredUsers} users, expected ${USERS + 1}`);
    rows.push(['restore: upload + checks + staging (to 202)', `${(results.restoreAcceptedMs / 1000).toFixed(2)} s`]);
    rows.push(['restore: total (to end of swap)', `${(results.restoreMs / 1000).toFixed(2)} s (${restoredUsers.toLocaleString('en')} users back)`]);

    results.idleP50Ms = percentile(idle, 50);
    results.idleP99Ms = percentile(idle, 99);
    results.idleSamples = idle.length;
    results.backupP50Ms = percentile(busy, 50);
    results.backupP99Ms = percentile(busy, 99);
    results.backupSamples = busy.length;
    results.backupsWhileSampling = backupsWhileSampling;
    rows.push(['GET /api/users/{id} idle p50 / p99', `${results.idleP50Ms.toFixed(2)} / ${results.idleP99Ms.toFixed(2)} ms (${idle.length} requests)`]);
    rows.push([
      'GET /api/users/{id} during backup p50 / p99',
      `${results.backupP50Ms.toFixed(2)} / ${results.backupP99Ms.toFixed(2)} ms (${busy.length} requests over ${backupsWhileSampling} backups)`,
    ]);
  } finally {
    agent.destroy();
    await bench.stop();
  }
  const width = Math.max(...rows.map(([a]) => a.length));
  console.log('maintenance (100,000 users):');
  for (const [a, b] of rows) console.log(`  ${a.padEnd(width)}  ${b}`);
  return results;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  benchMaintenance().catch((err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  });
}
