import { createHash } from 'node:crypto';
import { expect } from 'chai';
import sinon from 'sinon';
import { ADMIN_PASSWORD, GOOD_PASSWORD, startGateway, type TestGateway } from './support/harness.js';
import { ADMIN_PERMISSIONS } from '../src/auth/bootstrap-admin.js';

describe('sessions', () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startGateway();
  });
  after(() => gw.stop());
  afterEach(() => sinon.restore());

  it('logs in with the contract login result and opens the session', async () => {
    const res = await gw.api('POST', '/api/login', { body: { username: 'admin', password: ADMIN_PASSWORD, label: 'ci', expireTimeInHours: 2 } });
    expect(res.status).to.equal(200);
    expect(res.body).to.include.keys('token', 'expiresAt', 'permissions', 'needsMfa', 'enforceMFAEnrollment');
    expect(res.body.needsMfa).to.equal(false);
    expect(res.body.token).to.match(/^[A-Za-z0-9_-]{43}$/);
    const lifetime = Date.parse(res.body.expiresAt) - Date.now();
    expect(lifetime).to.be.within(2 * 3600_000 - 60_000, 2 * 3600_000 + 1000);
    expect(res.body.permissions.map((p: any) => `${p.context} ${p.operation} ${p.resource}`)).to.have.members(ADMIN_PERMISSIONS.map((p) => `${p.context} ${p.operation} ${p.resource}`));
    expect(res.body.permissions.map((p: any) => p.resource)).to.include.members(['/api/#', '#', '$SYS/#']);

    const session = await gw.api('GET', '/api/session', { token: res.body.token });
    expect(session.status).to.equal(200);
    expect(session.body.username).to.equal('admin');
    expect(session.body.expiresAt).to.equal(res.body.expiresAt);
    expect(session.body.mfa).to.deep.equal({ enabled: false, enforced: false });
  });

  it('uses a default lifetime of 12 hours and refuses one above the configured maximum', async () => {
    const res = await gw.api('POST', '/api/login', { body: { username: 'admin', password: ADMIN_PASSWORD } });
    expect(Date.parse(res.body.expiresAt) - Date.now()).to.be.within(12 * 3600_000 - 60_000, 12 * 3600_000 + 1000);
    const tooLong = await gw.api('POST', '/api/login', { body: { username: 'admin', password: ADMIN_PASSWORD, expireTimeInHours: 100000 } });
    expect(tooLong.status).to.equal(400);
    expect(tooLong.body.message).to.match(/720/);
  });

  it('stores tokens only as hashes and lists them by fingerprint with their label', async () => {
    const token = await gw.login();
    const labelled = await gw.api('POST', '/api/login', { body: { username: 'admin', password: ADMIN_PASSWORD, label: 'laptop' } });
    const admin = gw.services.users.findByUsername('admin')!;
    const fp = createHash('sha256').update(labelled.body.token).digest('hex');
    const stored = gw.services.store.tokens.get(fp);
    expect(stored).to.not.equal(undefined);
    expect(JSON.stringify(stored)).to.not.include(labelled.body.token);
    const list = await gw.api('GET', `/api/users/${admin.id}/tokens`, { token });
    expect(list.status).to.equal(200);
    const entry = list.body.find((t: any) => t.fingerprint === fp);
    expect(entry.label).to.equal('laptop');
  });

  it('logs out: the token stops working on the next request; logout is idempotent', async () => {
    const token = await gw.login();
    expect((await gw.api('GET', '/api/session', { token })).status).to.equal(200);
    expect((await gw.api('POST', '/api/logout', { body: { token } })).status).to.equal(200);
    expect((await gw.api('GET', '/api/session', { token })).status).to.equal(401);
    expect((await gw.api('POST', '/api/logout', { body: { token } })).status).to.equal(200);
    const fp = createHash('sha256').update(token).digest('hex');
    const audit = gw.logs().find((l) => l.audit === true && l.message === 'tokens revoked' && (l.tokens as string[])?.includes(fp.slice(0, 12)));
    expect(audit, 'revocation audited').to.not.equal(undefined);
  });

  it('keeps at most auth.maxTokensPerUser live tokens per user, revoking the oldest', async () => {
    const small = await startGateway({ overrides: { auth: { maxTokensPerUser: 3 } } });
    try {
      const first = await small.login();
      const second = await small.login();
      await small.login();
      expect((await small.api('GET', '/api/session', { token: first })).status).to.equal(200);
      await small.login();
      expect((await small.api('GET', '/api/session', { token: first })).status).to.equal(401);
      expect((await small.api('GET', '/api/session', { token: second })).status).to.equal(200);
      const admin = small.services.users.findByUsername('admin')!;
      expect(small.services.tokens.list(admin.id)).to.have.length(3);
    } finally {
      await small.stop();
    }
  });

  it('expires tokens', async () => {
    const token = await gw.login();
    const clock = sinon.useFakeTimers({ now: Date.now() + 12 * 3600_000 + 1000, toFake: ['Date'] });
    const res = await gw.api('GET', '/api/session', { token });
    clock.restore();
    expect(res.status).to.equal(401);
    expect((await gw.api('GET', '/api/session', { token })).status).to.equal(200);
  });

  it('accepts HTTP Basic credentials and refuses wrong ones', async () => {
    const ok = await gw.api('GET', '/api/session', { headers: { authorization: 'Basic ' + Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64') } });
    expect(ok.status).to.equal(200);
    expect(ok.body.username).to.equal('admin');
    const bad = await gw.api('GET', '/api/session', { headers: { authorization: 'Basic ' + Buffer.from('admin:nope-nope').toString('base64') } });
    expect(bad.status).to.equal(401);
  });

  const badHeaders = ['Bearer', 'Bearer not-a-token', 'Token abc', 'Basic !!!', 'Bearer ' + 'A'.repeat(43)];
  for (const header of badHeaders) {
    it(`answers 401 for Authorization "${header.slice(0, 20)}"`, async () => {
      const res = await gw.api('GET', '/api/session', { headers: { authorization: header } });
      expect(res.status).to.equal(401);
      expect(res.body.statusCode).to.equal(401);
    });
  }

  it('answers a wrong password and an unknown user identically', async () => {
    const wrong = await gw.api('POST', '/api/login', { body: { username: 'admin', password: 'wrong-password' } });
    const unknown = await gw.api('POST', '/api/login', { body: { username: 'nobody-here', password: 'wrong-password' } });
    expect(wrong.status).to.equal(401);
    expect(unknown.status).to.equal(401);
    expect(wrong.body).to.deep.equal(unknown.body);
  });

  it('gives a user with enforceMFAEnrollment a token that opens only session and mfa calls', async () => {
    const admin = await gw.login();
    const created = await gw.api('POST', '/api/users', {
      token: admin,
      body: { username: 'enroll-me', password: GOOD_PASSWORD, identityProvider: 'local', enforceMFAEnrollment: true, initialPermissions: [{ resource: '/api/#', operation: 'read', context: 'http' }] },
    });
    expect(created.status).to.equal(201);
    const login = await gw.api('POST', '/api/login', { body: { username: 'enroll-me', password: GOOD_PASSWORD } });
    expect(login.body.enforceMFAEnrollment).to.equal(true);
    const session = await gw.api('GET', '/api/session', { token: login.body.token });
    expect(session.status).to.equal(200);
    expect(session.body.mfa.enforced).to.equal(true);
    expect((await gw.api('GET', '/api/roles', { token: login.body.token })).status).to.equal(403);
  });

  it('records logins and failures as audit records without secrets', async () => {
    const token = await gw.login();
    await gw.api('POST', '/api/login', { body: { username: 'admin', password: 'Wrong-Secret-123' } });
    const audits = gw.logs().filter((l) => l.audit === true);
    expect(audits.some((a) => a.message === 'login' && a.username === 'admin')).to.equal(true);
    expect(audits.some((a) => a.message === 'login failed' && a.username === 'admin')).to.equal(true);
    const all = JSON.stringify(gw.logs());
    expect(all).to.not.include(ADMIN_PASSWORD);
    expect(all).to.not.include('Wrong-Secret-123');
    expect(all).to.not.include(token);
  });
});
