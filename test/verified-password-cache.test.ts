import { expect } from 'chai';
import { createVerifiedPasswordCache } from '../src/auth/verified-password-cache.js';

describe('verified password cache', () => {
  let now = 1_000;
  const cache = () => createVerifiedPasswordCache({ ttlMs: 60_000, maxEntries: 3, now: () => now });

  it('answers only for the exact password verified against the same stored hash', () => {
    const c = cache();
    expect(c.has('u1', 'hash-a', 'Secret-1')).to.equal(false);
    c.remember('u1', 'hash-a', 'Secret-1');
    expect(c.has('u1', 'hash-a', 'Secret-1')).to.equal(true);
    expect(c.has('u1', 'hash-a', 'Secret-2')).to.equal(false);
    expect(c.has('u2', 'hash-a', 'Secret-1')).to.equal(false);
    // A new password hash (password changed) invalidates the entry.
    expect(c.has('u1', 'hash-b', 'Secret-1')).to.equal(false);
    expect(c.has('u1', 'hash-a', 'Secret-1')).to.equal(false);
  });

  it('expires entries and keeps at most maxEntries', () => {
    const c = cache();
    c.remember('u1', 'h', 'p');
    now += 60_001;
    expect(c.has('u1', 'h', 'p')).to.equal(false);
    for (let i = 0; i < 10; i++) c.remember(`u${i}`, 'h', 'p');
    expect(c.size()).to.equal(3);
    expect(c.has('u9', 'h', 'p')).to.equal(true);
    expect(c.has('u0', 'h', 'p')).to.equal(false);
  });

  it('renews an entry on a hit: its expiry and its place among the most recent', () => {
    const c = cache();
    c.remember('u1', 'h', 'p');
    c.remember('u2', 'h', 'p');
    c.remember('u3', 'h', 'p');
    now += 50_000;
    expect(c.has('u1', 'h', 'p')).to.equal(true);
    now += 50_000; // 100 s after it was remembered, 50 s after the hit
    expect(c.has('u1', 'h', 'p')).to.equal(true);
    expect(c.has('u2', 'h', 'p')).to.equal(false); // expired, not renewed
    c.remember('u4', 'h', 'p');
    c.remember('u5', 'h', 'p');
    c.remember('u6', 'h', 'p'); // beyond maxEntries 3: the least recently used go first
    expect(c.has('u1', 'h', 'p')).to.equal(false);
    // A wrong password renews nothing.
    c.remember('u7', 'h', 'p');
    now += 50_000;
    expect(c.has('u7', 'h', 'wrong')).to.equal(false);
    now += 20_000;
    expect(c.has('u7', 'h', 'p')).to.equal(false);
  });

  it('is off with a ttl of 0 and never holds a user without a password hash', () => {
    const off = createVerifiedPasswordCache({ ttlMs: 0, maxEntries: 3 });
    off.remember('u1', 'h', 'p');
    expect(off.has('u1', 'h', 'p')).to.equal(false);
    const c = cache();
    c.remember('u1', undefined, 'p');
    expect(c.size()).to.equal(0);
  });

  it('forgets a user on demand', () => {
    const c = cache();
    c.remember('u1', 'h', 'p');
    c.forget('u1');
    expect(c.has('u1', 'h', 'p')).to.equal(false);
  });

  it('knows a check under way by user, stored hash and password, until it settles', async () => {
    const c = cache();
    let settle!: (ok: boolean) => void;
    const outcome = new Promise<boolean>((resolve) => (settle = resolve));
    c.track('u1', 'hash-a', 'Secret-1', outcome);
    expect(c.underWay('u1', 'hash-a', 'Secret-1')).to.equal(outcome);
    expect(c.underWay('u1', 'hash-a', 'Secret-2'), 'another password').to.equal(undefined);
    expect(c.underWay('u1', 'hash-b', 'Secret-1'), 'another stored hash').to.equal(undefined);
    expect(c.underWay('u2', 'hash-a', 'Secret-1'), 'another user').to.equal(undefined);
    // Two candidates at once: each finds its own.
    const other = Promise.resolve(false);
    c.track('u1', 'hash-a', 'Secret-2', other);
    expect(c.underWay('u1', 'hash-a', 'Secret-2')).to.equal(other);
    await other;
    await Promise.resolve();
    expect(c.underWay('u1', 'hash-a', 'Secret-2'), 'gone once settled').to.equal(undefined);
    settle(true);
    await outcome;
    await Promise.resolve();
    expect(c.underWay('u1', 'hash-a', 'Secret-1')).to.equal(undefined);
  });
});
