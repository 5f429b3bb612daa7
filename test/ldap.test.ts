// LDAP single sign-on (docs/design.md §8), end to end: a real OpenLDAP slapd started by the tests
// (test/support/slapd.ts) and the real gateway; logins over REST, HTTP Basic and MQTT.
import { createServer, type Server, type Socket } from 'node:net';
import { expect } from 'chai';
import { Client } from 'ldapts';
import { ADMIN_PASSWORD, GOOD_PASSWORD, startGateway, type TestGateway } from './support/harness.js';
import { connackCode, endAllClients } from './support/mqtt-test-kit.js';
import { READER_PASSWORD, groupDn, ldapOverrides, startSlapd, userDn, type Slapd } from './support/slapd.js';
import { fillFilter, normalizeDn, sameDn } from '../src/ldap/index.js';

type Grant = { resource: string; operation: 'read' | 'write' | 'readWrite'; context: 'mqtt' | 'http' };

const ALICE_PW = 'Alice-dir-pw1';
const BOB_PW = 'Bob-dir-pw1';
const CAROL_PW = 'Carol-dir-pw1';
const DAVE_DIR_PW = 'Dave-dir-pw1';
const ERIN_PW = 'Erin-dir-pw1';
const LOCAL_FAILURE = 'invalid username or password';

const basic = (username: string, password: string) => ({ authorization: `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}` });

describe('ldap: DN normalisation and filter escaping', () => {
  it('compares DNs case-insensitively, ignoring spaces and escape spelling', () => {
    expect(sameDn('cn=Operators, ou=Groups,dc=Example,dc=org', 'CN=operators,OU=groups,DC=example,DC=org')).to.equal(true);
    expect(sameDn('cn=a\\2Cb,dc=org', 'cn=A\\,B,dc=org')).to.equal(true);
    expect(sameDn('cn=a+sn=b,dc=org', 'SN=B + CN=A,dc=org')).to.equal(true);
    expect(sameDn('cn=ops,dc=org', 'cn=ops2,dc=org')).to.equal(false);
    expect(sameDn('cn=a\\,b,dc=org', 'cn=a,b,dc=org')).to.equal(false);
    expect(normalizeDn(' cn = x , dc=org ')).to.equal('cn=x,dc=org');
  });

  it('escapes every filter value per RFC 4515', () => {
    expect(fillFilter('(uid={{username}})', { username: '*)(uid=*' })).to.equal('(uid=\\2a\\29\\28uid=\\2a)');
    expect(fillFilter('(uid={{username}})', { username: 'a\\b\0' })).to.equal('(uid=a\\5cb\\00)');
    expect(fillFilter('(member={{dn}})', { dn: 'uid=x,dc=org' })).to.equal('(member=uid=x,dc=org)');
  });
});

