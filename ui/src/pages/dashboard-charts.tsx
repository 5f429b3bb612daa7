// The overview's charts (a chunk of its own, loaded by the overview): the last hour of the
// gateway's figures from GET /api/dashboard, polled with `since` at the sampling interval, each
// drawn as a small plain SVG line (no chart library, no inline style: the CSP forbids it) over a
// value scale of nice-number ticks from 0 (src/metrics/chart-scale.ts) and a time axis in clock
// times, the labels in HTML beside the drawing (text inside a stretched SVG would be distorted).
import { useState } from 'preact/hooks';
import { chartScale } from '../../../src/metrics/chart-scale.js';
import { api } from '../api.js';
import { ErrorMessage, Loading } from '../components/feedback.js';
import { useAsync, usePoll } from '../hooks.js';
import type { DashboardSeries, DashboardView } from '../types.js';

const WIDTH = 300;
const HEIGHT = 80;

const BYTE_UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
function bytes(n: number): string {
  let v = n;
  let i = 0;
  while (Math.abs(v) >= 1024 && i < BYTE_UNITS.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v >= 100 || i === 0 ? Math.round(v) : v.toFixed(1)} ${BYTE_UNITS[i]}`;
}
const number = (n: number) => (Math.abs(n) >= 100 || Number.isInteger(n) ? String(Math.round(n)) : n.toFixed(1));

export function formatValue(unit: DashboardSeries['unit'], v: number | null | undefined): string {
  if (v === null || v === undefined) return '—';
  switch (unit) {
    case 'bytes':
      return bytes(v);
    case 'bytes-per-second':
      return `${bytes(v)}/s`;
    case 'per-second':
      return `${number(v)}/s`;
    case 'percent':
      return `${number(v)} %`;
    default:
      return number(v);
  }
}

/** The view with `next` appended, keeping one window. */
function merge(current: DashboardView, next: DashboardView): DashboardView {
  if (next.times.length === 0) return current;
  const times = [...current.times, ...next.times];
  const keep = times.findIndex((t) => t > times[times.length - 1]! - next.windowSeconds * 1000);
  const series = next.series.map((s) => {
    const old = current.series.find((c) => c.id === s.id)?.values ?? new Array<number | null>(current.times.length).fill(null);
    return { ...s, values: [...old, ...s.values].slice(keep) };
  });
  return { ...next, times: times.slice(keep), series };
}

/** Polyline segments of the known values (a null breaks the line), from 0 at the bottom to `top` at the top. */
function segments(times: number[], values: (number | null)[], start: number, span: number, top: number): string[] {
  const out: string[] = [];
  let current: string[] = [];
  values.forEach((v, i) => {
    if (v === null) {
      if (current.length) out.push(current.join(' '));
      current = [];
      return;
    }
    const x = ((times[i]! - start) / span) * WIDTH;
    const y = HEIGHT - 1 - (top > 0 ? (v / top) * (HEIGHT - 2) : 0);
    current.push(`${x.toFixed(1)},${y.toFixed(1)}`);
  });
  if (current.length) out.push(current.join(' '));
  // A single point is drawn as a short flat line so that it shows.
  return out.map((s) => (s.includes(' ') ? s : `${s} ${(Number(s.split(',')[0]) + 2).toFixed(1)},${s.split(',')[1]}`));
}

/** A clock time of the time axis: hours and minutes, with seconds when the span is short. */
function clock(t: number, span: number): string {
  return new Date(t).toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit', hourCycle: 'h23', ...(span < 5 * 60_000 ? { second: '2-digit' } : {}) });
}

function Chart(props: { series: DashboardSeries; times: number[]; windowMs: number; intervalMs: number }) {
  const { series, times } = props;
  const known = series.values.filter((v): v is number => v !== null);
  const last = [...series.values].reverse().find((v) => v !== null) ?? null;
  const max = known.length ? Math.max(...known) : 0;
  const scale = chartScale(max, series.unit);
  const top = scale.top;
  const end = times.length ? times[times.length - 1]! : Date.now();
  // Until an hour of samples exists the chart spans what there is (a young gateway is not a sliver at the right edge).
  const span = Math.min(props.windowMs, Math.max(10 * props.intervalMs, times.length ? end - times[0]! : 0));
  const lines = segments(times, series.values, end - span, span, top);
  const summary = `${series.label} over the last hour: now ${formatValue(series.unit, last)}, highest ${formatValue(series.unit, known.length ? max : null)}`;
  return (
    <figure class="chart" data-series={series.id} data-last={last ?? ''} data-samples={known.length} data-top={top}>
      <figcaption>
        <span class="label">{series.label}</span> <strong class="value" data-volatile>{formatValue(series.unit, last)}</strong>
      </figcaption>
      <div class="plot">
        <div class="y-axis" aria-hidden="true">
          {[...scale.labels].reverse().map((label, i) => (
            <span key={i} data-volatile={i < scale.labels.length - 1 || undefined}>
              {label}
            </span>
          ))}
        </div>
        <svg viewBox={`0 0 ${WIDTH} ${HEIGHT}`} preserveAspectRatio="none" role="img" aria-label={summary}>
          <line class="grid" x1="0" y1="1" x2={WIDTH} y2="1" />
          <line class="grid" x1="0" y1={HEIGHT / 2} x2={WIDTH} y2={HEIGHT / 2} />
          <line class="axis" x1="0" y1={HEIGHT - 1} x2={WIDTH} y2={HEIGHT - 1} />
          {lines.map((points, i) => (
            <polyline key={i} class="line" points={points} />
          ))}
        </svg>
        <div class="x-axis" aria-hidden="true">
          <span data-volatile>{clock(end - span, span)}</span>
          <span data-volatile>{clock(end - span / 2, span)}</span>
          <span data-volatile>{clock(end, span)}</span>
        </div>
      </div>
    </figure>
  );
}

export function DashboardCharts() {
  const first = useAsync(() => api<DashboardView>('GET', '/api/dashboard'), []);
  const [view, setView] = useState<DashboardView | null>(null);
  const shown = view ?? first.data ?? null;
  const intervalMs = (first.data?.intervalSeconds ?? 10) * 1000;
  usePoll(
    async () => {
      if (!shown) return;
      const next = await api<DashboardView>('GET', '/api/dashboard', { query: { since: shown.times[shown.times.length - 1] } });
      setView(merge(shown, next));
    },
    intervalMs,
    shown !== null,
  );
  if (first.error) return <ErrorMessage error={first.error} />;
  if (!shown) return <Loading what="the charts" />;
  return (
    <div class="charts">
      {shown.series.map((s) => (
        <Chart key={s.id} series={s} times={shown.times} windowMs={shown.windowSeconds * 1000} intervalMs={shown.intervalSeconds * 1000} />
      ))}
    </div>
  );
}
