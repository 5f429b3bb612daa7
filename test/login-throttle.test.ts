import { expect } from 'chai';
import { createLoginThrottle } from '../src/auth/login-throttle.js';
import { TooManyRequestsError } from '../src/errors/errors.js';
import { ADMIN_PASSWORD, GOOD_PASSWORD, startGateway, type TestGateway } from './support/harness.js';

describe('brute-force protection', () => {
  describe('over HTTP', () => {
    let gw: TestGateway;
    let bystander: { username: string };
    before(async () => {
      gw = await startGateway({ overrides: { auth: { loginThrottle: { freeAttempts: 1, maxAttempts: 4, delayStepMs: 10, maxDelayMs: 20, lockoutSeconds: 60, maxTrackedUsernames: 100, maxFailuresPerAddress: 0 } } } });
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
    const options = { freeAttempts: 0, delayStepMs: 0, maxDelayMs: 0, maxFailuresPerAddress: 0 };

    it('keeps at most maxTrackedUsernames counters, and every lock until it ends', async () => {
      const t = createLoginThrottle({ ...options, maxAttempts: 3, lockoutSeconds: 60, maxTrackedUsernames: 50 });
      for (let i = 0; i < 3; i++) (await t.begin('victim')).failed();
      for (let i = 0; i < 10_000; i++) (await t.begin(`spray-${i}`)).failed();
      expect(t.size()).to.equal(50);
      expect(t.lockedFor('victim')).to.be.within(59, 60);
      const refused = await t.begin('victim').catch((e: unknown) => e);
      expect(refused).to.be.instanceOf(TooManyRequestsError);
    });

    it('does not evict the counter of a username whose checks are still running (a spray during a burst)', async () => {
      const t = createLoginThrottle({ ...options, maxAttempts: 3, lockoutSeconds: 60, maxTrackedUsernames: 5 });
      const running = await Promise.all([t.begin('victim'), t.begin('victim'), t.begin('victim')]);
      // Made-up names far beyond the table's bound while the victim's three guesses run.
      for (let i = 0; i < 100; i++) (await t.begin(`spray-${i}`)).failed();
      let fourth: 'waiting' | 'started' | 'refused' = 'waiting';
      const next = t.begin('victim').then(
        (a) => ((fourth = 'started'), a),
        (e: unknown) => ((fourth = 'refused'), Promise.reject(e)),
      );
      await new Promise((r) => setImmediate(r));
      expect(fourth, 'a fresh counter would let a fourth guess run at once').to.equal('waiting');
      for (const a of running) a.failed();
      expect(await next.catch((e: unknown) => e)).to.be.instanceOf(TooManyRequestsError);
      expect(t.lockedFor('victim')).to.be.above(0);
    });

    it('reserves attempts: at most maxAttempts checks run at once for one username, the rest wait their turn', async () => {
      const t = createLoginThrottle({ ...options, maxAttempts: 5, lockoutSeconds: 60, maxTrackedUsernames: 50 });
      const pending = Array.from({ length: 60 }, () => t.begin('u'));
      const settledNow = await Promise.race([Promise.all(pending.slice(0, 5)), new Promise((r) => setTimeout(r, 1000, 'timeout'))]);
      expect(settledNow, 'five run at once').to.be.an('array').with.length(5);
      // Five wrong guesses: the username locks, and everyone still waiting is refused.
      for (const attempt of settledNow as Awaited<(typeof pending)[number]>[]) attempt.failed();
      const rest = await Promise.allSettled(pending.slice(5));
      expect(rest.every((o) => o.status === 'rejected' && o.reason instanceof TooManyRequestsError)).to.equal(true);
    });

    it('lets a fleet sharing a username in: each waiting check runs when one before it succeeds', async () => {
      const t = createLoginThrottle({ ...options, maxAttempts: 3, lockoutSeconds: 60, maxTrackedUsernames: 50 });
      const attempts = Array.from({ length: 30 }, async () => (await t.begin('fleet')).succeeded());
      const outcomes = await Promise.allSettled(attempts);
      expect(outcomes.every((o) => o.status === 'fulfilled')).to.equal(true);
    });

    it('refuses an address after maxFailuresPerAddress failures across usernames', async () => {
      const t = createLoginThrottle({ ...options, maxAttempts: 10, lockoutSeconds: 60, maxTrackedUsernames: 1000, maxFailuresPerAddress: 20 });
      for (let i = 0; i < 20; i++) (await t.begin(`name-${i}`, '192.0.2.7')).failed();
      expect(await t.begin('name-x', '192.0.2.7').catch((e: unknown) => e)).to.be.instanceOf(TooManyRequestsError);
      (await t.begin('name-x', '192.0.2.8')).succeeded();
    });

    it('tryBegin reserves at once what begin would not wait for, and nothing else', async () => {
      const t = createLoginThrottle({ ...options, freeAttempts: 1, delayStepMs: 50, maxDelayMs: 50, maxAttempts: 3, lockoutSeconds: 60, maxTrackedUsernames: 50, maxFailuresPerAddress: 10 });
      const first = t.tryBegin('u', '192.0.2.1');
      expect(first, 'a free username and address').to.not.equal(undefined);
      first!.succeeded();
      expect(t.size(), 'a success forgets the counter').to.equal(0);
      // Two failures: the second earned a delay, so the next attempt cannot start at once.
      t.tryBegin('u')!.failed();
      t.tryBegin('u')!.failed();
      expect(t.tryBegin('u'), 'begin would wait for the delay').to.equal(undefined);
      const delayed = await t.begin('u');
      delayed.succeeded();
      // Three checks in flight: a fourth would wait for one of them.
      const running = [t.tryBegin('v')!, t.tryBegin('v')!, t.tryBegin('v')!];
      expect(t.tryBegin('v'), 'begin would wait for a place').to.equal(undefined);
      for (const a of running) a.failed();
      expect(() => t.tryBegin('v'), 'locked: 429 at once as begin').to.throw(TooManyRequestsError);
      // With an address too: a username at its limit has to wait (undefined); once its three end, three more run.
      const busy = [t.tryBegin('w1', '192.0.2.9')!, t.tryBegin('w1', '192.0.2.9')!, t.tryBegin('w1', '192.0.2.9')!];
      expect(t.tryBegin('w1', '192.0.2.9')).to.equal(undefined);
      for (const a of busy) a.release();
      for (let i = 0; i < 3; i++) t.tryBegin('w1', '192.0.2.9')!.succeeded();
    });

    it('forgets failures after a quiet period and unlocks after the lockout', async () => {
      let now = 1_000_000;
      const t = createLoginThrottle({ ...options, maxAttempts: 2, lockoutSeconds: 10, maxTrackedUsernames: 10, now: () => now });
      (await t.begin('u')).failed();
      (await t.begin('u')).failed();
      let error: unknown;
      await t.begin('u').catch((e: unknown) => (error = e));
      expect(error).to.be.instanceOf(TooManyRequestsError);
      now += 10_001;
      (await t.begin('u')).succeeded();
      expect(t.size()).to.equal(0);
      expect(t.locks()).to.equal(0);
    });
  });
});
