// Polling in rounds (src/mapping/poll-groups.ts), on a fake clock: what the endpoints of a
// connection whose driver reads together (S7) do with their poll timers.
import { expect } from 'chai';
import { PollGroups } from '../src/mapping/poll-groups.js';
import { FakeClock } from './mapping-support.js';

/** A read that finishes when the test says so. */
function reader(log: string[], name: string) {
  const open: Array<() => void> = [];
  const read = () => {
    log.push(name);
    return new Promise<void>((resolve) => open.push(resolve));
  };
  return { read, finish: () => open.splice(0).forEach((r) => r()) };
}
const turn = () => new Promise((r) => setImmediate(r));

describe('mapping: poll rounds of a connection that reads together', () => {
  it('starts every member in the same round, the next one intervalMs after the round\'s last read; a late member reads at once; leaving stops', async () => {
    const clock = new FakeClock();
    const groups = new PollGroups(clock.timers);
    const log: string[] = [];
    const a = reader(log, 'a');
    const b = reader(log, 'b');
    const leaveA = groups.join(100, a.read);
    const leaveB = groups.join(100, b.read);
    expect(log).to.deep.equal([]); // both wait for the first round
    clock.advance(0);
    expect(log).to.deep.equal(['a', 'b']);
    a.finish();
    await turn();
    expect(clock.pending()).to.deep.equal([]); // b still reads: no next round yet
    b.finish();
    await turn();
    expect(clock.pending()).to.deep.equal([100]);

    const c = reader(log, 'c');
    const leaveC = groups.join(100, c.read);
    expect(log).to.deep.equal(['a', 'b', 'c']); // at once, not after up to 100 ms
    c.finish();
    clock.advance(100);
    expect(log.slice(3)).to.deep.equal(['a', 'b', 'c']);
    for (const r of [a, b, c]) r.finish();
    await turn();

    leaveA();
    leaveB();
    clock.advance(100);
    expect(log.slice(6)).to.deep.equal(['c']);
    c.finish();
    await turn();
    leaveC();
    expect(clock.pending()).to.deep.equal([]);
    // Other intervals are other rounds.
    const d = reader(log, 'd');
    groups.join(1000, d.read);
    clock.advance(0);
    expect(log.at(-1)).to.equal('d');
  });
});
