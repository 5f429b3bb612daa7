// No one grants more than they hold (issue 11 point 1) and no one takes over a stronger account
// (point 2), against the real gateway: each escalation path as a user holding only the delegated
// right (refused, 403 naming the permission, audited, nothing changed) and as one that also
// holds what is granted (allowed).
import { expect } from 'chai';
import { GOOD_PASSWORD, startGateway, type TestGateway } from './support/harness.js';

type Grant = { resource: string; operation: 'read' | 'write' | 'readWrite'; context: 'mqtt' | 'http' };
const http = (resource: string, operation: Grant['operation'] = 'readWrite'): Grant => ({ resource, operation, context: 'http' });
const mqtt = (resource: string, operation: Grant['operation'] = 'readWrite'): Grant => ({ resource, operation, context: 'mqtt' });
const API_ALL = http('/api/#');

describe('grants never exceed the grantor', function () {
  let gw: TestGateway;
  let admin: string;
  let adminRoleId: string;
  let adminUserId: string;

  before(async () => {
    gw = await startGateway();
    admin = await gw.login();
    const roles = await gw.api('GET', '/api/roles?name%5Beq%5D=admin', { token: admin });
    adminRoleId = roles.body[0].id;
    const users = await gw.api('GET', '/api/users/usernames', { token: admin });
    adminUserId = users.body.find((u: { username: string }) => u.username === 'admin').id;
  });
  after(() => gw.stop());

  const refusals = () => gw.logs().filter((l) => l.message === 'grant refused');
  const userOf = async (id: string) => (await gw.api('GET', `/api/users/${id}`, { token: admin })).body;
  const privatePermissions = async (id: string) => (await userOf(id)).roles.find((r: { isShared: boolean }) => !r.isShared).permissions.map((p: Grant) => `${p.context} ${p.operation} ${p.resource}`);
  const sharedRoleIds = async (id: string) => (await userOf(id)).roles.filter((r: { isShared: boolean }) => r.isShared).map((r: { id: string }) => r.id);

  // Every refusal is audited once, with the permission that was missing.
  let audited = 0;
  beforeEach(() => {
    audited = refusals().length;
  });
  function expectRefused(res: { status: number; body: { message?: string } }, missing: string): void {
    expect(res.status, JSON.stringify(res.body)).to.equal(403);
    expect(res.body.message).to.include(missing);
    expect(refusals().length, 'one grant refused audit line').to.equal(++audited);
    expect(refusals().at(-1)!.missing).to.equal(missing);
  }

  describe('write on its own user record', () => {
    it('cannot give itself the admin role or /api/# (403, audited, unchanged)', async () => {
      const self = await gw.userWith([http('/api/users/+', 'readWrite')]);
      await gw.api('PUT', `/api/users/${self.id}`, { token: self.token, body: { username: self.username } }).then((r) => expect(r.status).to.equal(200));
      const before = refusals().length;
      expectRefused(await gw.api('PUT', `/api/users/${self.id}`, { token: self.token, body: { roles: [adminRoleId] } }), 'http readWrite /api/#');
      expectRefused(await gw.api('PUT', `/api/users/${self.id}`, { token: self.token, body: { permissions: [API_ALL] } }), 'http readWrite /api/#');
      expect(await sharedRoleIds(self.id)).to.deep.equal([]);
      expect(await privatePermissions(self.id)).to.deep.equal(['http readWrite /api/users/+']);
      expect(refusals().length - before).to.equal(2);
      expect(refusals().at(-1)).to.include({ userId: self.id, missing: 'http readWrite /api/#' });
    });

    it('may grant what it holds, keep what it has, and drop rights', async () => {
      const self = await gw.userWith([http('/api/users/+', 'readWrite'), mqtt('plant/#', 'read')]);
      const res = await gw.api('PUT', `/api/users/${self.id}`, {
        token: self.token,
        body: { permissions: [http('/api/users/+', 'readWrite'), mqtt('plant/+/temperature', 'read')] },
      });
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      expect(await privatePermissions(self.id)).to.have.members(['http readWrite /api/users/+', 'mqtt read plant/+/temperature']);
    });
  });

  describe('write on role assignments', () => {
    it('cannot assign the admin role, may assign a role it holds', async () => {
      const assigner = await gw.userWith([http('/api/users/+/roles', 'write'), mqtt('line-1/#', 'readWrite')]);
      expectRefused(await gw.api('POST', `/api/users/${assigner.id}/roles`, { token: assigner.token, body: { roleId: adminRoleId } }), 'http readWrite /api/#');
      expect(await sharedRoleIds(assigner.id)).to.deep.equal([]);
      const line = await gw.api('POST', '/api/roles', { token: admin, body: { name: `line-1-${Date.now()}`, isShared: true, permissions: [mqtt('line-1/+/state', 'read')] } });
      const ok = await gw.api('POST', `/api/users/${assigner.id}/roles`, { token: assigner.token, body: { roleId: line.body.id } });
      expect(ok.status, JSON.stringify(ok.body)).to.equal(201);
      expect(await sharedRoleIds(assigner.id)).to.deep.equal([line.body.id]);
    });
  });

  describe('write on /api/users alone', () => {
    it('cannot create a user with # or the admin role; a batch with one such user creates none', async () => {
      const creator = await gw.userWith([http('/api/users', 'write'), http('/api/users/batch', 'write'), mqtt('sensors/#', 'write')]);
      const name = `made-${Date.now()}`;
      expectRefused(await gw.api('POST', '/api/users', { token: creator.token, body: { username: name, identityProvider: 'local', initialPermissions: [http('#')] } }), 'http readWrite #');
      expectRefused(await gw.api('POST', '/api/users', { token: creator.token, body: { username: name, identityProvider: 'local', roles: [adminRoleId] } }), 'http readWrite /api/#');
      const batch = await gw.api('POST', '/api/users/batch', {
        token: creator.token,
        body: [
          { username: `${name}-a`, identityProvider: 'local', initialPermissions: [mqtt('sensors/a/#', 'write')] },
          { username: `${name}-b`, identityProvider: 'local', initialPermissions: [mqtt('actuators/#', 'write')] },
        ],
      });
      expectRefused(batch, 'mqtt write actuators/#');
      const names = (await gw.api('GET', '/api/users/usernames', { token: admin })).body.map((u: { username: string }) => u.username);
      expect(names).to.not.include.members([name, `${name}-a`, `${name}-b`]);
      const ok = await gw.api('POST', '/api/users', { token: creator.token, body: { username: name, identityProvider: 'local', initialPermissions: [mqtt('sensors/+/value', 'write')] } });
      expect(ok.status, JSON.stringify(ok.body)).to.equal(201);
    });
  });

  describe('write on /api/roles', () => {
    it('cannot create a shared role with /api/# nor add /api/# to its own private role', async () => {
      const roleAdmin = await gw.userWith([http('/api/roles', 'write'), http('/api/roles/+/permissions', 'write'), mqtt('a/#', 'read')]);
      expectRefused(await gw.api('POST', '/api/roles', { token: roleAdmin.token, body: { name: `wide-${Date.now()}`, isShared: true, permissions: [API_ALL] } }), 'http readWrite /api/#');
      const privateRoleId = (await userOf(roleAdmin.id)).roles.find((r: { isShared: boolean }) => !r.isShared).id;
      expectRefused(await gw.api('POST', `/api/roles/${privateRoleId}/permissions`, { token: roleAdmin.token, body: API_ALL }), 'http readWrite /api/#');
      expect(await privatePermissions(roleAdmin.id)).to.have.length(3);
      // Subsumption: a/# covers a/+/b; +/x does not cover #.
      const ok = await gw.api('POST', '/api/roles', { token: roleAdmin.token, body: { name: `narrow-${Date.now()}`, isShared: true, permissions: [mqtt('a/+/b', 'read')] } });
      expect(ok.status, JSON.stringify(ok.body)).to.equal(201);
      expectRefused(await gw.api('POST', '/api/roles', { token: roleAdmin.token, body: { name: `wider-${Date.now()}`, isShared: true, permissions: [mqtt('a/+/b', 'write')] } }), 'mqtt write a/+/b');
    });

    it('subsumption follows MQTT wildcards: +/x does not cover #, a/# covers a and a/+/b/#', async () => {
      const holder = await gw.userWith([http('/api/roles', 'write'), mqtt('+/x', 'read'), mqtt('a/#', 'write')]);
      const create = (permissions: Grant[]) => gw.api('POST', '/api/roles', { token: holder.token, body: { name: `r-${Date.now()}-${Math.random()}`, isShared: true, permissions } });
      expect((await create([mqtt('#', 'read')])).status).to.equal(403);
      expect((await create([mqtt('+/+', 'read')])).status).to.equal(403);
      expect((await create([mqtt('y/x', 'read')])).status).to.equal(201);
      expect((await create([mqtt('a', 'write')])).status).to.equal(201);
      expect((await create([mqtt('a/+/b/#', 'write')])).status).to.equal(201);
      expect((await create([mqtt('a/#', 'readWrite')])).status, 'write held, read not').to.equal(403);
    });
  });

  describe('role update and role permissions (shared and private roles)', () => {
    const roleOf = async (id: string) => (await gw.api('GET', `/api/roles/${id}`, { token: admin })).body;
    /** A refusal that names the permission, is audited once and leaves the role as it was. */
    async function refusedUnchanged(roleId: string, call: () => Promise<{ status: number; body: { message?: string } }>, missing: string): Promise<void> {
      const before = await roleOf(roleId);
      const audits = refusals().length;
      expectRefused(await call(), missing);
      expect(refusals().length - audits, 'audited').to.equal(1);
      expect(refusals().at(-1)!.missing).to.equal(missing);
      expect(await roleOf(roleId)).to.deep.equal(before);
    }

    it('cannot rename the admin role or bind it to an LDAP or IdP group (who gets a role at login)', async () => {
      const writer = await gw.userWith([http('/api/roles/+', 'readWrite'), mqtt('a/#', 'read')]);
      for (const body of [{ name: 'admin', ldapGroupDn: 'cn=writers,dc=example,dc=org' }, { name: 'admin', idpGroupIds: 'writers' }, { name: 'ops' }]) {
        await refusedUnchanged(adminRoleId, () => gw.api('PUT', `/api/roles/${adminRoleId}`, { token: writer.token, body }), 'http readWrite /api/#');
      }
      // A role whose permissions it holds: renamed and bound.
      const own = await gw.api('POST', '/api/roles', { token: admin, body: { name: `readers-${Date.now()}`, isShared: true, permissions: [mqtt('a/+/x', 'read')] } });
      const ok = await gw.api('PUT', `/api/roles/${own.body.id}`, { token: writer.token, body: { name: `${own.body.name}-2`, ldapGroupDn: 'cn=readers,dc=example,dc=org' } });
      expect(ok.status, JSON.stringify(ok.body)).to.equal(200);
      expect((await roleOf(own.body.id)).ldapGroupDn).to.equal('cn=readers,dc=example,dc=org');
    });

    it('a member of a shared role cannot widen it, by PUT of the role or of one of its permissions', async () => {
      const team = await gw.api('POST', '/api/roles', { token: admin, body: { name: `team-${Date.now()}`, isShared: true, permissions: [http('/api/roles/#'), mqtt('t/#')] } });
      const member = await gw.userWith([mqtt('m/#', 'read')]);
      expect((await gw.api('POST', `/api/users/${member.id}/roles`, { token: admin, body: { roleId: team.body.id } })).status).to.equal(201);
      const [first, second] = (await roleOf(team.body.id)).permissions;
      await refusedUnchanged(team.body.id, () => gw.api('PUT', `/api/roles/${team.body.id}`, { token: member.token, body: { name: team.body.name, permissions: [http('/api/roles/#'), mqtt('t/#'), API_ALL] } }), 'http readWrite /api/#');
      await refusedUnchanged(team.body.id, () => gw.api('PUT', `/api/roles/${team.body.id}/permissions/${second.id}`, { token: member.token, body: { resource: '#', operation: 'readWrite' } }), 'mqtt readWrite #');
      await refusedUnchanged(team.body.id, () => gw.api('PUT', `/api/roles/${team.body.id}/permissions/${first.id}`, { token: member.token, body: { resource: '/api/#', operation: 'readWrite' } }), 'http readWrite /api/#');
      await refusedUnchanged(team.body.id, () => gw.api('POST', `/api/roles/${team.body.id}/permissions`, { token: member.token, body: mqtt('other/#', 'write') }), 'mqtt write other/#');
      // What it holds (through the role itself or directly): allowed.
      expect((await gw.api('PUT', `/api/roles/${team.body.id}/permissions/${second.id}`, { token: member.token, body: { resource: 't/+/state', operation: 'read' } })).status).to.equal(200);
      expect((await gw.api('POST', `/api/roles/${team.body.id}/permissions`, { token: member.token, body: mqtt('m/x', 'read') })).status).to.equal(201);
      const res = await gw.api('PUT', `/api/roles/${team.body.id}`, { token: member.token, body: { name: team.body.name, permissions: [http('/api/roles/#'), mqtt('m/#', 'read')] } });
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      expect((await roleOf(team.body.id)).permissions.map((p: Grant) => `${p.context} ${p.operation} ${p.resource}`)).to.have.members(['http readWrite /api/roles/#', 'mqtt read m/#']);
    });

    it('adds to a private role only what the caller holds', async () => {
      const writer = await gw.userWith([http('/api/roles/+/permissions', 'write'), mqtt('plant/#', 'write')]);
      const target = await gw.userWith([]);
      const privateRoleId = (await userOf(target.id)).roles.find((r: { isShared: boolean }) => !r.isShared).id;
      await refusedUnchanged(privateRoleId, () => gw.api('POST', `/api/roles/${privateRoleId}/permissions`, { token: writer.token, body: mqtt('#', 'write') }), 'mqtt write #');
      expect((await gw.api('POST', `/api/roles/${privateRoleId}/permissions`, { token: writer.token, body: mqtt('plant/line-2/#', 'write') })).status).to.equal(201);
      expect(await privatePermissions(target.id)).to.deep.equal(['mqtt write plant/line-2/#']);
    });
  });

  describe('the administrator role', () => {
    it('is given and changed only by an administrator, even by one who holds all of its permissions', async () => {
      const adminRole = (await gw.api('GET', `/api/roles/${adminRoleId}`, { token: admin })).body;
      const strong = await gw.userWith(adminRole.permissions.map((p: Grant) => ({ resource: p.resource, operation: p.operation, context: p.context })));
      const before = refusals().length;
      const attempts: [string, string, unknown][] = [
        ['POST', `/api/users/${strong.id}/roles`, { roleId: adminRoleId }],
        ['PUT', `/api/users/${strong.id}`, { roles: [adminRoleId] }],
        ['POST', '/api/users', { username: `second-admin-${Date.now()}`, identityProvider: 'local', roles: [adminRoleId] }],
        ['PUT', `/api/roles/${adminRoleId}`, { name: 'admin', ldapGroupDn: 'cn=strong,dc=example,dc=org' }],
        ['DELETE', `/api/roles/${adminRoleId}/permissions/${adminRole.permissions[0].id}`, undefined],
        ['PUT', `/api/roles/${adminRoleId}/permissions/${adminRole.permissions[0].id}`, { resource: '/api/session', operation: 'read' }],
        ['DELETE', `/api/roles/${adminRoleId}`, undefined],
      ];
      for (const [method, path, body] of attempts) {
        const res = await gw.api(method, path, { token: strong.token, ...(body !== undefined ? { body } : {}) });
        expect(res.status, `${method} ${path}: ${JSON.stringify(res.body)}`).to.equal(403);
        expect(res.body.message).to.include('administrator');
      }
      expect(refusals().length - before).to.equal(attempts.length);
      expect(refusals().at(-1)).to.include({ userId: strong.id, missing: 'administrator' });
      expect((await gw.api('GET', `/api/roles/${adminRoleId}`, { token: admin })).body).to.deep.equal(adminRole);
      expect(await sharedRoleIds(strong.id)).to.deep.equal([]);
      // Other roles it holds: it may change them; the administrator may give the role.
      const other = await gw.api('POST', '/api/roles', { token: strong.token, body: { name: `ops-${Date.now()}`, isShared: true, permissions: [mqtt('ops/#')] } });
      expect(other.status).to.equal(201);
      expect((await gw.api('DELETE', `/api/roles/${other.body.id}`, { token: strong.token })).status).to.equal(200);
      expect((await gw.api('POST', `/api/users/${strong.id}/roles`, { token: admin, body: { roleId: adminRoleId } })).status).to.equal(201);
      expect(await sharedRoleIds(strong.id)).to.deep.equal([adminRoleId]);
    });
  });

  describe('grants of held roles and batches', () => {
    it('creates users (single and batch) with a role and permissions it holds', async () => {
      const line = await gw.api('POST', '/api/roles', { token: admin, body: { name: `line-2-${Date.now()}`, isShared: true, permissions: [mqtt('line-2/#', 'read')] } });
      const creator = await gw.userWith([http('/api/users', 'write'), http('/api/users/batch', 'write'), mqtt('line-2/#', 'readWrite')]);
      const name = `held-${Date.now()}`;
      const one = await gw.api('POST', '/api/users', { token: creator.token, body: { username: name, identityProvider: 'local', roles: [line.body.id] } });
      expect(one.status, JSON.stringify(one.body)).to.equal(201);
      const batch = await gw.api('POST', '/api/users/batch', {
        token: creator.token,
        body: [
          { username: `${name}-a`, identityProvider: 'local', roles: [line.body.id] },
          { username: `${name}-b`, identityProvider: 'local', initialPermissions: [mqtt('line-2/b/#', 'write')] },
        ],
      });
      expect(batch.status, JSON.stringify(batch.body)).to.equal(201);
      expect(batch.body).to.have.length(2);
      expect(await sharedRoleIds(batch.body[0])).to.deep.equal([line.body.id]);
    });
  });

  describe('client registry confirm', () => {
    let confirmer: { id: string; username: string; token: string };
    before(async () => {
      confirmer = await gw.userWith([http('/api/client-registry/#', 'readWrite'), mqtt('devices/#', 'write')]);
      expect((await gw.api('POST', '/api/client-registry/open', { token: admin, body: { duration: 600_000 } })).status).to.equal(204);
    });
    const register = (body: Record<string, unknown>) => gw.api('POST', '/api/client-registry/register', { body });

    it('does not grant what the device asked for (admin role) unless the confirmer holds it', async () => {
      const username = `device-${Date.now()}`;
      expect((await register({ username, password: GOOD_PASSWORD, roles: ['admin'], context: 'rogue' })).status).to.equal(202);
      expectRefused(await gw.api('POST', '/api/client-registry/confirm', { token: confirmer.token, body: { username } }), 'http readWrite /api/#');
      expectRefused(await gw.api('POST', '/api/client-registry/confirm', { token: confirmer.token, body: { username, roles: [], initialPermissions: [API_ALL] } }), 'http readWrite /api/#');
      const names = (await gw.api('GET', '/api/users/usernames', { token: admin })).body.map((u: { username: string }) => u.username);
      expect(names).to.not.include(username);
      // Naming what it holds instead: granted.
      const ok = await gw.api('POST', '/api/client-registry/confirm', { token: confirmer.token, body: { username, roles: [], initialPermissions: [mqtt(`devices/${username}/#`, 'write')] } });
      expect(ok.status, JSON.stringify(ok.body)).to.equal(200);
    });

    it('grants the requested roles when the confirmer holds them', async () => {
      const role = await gw.api('POST', '/api/roles', { token: admin, body: { name: `devices-${Date.now()}`, isShared: true, permissions: [mqtt('devices/+/status', 'write')] } });
      const username = `meter-${Date.now()}`;
      expect((await register({ username, password: GOOD_PASSWORD, roles: [role.body.name], context: 'ok' })).status).to.equal(202);
      const before = refusals().length;
      const ok = await gw.api('POST', '/api/client-registry/confirm', { token: confirmer.token, body: { username } });
      expect(ok.status, JSON.stringify(ok.body)).to.equal(200);
      expect(refusals().length).to.equal(before);
      expect(await sharedRoleIds(ok.body.id)).to.deep.equal([role.body.id]);
    });

    it('grants the requested permissions when the confirmer holds them', async () => {
      const username = `sensor-${Date.now()}`;
      expect((await register({ username, password: GOOD_PASSWORD, permissions: [mqtt(`devices/${username}/#`, 'write')], context: 'ok' })).status).to.equal(202);
      const ok = await gw.api('POST', '/api/client-registry/confirm', { token: confirmer.token, body: { username } });
      expect(ok.status, JSON.stringify(ok.body)).to.equal(200);
    });
  });

  describe('no takeover of a stronger account', () => {
    it('a user administrator cannot change the password, tokens, certificates or existence of the administrator', async () => {
      const manager = await gw.userWith([http('/api/users/#', 'readWrite'), http('/api/users', 'readWrite')]);
      const cases: [string, string, unknown][] = [
        ['PUT', `/api/users/${adminUserId}`, { password: 'Takeover-Passw0rd!' }],
        ['PUT', `/api/users/${adminUserId}`, { username: 'root2' }],
        ['PUT', `/api/users/${adminUserId}`, { disableMfa: true }],
        ['DELETE', `/api/users/${adminUserId}/tokens`, undefined],
        ['POST', `/api/users/${adminUserId}/certificates`, { fingerprint: 'ab'.repeat(32) }],
        ['DELETE', `/api/users/${adminUserId}`, undefined],
        ['POST', '/api/users/batch/delete', [adminUserId]],
      ];
      for (const [method, path, body] of cases) {
        const res = await gw.api(method, path, { token: manager.token, ...(body !== undefined ? { body } : {}) });
        expect(res.status, `${method} ${path}: ${JSON.stringify(res.body)}`).to.equal(403);
      }
      expect(await gw.login()).to.be.a('string');
      expect((await gw.api('GET', '/api/session', { token: admin })).status, 'admin tokens still work').to.equal(200);
      expect((await userOf(adminUserId)).username).to.equal('admin');

      // A weaker user: allowed.
      const weak = await gw.userWith([http('/api/users/+', 'read')]);
      expect((await gw.api('PUT', `/api/users/${weak.id}`, { token: manager.token, body: { password: 'An0ther-Passw0rd!' } })).status).to.equal(200);
      expect((await gw.api('GET', '/api/session', { token: weak.token })).status, 'tokens end with a password change').to.equal(401);
      expect((await gw.api('DELETE', `/api/users/${weak.id}`, { token: manager.token })).status).to.equal(200);
    });

    it('a session with write on its own record cannot replace its password or turn its MFA off without proof', async () => {
      const self = await gw.userWith([http('/api/users/+', 'readWrite'), http('/api/users/change-password', 'write')]);
      for (const body of [{ password: 'Stolen-Passw0rd!' }, { disableMfa: true }]) {
        const res = await gw.api('PUT', `/api/users/${self.id}`, { token: self.token, body });
        expect(res.status, JSON.stringify(res.body)).to.equal(403);
        expect(res.body.message).to.match(/change-password|mfa\/disable/);
      }
      expect(gw.logs().filter((l) => l.message === 'user update refused' && l.userId === self.id)).to.have.length(2);
      expect(await gw.login(self.username, GOOD_PASSWORD)).to.be.a('string');
      // The self-service call, with the current password: allowed.
      expect((await gw.api('PUT', '/api/users/change-password', { token: self.token, body: { password: GOOD_PASSWORD, newPassword: 'Own-Passw0rd!' } })).status).to.equal(204);
      // The administrator may still set anyone's password, its own included.
      expect((await gw.api('PUT', `/api/users/${self.id}`, { token: admin, body: { password: 'Set-By-Adm1n!' } })).status).to.equal(200);
    });
  });
});
