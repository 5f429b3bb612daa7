import { expect } from 'chai';
import { ConcurrencyLimiter, DecisionCache, TokenBucket, boundOutgoingQueues } from '../src/mqtt/limits.js';

describe('mqtt limits', function () {
  it('ConcurrencyLimiter runs at most N jobs and serves the rest in FIFO order', function () {
    const limiter = new ConcurrencyLimiter(2);
    const started: number[] = [];
    const releases: Array<() => void> = [];
    for (let i = 0; i < 5; i++) {
      limiter.schedule((release) => {
        started.push(i);
        releases.push(release);
      });
    }
    expect(started).to.deep.equal([0, 1]);
    expect(limiter.running).to.equal(2);
    expect(limiter.waiting).to.equal(3);
    releases[0]!();
    releases[0]!(); // a second release is ignored
    expect(started).to.deep.equal([0, 1, 2]);
    releases[1]!();
    releases[2]!();
    releases[3]!();
    releases[4]!();
    expect(started).to.deep.equal([0, 1, 2, 3, 4]);
    expect(limiter.running).to.equal(0);
    expect(limiter.waiting).to.equal(0);
  });

  it('ConcurrencyLimiter releases the slot of a job that throws', function () {
    const limiter = new ConcurrencyLimiter(1);
    limiter.schedule(() => {
      throw new Error('boom');
    });
    let ran = false;
    limiter.schedule((release) => {
      ran = true;
      release();
    });
    expect(ran).to.equal(true);
  });

  it('TokenBucket allows a burst of one second, then the rate', function () {
    const bucket = new TokenBucket(10);
    const t0 = Date.now();
    let allowed = 0;
    for (let i = 0; i < 100; i++) if (bucket.take(t0)) allowed++;
    expect(allowed).to.equal(10);
    expect(bucket.take(t0 + 50)).to.equal(false); // half a token
    expect(bucket.take(t0 + 100)).to.equal(true);
    let later = 0;
    for (let i = 0; i < 100; i++) if (bucket.take(t0 + 10_000)) later++;
    expect(later).to.equal(10); // capped at the burst
  });

  it('DecisionCache stays bounded and only refills after many misses', function () {
    const cache = new DecisionCache(4);
    for (let i = 0; i < 4; i++) {
      expect(cache.lookup(`t${i}`)).to.equal(undefined);
      cache.store(`t${i}`, i % 2 === 0);
    }
    expect(cache.lookup('t0')).to.equal(true);
    expect(cache.lookup('t1')).to.equal(false);
    // Full: new topics are not inserted (no churn) until more than 4 x size misses.
    for (let i = 4; i < 8; i++) {
      expect(cache.lookup(`t${i}`)).to.equal(undefined);
      cache.store(`t${i}`, true);
    }
    expect(cache.entries).to.equal(4);
    expect(cache.lookup('t0')).to.equal(true);
    for (let i = 8; i < 30; i++) {
      if (cache.lookup(`t${i}`) === undefined) cache.store(`t${i}`, true);
      expect(cache.entries).to.be.at.most(4);
    }
    expect(cache.lookup('t0')).to.equal(undefined); // refilled with newer topics
    cache.clear();
    expect(cache.entries).to.equal(0);
  });

  it('DecisionCache is skipped for a while when its topics do not repeat, and used again after', function () {
    const cache = new DecisionCache(4);
    // 1,000 distinct topics: hardly a hit, so after one window of 4 x size misses the map is not consulted.
    let n = 0;
    while (!cache.bypassed && n < 100) {
      if (cache.lookup(`d${n}`) === undefined) cache.store(`d${n}`, true);
      n++;
    }
    expect(cache.bypassed).to.equal(true);
    expect(n).to.be.within(17, 30);
    expect(cache.entries).to.equal(0);
    cache.store('x', true);
    expect(cache.lookup('x')).to.equal(undefined); // answered by the engine meanwhile, never wrongly
    // 16 x size lookups later it caches again.
    for (let i = 0; i < 64; i++) cache.lookup(`e${i}`);
    expect(cache.bypassed).to.equal(false);
    cache.store('x', false);
    expect(cache.lookup('x')).to.equal(false);
    // A clear (the user's permissions changed) ends a bypass at once.
    for (let i = 0; i < 100 && !cache.bypassed; i++) if (cache.lookup(`f${i}`) === undefined) cache.store(`f${i}`, true);
    expect(cache.bypassed).to.equal(true);
    cache.clear();
    expect(cache.bypassed).to.equal(false);
  });

  it('DecisionCache keeps refilling while its topics repeat', function () {
    const cache = new DecisionCache(4);
    // Four topics that repeat and a fifth that is new each time: 4 hits per miss.
    for (let round = 0; round < 50; round++) {
      for (const t of ['a', 'b', 'c', 'd', `new${round}`]) if (cache.lookup(t) === undefined) cache.store(t, true);
      expect(cache.bypassed).to.equal(false);
    }
  });

  it('boundOutgoingQueues counts enqueued and cleared messages per session', async function () {
    const stored: Record<string, number[]> = {};
    const persistence = {
      async outgoingEnqueue(sub: { clientId: string }, packet: number) {
        (stored[sub.clientId] ??= []).push(packet);
      },
      async outgoingEnqueueCombi(subs: Array<{ clientId: string }>, packet: number) {
        for (const sub of subs) (stored[sub.clientId] ??= []).push(packet);
      },
      async outgoingClearMessageId(client: { id: string }, packet: number) {
        const q = stored[client.id] ?? [];
        const i = q.indexOf(packet);
        return i === -1 ? undefined : q.splice(i, 1)[0];
      },
    };
    let drops = 0;
    const bound = boundOutgoingQueues(persistence, 2, () => drops++)!;
    for (let p = 1; p <= 3; p++) await persistence.outgoingEnqueueCombi([{ clientId: 'a' }, { clientId: 'b' }], p);
    expect(stored).to.deep.equal({ a: [1, 2], b: [1, 2] });
    expect(drops).to.equal(2);
    await persistence.outgoingClearMessageId({ id: 'a' }, 1);
    await persistence.outgoingClearMessageId({ id: 'a' }, 99); // unknown id: no change
    expect(bound.queued('a')).to.equal(1);
    await persistence.outgoingEnqueue({ clientId: 'a' }, 4);
    expect(stored.a).to.deep.equal([2, 4]);
    await persistence.outgoingEnqueue({ clientId: 'a' }, 5);
    expect(stored.a).to.deep.equal([2, 4]);
    expect(drops).to.equal(3);
  });
});
