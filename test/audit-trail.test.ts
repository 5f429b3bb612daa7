// The audit trail (docs/design.md §14, docs/security.md "Audit trail"): every audit event also goes to the store
// and GET /api/audit pages it — the caller of the request and the client address recorded,
// filters (time range, user, action, outcome) and a cursor, 400 on bad input, 403 without the
// permission on the path, no secret stored; bounded by count and by age with a page costing the
// page (a real store, the reads counted); a restore keeps the events since the backup.
import { expect } from 'chai';
import { setTimeout as delay } from 'node:timers/promises';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import sinon from 'sinon';
import type { Database } from 'lmdb';
import { createAuditTrail } from '../src/audit/index.js';
import { MAX_SCAN } from '../src/audit/audit-store.js';
import { createSilentLogger } from '../src/log/index.js';
import { createStoragePolicy, STORAGE_DEFAULTS } from '../src/storage/index.js';
import { openStore, type Store } from '../src/store/index.js';
import { ADMIN_PASSWORD, GOOD_PASSWORD, startGateway, tempDir, type TestGateway } from './support/harness.js';
import { backupAndDownload, upload, waitIdle } from './support/maintenance-kit.js';

interface AuditItem {
  id: string;
  time: string;
  action: string;
  outcome: 'success' | 'failure';
  actor?: { userId: string; username: string };
  user?: string;
  source?: string;
  details: Record<string, unknown>;
}
interface AuditPageBody {
  items: AuditItem[];
  nextCursor?: string;
}

const http = (resource: string, operation: 'read' | 'write' | 'readWrite' = 'read') => ({ context: 'http' as const, resource, operation });