describe('ldap single sign-on (real slapd)', function () {
  this.timeout(60_000);
  let slapd: Slapd;
  let gw: TestGateway;
  let admin: string;
  const roleIds: Record<string, string> = {};

  async function createRole(g: TestGateway, token: string, name: string, permissions: Grant[], ldapGroupDn?: string): Promise<string> {
    const res = await g.api('POST', '/api/roles', { token, body: { name, isShared: true, permissions, ...(ldapGroupDn ? { ldapGroupDn } : {}) } });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    return res.body.id as string;
  }

  const login = (username: string, password: string, g = gw) => g.api('POST', '/api/login', { body: { username, password } });
  const sharedRoleNames = (g: TestGateway, username: string) => {
    const user = g.services.users.findByUsername(username)!;
    return user.roleIds.map((id) => g.services.roles.list({}).find((r) => r.id === id)!.name).sort();
  };
  const audits = (g: TestGateway, message: string) => g.logs().filter((l) => l.audit === true && l.message === message);

  before(async () => {
    slapd = await startSlapd();
    await slapd.addUser('alice', ALICE_PW);
    await slapd.addUser('bob', BOB_PW);
    await slapd.addUser('carol', CAROL_PW, { description: ['attr-operators', 'no-such-role'] });
    await slapd.addUser('dave', DAVE_DIR_PW);
    await slapd.addUser('erin', ERIN_PW);
    await slapd.addGroup('operators', [userDn('alice'), userDn('bob')]);
    await slapd.addGroup('engineers', [userDn('bob')]);
    gw = await startGateway({ overrides: ldapOverrides(slapd) });
    admin = await gw.login();
    // Written differently from the directory's spelling: compared normalised.
    roleIds.operators = await createRole(gw, admin, 'operators', [
      { resource: 'plant/#', operation: 'readWrite', context: 'mqtt' },
      { resource: '/api/roles', operation: 'read', context: 'http' },
    ], 'CN=Operators, OU=Groups, DC=example, DC=org');
    roleIds.engineers = await createRole(gw, admin, 'engineers', [{ resource: '/api/users/#', operation: 'read', context: 'http' }], groupDn('engineers'));
    // Names a group nobody can be a member of through the directory filter: never granted.
    roleIds.unrelated = await createRole(gw, admin, 'unrelated', [{ resource: '/api/certificates', operation: 'read', context: 'http' }], 'cn=elsewhere,dc=example,dc=org');
    // A local user with the name of a directory user.
    const dave = await gw.api('POST', '/api/users', { token: admin, body: { username: 'dave', password: GOOD_PASSWORD, identityProvider: 'local' } });
    expect(dave.status).to.equal(201);
  });

  after(async () => {
    await endAllClients();
    await gw?.stop();
    await slapd?.destroy();
  });

  it('reports the LDAP switches', async () => {
    const res = await gw.api('GET', '/api/auth/ldap', { token: admin });
    expect(res.status).to.equal(200);
    expect(res.body).to.deep.equal({ enabled: true, mode: 'GROUP' });
  });

  it('logs a directory user in over REST and creates it as an ldap user with the roles of its groups', async () => {
    const res = await login('alice', ALICE_PW);
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    expect(res.body.token).to.be.a('string');
    expect(res.body.needsMfa).to.equal(false);
    const user = gw.services.users.findByUsername('alice')!;
    expect(user.identityProvider).to.equal('ldap');
    expect(user.passwordHash).to.equal(undefined);
    expect(user.roleIds).to.deep.equal([roleIds.operators]);
    const view = await gw.api('GET', `/api/users/${user.id}`, { token: admin });
    expect(view.status).to.equal(200);
    expect(view.body.identityProvider).to.equal('ldap');
    // The role's permissions apply to the token at once.
    expect((await gw.api('GET', '/api/roles', { token: res.body.token })).status).to.equal(200);
    expect((await gw.api('GET', '/api/users/usernames', { token: res.body.token })).status).to.equal(403);
    const record = audits(gw, 'ldap login').find((l) => l.username === 'alice')!;
    expect(record).to.include({ dn: userDn('alice'), mode: 'GROUP', created: true });
    expect(record.roles).to.deep.equal(['operators']);
  });

  it('gives a member of several groups every matching role', async () => {
    expect((await login('bob', BOB_PW)).status).to.equal(200);
    expect(sharedRoleNames(gw, 'bob')).to.deep.equal(['engineers', 'operators']);
  });

  it('synchronises the roles at the next login after the directory changed', async () => {
    const first = await login('alice', ALICE_PW);
    const token = first.body.token as string;
    await slapd.setMembers(groupDn('operators'), [userDn('bob')]);
    await slapd.setMembers(groupDn('engineers'), [userDn('bob'), userDn('alice')]);
    // Nothing changes until alice logs in again.
    expect(sharedRoleNames(gw, 'alice')).to.deep.equal(['operators']);
    expect((await login('alice', ALICE_PW)).status).to.equal(200);
    expect(sharedRoleNames(gw, 'alice')).to.deep.equal(['engineers']);
    // Existing sessions follow the new roles.
    expect((await gw.api('GET', '/api/roles', { token })).status).to.equal(403);
    expect((await gw.api('GET', '/api/users/usernames', { token })).status).to.equal(200);
    expect(audits(gw, 'user roles synchronised').some((l) => l.username === 'alice')).to.equal(true);
    // Out of every group: no shared role at all.
    await slapd.setMembers(groupDn('engineers'), [userDn('bob')]);
    expect((await login('alice', ALICE_PW)).status).to.equal(200);
    expect(sharedRoleNames(gw, 'alice')).to.deep.equal([]);
    // And back, for the tests that follow.
    await slapd.setMembers(groupDn('operators'), [userDn('alice'), userDn('bob')]);
    expect((await login('alice', ALICE_PW)).status).to.equal(200);
    expect(sharedRoleNames(gw, 'alice')).to.deep.equal(['operators']);
  });

  it('creates one user when its first logins arrive at once', async () => {
    await slapd.addUser('gina', 'Gina-dir-pw1');
    await slapd.setMembers(groupDn('engineers'), [userDn('bob'), userDn('gina')]);
    const results = await Promise.all(Array.from({ length: 6 }, () => login('gina', 'Gina-dir-pw1')));
    expect(results.map((r) => r.status)).to.deep.equal([200, 200, 200, 200, 200, 200]);
    expect(gw.services.users.usernames().filter((u) => u.username === 'gina').length).to.equal(1);
    expect(sharedRoleNames(gw, 'gina')).to.deep.equal(['engineers']);
    expect(audits(gw, 'user created').filter((l) => l.username === 'gina').length).to.equal(1);
    await slapd.setMembers(groupDn('engineers'), [userDn('bob')]);
  });

  it('refuses a wrong password with the same answer as a local failure', async () => {
    const local = await login('admin', 'Wrong-passw0rd');
    const res = await login('alice', 'Wrong-passw0rd');
    expect(res.status).to.equal(401);
    expect(local.status).to.equal(401);
    expect(res.body.message).to.equal(LOCAL_FAILURE);
    expect(res.body).to.deep.equal(local.body);
    expect(audits(gw, 'ldap login failed').some((l) => l.username === 'alice' && l.reason === 'wrong password')).to.equal(true);
  });

  it('refuses a username the directory does not know', async () => {
    const res = await login('mallory', 'Some-passw0rd');
    expect(res.status).to.equal(401);
    expect(res.body.message).to.equal(LOCAL_FAILURE);
    expect(gw.services.users.findByUsername('mallory')).to.equal(undefined);
    expect(audits(gw, 'ldap login failed').some((l) => l.username === 'mallory' && l.reason === 'not found')).to.equal(true);
  });

  it('refuses an empty password before asking the directory (which would accept it as an anonymous bind)', async () => {
    // The danger is real: slapd answers a simple bind with a DN and no password with success.
    const probe = new Client({ url: slapd.url });
    try {
      await probe.bind(userDn('alice'), '');
    } finally {
      await probe.unbind();
    }
    const basicRes = await gw.api('GET', '/api/session', { headers: basic('alice', '') });
    expect(basicRes.status).to.equal(401);
    expect(basicRes.body.message).to.equal(LOCAL_FAILURE);
    expect(await connackCode(gw.ports.mqtt, { username: 'alice', password: '' })).to.equal(4);
    // REST refuses it in validation already (passwords have at least 5 characters).
    expect((await login('alice', '')).status).to.be.oneOf([400, 401]);
    const refused = audits(gw, 'ldap login failed').filter((l) => l.username === 'alice' && l.reason === 'empty password');
    expect(refused.length).to.be.greaterThanOrEqual(2);
  });

  it('escapes the username in the search filter (no filter injection)', async () => {
    for (const username of ['*)(uid=*', '*', 'ali*', 'alice)(|(uid=*']) {
      const res = await login(username, ALICE_PW);
      expect(res.status, username).to.equal(401);
      expect(res.body.message).to.equal(LOCAL_FAILURE);
      const record = audits(gw, 'ldap login failed').filter((l) => l.username === username).at(-1)!;
      // Matched literally: nobody has that uid (not "ambiguous", not a parse error).
      expect(record.reason, username).to.equal('not found');
    }
    expect(audits(gw, 'ldap login').some((l) => String(l.username).includes('*'))).to.equal(false);
  });

  it('never authenticates a local user against the directory (no takeover)', async () => {
    const res = await login('dave', DAVE_DIR_PW);
    expect(res.status).to.equal(401);
    expect((await gw.api('GET', '/api/session', { headers: basic('dave', DAVE_DIR_PW) })).status).to.equal(401);
    const dave = gw.services.users.findByUsername('dave')!;
    expect(dave.identityProvider).to.equal('local');
    expect(dave.roleIds).to.deep.equal([]);
    expect(audits(gw, 'ldap login').some((l) => l.username === 'dave')).to.equal(false);
    expect(audits(gw, 'ldap login failed').some((l) => l.username === 'dave')).to.equal(false);
    // Its local password still works.
    expect((await login('dave', GOOD_PASSWORD)).status).to.equal(200);
  });

  it('accepts HTTP Basic and MQTT password connects of a directory user', async () => {
    const session = await gw.api('GET', '/api/session', { headers: basic('alice', ALICE_PW) });
    expect(session.status, JSON.stringify(session.body)).to.equal(200);
    expect(session.body.username).to.equal('alice');
    expect((await gw.api('GET', '/api/roles', { headers: basic('alice', ALICE_PW) })).status).to.equal(200);
    expect(await connackCode(gw.ports.mqtt, { username: 'alice', password: ALICE_PW })).to.equal(0);
    expect(await connackCode(gw.ports.mqtt, { username: 'alice', password: 'Wrong-passw0rd' })).to.equal(4);
    // A first contact over MQTT creates the user too (erin has no group: no MQTT permission → 5).
    expect(await connackCode(gw.ports.mqtt, { username: 'erin', password: ERIN_PW })).to.equal(5);
    expect(gw.services.users.findByUsername('erin')!.identityProvider).to.equal('ldap');
  });

  it('does not record a directory user\'s first MQTT connect as a registration while the registry is open', async () => {
    await slapd.addUser('hank', 'Hank-dir-pw1');
    expect((await gw.api('POST', '/api/client-registry/open', { token: admin, body: {} })).status).to.equal(204);
    try {
      // hank has no group, so no MQTT permission: 5, but he is known (created as an ldap user).
      expect(await connackCode(gw.ports.mqtt, { username: 'hank', password: 'Hank-dir-pw1' })).to.equal(5);
      const pending = await gw.api('GET', '/api/client-registry', { token: admin });
      expect(pending.body.map((p: { username: string }) => p.username)).to.not.include('hank');
      expect(gw.services.users.findByUsername('hank')!.identityProvider).to.equal('ldap');
      // A name nobody knows is still recorded.
      expect(await connackCode(gw.ports.mqtt, { username: 'new-device-77', password: 'Dev1ce-Passw0rd' })).to.equal(4);
      const after = await gw.api('GET', '/api/client-registry', { token: admin });
      expect(after.body.map((p: { username: string }) => p.username)).to.include('new-device-77');
    } finally {
      await gw.api('POST', '/api/client-registry/lock', { token: admin });
    }
  });

  it('notices a password changed in the directory at once (no cached check for ldap users)', async () => {
    expect(await connackCode(gw.ports.mqtt, { username: 'bob', password: BOB_PW })).to.equal(0);
    await slapd.replace(userDn('bob'), 'userPassword', ['Bob-new-pw2']);
    expect(await connackCode(gw.ports.mqtt, { username: 'bob', password: BOB_PW })).to.equal(4);
    expect((await gw.api('GET', '/api/session', { headers: basic('bob', BOB_PW) })).status).to.equal(401);
    expect(await connackCode(gw.ports.mqtt, { username: 'bob', password: 'Bob-new-pw2' })).to.equal(0);
  });

  it('refuses ldap users while the directory is down, stays up, and recovers', async () => {
    await slapd.stop();
    try {
      const res = await login('alice', ALICE_PW);
      expect(res.status).to.equal(401);
      expect(res.body.message).to.equal(LOCAL_FAILURE);
      expect(JSON.stringify(res.body)).to.not.match(/ECONNREFUSED|directory|ldap/i);
      expect(await connackCode(gw.ports.mqtt, { username: 'alice', password: ALICE_PW })).to.equal(4);
      const warned = gw.logs().filter((l) => l.level === 'warn' && l.message === 'ldap directory unavailable');
      expect(warned.length).to.be.greaterThanOrEqual(1);
      expect(JSON.stringify(warned.at(-1))).to.match(/ECONNREFUSED|connect/i);
      expect(audits(gw, 'ldap login failed').some((l) => l.username === 'alice' && l.reason === 'directory unavailable')).to.equal(true);
      // The daemon is fine: local users log in, tokens work.
      expect((await login('admin', ADMIN_PASSWORD)).status).to.equal(200);
      expect((await gw.api('GET', '/api/session', { token: admin })).status).to.equal(200);
    } finally {
      await slapd.restart();
    }
    expect((await login('alice', ALICE_PW)).status).to.equal(200);
  });

  it('bounds a directory that never answers by timeoutMs', async () => {
    // Accepts connections and never says a word.
    const sockets = new Set<Socket>();
    const silent: Server = createServer((s) => sockets.add(s));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const { port } = silent.address() as { port: number };
    const saved = { url: gw.config.ldap.url, timeoutMs: gw.config.ldap.timeoutMs };
    // The service reads config.ldap at call time.
    gw.config.ldap.url = `ldap://127.0.0.1:${port}`;
    gw.config.ldap.timeoutMs = 600;
    try {
      const started = Date.now();
      const res = await login('alice', ALICE_PW);
      expect(res.status).to.equal(401);
      expect(Date.now() - started).to.be.lessThan(3000);
    } finally {
      Object.assign(gw.config.ldap, saved);
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => silent.close(() => resolve()));
    }
    expect((await login('alice', ALICE_PW)).status).to.equal(200);
  });

  it('keeps passwords out of every log line', () => {
    const all = JSON.stringify(gw.logs());
    for (const secret of [ALICE_PW, BOB_PW, 'Bob-new-pw2', 'Gina-dir-pw1', DAVE_DIR_PW, ERIN_PW, READER_PASSWORD, 'Wrong-passw0rd', ADMIN_PASSWORD, GOOD_PASSWORD]) {
      expect(all.includes(secret), secret).to.equal(false);
    }
    expect(audits(gw, 'ldap login').length).to.be.greaterThan(3);
    expect(audits(gw, 'login failed').some((l) => l.identityProvider === 'ldap')).to.equal(true);
  });

  it('ATTRIBUTE mode: the role names listed in the user entry, synchronised at each login', async () => {
    const g = await startGateway({ overrides: ldapOverrides(slapd, { mode: 'ATTRIBUTE', roleAttribute: 'description' }) });
    try {
      const token = await g.login();
      expect((await g.api('GET', '/api/auth/ldap', { token })).body).to.deep.equal({ enabled: true, mode: 'ATTRIBUTE' });
      const ops = await createRole(g, token, 'attr-operators', [{ resource: 'plant/#', operation: 'read', context: 'mqtt' }]);
      await createRole(g, token, 'attr-engineers', [{ resource: '/api/users/#', operation: 'read', context: 'http' }]);
      // A group DN does not matter in this mode.
      await createRole(g, token, 'grouped', [{ resource: '/api/roles', operation: 'read', context: 'http' }], groupDn('operators'));
      const res = await login('carol', CAROL_PW, g);
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      const carol = g.services.users.findByUsername('carol')!;
      expect(carol.identityProvider).to.equal('ldap');
      expect(carol.roleIds).to.deep.equal([ops]);
      await slapd.replace(userDn('carol'), 'description', ['attr-engineers', 'attr-operators']);
      expect((await login('carol', CAROL_PW, g)).status).to.equal(200);
      expect(sharedRoleNames(g, 'carol')).to.deep.equal(['attr-engineers', 'attr-operators']);
      // A private role's name is never granted.
      await slapd.replace(userDn('carol'), 'description', [`user:${carol.id}`, `user:${g.services.users.findByUsername('admin')!.id}`]);
      expect((await login('carol', CAROL_PW, g)).status).to.equal(200);
      expect(sharedRoleNames(g, 'carol')).to.deep.equal([]);
      // alice belongs to groups but lists no role: nothing.
      expect((await login('alice', ALICE_PW, g)).status).to.equal(200);
      expect(sharedRoleNames(g, 'alice')).to.deep.equal([]);
      expect(await connackCode(g.ports.mqtt, { username: 'carol', password: 'Wrong-passw0rd' })).to.equal(4);
    } finally {
      await g.stop();
    }
  });

  it('LDAP disabled: unknown usernames are not looked up, ldap users cannot log in with a password', async () => {
    const g = await startGateway({ overrides: ldapOverrides(slapd, { enabled: false }) });
    try {
      const token = await g.login();
      expect((await g.api('GET', '/api/auth/ldap', { token })).body).to.deep.equal({ enabled: false, mode: 'GROUP' });
      expect((await login('alice', ALICE_PW, g)).status).to.equal(401);
      expect(g.services.users.findByUsername('alice')).to.equal(undefined);
      // An ldap user created by an administrator, even with a local password, is not checked locally.
      const created = await g.api('POST', '/api/users', { token, body: { username: 'frank', password: GOOD_PASSWORD, identityProvider: 'ldap' } });
      expect(created.status).to.equal(201);
      expect((await login('frank', GOOD_PASSWORD, g)).status).to.equal(401);
      expect(audits(g, 'ldap login').length).to.equal(0);
    } finally {
      await g.stop();
    }
  });

  it('evaluates at most maxAttempts of 30 concurrent wrong directory passwords (binds); the rest get 429', async () => {
    await slapd.addUser('henry', 'Henry-dir-pw1');
    const results = await Promise.all(Array.from({ length: 30 }, () => login('henry', 'Wrong-passw0rd')));
    const binds = audits(gw, 'ldap login failed').filter((l) => l.username === 'henry' && l.reason === 'wrong password').length;
    expect(binds).to.be.within(1, gw.config.auth.loginThrottle.maxAttempts);
    expect(results.filter((r) => r.status === 401)).to.have.length(binds);
    expect(results.filter((r) => r.status === 429)).to.have.length(30 - binds);
    expect((await login('henry', 'Henry-dir-pw1')).status, 'locked, even with the right password').to.equal(429);
  });

  it('a directory user with write on roles cannot bind the admin role to its own group; a role it holds, it may', async () => {
    await slapd.addUser('ivan', 'Ivan-dir-pw1');
    await slapd.addGroup('ivans', [userDn('ivan')]);
    expect((await login('ivan', 'Ivan-dir-pw1')).status).to.equal(200);
    const ivan = gw.services.users.findByUsername('ivan')!;
    const granted = await gw.api('PUT', `/api/users/${ivan.id}`, { token: admin, body: { permissions: [{ resource: '/api/roles/+', operation: 'readWrite', context: 'http' }] } });
    expect(granted.status, JSON.stringify(granted.body)).to.equal(200);
    const token = (await login('ivan', 'Ivan-dir-pw1')).body.token as string;
    const adminRole = gw.services.roles.list({ name: 'admin' })[0]!;
    const refused = await gw.api('PUT', `/api/roles/${adminRole.id}`, { token, body: { name: 'admin', ldapGroupDn: groupDn('ivans') } });
    expect(refused.status, JSON.stringify(refused.body)).to.equal(403);
    expect(refused.body.message).to.include('http readWrite /api/#');
    expect((await login('ivan', 'Ivan-dir-pw1')).status).to.equal(200);
    expect(sharedRoleNames(gw, 'ivan')).to.deep.equal([]);
    const readers = await createRole(gw, admin, 'ivan-readers', [{ resource: '/api/roles/+', operation: 'read', context: 'http' }]);
    expect((await gw.api('PUT', `/api/roles/${readers}`, { token, body: { name: 'ivan-readers', ldapGroupDn: groupDn('ivans') } })).status).to.equal(200);
    expect((await login('ivan', 'Ivan-dir-pw1')).status).to.equal(200);
    expect(sharedRoleNames(gw, 'ivan')).to.deep.equal(['ivan-readers']);
  });
});

