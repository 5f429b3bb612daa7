// MFA (docs/design.md §7): enrollment, the second login step, backup codes, the failure ban, replay,
// encryption at rest, HTTP Basic and MQTT of enrolled users. OTPs come from the real
// `oathtool` CLI (OATH Toolkit), never from otplib, so the gateway is checked against an
// independent TOTP implementation. Time-sensitive scenarios fake Date only (the services read
// Date.now() at call time) and hand the same instant to oathtool with --now.
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import sinon from 'sinon';
import { ADMIN_PASSWORD, GOOD_PASSWORD, startGateway, tempDir, type TestGateway } from './support/harness.js';
import { connackCode } from './support/mqtt-test-kit.js';
import { open } from '../src/mfa/secret-box.js';

const run = promisify(execFile);
const STEP_MS = 30_000;

/** The TOTP of `secret` (base32) computed by oathtool, at `atMs` or at the real current time. */
async function oathtool(secret: string, atMs?: number): Promise<string> {
  const args = ['--totp', '-b', secret];
  if (atMs !== undefined) args.push('--now', `@${Math.floor(atMs / 1000)}`);
  const { stdout } = await run('oathtool', args);
  const otp = stdout.trim();
  expect(otp).to.match(/^\d{6}$/);
  return otp;
}

/** A six-digit code that is not the given one. */
const wrongOtp = (otp: string) => String((Number(otp) + 500_001) % 1_000_000).padStart(6, '0');

type Grant = { resource: string; operation: 'read' | 'write' | 'readWrite'; context: 'mqtt' | 'http' };

interface Enrolled {
  id: string;
  username: string;
  token: string;
  secret: string;
  backupCodes: string[];
}

