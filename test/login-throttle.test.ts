import { expect } from 'chai';
import { createLoginThrottle } from '../src/auth/login-throttle.js';
import { TooManyRequestsError } from '../src/errors/errors.js';
import { ADMIN_PASSWORD, GOOD_PASSWORD, startGateway, type TestGateway } from './support/harness.js';

describe('brute-force protection', () => {
  describe('over HTTP', () => {
    let gw: TestGateway;
    let bystander: { username: string };
    before(async () => {
      gw = await startGateway({ overrides: { auth: { loginThrottle: { freeAttempts: 1, maxAttempts: 4, delayStepMs: 10, maxDelayMs: 20, lockoutSeconds: 60, maxTrackedUsernames: 100 } } } });
      bystander = await gw.userWith([{ resource: '/api/session', operation: 'read', context: 'http' }]);
    });
    after(() => gw.stop());

    const attempt = (username: string, password: string) => gw.api('POST', '/api/login', { body: { username, password } });

    it('refuses a username with 429 after repeated failures, even with the right password', async () => {
      for (let i = 0; i < 4; i++) expect((await attempt('admin', 'not-the-password')).status).to.equal(401);
      const locked = await attempt('admin', ADMIN_PASSWORD);
      expect(locked.status).to.equal(429);
      expect(locked.body.statusCode).to.equal(429);
      expect(Number(locked.headers.get('retry-after'))).to.be.within(1, 60);
    });

    it('treats an unknown username exactly like a known one', async () => {
      for (let i = 0; i < 4; i++) expect((await attempt('ghost-user', 'whatever1')).status).to.equal(401);
      const locked = await attempt('ghost-user', 'whatever1');
      expect(locked.status).to.equal(429);
      expect(locked.body.message).to.equal((await attempt('admin', 'x-x-x-x-x')).body.message);
    });

    it('does not lock other usernames', async () => {
      expect((await attempt('admin', ADMIN_PASSWORD)).status, 'admin is locked by now').to.equal(429);
      expect((await attempt(bystander.username, GOOD_PASSWORD)).status).to.equal(200);
    });
  });

  describe('the counter store', () => {
    it('keeps at most maxTrackedUsernames entries', () => {
      const t = createLoginThrottle({ freeAttempts: 0, maxAttempts: 3, delayStepMs: 0, maxDelayMs: 0, lockoutSeconds: 60, maxTrackedUsernames: 50 });
      for (let i = 0; i < 10_000; i++) t.failed(`spray-${i}`);
      expect(t.size()).to.equal(50);
    });

    it('forgets failures after a quiet period and unlocks after the lockout', async () => {
      let now = 1_000_000;
      const t = createLoginThrottle({ freeAttempts: 0, maxAttempts: 2, delayStepMs: 0, maxDelayMs: 0, lockoutSeconds: 10, maxTrackedUsernames: 10, now: () => now });
      t.failed('u');
      t.failed('u');
      let error: unknown;
      await t.before('u').catch((e) => (error = e));
      expect(error).to.be.instanceOf(TooManyRequestsError);
      now += 10_001;
      await t.before('u');
      t.succeeded('u');
      expect(t.size()).to.equal(0);
    });
  });
});
