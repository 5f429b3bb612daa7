// Brute-force limits that concurrency cannot race (issue 11 point 3), against the real gateway:
// bursts of concurrent wrong passwords and OTPs evaluate at most maxAttempts / maxFailures, a
// spray of made-up usernames leaves a lock in place, the per-address limit, and tokens that end
// with an MFA enrolment. Login times that do not tell whether a username exists: login-timing.test.ts.
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import net from 'node:net';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { GOOD_PASSWORD, startGateway, type TestGateway } from './support/harness.js';
import { closed, connackCode, connect, endAllClients } from './support/mqtt-test-kit.js';

const run = promisify(execFile);
const http = (resource: string) => ({ resource, operation: 'readWrite' as const, context: 'http' as const });

async function oathtool(secret: string): Promise<string> {
  const { stdout } = await run('oathtool', ['--totp', '-b', secret]);
  return stdout.trim();
}

describe('brute force that cannot be raced', function () {
  this.timeout(120_000);

  describe('passwords and OTPs', () => {
    let gw: TestGateway;
    before(async () => {
      gw = await startGateway({ overrides: { auth: { loginThrottle: { maxFailuresPerAddress: 0 } } } });
    });
    after(() => gw.stop());

    it('evaluates at most maxAttempts of 60 concurrent wrong passwords; the rest get 429 and the user is locked', async () => {
      const victim = await gw.userWith([http('/api/session')]);
      const results = await Promise.all(Array.from({ length: 60 }, () => gw.api('POST', '/api/login', { body: { username: victim.username, password: 'Wrong-Passw0rd!' } })));
      const evaluated = results.filter((r) => r.status === 401).length;
      expect(evaluated).to.be.within(1, gw.config.auth.loginThrottle.maxAttempts);
      expect(results.filter((r) => r.status === 429)).to.have.length(60 - evaluated);
      const audited = gw.logs().filter((l) => l.message === 'login failed' && l.username === victim.username).length;
      expect(audited).to.equal(evaluated);
      expect((await gw.api('POST', '/api/login', { body: { username: victim.username, password: GOOD_PASSWORD } })).status, 'locked').to.equal(429);
    });

    it('the same for HTTP Basic and for MQTT password CONNECTs: at most maxAttempts evaluated, then locked', async () => {
      const max = gw.config.auth.loginThrottle.maxAttempts;
      const failedVia = (username: string, via: string) => gw.logs().filter((l) => l.message === 'login failed' && l.username === username && l.via === via).length;
      const basic = (username: string, password: string) => ({ authorization: `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}` });
      const webUser = await gw.userWith([http('/api/session')]);
      const web = await Promise.all(Array.from({ length: 60 }, () => gw.api('GET', '/api/session', { headers: basic(webUser.username, 'Wrong-Passw0rd!') })));
      expect(failedVia(webUser.username, 'basic')).to.be.within(1, max);
      expect(web.filter((r) => r.status === 401)).to.have.length(failedVia(webUser.username, 'basic'));
      expect(web.filter((r) => r.status === 429)).to.have.length(60 - failedVia(webUser.username, 'basic'));
      expect((await gw.api('GET', '/api/session', { headers: basic(webUser.username, GOOD_PASSWORD) })).status, 'locked').to.equal(429);

      const device = await gw.userWith([{ resource: 'burst/#', operation: 'write', context: 'mqtt' }]);
      const codes = await Promise.all(Array.from({ length: 60 }, (_, i) => connackCode(gw.ports.mqtt, { username: device.username, password: 'Wrong-Passw0rd!', clientId: `burst-${i}`, reconnectPeriod: 0 })));
      expect(codes.every((c) => c !== 0), JSON.stringify(codes)).to.equal(true);
      expect(failedVia(device.username, 'mqtt')).to.be.within(1, max);
      expect(await connackCode(gw.ports.mqtt, { username: device.username, password: GOOD_PASSWORD, reconnectPeriod: 0 }), 'locked').to.not.equal(0);
    });

    it('a CONNECT refused by the lock is one audit line with its reason, not an error line too (a locked-out client cannot double the log)', async () => {
      const device = await gw.userWith([{ resource: 'locked/#', operation: 'write', context: 'mqtt' }]);
      const refusedLines = () => gw.logs().filter((l) => l.message === 'mqtt.connect.refused' && l.username === device.username);
      const max = gw.config.auth.loginThrottle.maxAttempts;
      for (let i = 0; i < max; i++) expect(await connackCode(gw.ports.mqtt, { username: device.username, password: 'Wrong-Passw0rd!', reconnectPeriod: 0 })).to.equal(4);
      const errorsBefore = gw.logs().filter((l) => l.level === 'error').length;
      const linesBefore = refusedLines().length;
      for (let i = 0; i < 5; i++) expect(await connackCode(gw.ports.mqtt, { username: device.username, password: GOOD_PASSWORD, reconnectPeriod: 0 }), 'locked').to.equal(3);
      const locked = refusedLines().slice(linesBefore);
      expect(locked.map((l) => [l.returnCode, l.reason])).to.deep.equal(Array.from({ length: 5 }, () => [3, 'too many failed attempts']));
      expect(gw.logs().filter((l) => l.level === 'error').slice(errorsBefore)).to.deep.equal([]);
    });

    it('counts the current password of a password change like a login (a token is no unlimited password oracle)', async () => {
      const u = await gw.userWith([http('/api/users/change-password')]);
      const results = await Promise.all(
        Array.from({ length: 30 }, () => gw.api('PUT', '/api/users/change-password', { token: u.token, body: { password: 'Wrong-Passw0rd!', newPassword: 'N3w-Passw0rd!' } })),
      );
      const evaluated = gw.logs().filter((l) => l.message === 'password change refused' && l.userId === u.id).length;
      expect(evaluated).to.be.within(1, gw.config.auth.loginThrottle.maxAttempts);
      expect(results.filter((r) => r.status === 401)).to.have.length(evaluated);
      expect(results.filter((r) => r.status === 429)).to.have.length(30 - evaluated);
      expect((await gw.api('POST', '/api/login', { body: { username: u.username, password: GOOD_PASSWORD } })).status, 'locked').to.equal(429);
    });

    it('evaluates at most maxFailures of 100 concurrent OTP guesses', async () => {
      const u = await gw.userWith([http('/api/session')]);
      const enable = await gw.api('POST', '/api/mfa/enable', { token: u.token });
      const secret = new URL(enable.body.uri).searchParams.get('secret')!;
      expect((await gw.api('POST', '/api/mfa/validate', { token: u.token, body: { otp: await oathtool(secret) } })).status).to.equal(200);
      // Ten second-step challenges, so that guesses really run side by side.
      const challenges: string[] = [];
      for (let i = 0; i < 10; i++) {
        const login = await gw.api('POST', '/api/login', { body: { username: u.username, password: GOOD_PASSWORD } });
        expect(login.body.needsMfa).to.equal(true);
        challenges.push(login.body.secret);
      }
      const good = await oathtool(secret);
      const wrong = String((Number(good) + 500_001) % 1_000_000).padStart(6, '0');
      const results = await Promise.all(
        Array.from({ length: 100 }, (_, i) => gw.api('POST', '/api/mfa/login', { body: { username: u.username, secret: challenges[i % 10], otp: wrong } })),
      );
      const evaluated = gw.logs().filter((l) => l.message === 'mfa check failed' && l.userId === u.id).length;
      expect(evaluated).to.be.within(1, gw.config.mfa.maxFailures);
      expect(results.every((r) => r.status === 401 || r.status === 429)).to.equal(true);
      expect(results.filter((r) => r.status === 429).length).to.be.above(0);
      const after = await gw.api('POST', '/api/mfa/login', { body: { username: u.username, secret: challenges[0], otp: await oathtool(secret) } });
      expect(after.status, 'banned, even with the right code').to.equal(429);
    });

    it('lets 40 devices sharing one username connect at once with the right password (MQTT)', async () => {
      const fleet = await gw.userWith([{ resource: 'fleet/#', operation: 'write', context: 'mqtt' }]);
      const codes = await Promise.all(Array.from({ length: 40 }, (_, i) => connackCode(gw.ports.mqtt, { username: fleet.username, password: GOOD_PASSWORD, clientId: `fleet-${i}`, reconnectPeriod: 0 })));
      expect(codes.every((c) => c === 0), JSON.stringify(codes)).to.equal(true);
    });

    it('keeps a lock however many made-up usernames fail after it', async () => {
      const small = await startGateway({ overrides: { auth: { loginThrottle: { maxTrackedUsernames: 20, maxFailuresPerAddress: 0 } } } });
      try {
        const victim = await small.userWith([http('/api/session')]);
        const max = small.config.auth.loginThrottle.maxAttempts;
        for (let i = 0; i < max; i++) await small.api('POST', '/api/login', { body: { username: victim.username, password: 'Wrong-Passw0rd!' } });
        // Ten times the counter table's bound, to evict every counter it holds.
        for (let i = 0; i < 200; i += 20) {
          await Promise.all(Array.from({ length: 20 }, (_, k) => small.api('POST', '/api/login', { body: { username: `made-up-${i + k}`, password: 'Wrong-Passw0rd!' } })));
        }
        const after = await small.api('POST', '/api/login', { body: { username: victim.username, password: GOOD_PASSWORD } });
        expect(after.status).to.equal(429);
        expect(Number(after.headers.get('retry-after'))).to.be.above(0);
      } finally {
        await small.stop();
      }
    });

    it('refuses an address after maxFailuresPerAddress failures across usernames', async () => {
      const limited = await startGateway({ overrides: { auth: { loginThrottle: { maxFailuresPerAddress: 15 } } } });
      try {
        const someone = await limited.userWith([http('/api/session')]);
        for (let i = 0; i < 15; i++) expect((await limited.api('POST', '/api/login', { body: { username: `spray-${i}`, password: 'Wrong-Passw0rd!' } })).status).to.equal(401);
        const refused = await limited.api('POST', '/api/login', { body: { username: someone.username, password: GOOD_PASSWORD } });
        expect(refused.status).to.equal(429);
        expect(refused.body.message).to.include('address');
      } finally {
        await limited.stop();
      }
    });

    it('ends every other token of a user who enrols in MFA, and its MQTT sessions (password and token); the enrolling one goes on', async () => {
      const u = await gw.userWith([http('/api/session'), { resource: 'enrol/#', operation: 'read', context: 'mqtt' }]);
      const other = await gw.login(u.username, GOOD_PASSWORD);
      const byPassword = await connect(gw.ports.mqtt, { username: u.username, password: GOOD_PASSWORD });
      const byToken = await connect(gw.ports.mqtt, { username: u.username, password: other });
      const ends = [closed(byPassword, 5000), closed(byToken, 5000)];
      const enable = await gw.api('POST', '/api/mfa/enable', { token: u.token });
      const secret = new URL(enable.body.uri).searchParams.get('secret')!;
      expect((await gw.api('POST', '/api/mfa/validate', { token: u.token, body: { otp: await oathtool(secret) } })).status).to.equal(200);
      await Promise.all(ends);
      expect((await gw.api('GET', '/api/session', { token: other })).status).to.equal(401);
      expect((await gw.api('GET', '/api/session', { token: u.token })).status).to.equal(200);
    });

    it('a password change by the user ends its other tokens and its MQTT sessions signed in with the old password', async () => {
      const u = await gw.userWith([http('/api/session'), http('/api/users/change-password'), { resource: 'pw/#', operation: 'read', context: 'mqtt' }]);
      const other = await gw.login(u.username, GOOD_PASSWORD);
      const byPassword = await connect(gw.ports.mqtt, { username: u.username, password: GOOD_PASSWORD });
      const byToken = await connect(gw.ports.mqtt, { username: u.username, password: other });
      const kept = await connect(gw.ports.mqtt, { username: u.username, password: u.token });
      const ends = [closed(byPassword, 5000), closed(byToken, 5000)];
      const changed = await gw.api('PUT', '/api/users/change-password', { token: u.token, body: { password: GOOD_PASSWORD, newPassword: 'N3w-Passw0rd!' } });
      expect(changed.status, JSON.stringify(changed.body)).to.equal(204);
      await Promise.all(ends);
      expect(kept.connected, 'the session of the token that made the change stays').to.equal(true);
      expect((await gw.api('GET', '/api/session', { token: other })).status).to.equal(401);
      expect((await gw.api('GET', '/api/session', { token: u.token })).status).to.equal(200);
      expect(await connackCode(gw.ports.mqtt, { username: u.username, password: GOOD_PASSWORD })).to.equal(4);
      await endAllClients();
    });
  });

  describe('refused MQTT CONNECTs', () => {
    let gw: TestGateway;
    before(async () => {
      gw = await startGateway({ overrides: { auth: { loginThrottle: { maxFailuresPerAddress: 0 } } } });
    });
    after(() => gw.stop());

    async function refusedCount(reason: string): Promise<number> {
      const text = String((await gw.api('GET', '/metrics', { token: await gw.login() })).body);
      const line = text.split('\n').find((l: string) => l.startsWith(`gatewayd_mqtt_connects_refused_total{reason="${reason}"}`));
      return line ? Number(line.split(' ').at(-1)) : 0;
    }

    it('logs each one with its reason and source address, and counts it by reason', async () => {
      const device = await gw.userWith([{ resource: 'd/#', operation: 'write', context: 'mqtt' }]);
      const unsupported = async () => {
        const socket = net.connect(gw.ports.mqtt, '127.0.0.1');
        await once(socket, 'connect');
        // CONNECT, protocol name MQTT, level 7 (no such version), client id "v7".
        socket.write(Buffer.from([0x10, 0x0e, 0x00, 0x04, 0x4d, 0x51, 0x54, 0x54, 0x07, 0x02, 0x00, 0x3c, 0x00, 0x02, 0x76, 0x37]));
        const [reply] = (await once(socket, 'data')) as [Buffer];
        socket.destroy();
        return reply[3]!;
      };
      const cases: [string, string, () => Promise<number>, number][] = [
        ['wrong password', 'bad_credentials', () => connackCode(gw.ports.mqtt, { username: device.username, password: 'Wrong-Passw0rd!', reconnectPeriod: 0 }), 4],
        ['unknown user', 'bad_credentials', () => connackCode(gw.ports.mqtt, { username: 'no-such-device', password: 'Wrong-Passw0rd!', reconnectPeriod: 0 }), 4],
        ['bad client id', 'bad_client_id', () => connackCode(gw.ports.mqtt, { username: device.username, password: GOOD_PASSWORD, clientId: 'c'.repeat(gw.config.mqtt.maxClientIdLength + 1), reconnectPeriod: 0 }), 2],
        ['unsupported protocol version', 'unsupported_version', unsupported, 1],
      ];
      for (const [label, reason, connect, code] of cases) {
        const counted = await refusedCount(reason);
        const logged = gw.logs().filter((l) => l.message === 'mqtt.connect.refused').length;
        expect(await connect(), label).to.equal(code);
        const line = gw.logs().filter((l) => l.message === 'mqtt.connect.refused').at(-1)!;
        expect(gw.logs().filter((l) => l.message === 'mqtt.connect.refused').length - logged, label).to.equal(1);
        expect(line.audit, label).to.equal(true);
        expect(line.returnCode, label).to.equal(code);
        expect(line.reason, label).to.be.a('string').and.not.equal('');
        expect(String(line.remote), label).to.include('127.0.0.1');
        expect(await refusedCount(reason), label).to.equal(counted + 1);
      }
    });
  });

  describe('numbers in queries', () => {
    let gw: TestGateway;
    before(async () => {
      gw = await startGateway();
    });
    after(() => gw.stop());

    for (const value of ['1e309', 'Infinity', '-Infinity', 'NaN', '1e2', '0x10', '10.0', ' 10', '010', '99999999999999999999', '-1', '0', '101']) {
      it(`answers 400 for rowsPerPage=${JSON.stringify(value)}`, async () => {
        const token = await gw.login();
        const res = await gw.api('GET', `/api/listUsers?rowsPerPage=${encodeURIComponent(value)}`, { token });
        expect(res.status, JSON.stringify(res.body)).to.equal(400);
        const roles = await gw.api('GET', `/api/roles/page?rowsPerPage=5&pageNumber=${encodeURIComponent(value === '101' ? '1e3' : value)}`, { token });
        expect(roles.status, JSON.stringify(roles.body)).to.equal(400);
      });
    }

    it('still answers a page for plain decimal integers', async () => {
      const token = await gw.login();
      expect((await gw.api('GET', '/api/listUsers?rowsPerPage=100&pageNumber=1', { token })).status).to.equal(200);
      expect((await gw.api('GET', '/api/roles/page?rowsPerPage=50&pageNumber=2', { token })).status).to.equal(200);
    });
  });
});
