// run-alone: it compares login durations, which other test files running beside it would disturb.
// Login times that do not tell whether a username exists (issue 11 point 3), against the real
// gateway at a realistic hash cost: a known username with a wrong password costs what an unknown
// one costs, over REST and over MQTT CONNECT.
import { expect } from 'chai';
import { startGateway, type TestGateway } from './support/harness.js';
import { connackCode } from './support/mqtt-test-kit.js';

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
};

describe('login time does not tell whether a username exists', function () {
  this.timeout(120_000);
  let gw: TestGateway;
  const SAMPLES = 40;
  const ROUNDS = 3;
  const known: string[] = [];
  before(async function () {
    // A realistic hash cost, so the check dominates the request; spread over many users, no
    // address limit, and free attempts for every round of both tests so no username is delayed.
    gw = await startGateway({ overrides: { auth: { passwordHashCost: 13, loginThrottle: { maxFailuresPerAddress: 0, freeAttempts: 2 * ROUNDS, maxAttempts: 4 * ROUNDS } } } });
    for (let i = 0; i < SAMPLES; i++) known.push((await gw.userWith([{ resource: 'timing/#', operation: 'read', context: 'mqtt' }])).username);
  });
  after(() => gw.stop());

  async function timed(fn: () => Promise<unknown>): Promise<number> {
    const t = process.hrtime.bigint();
    await fn();
    return Number(process.hrtime.bigint() - t) / 1e6;
  }

  /**
   * Up to ROUNDS interleaved rounds of SAMPLES pairs; passes at the first round whose medians
   * differ by less than 1.2x. A username check that skips the hash is slower or faster in every
   * round (several times over at this hash cost); load on a shared machine is not.
   */
  async function compareMedians(known: (i: number) => Promise<unknown>, unknown: (i: number) => Promise<unknown>): Promise<void> {
    const rounds: string[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const a: number[] = [];
      const b: number[] = [];
      // Interleaved, in alternating order, so load on the machine hits both alike.
      for (let i = 0; i < SAMPLES; i++) {
        const pair = i % 2 === 0 ? [() => timed(() => known(i)).then((t) => a.push(t)), () => timed(() => unknown(i)).then((t) => b.push(t))] : [() => timed(() => unknown(i)).then((t) => b.push(t)), () => timed(() => known(i)).then((t) => a.push(t))];
        for (const step of pair) await step();
      }
      const ratio = Math.max(median(a), median(b)) / Math.min(median(a), median(b));
      if (ratio < 1.2) return;
      rounds.push(`known ${median(a).toFixed(1)} ms, unknown ${median(b).toFixed(1)} ms`);
    }
    expect.fail(`the medians differ by 1.2x or more in each of ${ROUNDS} rounds: ${rounds.join('; ')}`);
  }

  it('REST: the median login of an unknown username and of a known one differ by less than 1.2x', async function () {
    this.timeout(60_000);
    await compareMedians(
      (i) => gw.api('POST', '/api/login', { body: { username: known[i]!, password: 'Wrong-Passw0rd!' } }),
      (i) => gw.api('POST', '/api/login', { body: { username: `nobody-${i}`, password: 'Wrong-Passw0rd!' } }),
    );
  });

  it('MQTT: the same for CONNECT with a password', async function () {
    this.timeout(60_000);
    const port = gw.ports.mqtt;
    await compareMedians(
      async (i) => expect(await connackCode(port, { username: known[i]!, password: 'Wrong-Passw0rd!', reconnectPeriod: 0 })).to.not.equal(0),
      async (i) => expect(await connackCode(port, { username: `ghost-${i}`, password: 'Wrong-Passw0rd!', reconnectPeriod: 0 })).to.not.equal(0),
    );
  });
});
