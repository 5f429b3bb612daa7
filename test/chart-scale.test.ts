// The overview charts' value scale (issue 38 point 7): an idle gateway's chart labelled its scale
// "1 B/s, 1 B/s, 0 B/s" (the middle tick 0.5 rounded to 1). chartScale gives nice-number ticks
// whose labels are distinct and readable at every scale, for every unit of the dashboard.
import { expect } from 'chai';
import { chartScale, niceStep, type ChartUnit } from '../src/metrics/chart-scale.js';

const UNITS: ChartUnit[] = ['count', 'per-second', 'bytes', 'bytes-per-second', 'percent'];
const BYTE_UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
const DECIMAL_PREFIXES = ['', 'k', 'M', 'G', 'T', 'P'];

/** Highest values from 0.0001 to 10^15 in steps of about 12 % (and the edges of each nice step). */
function sweep(): number[] {
  const out = [0];
  for (let v = 1e-4; v < 1e15; v *= 1.12) out.push(v);
  for (let e = -3; e <= 14; e++) for (const m of [1, 2, 2.5, 4, 5, 10]) out.push(m * 10 ** e, m * 10 ** e * 1.0001, 2 * m * 10 ** e);
  for (let p = 0; p <= 4; p++) for (const m of [1, 1000, 1023, 1024, 1025, 2048]) out.push(m * 1024 ** p);
  return out;
}

/** A label back to its value: "2.5 KiB/s" → 2560, "2.5k/s" → 2500. */
function valueOf(label: string, unit: ChartUnit): number {
  const m = unit.startsWith('bytes') ? /^(\d+(?:\.\d+)?) ([A-Za-z]+)(?:\/s)?$/.exec(label) : /^(\d+(?:\.\d+)?)([kMGTP]?)(?:\/s| %)?$/.exec(label);
  expect(m, `label ${label} (${unit})`).to.not.equal(null);
  const [base, prefixes] = unit.startsWith('bytes') ? [1024, BYTE_UNITS] : [1000, DECIMAL_PREFIXES];
  const power = prefixes.indexOf(m![2]!);
  expect(power, label).to.be.at.least(0);
  return Number(m![1]) * base ** power;
}

describe('chart scale (nice-number ticks)', () => {
  it('labels an idle chart with distinct ticks: 1.0 B/s, 0.5 B/s, 0 B/s', () => {
    expect(chartScale(0, 'bytes-per-second').labels).to.deep.equal(['0 B/s', '0.5 B/s', '1.0 B/s']);
    expect(chartScale(0.9, 'bytes-per-second').labels).to.deep.equal(['0 B/s', '0.5 B/s', '1.0 B/s']);
    expect(chartScale(0, 'count').labels).to.deep.equal(['0', '1', '2']);
    expect(chartScale(0, 'percent').labels).to.deep.equal(['0 %', '50 %', '100 %']);
    expect(chartScale(0, 'per-second').labels).to.deep.equal(['0/s', '0.5/s', '1.0/s']);
  });

  it('picks steps of 1, 2, 2.5 or 5 times a power of ten, in the byte unit that reads best', () => {
    expect(chartScale(31_130, 'bytes-per-second').labels).to.deep.equal(['0 KiB/s', '20 KiB/s', '40 KiB/s']);
    expect(chartScale(3.1, 'per-second').labels).to.deep.equal(['0/s', '2/s', '4/s']);
    expect(chartScale(4.4, 'per-second').labels).to.deep.equal(['0/s', '2.5/s', '5.0/s']);
    expect(chartScale(900 * 1024 * 2, 'bytes').labels).to.deep.equal(['0 MiB', '1 MiB', '2 MiB']);
    expect(chartScale(4200, 'per-second').labels).to.deep.equal(['0k/s', '2.5k/s', '5.0k/s']);
    expect(chartScale(4200, 'count').labels).to.deep.equal(['0k', '5k', '10k']);
    expect(chartScale(0.3, 'per-second').labels).to.deep.equal(['0/s', '0.2/s', '0.4/s']);
    expect(chartScale(73, 'percent').labels).to.deep.equal(['0 %', '50 %', '100 %']);
    expect(chartScale(3, 'count').labels).to.deep.equal(['0', '2', '4']);
    for (const [x, step] of [[0.7, 1], [1, 1], [1.01, 2], [2.2, 2.5], [3, 5], [7, 10], [0.021, 0.025], [130, 200]] as const) expect(niceStep(x), String(x)).to.equal(step);
  });

  for (const unit of UNITS) {
    it(`${unit}: over 10^-4 … 10^15, ticks from 0, evenly spaced, covering the highest value, with distinct readable labels that say their values`, () => {
      let scales = 0;
      for (const max of sweep()) {
        const s = chartScale(max, unit);
        const where = `${unit}, highest ${max}: ${s.labels.join(', ')}`;
        expect(s.ticks, where).to.have.length(3);
        expect(s.ticks[0], where).to.equal(0);
        expect(s.top, where).to.equal(s.ticks[2]);
        expect(s.ticks[2]! - s.ticks[1]!, where).to.be.closeTo(s.ticks[1]!, s.ticks[1]! * 1e-9);
        expect(s.top, where).to.be.at.least(max);
        // Not a sliver: the highest value fills at least about half of the chart (counts: 40 %), above the smallest step.
        if (max >= (unit === 'count' ? 2 : 0.02)) expect(s.top, where).to.be.at.most(max * (unit === 'count' ? 2.5 : 2.1));
        expect(new Set(s.labels).size, where).to.equal(3);
        for (const label of s.labels) expect(label.length, where).to.be.at.most(11);
        s.labels.forEach((label, i) => expect(valueOf(label, unit), where).to.be.closeTo(s.ticks[i]!, s.ticks[i]! * 1e-9 + 1e-12));
        // One unit per axis: a scale never mixes B and KiB, or 900 and 1k.
        expect(new Set(s.labels.map((l) => l.replace(/^[\d.]+/, ''))).size, where).to.equal(1);
        if (unit === 'count') expect(s.ticks.every(Number.isInteger), where).to.equal(true);
        scales++;
      }
      expect(scales).to.be.above(400);
    });
  }

  it('takes no value, NaN or a negative highest value as an empty chart', () => {
    for (const max of [Number.NaN, -5, Number.NEGATIVE_INFINITY]) expect(chartScale(max, 'bytes').labels).to.deep.equal(['0 B', '0.5 B', '1.0 B']);
  });
});
