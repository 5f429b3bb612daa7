// The value scale of the overview's charts (the web UI draws them, ui/src/pages/dashboard-charts.tsx;
// the function lives here so that the unit tests run it in Node, as the UI's service-yaml uses
// src/mapping/service-tags.ts). Three ticks — 0, one step, two steps — with a nice step: 1, 2,
// 2.5 or 5 times a power of ten (counts: no 2.5), in the unit the labels name: bytes in binary
// units (512 B, 1 KiB, 2.5 MiB), other figures from 1,000 up with k, M, G (2.5k/s). Every label of one axis has the same unit and as many decimals as the step needs,
// so the labels are distinct at every scale: an idle gateway's bytes per second read
// "1 B/s, 0.5 B/s, 0 B/s", not "1 B/s, 1 B/s, 0 B/s".

/** The units of the dashboard's series (DashboardUnit; spelled out here: the UI imports this file without the daemon's). */
export type ChartUnit = 'count' | 'per-second' | 'bytes' | 'bytes-per-second' | 'percent';

export interface ChartScale {
  /** The top of the scale (the last tick). */
  top: number;
  /** Tick values from 0 up, evenly spaced. */
  ticks: number[];
  /** The ticks' labels, in the same order. */
  labels: string[];
}

/** Intervals between ticks: 0, step, 2 steps. */
const INTERVALS = 2;
const NICE = [1, 2, 2.5, 5, 10];
/** Counts (clients) step by whole numbers: no 2.5. */
const NICE_WHOLE = [1, 2, 5, 10];
const BYTE_PREFIXES = [' B', ' KiB', ' MiB', ' GiB', ' TiB', ' PiB'];
const DECIMAL_PREFIXES = ['', 'k', 'M', 'G', 'T', 'P'];
/** The smallest step of fractional units: finer than 0.01 /s is noise on a 10-second sample. */
const MIN_FRACTION = 0.01;

/** The smallest nice number (1, 2, 2.5, 5 × 10^k; `whole`: no 2.5) at least `x` (> 0). */
export function niceStep(x: number, whole = false): number {
  const power = 10 ** Math.floor(Math.log10(x));
  // Rounded: 10 ** -2 * 2.5 is 0.025000000000000001, and x itself may be a step already.
  const step = (whole ? NICE_WHOLE : NICE).map((m) => Number((m * power).toPrecision(12))).find((s) => s >= x * (1 - 1e-12));
  return step ?? 10 * power;
}

/** Decimals that show `step` (in its unit) and its multiples exactly: 2.5 → 1, 0.25 → 2, 20 → 0. */
function decimalsOf(step: number): number {
  for (let d = 0; d < 12; d++) if (Math.abs(Math.round(step * 10 ** d) - step * 10 ** d) < 1e-9) return d;
  return 12;
}

/** The scale of a chart whose highest value is `max` (≥ 0; 0 when it has none). */
export function chartScale(max: number, unit: ChartUnit): ChartScale {
  const highest = Number.isFinite(max) && max > 0 ? max : 0;
  const bytes = unit === 'bytes' || unit === 'bytes-per-second';
  const whole = unit === 'count';
  // Large values in a prefixed unit (40 KiB/s, 2.5k/s): every label stays short.
  const base = bytes ? 1024 : 1000;
  const prefixes = bytes ? BYTE_PREFIXES : DECIMAL_PREFIXES;
  // No value above 0: a scale of one step that still reads as one (0, 1, 2 clients; 0, 50, 100 %).
  const wanted = highest / INTERVALS || (unit === 'percent' ? 50 : whole ? 1 : 0.5);
  let power = Math.min(prefixes.length - 1, Math.max(0, Math.floor(Math.log(wanted) / Math.log(base))));
  const stepIn = (p: number) => Math.max(whole ? 1 : MIN_FRACTION, niceStep(wanted / base ** p, whole));
  let step = stepIn(power);
  // 1000 KiB reads better as 1 MiB, 1000k as 1M.
  if (step >= 1000 && power < prefixes.length - 1) step = stepIn(++power);
  const decimals = decimalsOf(step);
  const suffix = `${prefixes[power]}${unit === 'bytes-per-second' || unit === 'per-second' ? '/s' : unit === 'percent' ? ' %' : ''}`;
  const inUnit = Array.from({ length: INTERVALS + 1 }, (_, i) => i * step);
  return {
    top: INTERVALS * step * base ** power,
    ticks: inUnit.map((v) => v * base ** power),
    labels: inUnit.map((v) => `${v === 0 ? '0' : v.toFixed(decimals)}${suffix}`),
  };
}