describe('MFA', () => {
  let gw: TestGateway;
  let admin: string;
  let clock: sinon.SinonFakeTimers | undefined;
  /** Every OTP, TOTP secret, challenge, backup code and token the tests handled: none may reach a log line. */
  const otps = new Set<string>();
  const secrets = new Set<string>();

  before(async () => {
    gw = await startGateway();
    admin = await gw.login();
  });
  after(() => gw.stop());
  afterEach(() => {
    clock?.restore();
    clock = undefined;
  });

  /** Fakes Date at the start (+2 s) of a TOTP step after the real current one. */
  function freezeTime(): void {
    clock = sinon.useFakeTimers({ now: (Math.floor(Date.now() / STEP_MS) + 1) * STEP_MS + 2000, toFake: ['Date'] });
  }
  const nextStep = () => clock!.tick(STEP_MS);

  /** OTP at the (possibly faked) current time. */
  async function otpNow(secret: string): Promise<string> {
    const otp = await oathtool(secret, clock ? Date.now() : undefined);
    otps.add(otp);
    return otp;
  }

  function secretOf(uri: string): string {
    const secret = new URL(uri).searchParams.get('secret')!;
    secrets.add(secret);
    return secret;
  }

  async function enrolled(grants: Grant[] = []): Promise<Enrolled> {
    const u = await gw.userWith(grants);
    secrets.add(u.token);
    const enable = await gw.api('POST', '/api/mfa/enable', { token: u.token });
    expect(enable.status).to.equal(200);
    const secret = secretOf(enable.body.uri);
    const validate = await gw.api('POST', '/api/mfa/validate', { token: u.token, body: { otp: await otpNow(secret) } });
    expect(validate.status, JSON.stringify(validate.body)).to.equal(200);
    validate.body.backupCodes.forEach((c: string) => secrets.add(c));
    return { ...u, secret, backupCodes: validate.body.backupCodes };
  }

  async function passwordLogin(username: string, extra: Record<string, unknown> = {}) {
    const res = await gw.api('POST', '/api/login', { body: { username, password: GOOD_PASSWORD, ...extra } });
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    if (res.body.secret) secrets.add(res.body.secret);
    if (res.body.token) secrets.add(res.body.token);
    return res.body;
  }

  async function mfaLogin(body: Record<string, unknown>) {
    const res = await gw.api('POST', '/api/mfa/login', { body });
    if (res.body?.token) secrets.add(res.body.token);
    return res;
  }

  it('enrolls: enable returns the otpauth URI, validate checks the OTP and returns 10 backup codes', async () => {
    const u = await gw.userWith([]);
    expect((await gw.api('GET', '/api/mfa/isenrolled', { token: u.token })).body).to.deep.equal({ isEnrolled: false });
    expect((await gw.api('POST', '/api/mfa/validate', { token: u.token, body: { otp: '123456' } })).status).to.equal(409); // enable first

    const enable = await gw.api('POST', '/api/mfa/enable', { token: u.token });
    expect(enable.status).to.equal(200);
    const uri = new URL(enable.body.uri);
    expect(uri.protocol).to.equal('otpauth:');
    expect(uri.host).to.equal('totp');
    expect(decodeURIComponent(uri.pathname)).to.equal(`/gatewayd:${u.username}`);
    expect(uri.searchParams.get('issuer')).to.equal('gatewayd');
    expect(uri.searchParams.get('algorithm')).to.equal('SHA1');
    expect(uri.searchParams.get('digits')).to.equal('6');
    expect(uri.searchParams.get('period')).to.equal('30');
    const secret = secretOf(enable.body.uri);
    expect(secret).to.match(/^[A-Z2-7]{32,}$/); // base32, 160 bits
    // Not enrolled until validated.
    expect((await gw.api('GET', '/api/mfa/isenrolled', { token: u.token })).body.isEnrolled).to.equal(false);

    // Real wall clock and plain oathtool, as an authenticator app would.
    const right = await otpNow(secret);
    const wrong = await gw.api('POST', '/api/mfa/validate', { token: u.token, body: { otp: wrongOtp(right) } });
    expect(wrong.status).to.equal(401);
    expect(wrong.body.message).to.match(/invalid OTP/);
    expect((await gw.api('POST', '/api/mfa/validate', { token: u.token, body: { otp: 'abcdef' } })).status).to.equal(401);
    const validate = await gw.api('POST', '/api/mfa/validate', { token: u.token, body: { otp: right } });
    expect(validate.status).to.equal(200);
    const codes: string[] = validate.body.backupCodes;
    codes.forEach((c) => secrets.add(c));
    expect(codes).to.have.length(10);
    expect(new Set(codes).size).to.equal(10);
    for (const c of codes) expect(c).to.match(/^[23456789ABCDEFGHJKMNPQRSTUVWXYZ]{10}$/);

    expect((await gw.api('GET', '/api/mfa/isenrolled', { token: u.token })).body).to.deep.equal({ isEnrolled: true });
    expect((await gw.api('GET', '/api/session', { token: u.token })).body.mfa).to.deep.equal({ enabled: true, enforced: false });
    expect((await gw.api('GET', `/api/users/${u.id}`, { token: admin })).body.mfa_is_enrolled).to.equal(true);

    const again = await gw.api('POST', '/api/mfa/enable', { token: u.token });
    expect(again.status).to.equal(409);
    expect(again.body.message).to.match(/already enrolled/);
    expect((await gw.api('POST', '/api/mfa/validate', { token: u.token, body: { otp: right } })).status).to.equal(409);
  });

  it('keeps the TOTP secret sealed (AES-256-GCM, key file 0600) and only hashes of backup codes', async () => {
    freezeTime();
    const u = await enrolled();
    const record = gw.services.store.users.get(u.id)!;
    const raw = JSON.stringify(record);
    expect(record.mfa.enrolled).to.equal(true);
    expect(record.mfa.sealedSecret).to.be.a('string');
    expect(raw).not.to.include(u.secret);
    for (const code of u.backupCodes) expect(raw).not.to.include(code);
    expect(record.mfa.backupCodeHashes).to.have.length(10);

    const keyPath = join(gw.dataDir, 'mfa.key');
    expect(statSync(keyPath).mode & 0o777).to.equal(0o600);
    const key = readFileSync(keyPath);
    expect(key).to.have.length(32);
    expect(open(key, record.mfa.sealedSecret!, u.id)).to.equal(u.secret);
    // Bound to the user: the same sealed value does not open as another user's.
    expect(() => open(key, record.mfa.sealedSecret!, 'another-user')).to.throw();
  });

  it('login of an enrolled user answers needsMfa and a challenge, no token; mfa/login with an OTP gives the token', async () => {
    freezeTime();
    const u = await enrolled([{ resource: '/api/roles', operation: 'read', context: 'http' }]);
    const login = await gw.api('POST', '/api/login', { body: { username: u.username, password: GOOD_PASSWORD, expireTimeInHours: 2, label: 'mfa-device' } });
    expect(login.status).to.equal(200);
    expect(login.body.needsMfa).to.equal(true);
    expect(login.body.secret).to.be.a('string').with.length.greaterThan(30);
    expect(login.body).not.to.have.any.keys('token', 'expiresAt', 'permissions');
    secrets.add(login.body.secret);

    nextStep(); // the enrollment used this step's OTP
    const res = await mfaLogin({ username: u.username, secret: login.body.secret, otp: await otpNow(u.secret) });
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    expect(res.body.needsMfa).to.equal(false);
    expect(res.body.enforceMFAEnrollment).to.equal(false);
    expect(res.body.token).to.match(/^[A-Za-z0-9_-]{43}$/);
    expect(Date.parse(res.body.expiresAt) - Date.now()).to.be.within(2 * 3600_000 - 60_000, 2 * 3600_000 + 1000);
    expect(res.body.permissions.map((p: Grant) => p.resource)).to.deep.equal(['/api/roles']);

    const session = await gw.api('GET', '/api/session', { token: res.body.token });
    expect(session.status).to.equal(200);
    expect(session.body.mfa).to.deep.equal({ enabled: true, enforced: false });
    expect((await gw.api('GET', '/api/roles', { token: res.body.token })).status).to.equal(200);
    const tokens = await gw.api('GET', `/api/users/${u.id}/tokens`, { token: admin });
    expect(tokens.body.map((t: { label: string }) => t.label)).to.include('mfa-device');
  });

  it('refuses a used challenge and a replayed OTP', async () => {
    freezeTime();
    const u = await enrolled();
    nextStep();
    const first = await passwordLogin(u.username);
    const otp = await otpNow(u.secret);
    expect((await mfaLogin({ username: u.username, secret: first.secret, otp })).status).to.equal(200);

    // The challenge is single-use, even with a fresh OTP.
    nextStep();
    const fresh = await otpNow(u.secret);
    const reused = await mfaLogin({ username: u.username, secret: first.secret, otp: fresh });
    expect(reused.status).to.equal(401);
    expect(reused.body).not.to.have.property('token');

    // The OTP of a step already used is refused with a new challenge; the next step's passes.
    const second = await passwordLogin(u.username);
    expect((await mfaLogin({ username: u.username, secret: second.secret, otp })).status).to.equal(401);
    expect((await mfaLogin({ username: u.username, secret: second.secret, otp: fresh })).status).to.equal(200);
    expect((await mfaLogin({ username: u.username, secret: second.secret, otp: fresh })).status).to.equal(401);
  });

  it('accepts a backup code once', async () => {
    freezeTime();
    const u = await enrolled();
    const [code] = u.backupCodes as [string];
    const first = await passwordLogin(u.username);
    const ok = await mfaLogin({ username: u.username, secret: first.secret, backupCode: code });
    expect(ok.status).to.equal(200);
    expect((await gw.api('GET', '/api/session', { token: ok.body.token })).status).to.equal(200);
    expect(gw.services.store.users.get(u.id)!.mfa.backupCodeHashes).to.have.length(9);

    const second = await passwordLogin(u.username);
    const again = await mfaLogin({ username: u.username, secret: second.secret, backupCode: code });
    expect(again.status).to.equal(401);
    expect(again.body.message).to.match(/invalid OTP or backup code/);
    // Typed in lower case with a dash: still the same code.
    const other = u.backupCodes[1]!;
    const typed = `${other.slice(0, 5)}-${other.slice(5)}`.toLowerCase();
    expect((await mfaLogin({ username: u.username, secret: second.secret, backupCode: typed })).status).to.equal(200);
  });

  it('refuses a challenge presented with another username, an unknown challenge and a missing factor', async () => {
    freezeTime();
    const a = await enrolled();
    const b = await enrolled();
    nextStep();
    const challengeA = await passwordLogin(a.username);
    const crossed = await mfaLogin({ username: b.username, secret: challengeA.secret, otp: await otpNow(b.secret) });
    expect(crossed.status).to.equal(401);
    expect(crossed.body).not.to.have.property('token');
    const unknown = await mfaLogin({ username: a.username, secret: randomBytes(32).toString('base64url'), otp: await otpNow(a.secret) });
    expect(unknown.status).to.equal(401);
    expect((await mfaLogin({ username: a.username, secret: challengeA.secret })).status).to.equal(400);
    expect((await mfaLogin({ username: a.username, secret: challengeA.secret, otp: '123456', backupCode: a.backupCodes[0] })).status).to.equal(400);
    expect((await mfaLogin({ username: a.username, otp: '123456' })).status).to.equal(400); // secret is required
    // The challenge still belongs to a and works for a.
    const ok = await mfaLogin({ username: a.username, secret: challengeA.secret, otp: await otpNow(a.secret) });
    expect(ok.status).to.equal(200);
    expect((await gw.api('GET', '/api/session', { token: ok.body.token })).body.username).to.equal(a.username);
  });

  it('refuses an expired challenge', async () => {
    freezeTime();
    const u = await enrolled();
    const login = await passwordLogin(u.username);
    clock!.tick(gw.config.mfa.challengeSeconds * 1000 + 1000);
    const res = await mfaLogin({ username: u.username, secret: login.secret, otp: await otpNow(u.secret) });
    expect(res.status).to.equal(401);
    expect(res.body.message).to.match(/expired/);
    // A new password login gives a new challenge that works.
    const again = await passwordLogin(u.username);
    expect((await mfaLogin({ username: u.username, secret: again.secret, otp: await otpNow(u.secret) })).status).to.equal(200);
  });

  it('bans MFA logins for banSeconds after maxFailures invalid OTPs or backup codes in a row: 429 even with a right OTP', async () => {
    freezeTime();
    const u = await enrolled();
    nextStep();
    const login = await passwordLogin(u.username);
    const right = await otpNow(u.secret);
    expect(gw.config.mfa.maxFailures).to.equal(5);
    const attempts = [{ otp: wrongOtp(right) }, { backupCode: 'WRONGCODE2' }, { otp: wrongOtp(right) }, { backupCode: 'WRONGCODE3' }, { otp: '000000' === right ? '000001' : '000000' }];
    for (const attempt of attempts) {
      const res = await mfaLogin({ username: u.username, secret: login.secret, ...attempt });
      expect(res.status).to.equal(401);
    }
    const banned = await mfaLogin({ username: u.username, secret: login.secret, otp: right });
    expect(banned.status).to.equal(429);
    expect(banned.body).not.to.have.property('token');
    expect(Number(banned.headers.get('retry-after'))).to.be.within(1, gw.config.mfa.banSeconds);
    expect((await mfaLogin({ username: u.username, secret: login.secret, backupCode: u.backupCodes[0] })).status).to.equal(429);
    // The ban also covers the calls of an authenticated session that need a second factor.
    expect((await gw.api('POST', '/api/mfa/disable', { token: u.token, body: { otp: right } })).status).to.equal(429);

    clock!.tick(gw.config.mfa.banSeconds * 1000 + 1000);
    const after = await passwordLogin(u.username);
    const ok = await mfaLogin({ username: u.username, secret: after.secret, otp: await otpNow(u.secret) });
    expect(ok.status).to.equal(200);
  });

  it('regenerates backup codes with a valid factor: the old codes stop working', async () => {
    freezeTime();
    const u = await enrolled();
    expect((await gw.api('POST', '/api/mfa/regenerate/backupcodes', { token: u.token })).status).to.equal(400);
    expect((await gw.api('POST', '/api/mfa/regenerate/backupcodes', { token: u.token, body: { backupCode: 'NOTACODE22' } })).status).to.equal(401);
    const regen = await gw.api('POST', '/api/mfa/regenerate/backupcodes', { token: u.token, body: { backupCode: u.backupCodes[0] } });
    expect(regen.status).to.equal(200);
    const fresh: string[] = regen.body.backupCodes;
    fresh.forEach((c) => secrets.add(c));
    expect(fresh).to.have.length(10);
    expect(fresh.filter((c) => u.backupCodes.includes(c))).to.deep.equal([]);

    const login = await passwordLogin(u.username);
    expect((await mfaLogin({ username: u.username, secret: login.secret, backupCode: u.backupCodes[1] })).status).to.equal(401);
    expect((await mfaLogin({ username: u.username, secret: login.secret, backupCode: fresh[0] })).status).to.equal(200);

    nextStep();
    const byOtp = await gw.api('POST', '/api/mfa/regenerate/backupcodes', { token: u.token, body: { otp: await otpNow(u.secret) } });
    expect(byOtp.status).to.equal(200);
    byOtp.body.backupCodes.forEach((c: string) => secrets.add(c));
    expect(gw.services.store.users.get(u.id)!.mfa.backupCodeHashes).to.have.length(10);
  });

  it('disables MFA with a valid OTP: the next login gets a token at once', async () => {
    freezeTime();
    const u = await enrolled();
    expect((await gw.api('POST', '/api/mfa/disable', { token: u.token })).status).to.equal(400);
    const wrong = await gw.api('POST', '/api/mfa/disable', { token: u.token, body: { otp: wrongOtp(await otpNow(u.secret)) } });
    expect(wrong.status).to.equal(401);
    nextStep();
    const res = await gw.api('POST', '/api/mfa/disable', { token: u.token, body: { otp: await otpNow(u.secret) } });
    expect(res.status).to.equal(200);
    expect((await gw.api('GET', '/api/mfa/isenrolled', { token: u.token })).body.isEnrolled).to.equal(false);
    expect(gw.services.store.users.get(u.id)!.mfa).to.deep.equal({ enrolled: false, backupCodeHashes: [] });
    const login = await passwordLogin(u.username);
    expect(login.needsMfa).to.equal(false);
    expect(login.token).to.be.a('string');
    // Nothing left to disable.
    expect((await gw.api('POST', '/api/mfa/disable', { token: u.token, body: { backupCode: u.backupCodes[0] } })).status).to.equal(409);
  });

  it('lets an administrator disable MFA of a user (PUT /api/users/{id} disableMfa)', async () => {
    freezeTime();
    const u = await enrolled();
    expect((await passwordLogin(u.username)).needsMfa).to.equal(true);
    const put = await gw.api('PUT', `/api/users/${u.id}`, { token: admin, body: { disableMfa: true } });
    expect(put.status).to.equal(200);
    expect(put.body.mfa_is_enrolled).to.equal(false);
    const login = await passwordLogin(u.username);
    expect(login.needsMfa).to.equal(false);
    expect((await gw.api('GET', '/api/session', { token: login.token })).body.mfa.enabled).to.equal(false);
  });

  it('refuses HTTP Basic of an enrolled user (403) but not of others', async () => {
    freezeTime();
    const u = await enrolled();
    const basic = (user: string, password: string) => ({ authorization: 'Basic ' + Buffer.from(`${user}:${password}`).toString('base64') });
    const res = await gw.api('GET', '/api/session', { headers: basic(u.username, GOOD_PASSWORD) });
    expect(res.status).to.equal(403);
    expect(res.body.message).to.match(/MFA/);
    // A wrong password still answers 401: the refusal tells nothing to who lacks the password.
    expect((await gw.api('GET', '/api/session', { headers: basic(u.username, 'Wrong-Passw0rd') })).status).to.equal(401);
    expect((await gw.api('GET', '/api/session', { headers: basic('admin', ADMIN_PASSWORD) })).status).to.equal(200);
  });

  it('refuses a password MQTT connect of an enrolled user (CONNACK 5) and accepts the token of its MFA login', async () => {
    freezeTime();
    const u = await enrolled([{ resource: 'plant/#', operation: 'readWrite', context: 'mqtt' }]);
    const port = gw.ports.mqtt;
    expect(await connackCode(port, { username: u.username, password: GOOD_PASSWORD })).to.equal(5);
    expect(await connackCode(port, { username: u.username, password: 'Wrong-Passw0rd' })).to.equal(4);
    nextStep();
    const login = await passwordLogin(u.username);
    const res = await mfaLogin({ username: u.username, secret: login.secret, otp: await otpNow(u.secret) });
    expect(res.status).to.equal(200);
    expect(await connackCode(port, { username: u.username, password: res.body.token })).to.equal(0);
  });

  it('gives users with enforceMFAEnrollment a limited token until they enroll, then a full one after the MFA login', async () => {
    freezeTime();
    const created = await gw.api('POST', '/api/users', {
      token: admin,
      body: {
        username: 'must-enroll',
        password: GOOD_PASSWORD,
        identityProvider: 'local',
        enforceMFAEnrollment: true,
        initialPermissions: [{ resource: '/api/roles', operation: 'read', context: 'http' }],
      },
    });
    expect(created.status).to.equal(201);
    const first = await passwordLogin('must-enroll');
    expect(first.enforceMFAEnrollment).to.equal(true);
    expect((await gw.api('GET', '/api/roles', { token: first.token })).status).to.equal(403);
    const enable = await gw.api('POST', '/api/mfa/enable', { token: first.token });
    expect(enable.status).to.equal(200);
    const secret = secretOf(enable.body.uri);
    const validate = await gw.api('POST', '/api/mfa/validate', { token: first.token, body: { otp: await otpNow(secret) } });
    expect(validate.status).to.equal(200);
    validate.body.backupCodes.forEach((c: string) => secrets.add(c));

    nextStep();
    const second = await passwordLogin('must-enroll');
    expect(second.needsMfa).to.equal(true);
    const res = await mfaLogin({ username: 'must-enroll', secret: second.secret, otp: await otpNow(secret) });
    expect(res.status).to.equal(200);
    expect(res.body.enforceMFAEnrollment).to.equal(false);
    expect((await gw.api('GET', '/api/roles', { token: res.body.token })).status).to.equal(200);
    expect((await gw.api('GET', '/api/session', { token: res.body.token })).body.mfa).to.deep.equal({ enabled: true, enforced: true });
  });

  it('needs a credential for the MFA calls except mfa/login', async () => {
    for (const [method, path] of [['POST', '/api/mfa/enable'], ['POST', '/api/mfa/validate'], ['POST', '/api/mfa/disable'], ['POST', '/api/mfa/regenerate/backupcodes'], ['GET', '/api/mfa/isenrolled']] as const) {
      expect((await gw.api(method, path, method === 'GET' ? {} : { body: { otp: '123456' } })).status, path).to.equal(401);
    }
  });

  // Runs last: everything above has been logged by now.
  it('audits MFA events and never logs an OTP, TOTP secret, challenge, backup code or token', () => {
    const lines = gw.logs();
    const text = lines.map((l) => JSON.stringify(l)).join('\n');
    expect(secrets.size).to.be.greaterThan(20);
    for (const s of secrets) expect(text, 'a secret was logged').not.to.include(s);
    // Six digits can occur by chance inside ids or timings: look for an OTP as a whole value.
    const values: string[] = [];
    const walk = (v: unknown): void => {
      if (typeof v === 'string') values.push(v);
      else if (v && typeof v === 'object') Object.values(v).forEach(walk);
    };
    lines.forEach(walk);
    for (const otp of otps) expect(values, 'an OTP was logged').not.to.include(otp);

    const audits = lines.filter((l) => l.audit === true).map((l) => l.message);
    for (const event of ['mfa enrollment started', 'mfa enrolled', 'mfa enrollment failed', 'login needs mfa', 'mfa check failed', 'mfa banned', 'mfa refused', 'mfa login failed', 'mfa backup code used', 'mfa backup codes regenerated', 'mfa disabled']) {
      expect(audits, event).to.include(event);
    }
    expect(lines.some((l) => l.audit === true && l.message === 'login' && l.via === 'mfa')).to.equal(true);
  });
});

