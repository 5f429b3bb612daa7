// Permission listings (contract "Area A: roles and permissions"): the caller's effective
// permissions, the usage aggregation page and the id aggregation.
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';

import { GOOD_PASSWORD, startGateway, type TestGateway } from './support/harness.js';

type Perm = { resource: string; operation: 'read' | 'write' | 'readWrite'; context: 'mqtt' | 'http' };
type StoredPerm = Perm & { id: string };
type RoleView = { id: string; name: string; isShared: boolean; permissions: StoredPerm[] };
type Usage = { roleName: string; roleId: string; isRoleShared: boolean; username: string | null; userId: string | null; operation: string };

const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
const byId = (a: { id: string }, b: { id: string }) => cmp(a.id, b.id);
const usageKey = (u: Usage) => `${u.roleId}\0${u.operation}`;

describe('permissions API', function () {
  let gw: TestGateway;
  let admin: string;
  let ops: RoleView;
  let writers: RoleView;
  let user: { id: string; username: string; token: string };
  let userPrivate: RoleView;

  const direct: Perm[] = [
    { resource: 'plant/a', operation: 'readWrite', context: 'mqtt' },
    { resource: '/api/permissions/#', operation: 'read', context: 'http' },
  ];

  before(async () => {
    gw = await startGateway();
    admin = await gw.login();
    const mk = async (name: string, permissions: Perm[]) => {
      const res = await gw.api('POST', '/api/roles', { token: admin, body: { name, isShared: true, permissions } });
      expect(res.status, JSON.stringify(res.body)).to.equal(201);
      return res.body as RoleView;
    };
    ops = await mk('ops', [
      { resource: 'plant/a', operation: 'read', context: 'mqtt' },
      { resource: 'plant/a', operation: 'read', context: 'http' },
      { resource: '/api/roles/names', operation: 'read', context: 'http' },
    ]);
    writers = await mk('writers', [
      { resource: 'plant/a', operation: 'write', context: 'mqtt' },
      { resource: 'plant/b/#', operation: 'write', context: 'mqtt' },
    ]);
    user = await gw.userWith(direct, 'perm-user');
    expect((await gw.api('POST', `/api/users/${user.id}/roles`, { token: admin, body: { roleId: ops.id } })).status).to.equal(201);
    const view = await gw.api('GET', `/api/users/${user.id}`, { token: admin });
    userPrivate = (view.body.roles as RoleView[]).find((r) => !r.isShared)!;
  });
  after(async () => {
    await gw?.stop();
  });

  const allRoles = async () => (await gw.api('GET', '/api/roles', { token: admin })).body as RoleView[];

  describe('GET /api/permissions', () => {
    it('answers the caller\'s effective permissions: its roles plus its direct permissions, with ids', async () => {
      const res = await gw.api('GET', '/api/permissions', { token: user.token });
      expect(res.status).to.equal(200);
      expect([...res.body].sort(byId)).to.deep.equal([...ops.permissions, ...userPrivate.permissions].sort(byId));
      expect(userPrivate.permissions.map(({ resource, operation, context }) => ({ resource, operation, context }))).to.deep.equal(direct);
    });

    it('follows role changes at once and needs no permission', async () => {
      expect((await gw.api('POST', `/api/users/${user.id}/roles`, { token: admin, body: { roleId: writers.id } })).status).to.equal(201);
      const more = await gw.api('GET', '/api/permissions', { token: user.token });
      expect([...more.body].sort(byId)).to.deep.equal([...ops.permissions, ...writers.permissions, ...userPrivate.permissions].sort(byId));
      expect((await gw.api('DELETE', `/api/users/${user.id}/roles`, { token: admin, body: { roleId: writers.id } })).status).to.equal(200);
      const back = await gw.api('GET', '/api/permissions', { token: user.token });
      expect(back.body).to.have.length(ops.permissions.length + userPrivate.permissions.length);

      const nobody = await gw.userWith([]);
      const none = await gw.api('GET', '/api/permissions', { token: nobody.token });
      expect(none.status).to.equal(200);
      expect(none.body).to.deep.equal([]);
      expect((await gw.api('GET', '/api/permissions')).status).to.equal(401);

      const adminRole = (await allRoles()).find((r) => r.name === 'admin')!;
      const mine = await gw.api('GET', '/api/permissions', { token: admin });
      expect([...mine.body].sort(byId)).to.deep.equal([...adminRole.permissions].sort(byId));
      // Basic credentials see the same.
      const basic = Buffer.from(`${user.username}:${GOOD_PASSWORD}`).toString('base64');
      const viaBasic = await gw.api('GET', '/api/permissions', { headers: { authorization: `Basic ${basic}` } });
      expect([...viaBasic.body].sort(byId)).to.deep.equal([...back.body].sort(byId));
    });
  });

  describe('a user holding 150,000 permissions', () => {
    it('is decided on (REST and the engine) without failing', async function () {
      this.timeout(60_000);
      // More than a request body may carry (maxItems 1000): inserted through the service.
      const many: Perm[] = Array.from({ length: 150_000 }, (_, k) => ({ resource: `plant/line${k >> 7}/machine${k & 127}/#`, operation: 'read', context: 'mqtt' }));
      many.push({ resource: '/api/roles/names', operation: 'read', context: 'http' });
      const big = await gw.services.users.create({ username: 'big-holder', password: GOOD_PASSWORD, identityProvider: 'local', initialPermissions: many });
      const token = await gw.login('big-holder', GOOD_PASSWORD);
      expect((await gw.api('GET', '/api/roles/names', { token })).status).to.equal(200);
      expect((await gw.api('GET', '/api/roles', { token })).status).to.equal(403);
      expect(gw.services.engine.allows(big.id, 'mqtt', 'read', 'plant/line1000/machine5/temp')).to.equal(true);
      expect(gw.services.engine.allows(big.id, 'mqtt', 'read', 'plant/line2000/machine5/temp')).to.equal(false);
      expect(gw.services.engine.grantsOf(big.id)).to.have.length(150_001);
      expect((await gw.api('DELETE', `/api/users/${big.id}`, { token: admin })).status).to.equal(200);
    });
  });

  describe('GET /api/permissions/page', () => {
    it('aggregates the usage of a resource (roleName, roleId, isRoleShared, username/userId of private roles)', async () => {
      const id = ops.permissions.find((p) => p.resource === 'plant/a' && p.context === 'mqtt')!.id;
      const res = await gw.api('GET', `/api/permissions/page?ids=${id}&rowsPerPage=10&pageNumber=1`, { token: admin });
      expect(res.status).to.equal(200);
      expect(res.body.pagination).to.deep.equal({ totalPages: 1, totalRows: 1, totalRowsInPage: 1, currentPage: 1, nextPage: 0, rowsPerPage: 10 });
      expect(res.body.permissions).to.have.length(1);
      const group = res.body.permissions[0];
      expect(group.resource).to.equal('plant/a');
      expect(group.context).to.equal('mqtt');
      const expected: Usage[] = [
        { roleName: 'ops', roleId: ops.id, isRoleShared: true, username: null, userId: null, operation: 'read' },
        { roleName: 'writers', roleId: writers.id, isRoleShared: true, username: null, userId: null, operation: 'write' },
        { roleName: userPrivate.name, roleId: userPrivate.id, isRoleShared: false, username: 'perm-user', userId: user.id, operation: 'readWrite' },
      ];
      const admins = (await allRoles()).find((r) => r.name === 'admin')!;
      expect(admins.permissions.some((p) => p.resource === 'plant/a')).to.equal(false);
      expect([...group.usage].sort((a: Usage, b: Usage) => cmp(usageKey(a), usageKey(b)))).to.deep.equal(expected.sort((a, b) => cmp(usageKey(a), usageKey(b))));
      // The same resource in the other context is its own group.
      const httpId = ops.permissions.find((p) => p.resource === 'plant/a' && p.context === 'http')!.id;
      const http = await gw.api('GET', `/api/permissions/page?ids=${httpId}&rowsPerPage=10&pageNumber=1`, { token: admin });
      expect(http.body.permissions).to.deep.equal([
        { resource: 'plant/a', context: 'http', usage: [{ roleName: 'ops', roleId: ops.id, isRoleShared: true, username: null, userId: null, operation: 'read' }] },
      ]);
    });

    it('filters by several ids (unknown ones ignored, one group per resource and context) and paginates them', async () => {
      const ids = [
        ...writers.permissions.map((p) => p.id), // plant/a mqtt, plant/b/# mqtt
        ops.permissions.find((p) => p.resource === '/api/roles/names')!.id,
        ops.permissions.find((p) => p.resource === 'plant/a' && p.context === 'mqtt')!.id, // same group as writers' plant/a
        randomUUID(),
      ];
      const q = ids.map((i) => `ids=${i}`).join('&');
      const groups: { resource: string; context: string }[] = [];
      const p1 = await gw.api('GET', `/api/permissions/page?${q}&rowsPerPage=2&pageNumber=1`, { token: admin });
      expect(p1.status).to.equal(200);
      expect(p1.body.pagination).to.deep.equal({ totalPages: 2, totalRows: 3, totalRowsInPage: 2, currentPage: 1, nextPage: 2, rowsPerPage: 2 });
      const p2 = await gw.api('GET', `/api/permissions/page?${q}&rowsPerPage=2&pageNumber=2`, { token: admin });
      expect(p2.body.pagination).to.deep.equal({ totalPages: 2, totalRows: 3, totalRowsInPage: 1, currentPage: 2, nextPage: 0, rowsPerPage: 2 });
      groups.push(...p1.body.permissions, ...p2.body.permissions);
      expect(groups.map((g) => `${g.resource} ${g.context}`)).to.deep.equal(['/api/roles/names http', 'plant/a mqtt', 'plant/b/# mqtt']);
      const none = await gw.api('GET', `/api/permissions/page?ids=${randomUUID()}&rowsPerPage=2&pageNumber=1`, { token: admin });
      expect(none.body).to.deep.equal({ permissions: [], pagination: { totalPages: 0, totalRows: 0, totalRowsInPage: 0, currentPage: 1, nextPage: 0, rowsPerPage: 2 } });
    });

    it('pages through every resource and context in order, each usage matching the roles', async () => {
      const roles = await allRoles();
      // Owner of every private role, from the users' own views.
      const owners = new Map<string, { username: string; id: string }>();
      const users = await gw.api('GET', '/api/listUsers?rowsPerPage=100', { token: admin });
      expect(users.body.pagination.totalPages).to.equal(1);
      for (const u of users.body.users as { id: string; username: string; roles: RoleView[] }[]) {
        for (const r of u.roles) if (!r.isShared) owners.set(r.id, { username: u.username, id: u.id });
      }
      const expected = new Map<string, Usage[]>();
      for (const r of roles) {
        for (const p of r.permissions) {
          const key = `${p.resource}\0${p.context}`;
          const owner = owners.get(r.id);
          expect(!!owner, `owner of ${r.name}`).to.equal(!r.isShared);
          expected.set(key, [
            ...(expected.get(key) ?? []),
            { roleName: r.name, roleId: r.id, isRoleShared: r.isShared, username: owner?.username ?? null, userId: owner?.id ?? null, operation: p.operation },
          ]);
        }
      }
      const keys = [...expected.keys()].sort(cmp);
      const rows = 2;
      const pages = Math.ceil(keys.length / rows);
      const seen: string[] = [];
      for (let page = 1; page <= pages; page++) {
        const res = await gw.api('GET', `/api/permissions/page?rowsPerPage=${rows}&pageNumber=${page}`, { token: admin });
        expect(res.status).to.equal(200);
        expect(res.body.pagination).to.deep.equal({
          totalPages: pages,
          totalRows: keys.length,
          totalRowsInPage: page < pages ? rows : keys.length - rows * (pages - 1),
          currentPage: page,
          nextPage: page < pages ? page + 1 : 0,
          rowsPerPage: rows,
        });
        for (const g of res.body.permissions as { resource: string; context: string; usage: Usage[] }[]) {
          const key = `${g.resource}\0${g.context}`;
          seen.push(key);
          const want = expected.get(key)!;
          expect([...g.usage].sort((a, b) => cmp(usageKey(a), usageKey(b))), key).to.deep.equal(want.sort((a, b) => cmp(usageKey(a), usageKey(b))));
        }
      }
      expect(seen).to.deep.equal(keys);
    });

    it('answers 400 for rowsPerPage 0 or 51 and for a missing rowsPerPage or pageNumber', async () => {
      for (const q of ['rowsPerPage=0&pageNumber=1', 'rowsPerPage=51&pageNumber=1', 'pageNumber=1', 'rowsPerPage=5', 'rowsPerPage=5&pageNumber=0']) {
        const res = await gw.api('GET', `/api/permissions/page?${q}`, { token: admin });
        expect(res.status, q).to.equal(400);
      }
    });
  });

  describe('GET /api/permissions/ids', () => {
    it('aggregates every permission id by resource, operation and context', async () => {
      const res = await gw.api('GET', '/api/permissions/ids', { token: admin });
      expect(res.status).to.equal(200);
      const got = new Map<string, string[]>();
      for (const g of res.body as (Perm & { ids: string[] })[]) {
        const key = `${g.resource}\0${g.operation}\0${g.context}`;
        expect(got.has(key), `group ${key} appears once`).to.equal(false);
        got.set(key, [...g.ids].sort(cmp));
      }
      const want = new Map<string, string[]>();
      for (const r of await allRoles()) {
        for (const p of r.permissions) {
          const key = `${p.resource}\0${p.operation}\0${p.context}`;
          want.set(key, [...(want.get(key) ?? []), p.id].sort(cmp));
        }
      }
      expect(Object.fromEntries(got)).to.deep.equal(Object.fromEntries(want));
      const plantRead = (res.body as (Perm & { ids: string[] })[]).find((g) => g.resource === 'plant/a' && g.operation === 'read' && g.context === 'mqtt')!;
      expect(plantRead.ids).to.deep.equal([ops.permissions.find((p) => p.resource === 'plant/a' && p.context === 'mqtt')!.id]);
    });

    it('drops the ids of a deleted role and of a deleted user', async () => {
      const temp = await gw.api('POST', '/api/roles', { token: admin, body: { name: 'temp', isShared: true, permissions: [{ resource: 'tmp/#', operation: 'read', context: 'mqtt' }] } });
      const u = await gw.userWith([{ resource: 'tmp/#', operation: 'read', context: 'mqtt' }]);
      const group = async () =>
        ((await gw.api('GET', '/api/permissions/ids', { token: admin })).body as (Perm & { ids: string[] })[]).find((g) => g.resource === 'tmp/#');
      expect((await group())!.ids).to.have.length(2);
      expect((await gw.api('DELETE', `/api/roles/${temp.body.id}`, { token: admin })).status).to.equal(200);
      expect((await group())!.ids).to.have.length(1);
      expect((await gw.api('DELETE', `/api/users/${u.id}`, { token: admin })).status).to.equal(200);
      expect(await group()).to.equal(undefined);
      const page = await gw.api('GET', `/api/permissions/page?ids=${temp.body.permissions[0].id}&rowsPerPage=5&pageNumber=1`, { token: admin });
      expect(page.body.permissions).to.deep.equal([]);
    });
  });
});