describe('audit trail: GET /api/audit', function () {
  this.timeout(30_000);
  let gw: TestGateway;
  let admin: string;
  before(async () => {
    gw = await startGateway();
    admin = await gw.login();
  });
  after(() => gw.stop());

  /** The trail as the API answers it, once the writes issued so far are committed. */
  async function audit(query: Record<string, string | number> = {}, token = admin) {
    await gw.services.audit.settled();
    const qs = new URLSearchParams(Object.entries(query).map(([k, v]): [string, string] => [k, String(v)])).toString();
    return gw.api<AuditPageBody>('GET', `/api/audit${qs ? `?${qs}` : ''}`, { token });
  }

  it('records a login with the user and the client address, and a refused grant with the caller, as failure', async () => {
    const delegate = await gw.userWith([http('/api/roles/#', 'readWrite')], 'role-delegate');
    const refused = await gw.api('POST', '/api/roles', { token: delegate.token, body: { name: 'too-strong', isShared: true, permissions: [{ context: 'mqtt', resource: '#', operation: 'readWrite' }] } });
    expect(refused.status).to.equal(403);

    const logins = await audit({ user: 'role-delegate', action: 'login' });
    expect(logins.status).to.equal(200);
    expect(logins.body.items).to.have.length(1);
    const login = logins.body.items[0]!;
    expect(login).to.include({ action: 'login', outcome: 'success', user: 'role-delegate', source: '127.0.0.1' });
    expect(Date.parse(login.time)).to.be.closeTo(Date.now(), 30_000);

    // An action has one outcome: the other finds nothing, the same one finds it.
    expect((await audit({ user: 'role-delegate', action: 'login', outcome: 'failure' })).body.items).to.deep.equal([]);
    expect((await audit({ user: 'role-delegate', action: 'grant refused', outcome: 'failure' })).body.items).to.have.length(1);
    const grants = await audit({ user: 'role-delegate', outcome: 'failure' });
    expect(grants.body.items.map((i) => i.action)).to.deep.equal(['grant refused']);
    const grant = grants.body.items[0]!;
    expect(grant.actor).to.deep.equal({ userId: delegate.id, username: 'role-delegate' });
    expect(grant.details).to.include({ missing: 'mqtt readWrite #' });

    // The user the admin created is found by either name: the caller's and the one it is about.
    const created = await audit({ user: 'role-delegate', action: 'user created' });
    expect(created.body.items).to.have.length(1);
    expect(created.body.items[0]!.actor?.username, JSON.stringify(created.body)).to.equal("admin");
    expect((await audit({ user: 'admin', action: 'user created' })).body.items.map((i) => i.user)).to.include('role-delegate');
  });

  it('records the roles and permissions a created or updated user is granted, by name', async () => {
    const role = await gw.api('POST', '/api/roles', { token: admin, body: { name: 'line-operators', isShared: true, permissions: [{ context: 'mqtt', resource: 'line/#', operation: 'read' }] } });
    expect(role.status).to.equal(201);
    const created = await gw.api('POST', '/api/users', {
      token: admin,
      body: { username: 'granted-user', password: GOOD_PASSWORD, identityProvider: 'local', roles: [role.body.id], initialPermissions: [{ context: 'mqtt', resource: 'line/valve/set', operation: 'write' }] },
    });
    expect(created.status).to.equal(201);
    const [event] = (await audit({ user: 'granted-user', action: 'user created' })).body.items;
    expect(event!.details).to.deep.include({ roles: ['line-operators'], permissions: ['write mqtt line/valve/set'] });
    expect(event!.actor?.username).to.equal('admin');
    const [roleEvent] = (await audit({ action: 'role created', category: 'accounts' })).body.items;
    expect(roleEvent!.details).to.deep.include({ roleName: 'line-operators', permissions: ['read mqtt line/#'] });

    const updated = await gw.api('PUT', `/api/users/${created.body.id}`, { token: admin, body: { roles: [], permissions: [{ context: 'http', resource: '/api/endpoints/#', operation: 'read' }] } });
    expect(updated.status).to.equal(200);
    const [change] = (await audit({ user: 'granted-user', action: 'user updated' })).body.items;
    expect(change!.details).to.deep.include({ roles: [], permissions: ['read http /api/endpoints/#'] });
    // A change that grants nothing does not claim to.
    expect((await gw.api('PUT', `/api/users/${created.body.id}`, { token: admin, body: { enforceMFAEnrollment: true } })).status).to.equal(200);
    const [plain] = (await audit({ user: 'granted-user', action: 'user updated' })).body.items;
    expect(plain!.details).not.to.have.any.keys('roles', 'permissions');
  });

  it('keeps no secret: passwords set, tokens used and failed passwords are not in the trail', async () => {
    const user = await gw.userWith([], 'secret-keeper');
    const newPassword = 'N3w-Secret-Passw0rd';
    expect((await gw.api('PUT', `/api/users/${user.id}`, { token: admin, body: { password: newPassword } })).status).to.equal(200);
    expect((await gw.api('POST', '/api/login', { body: { username: 'secret-keeper', password: 'Wr0ng-Guess-123' } })).status).to.equal(401);
    const page = await audit({ user: 'secret-keeper', limit: 500 });
    expect(page.body.items.map((i) => i.action)).to.include.members(['user created', 'user updated', 'login', 'login failed']);
    const text = JSON.stringify(page.body);
    for (const secret of [newPassword, GOOD_PASSWORD, 'Wr0ng-Guess-123', user.token, admin]) expect(text).not.to.include(secret);
  });

  it('pages newest first with a cursor: every event once, the last page without nextCursor', async () => {
    const pager = await gw.userWith([], 'pager-user');
    for (let i = 0; i < 24; i++) await gw.login('pager-user', GOOD_PASSWORD);
    const seen: AuditItem[] = [];
    let cursor: string | undefined;
    for (let pages = 0; pages < 10; pages++) {
      const res = await audit({ user: pager.username, action: 'login', limit: 10, ...(cursor ? { cursor } : {}) });
      expect(res.status).to.equal(200);
      seen.push(...res.body.items);
      cursor = res.body.nextCursor;
      if (!cursor) break;
    }
    expect(seen).to.have.length(25); // userWith's own login too
    expect(new Set(seen.map((i) => i.id)).size).to.equal(25);
    const times = seen.map((i) => Date.parse(i.time));
    expect(times).to.deep.equal([...times].sort((a, b) => b - a));

    // A time range: only what lies inside it.
    const middle = seen[12]!;
    const range = await audit({ user: pager.username, action: 'login', to: middle.time, limit: 500 });
    expect(range.body.items.every((i) => Date.parse(i.time) <= Date.parse(middle.time))).to.equal(true);
    expect(range.body.items.map((i) => i.id)).to.include(middle.id);
    const future = await audit({ from: new Date(Date.now() + 60_000).toISOString() });
    expect(future.body).to.deep.equal({ items: [] });
  });

  it('lists the actions present', async () => {
    const res = await gw.api('GET', '/api/audit/actions', { token: admin });
    expect(res.status).to.equal(200);
    expect(res.body.actions).to.include.members(['login', 'user created']);
    expect(res.body.actions).to.deep.equal([...res.body.actions].sort());
  });

  it('answers 400 to bad filters and cursors, and changes nothing', async () => {
    const before = (await audit({ limit: 500 })).body.items.length;
    for (const query of ['limit=0', 'limit=501', 'limit=ten', 'outcome=maybe', 'from=yesterday', 'to=2024-13-45T00:00:00Z', 'cursor=%2F%2F', 'cursor=bm9wZQ', 'colour=red', 'user=', 'category=writes', 'endpoint=']) {
      const res = await gw.api('GET', `/api/audit?${query}`, { token: admin });
      expect(res.status, query).to.equal(400);
      expect(res.body.message, query).to.be.a('string');
    }
    const reversed = await audit({ from: '2030-01-01T00:00:00Z', to: '2020-01-01T00:00:00Z' });
    expect(reversed.status).to.equal(400);
    expect((reversed.body as unknown as { message: string }).message).to.equal('from is after to');
    expect((await audit({ limit: 500 })).body.items.length).to.be.at.least(before);
  });

  it('needs read permission on its path: 401 without credential, 403 without it, 404 beside it', async () => {
    expect((await gw.api('GET', '/api/audit')).status).to.equal(401);
    const nobody = await gw.userWith([], 'audit-nobody');
    expect((await gw.api('GET', '/api/audit', { token: nobody.token })).status).to.equal(403);
    const writer = await gw.userWith([http('/api/audit', 'write')], 'audit-writer');
    expect((await gw.api('GET', '/api/audit', { token: writer.token })).status).to.equal(403);
    const reader = await gw.userWith([http('/api/audit')], 'audit-reader');
    expect((await gw.api('GET', '/api/audit', { token: reader.token })).status).to.equal(200);
    expect((await gw.api('GET', '/api/audit/actions', { token: reader.token })).status).to.equal(403);
    const auditor = await gw.userWith([http('/api/audit/#')], 'auditor');
    expect((await gw.api('GET', '/api/audit/actions', { token: auditor.token })).status).to.equal(200);
    expect((await gw.api('GET', '/api/audit/nothing', { token: admin })).status).to.equal(404);
    expect((await gw.api('DELETE', '/api/audit', { token: admin })).status).to.be.oneOf([404, 405]);
  });
});

