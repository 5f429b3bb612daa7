// Client self-registration against the real gateway: HTTP, LMDB, the gateway CA, the broker
// (TCP and TLS) and the openssl CLI. Expiry is tested on real time with a short window and a
// bounded poll of the status (no fake timers: the timer and the lazy check are both real).
import { execFile } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { GOOD_PASSWORD, startGateway, tempDir, type TestGateway } from './support/harness.js';
import { connackCode, connect, endAllClients } from './support/mqtt-test-kit.js';

const run = promisify(execFile);
type Grant = { resource: string; operation: 'read' | 'write' | 'readWrite'; context: 'mqtt' | 'http' };
const mqttGrant = (resource: string): Grant => ({ resource, operation: 'readWrite', context: 'mqtt' });

const MAX_DURATION = 600_000;
const DEFAULT_DURATION = 45_000;
const MAX_PENDING = 5;

async function waitFor(what: string, check: () => Promise<boolean>, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`${what}: not within ${ms} ms`);
}

describe('client registry', function () {
  this.timeout(30_000);
  let gw: TestGateway;
  let admin: string;
  let pki: string;
  let seq = 0;
  const name = (prefix = 'device') => `${prefix}-${process.pid}-${++seq}`;

  /** A fresh RSA key and CSR with CN = cn made by the openssl CLI. */
  async function makeCsr(cn: string): Promise<{ key: string; keyPem: string; csrPem: string; csrBase64: string }> {
    const key = join(pki, `${cn}.key`);
    const csr = join(pki, `${cn}.csr`);
    await run('openssl', ['req', '-new', '-newkey', 'rsa:2048', '-nodes', '-subj', `/CN=${cn}`, '-keyout', key, '-out', csr]);
    const csrPem = readFileSync(csr, 'utf8');
    return { key, keyPem: readFileSync(key, 'utf8'), csrPem, csrBase64: Buffer.from(csrPem).toString('base64') };
  }

  const register = (body: Record<string, unknown>) => gw.api('POST', '/api/client-registry/register', { body });
  const open = (duration?: number, token = admin) =>
    gw.api('POST', '/api/client-registry/open', { token, ...(duration !== undefined ? { body: { duration } } : {}) });
  const list = async () => {
    const res = await gw.api('GET', '/api/client-registry', { token: admin });
    expect(res.status).to.equal(200);
    return res.body as Record<string, any>[];
  };
  const status = async () => (await gw.api('GET', '/api/client-registry/status', { token: admin })).body as { status: string; unlockedUntil: number };

  before(async () => {
    gw = await startGateway({
      overrides: {
        registry: { defaultDurationMs: DEFAULT_DURATION, maxDurationMs: MAX_DURATION, maxPendingRequests: MAX_PENDING },
        policy: { username: { min: 4 } },
        // No delays, lockout at the third failure: shows that confirm clears the count.
        auth: { loginThrottle: { freeAttempts: 3, maxAttempts: 3, delayStepMs: 0, maxDelayMs: 0, lockoutSeconds: 300, maxTrackedUsernames: 10000 } },
      },
    });
    admin = await gw.login();
    pki = tempDir('gatewayd-registry-');
    const role = await gw.api('POST', '/api/roles', { token: admin, body: { name: 'field-devices', isShared: true, permissions: [mqttGrant('field/#')] } });
    expect(role.status).to.equal(201);
  });
  after(async () => {
    await gw.stop();
    rmSync(pki, { recursive: true, force: true });
  });
  // Every test starts from a locked, empty registry.
  beforeEach(async () => {
    expect((await gw.api('POST', '/api/client-registry/lock', { token: admin })).status).to.equal(204);
  });
  afterEach(() => endAllClients());

  it('is locked at first: register answers 423 and the status says locked', async () => {
    expect(await status()).to.deep.equal({ status: 'locked', unlockedUntil: 0 });
    const res = await register({ username: name(), password: GOOD_PASSWORD, context: 'line 1' });
    expect(res.status).to.equal(423);
    expect(res.body.error).to.equal('Locked');
  });

  it('opens for the given duration, or the configured default, and refuses more than the maximum', async () => {
    let before = Date.now();
    expect((await open(60_000)).status).to.equal(204);
    let s = await status();
    expect(s.status).to.equal('open');
    expect(s.unlockedUntil).to.be.within(before + 60_000, Date.now() + 60_000);

    before = Date.now();
    expect((await open()).status).to.equal(204);
    s = await status();
    expect(s.unlockedUntil, 'registry.defaultDurationMs applies without a body').to.be.within(before + DEFAULT_DURATION, Date.now() + DEFAULT_DURATION);
    before = Date.now();
    expect((await gw.api('POST', '/api/client-registry/open', { token: admin, body: {} })).status).to.equal(204);
    s = await status();
    expect(s.unlockedUntil, 'and with an empty body').to.be.within(before + DEFAULT_DURATION, Date.now() + DEFAULT_DURATION);

    const tooLong = await open(MAX_DURATION + 1);
    expect(tooLong.status).to.equal(400);
    expect(tooLong.body.message).to.contain(String(MAX_DURATION));
    expect((await open(0)).status).to.equal(400);
  });

  it('relocks itself when the time is up, keeping the requests until an explicit lock', async () => {
    const username = name();
    expect((await open(400)).status).to.equal(204);
    expect((await register({ username, password: GOOD_PASSWORD, context: 'short window' })).status).to.equal(202);
    await waitFor('registry relocked', async () => (await status()).status === 'locked');
    expect(await status()).to.deep.equal({ status: 'locked', unlockedUntil: 0 });
    expect((await register({ username, password: GOOD_PASSWORD, context: 'short window' })).status).to.equal(423);
    expect((await list()).map((e) => e.username)).to.deep.equal([username]);
    expect(gw.logs().some((l) => l.message === 'registry relocked' && l.audit === true)).to.equal(true);
  });

  it('lock relocks at once and flushes every request', async () => {
    expect((await open(60_000)).status).to.equal(204);
    expect((await register({ username: name(), password: GOOD_PASSWORD, context: 'a' })).status).to.equal(202);
    expect((await register({ username: name(), password: GOOD_PASSWORD, context: 'b' })).status).to.equal(202);
    expect(await list()).to.have.length(2);
    expect((await gw.api('POST', '/api/client-registry/lock', { token: admin })).status).to.equal(204);
    expect(await status()).to.deep.equal({ status: 'locked', unlockedUntil: 0 });
    expect(await list()).to.deep.equal([]);
  });

  it('password device: 202 pending, 202 on repeat, confirm creates the user, 201 {} once, then its password logs in', async () => {
    const username = name();
    const request = {
      username,
      password: GOOD_PASSWORD,
      roles: ['field-devices'],
      permissions: [{ resource: `devices/${username}/#`, operation: 'write', context: 'mqtt' }],
      context: 'press 4, hall B',
    };
    expect((await open(60_000)).status).to.equal(204);
    const first = await register(request);
    expect(first.status).to.equal(202);
    expect(first.body.status).to.equal('pending');
    expect((await register(request)).status).to.equal(202);

    const [entry] = await list();
    expect(entry).to.include({ username, credentialType: 'password', context: 'press 4, hall B', granted: false });
    expect(entry!.roles).to.deep.equal(['field-devices']);
    expect(entry!.permissions).to.deep.equal(request.permissions);
    expect(Number.isNaN(Date.parse(entry!.timestamp))).to.equal(false);

    const confirmed = await gw.api('POST', '/api/client-registry/confirm', { token: admin, body: { username } });
    expect(confirmed.status).to.equal(200);
    expect(confirmed.body.username).to.equal(username);
    expect(confirmed.body.grantTypes).to.deep.equal([{ method: 'password', isRequired: true }]);
    const roleNames = confirmed.body.roles.map((r: { name: string }) => r.name);
    expect(roleNames).to.include('field-devices');
    const direct = confirmed.body.roles.find((r: { isShared: boolean }) => !r.isShared);
    expect(direct.permissions.map((p: Grant) => p.resource)).to.deep.equal([`devices/${username}/#`]);
    expect((await list())[0]).to.include({ username, granted: true });

    const granted = await register(request);
    expect(granted.status).to.equal(201);
    expect(granted.body).to.deep.equal({});
    expect(await list(), 'delivered once, then removed').to.deep.equal([]);
    expect(await gw.login(username, GOOD_PASSWORD)).to.be.a('string');
    const again = await register(request);
    expect(again.status, 'the user exists now').to.equal(409);

    // The registry never logs the password.
    expect(JSON.stringify(gw.logs())).to.not.contain(GOOD_PASSWORD);
    const audits = gw.logs().filter((l) => l.audit === true && String(l.message).startsWith('registration') && l.username === username);
    expect(audits.map((l) => l.message)).to.include.members(['registration requested', 'registration confirmed', 'registration delivered']);
  });

  it('confirm body roles and permissions replace the requested ones', async () => {
    const username = name();
    expect((await open(60_000)).status).to.equal(204);
    const req = { username, password: GOOD_PASSWORD, roles: ['field-devices'], context: 'x' };
    expect((await register(req)).status).to.equal(202);
    const other = await gw.api('POST', '/api/roles', { token: admin, body: { name: `other-${username}`, isShared: true, permissions: [mqttGrant('other/#')] } });
    const confirmed = await gw.api('POST', '/api/client-registry/confirm', {
      token: admin,
      body: { username, roles: [other.body.id], initialPermissions: [mqttGrant('only/this')], mqttPublishPrefix: 'site-1/' },
    });
    expect(confirmed.status).to.equal(200);
    expect(confirmed.body.mqttPublishPrefix).to.equal('site-1/');
    const names = confirmed.body.roles.map((r: { name: string }) => r.name);
    expect(names).to.include(`other-${username}`).and.not.include('field-devices');
    const direct = confirmed.body.roles.find((r: { isShared: boolean }) => !r.isShared);
    expect(direct.permissions.map((p: Grant) => p.resource)).to.deep.equal(['only/this']);
  });

  it('CSR device: confirm signs the CSR with the gateway CA, the poll returns it, and it opens MQTTS', async () => {
    const username = name('sensor');
    const { key, keyPem, csrBase64 } = await makeCsr(username);
    expect((await open(60_000)).status).to.equal(204);
    const request = { username, csr: csrBase64, permissions: [mqttGrant(`sensors/${username}/#`)], context: 'cold store' };
    expect((await register(request)).status).to.equal(202);
    expect((await register(request)).status).to.equal(202);
    expect((await list())[0]).to.include({ username, credentialType: 'certificate', granted: false });

    const confirmed = await gw.api('POST', '/api/client-registry/confirm', { token: admin, body: { username } });
    expect(confirmed.status).to.equal(200);
    expect(confirmed.body.grantTypes).to.deep.equal([{ method: 'certificate', isRequired: true }]);
    expect(confirmed.body.certificates).to.have.length(1);

    const granted = await register(request);
    expect(granted.status).to.equal(201);
    const certPem = Buffer.from(granted.body.certificate, 'base64').toString('utf8');
    const x509 = new X509Certificate(certPem);
    expect(x509.subject).to.equal(`CN=${username}`);
    expect(confirmed.body.certificates[0].fingerprint).to.equal(x509.fingerprint256.replace(/:/g, '').toLowerCase());
    const days = (Date.parse(x509.validTo) - Date.now()) / 86_400_000;
    expect(days).to.be.within(gw.config.registry.certificateValidityDays - 1, gw.config.registry.certificateValidityDays + 1);

    const caFile = join(pki, 'gateway-ca.pem');
    const certFile = join(pki, `${username}.crt`);
    writeFileSync(caFile, gw.services.ca!.caCertPem);
    writeFileSync(certFile, certPem);
    const verified = await run('openssl', ['verify', '-CAfile', caFile, certFile]);
    expect(verified.stdout).to.contain(': OK');

    const client = await connect(gw.ports.mqtts, { protocol: 'mqtts', ca: gw.services.ca!.caCertPem, cert: certPem, key: keyPem, servername: 'localhost' } as never);
    expect(client.connected).to.equal(true);
    await client.publishAsync(`sensors/${username}/t`, '4.2', { qos: 1 });
    expect(key).to.be.a('string');
  });

  it('a device may send a password and a CSR: it gets the certificate and can log in with the password', async () => {
    const username = name('both');
    const { csrBase64 } = await makeCsr(username);
    expect((await open(60_000)).status).to.equal(204);
    const request = { username, password: GOOD_PASSWORD, csr: csrBase64, context: 'x' };
    expect((await register(request)).status).to.equal(202);
    expect((await register({ username, password: GOOD_PASSWORD, context: 'x' })).status, 'the CSR is part of the credentials').to.equal(409);
    expect((await list())[0]).to.include({ credentialType: 'certificate' });
    const confirmed = await gw.api('POST', '/api/client-registry/confirm', { token: admin, body: { username } });
    expect(confirmed.body.grantTypes).to.deep.equal([{ method: 'password', isRequired: false }, { method: 'certificate', isRequired: false }]);
    expect((await gw.api('POST', '/api/client-registry/confirm', { token: admin, body: { username } })).status, 'confirmed once').to.equal(409);
    const granted = await register(request);
    expect(granted.status).to.equal(201);
    expect(Buffer.from(granted.body.certificate, 'base64').toString('utf8')).to.contain('-----BEGIN CERTIFICATE-----');
    expect(await gw.login(username, GOOD_PASSWORD)).to.be.a('string');
  });

  it('refuses a CSR whose CN is not the username (400) and a CSR that is no CSR', async () => {
    const { csrBase64 } = await makeCsr(`someone-else-${process.pid}`);
    expect((await open(60_000)).status).to.equal(204);
    const res = await register({ username: name(), csr: csrBase64, context: 'x' });
    expect(res.status).to.equal(400);
    expect(res.body.message).to.match(/common name/i);
    const garbage = await register({ username: name(), csr: Buffer.from('hello').toString('base64'), context: 'x' });
    expect(garbage.status).to.equal(400);
    expect(await list()).to.deep.equal([]);
  });

  it('answers 409 for a pending username with other credentials and for an existing user', async () => {
    const username = name();
    expect((await open(60_000)).status).to.equal(204);
    expect((await register({ username, password: GOOD_PASSWORD, context: 'x' })).status).to.equal(202);
    expect((await register({ username, password: 'Other-Passw0rd', context: 'x' })).status).to.equal(409);
    const { csrBase64 } = await makeCsr(username);
    expect((await register({ username, csr: csrBase64, context: 'x' })).status).to.equal(409);
    expect((await register({ username, password: GOOD_PASSWORD, csr: csrBase64, context: 'x' })).status).to.equal(409);
    expect((await register({ username, password: GOOD_PASSWORD, context: 'x' })).status, 'the original still polls').to.equal(202);

    const csrName = name('csr');
    const a = await makeCsr(csrName);
    const b = await makeCsr(csrName);
    expect((await register({ username: csrName, csr: a.csrBase64, context: 'x' })).status).to.equal(202);
    expect((await register({ username: csrName, csr: b.csrBase64, context: 'x' })).status).to.equal(409);
    // The same CSR as plain PEM is the same request.
    expect((await register({ username: csrName, csr: a.csrPem, context: 'x' })).status).to.equal(202);

    const existing = await gw.userWith([mqttGrant('x/#')]);
    const taken = await register({ username: existing.username, password: GOOD_PASSWORD, context: 'x' });
    expect(taken.status).to.equal(409);
    expect(taken.body.message).to.contain('already exists');
  });

  it('checks the policies (422), role names (400) and permissions (400)', async () => {
    expect((await open(60_000)).status).to.equal(204);
    expect((await register({ username: name(), password: 'weakpassword', context: 'x' })).status).to.equal(422);
    expect((await register({ username: 'abc', password: GOOD_PASSWORD, context: 'x' })).status, 'username policy min 4').to.equal(422);
    const unknownRole = await register({ username: name(), password: GOOD_PASSWORD, roles: ['no-such-role'], context: 'x' });
    expect(unknownRole.status).to.equal(400);
    expect(unknownRole.body.message).to.contain('no-such-role');
    const badPermission = await register({ username: name(), password: GOOD_PASSWORD, permissions: [{ resource: 'a/#/b', operation: 'read', context: 'mqtt' }], context: 'x' });
    expect(badPermission.status).to.equal(400);
    expect((await register({ username: name(), context: 'neither password nor csr' })).status).to.equal(400);
    expect(await list()).to.deep.equal([]);
  });

  it('bounds the pending list by registry.maxPendingRequests (503 beyond)', async () => {
    expect((await open(60_000)).status).to.equal(204);
    for (let i = 0; i < MAX_PENDING; i++) expect((await register({ username: name(), password: GOOD_PASSWORD, context: 'x' })).status).to.equal(202);
    const full = await register({ username: name(), password: GOOD_PASSWORD, context: 'x' });
    expect(full.status).to.equal(503);
    expect(full.body.message).to.contain(String(MAX_PENDING));
  });

  it('confirm of an unknown username is 404; dropping a request is idempotent', async () => {
    expect((await gw.api('POST', '/api/client-registry/confirm', { token: admin, body: { username: 'nobody-pending' } })).status).to.equal(404);
    const username = name();
    expect((await open(60_000)).status).to.equal(204);
    expect((await register({ username, password: GOOD_PASSWORD, context: 'x' })).status).to.equal(202);
    expect((await gw.api('DELETE', `/api/client-registry/runners/${username}`, { token: admin })).status).to.equal(200);
    expect(await list()).to.deep.equal([]);
    expect((await gw.api('DELETE', `/api/client-registry/runners/${username}`, { token: admin })).status).to.equal(200);
    expect((await gw.api('POST', '/api/client-registry/confirm', { token: admin, body: { username } })).status).to.equal(404);
  });

  it('records an MQTT CONNECT of an unknown user while open, refuses it, and lets it in after confirm', async () => {
    const username = name('plc');
    const port = gw.ports.mqtt;
    expect(await connackCode(port, { username, password: GOOD_PASSWORD })).to.equal(4);
    expect(await list(), 'not recorded while locked').to.deep.equal([]);

    expect((await open(60_000)).status).to.equal(204);
    expect(await connackCode(port, { username, password: GOOD_PASSWORD })).to.equal(4);
    const [entry] = await list();
    expect(entry).to.include({ username, credentialType: 'password', context: 'mqtt connect', granted: false });
    expect(entry!.roles).to.deep.equal([]);
    // Another password for the same name neither replaces nor adds a request.
    expect(await connackCode(port, { username, password: 'Other-Passw0rd' })).to.equal(4);
    expect(await list()).to.have.length(1);
    // Three failures: the username is now locked out by the login throttle.
    expect(await connackCode(port, { username, password: GOOD_PASSWORD })).to.not.equal(0);

    const confirmed = await gw.api('POST', '/api/client-registry/confirm', { token: admin, body: { username, initialPermissions: [mqttGrant(`plc/${username}/#`)] } });
    expect(confirmed.status).to.equal(200);
    expect(await list(), 'an MQTT request is done once confirmed').to.deep.equal([]);
    expect(await connackCode(port, { username, password: GOOD_PASSWORD })).to.equal(0);
    expect(await connackCode(port, { username, password: 'Other-Passw0rd' })).to.equal(4);
  });

  it('needs http permissions for everything but register, which is public', async () => {
    const nobody = await gw.userWith([mqttGrant('x/#')]);
    for (const [method, path, body] of [
      ['GET', '/api/client-registry', undefined],
      ['GET', '/api/client-registry/status', undefined],
      ['POST', '/api/client-registry/open', { duration: 1000 }],
      ['POST', '/api/client-registry/lock', undefined],
      ['POST', '/api/client-registry/confirm', { username: 'whoever' }],
      ['DELETE', '/api/client-registry/runners/whoever', undefined],
    ] as const) {
      expect((await gw.api(method, path, { token: nobody.token, body })).status, `${method} ${path}`).to.equal(403);
      expect((await gw.api(method, path, { body })).status, `${method} ${path} anonymous`).to.equal(401);
    }
    const reader = await gw.userWith([{ resource: '/api/client-registry', operation: 'read', context: 'http' }]);
    expect((await gw.api('GET', '/api/client-registry', { token: reader.token })).status).to.equal(200);
    expect((await open(1000, reader.token)).status).to.equal(403);
    const opener = await gw.userWith([{ resource: '/api/client-registry/+', operation: 'write', context: 'http' }]);
    expect((await open(60_000, opener.token)).status).to.equal(204);
    // Anonymous register reaches the registry (no 401).
    expect((await register({ username: name(), password: GOOD_PASSWORD, context: 'x' })).status).to.equal(202);
  });
});
