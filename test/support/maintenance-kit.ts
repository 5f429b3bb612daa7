// Backup and restore through the API, for the tests that need a real archive (maintenance,
// the audit trail): wait until nothing runs, take and download a backup, upload one to restore.
import { expect } from 'chai';
import { setTimeout as delay } from 'node:timers/promises';
import { ADMIN_PASSWORD, type TestGateway } from './harness.js';

export interface Status {
  running: boolean;
  backup?: { id: string; succeeded?: boolean; statusMessage: string; startDate: string; endDate?: string };
  restore?: { id: string; succeeded?: boolean; statusMessage: string; startDate: string; endDate?: string };
}

/** Polls GET /api/maintenance/db until nothing runs; logs in again when a restore revoked the token. */
export async function waitIdle(gw: TestGateway, password = ADMIN_PASSWORD): Promise<Status> {
  let token: string | undefined;
  for (let i = 0; i < 1500; i++) {
    if (!token) {
      const login = await gw.api('POST', '/api/login', { body: { username: 'admin', password } });
      if (login.status === 200) token = login.body.token;
      else if (login.status !== 423) throw new Error(`login: ${login.status} ${JSON.stringify(login.body)}`);
    }
    if (token) {
      const res = await gw.api<Status>('GET', '/api/maintenance/db', { token });
      if (res.status === 401) token = undefined;
      else if (res.status === 200 && !res.body.running) return res.body;
      else if (res.status !== 200 && res.status !== 423) throw new Error(`status: ${res.status} ${JSON.stringify(res.body)}`);
    }
    await delay(20);
  }
  throw new Error('maintenance did not become idle within 30 s');
}

export async function backupAndDownload(gw: TestGateway, token: string): Promise<{ id: string; archive: Buffer; res: Response }> {
  const started = await gw.api('POST', '/api/maintenance/db/backup', { token });
  expect(started.status, JSON.stringify(started.body)).to.equal(202);
  const status = await waitIdle(gw);
  expect(status.backup?.id).to.equal(started.body);
  expect(status.backup?.succeeded, status.backup?.statusMessage).to.equal(true);
  const res = await fetch(`${gw.baseUrl}/api/maintenance/db/backup`, { headers: { authorization: `Bearer ${token}` } });
  expect(res.status).to.equal(200);
  return { id: started.body, archive: Buffer.from(await res.arrayBuffer()), res };
}

export async function upload(gw: TestGateway, token: string, archive: Buffer, name = 'backup.tar.gz') {
  const form = new FormData();
  form.append('file', new Blob([new Uint8Array(archive)], { type: 'application/gzip' }), name);
  return gw.api('POST', '/api/maintenance/db/restore', { token, raw: form });
}