describe('audit trail: bounds and cost', function () {
  this.timeout(30_000);
  let dir: string;
  let store: Store;
  beforeEach(() => {
    dir = tempDir();
    store = openStore({ dir: join(dir, 'db') });
  });
  afterEach(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const silent = createSilentLogger();

  /** A started trail of up to 10,000 records without a rate limit, and the databases it opened (to count their reads). */
  async function trailWithDatabases() {
    const dbs = new Map<string, Database>();
    const open = store.openDatabase.bind(store);
    sinon.stub(store, 'openDatabase').callsFake((name: string, options?: object) => {
      const db = open(name, options);
      dbs.set(name, db);
      return db;
    });
    const trail = createAuditTrail({ store, storage: createStoragePolicy({ store, timings: STORAGE_DEFAULTS }), log: silent, limits: { maxEntries: 10_000, maxAgeMs: 86_400_000, maxPerSecond: 1e6 } });
    await trail.part.start();
    return { trail, dbs };
  }

  it('keeps at most maxEntries records, dropping the oldest', async () => {
    const trail = createAuditTrail({ store, storage: createStoragePolicy({ store, timings: STORAGE_DEFAULTS }), log: silent, limits: { maxEntries: 100, maxAgeMs: 86_400_000, maxPerSecond: 1e6 } });
    await trail.part.start();
    const log = trail.logger(silent);
    for (let i = 0; i < 250; i++) log.audit('login', { username: `u${i}` });
    await trail.settled();
    // Pruning runs after the commits; let it finish.
    for (let i = 0; i < 100 && trail.stats().records > 100; i++) await delay(10), await trail.settled();
    expect(trail.stats().records).to.equal(100);
    const page = trail.query({ limit: 500 });
    expect(page.records.map((r) => r.user)).to.deep.equal(Array.from({ length: 100 }, (_, i) => `u${249 - i}`));
    // The index entries of the dropped records went with them.
    expect(trail.query({ user: 'u0', limit: 10 }).records).to.deep.equal([]);
    expect(trail.query({ user: 'u200', limit: 10 }).records).to.have.length(1);
    await trail.part.stop();
  });

  it('drops records older than maxAge at the next pruning', async () => {
    let now = Date.parse('2024-01-01T00:00:00Z');
    const trail = createAuditTrail({ store, storage: createStoragePolicy({ store, timings: STORAGE_DEFAULTS }), log: silent, limits: { maxEntries: 1000, maxAgeMs: 3_600_000, maxPerSecond: 1e6 }, now: () => now, pruneIntervalMs: 20 });
    await trail.part.start();
    for (let i = 0; i < 5; i++) trail.record('login', { username: 'old' });
    now += 2 * 3_600_000;
    trail.record('login', { username: 'new' });
    await trail.settled();
    for (let i = 0; i < 200 && trail.stats().records > 1; i++) await delay(10);
    expect(trail.query({ limit: 10 }).records.map((r) => r.user)).to.deep.equal(['new']);
    await trail.part.stop();
  });

  it('stores at most maxPerSecond events a second, then one record of how many it left out', async () => {
    let now = Date.now();
    const trail = createAuditTrail({ store, storage: createStoragePolicy({ store, timings: STORAGE_DEFAULTS }), log: silent, limits: { maxEntries: 1000, maxAgeMs: 86_400_000, maxPerSecond: 10 }, now: () => now });
    await trail.part.start();
    for (let i = 0; i < 25; i++) trail.record('mqtt.connect.refused', { clientId: `flood-${i}`, remote: '192.0.2.7' });
    expect(trail.stats().dropped).to.equal(15);
    now += 2000;
    trail.record('login', { username: 'after-the-flood' });
    await trail.settled();
    const page = trail.query({ limit: 50 });
    expect(page.records.map((r) => r.action)).to.deep.equal(['login', 'audit events not stored', ...Array(10).fill('mqtt.connect.refused')]);
    expect(page.records[1]!.details).to.include({ count: 15 });
    await trail.part.stop();
  });

  it('reads only the page: a filter on a few of 3,000 records reads a handful of keys and records', async () => {
    const { trail, dbs } = await trailWithDatabases();
    for (let i = 0; i < 3000; i++) trail.record(i % 300 === 0 ? 'grant refused' : 'login', { username: i % 300 === 0 ? 'mallory' : `device-${i}` });
    await trail.settled();
    const records = dbs.get('audit')!;
    const index = dbs.get('audit-index')!;
    const gets = sinon.spy(records, 'get');
    const keys = sinon.spy(index, 'getRange');
    const page = trail.query({ user: 'mallory', outcome: 'failure', limit: 5 });
    expect(page.records).to.have.length(5);
    expect(page.next).to.be.an('array');
    expect(gets.callCount).to.equal(5);
    expect(keys.callCount).to.equal(1);
    const read = [...(keys.firstCall.returnValue as Iterable<unknown>)].length;
    expect(read).to.be.at.most(7);
    // Index entries per record: action, outcome, category, and three per name (here one name).
    expect((index.getStats() as { entryCount: number }).entryCount).to.equal(3000 * 6);
    const rest = trail.query({ user: 'mallory', outcome: 'failure', limit: 5, after: page.next! });
    expect(rest.records).to.have.length(5);
    expect(rest.next).to.equal(undefined);
    await trail.part.stop();
  });

  it('checks a filter no index answers on at most MAX_SCAN entries per page, and goes on from there', async () => {
    const { trail, dbs } = await trailWithDatabases();
    trail.record('endpoint write failed', { endpoint: 'line.valve', value: 1, error: 'Modbus exception 2' });
    for (let i = 0; i < MAX_SCAN + 1000; i++) trail.record('login', { username: `device-${i}` });
    await trail.settled();
    // Sign-ins that failed: the category's index, the outcome checked on each record. None failed.
    const gets = sinon.spy(dbs.get('audit')!, 'get');
    const first = trail.query({ category: 'sign-in', outcome: 'failure', limit: 50 });
    expect(first.records).to.deep.equal([]);
    expect(first.next, 'a cursor: the page stopped reading').to.be.an('array');
    expect(gets.callCount).to.equal(MAX_SCAN);
    const second = trail.query({ category: 'sign-in', outcome: 'failure', limit: 50, after: first.next! });
    expect(second).to.deep.equal({ records: [] });
    // An endpoint and an outcome: the endpoint's index, the outcome checked.
    expect(trail.query({ endpoint: 'line.valve', outcome: 'failure', limit: 5 }).records.map((r) => r.details.error)).to.deep.equal(['Modbus exception 2']);
    expect(trail.query({ endpoint: 'line.valve', outcome: 'success', limit: 5 }).records).to.deep.equal([]);
    expect(trail.query({ category: 'control', limit: 5 }).records).to.have.length(1);
    await trail.part.stop();
  });
});

describe('audit trail: backup and restore', function () {
  this.timeout(60_000);
  it('a restore brings the archive\'s trail and keeps the events since the backup', async () => {
    const gw = await startGateway();
    try {
      let admin = await gw.login();
      const { archive } = await backupAndDownload(gw, admin);
      // After the backup: an event the archive does not hold.
      await gw.userWith([], 'after-the-backup');
      expect((await upload(gw, admin, archive)).status).to.equal(202);
      const status = await waitIdle(gw);
      expect(status.restore?.succeeded, status.restore?.statusMessage).to.equal(true);
      admin = await gw.login('admin', ADMIN_PASSWORD);
      let found: AuditPageBody | undefined;
      for (let i = 0; i < 200; i++) {
        await gw.services.audit.settled();
        found = (await gw.api<AuditPageBody>('GET', '/api/audit?user=after-the-backup&action=user%20created', { token: admin })).body;
        if (found.items.length) break;
        await delay(25);
      }
      expect(found!.items).to.have.length(1);
      // The user itself is gone with the restore; its history is not.
      expect((await gw.api('GET', '/api/listUsers?username%5Beq%5D=after-the-backup', { token: admin })).body.users).to.deep.equal([]);
      const restore = await gw.api<AuditPageBody>('GET', '/api/audit?action=database%20restore%20completed', { token: admin });
      expect(restore.body.items).to.have.length(1);
      // Taken over once: no duplicates of events both stores held.
      const logins = await gw.api<AuditPageBody>('GET', '/api/audit?user=admin&action=login&limit=500', { token: admin });
      expect(new Set(logins.body.items.map((i) => i.id)).size).to.equal(logins.body.items.length);
    } finally {
      await gw.stop();
    }
  });
});