describe('ldap single sign-on over TLS (real slapd: ldaps:// and StartTLS)', function () {
  this.timeout(60_000);
  let slapd: Slapd;
  let gw: TestGateway;

  before(async () => {
    slapd = await startSlapd({ tls: true });
    await slapd.addUser('tina', 'Tina-dir-pw1');
    await slapd.addGroup('operators', [userDn('tina')]);
    gw = await startGateway({ overrides: ldapOverrides(slapd, { url: slapd.ldapsUrl, tlsCaFile: slapd.caFile }) });
    const token = await gw.login();
    const role = await gw.api('POST', '/api/roles', { token, body: { name: 'operators', isShared: true, permissions: [], ldapGroupDn: groupDn('operators') } });
    expect(role.status).to.equal(201);
  });

  after(async () => {
    await gw?.stop();
    await slapd?.destroy();
  });

  /** Logs tina in with these ldap settings (the service reads config.ldap at call time). */
  async function loginWith(settings: Partial<TestGateway['config']['ldap']>): Promise<number> {
    const saved = { ...gw.config.ldap };
    Object.assign(gw.config.ldap, settings);
    try {
      return (await gw.api('POST', '/api/login', { body: { username: 'tina', password: 'Tina-dir-pw1' } })).status;
    } finally {
      Object.assign(gw.config.ldap, saved);
    }
  }
  const lastWarning = () => gw.logs().filter((l) => l.level === 'warn' && l.message === 'ldap directory unavailable').at(-1);

  it('ldaps:// with the configured CA', async () => {
    expect(await loginWith({})).to.equal(200);
    expect(gw.services.users.findByUsername('tina')!.identityProvider).to.equal('ldap');
    expect(gw.services.users.findByUsername('tina')!.roleIds.length).to.equal(1);
  });

  it('ldaps:// refuses a server certificate the gateway does not trust', async () => {
    expect(await loginWith({ tlsCaFile: '' })).to.equal(401);
    expect(JSON.stringify(lastWarning())).to.match(/certificate/i);
  });

  it('StartTLS on ldap:// with the configured CA (by IP and by host name)', async () => {
    expect(await loginWith({ url: slapd.url, startTls: true })).to.equal(200);
    expect(await loginWith({ url: slapd.url.replace('127.0.0.1', 'localhost'), startTls: true })).to.equal(200);
  });

  it('StartTLS really upgrades before binding: an untrusted certificate fails the login', async () => {
    expect(await loginWith({ url: slapd.url, startTls: true, tlsCaFile: '' })).to.equal(401);
    expect(JSON.stringify(lastWarning())).to.match(/certificate/i);
    expect(JSON.stringify(lastWarning())).to.match(/starttls/);
  });

  it('an unreadable CA file fails the login (401, warned)', async () => {
    expect(await loginWith({ tlsCaFile: '/nonexistent/ca.pem' })).to.equal(401);
    expect(JSON.stringify(lastWarning())).to.match(/tlsCaFile/);
    expect(await loginWith({})).to.equal(200);
  });
});