describe('MFA configuration', () => {
  const dirs: string[] = [];
  after(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

  it('seals with the key of mfa.encryptionKeyFile and creates no key file in the data directory', async () => {
    const keyDir = mkdtempSync(join(tmpdir(), 'gatewayd-mfa-key-'));
    dirs.push(keyDir);
    const key = randomBytes(32);
    const keyFile = join(keyDir, 'key.hex');
    writeFileSync(keyFile, key.toString('hex') + '\n', { mode: 0o600 });
    const gw = await startGateway({ overrides: { mfa: { encryptionKeyFile: keyFile } } });
    try {
      const u = await gw.userWith([]);
      const enable = await gw.api('POST', '/api/mfa/enable', { token: u.token });
      const secret = new URL(enable.body.uri).searchParams.get('secret')!;
      const validate = await gw.api('POST', '/api/mfa/validate', { token: u.token, body: { otp: await oathtool(secret) } });
      expect(validate.status).to.equal(200);
      const record = gw.services.store.users.get(u.id)!;
      expect(open(key, record.mfa.sealedSecret!, u.id)).to.equal(secret);
      expect(existsSync(join(gw.dataDir, 'mfa.key'))).to.equal(false);
    } finally {
      await gw.stop();
    }
  });

  it('refuses to start when mfa.encryptionKeyFile cannot be read (configuration error)', async () => {
    const dataDir = tempDir();
    dirs.push(dataDir);
    let error: unknown;
    try {
      const gw = await startGateway({ dataDir, overrides: { mfa: { encryptionKeyFile: join(dataDir, 'no-such-key') } } });
      await gw.stop();
    } catch (err) {
      error = err;
    }
    expect(error).to.be.instanceOf(Error);
    expect((error as Error).name).to.equal('ConfigError');
    expect((error as Error).message).to.include('mfa.encryptionKeyFile');
  });

  it('answers 409 to enrollment when mfa.enabled is false; enrolled users still need their second factor', async () => {
    const dataDir = tempDir();
    dirs.push(dataDir);
    // Enroll while enabled, then restart with MFA switched off.
    let gw = await startGateway({ dataDir });
    const u = await gw.userWith([]);
    const enable = await gw.api('POST', '/api/mfa/enable', { token: u.token });
    const secret = new URL(enable.body.uri).searchParams.get('secret')!;
    expect((await gw.api('POST', '/api/mfa/validate', { token: u.token, body: { otp: await oathtool(secret) } })).status).to.equal(200);
    await gw.stop();

    gw = await startGateway({ dataDir, overrides: { mfa: { enabled: false } } });
    try {
      expect((await gw.api('GET', '/api/auth/mfa')).status).to.equal(401);
      const admin = await gw.login();
      expect((await gw.api('GET', '/api/auth/mfa', { token: admin })).body).to.deep.equal({ enabled: false });
      const res = await gw.api('POST', '/api/mfa/enable', { token: admin });
      expect(res.status).to.equal(409);
      expect(res.body.message).to.match(/disabled by configuration/);
      const login = await gw.api('POST', '/api/login', { body: { username: u.username, password: GOOD_PASSWORD } });
      expect(login.body.needsMfa).to.equal(true);
      expect(login.body).not.to.have.property('token');
    } finally {
      await gw.stop();
    }
  });
});
