// The overview's flash card (docs/footprint.md "Flash", docs/web-ui.md): what the gateway writes,
// in the unit of the charts beside it (KiB/s), over a window it names; the projected life by the
// formula of the README's table, with the assumptions it rests on and the settings that change
// them; and the wear budget, which decides whether an acknowledgement that waits for the flash
// gets a commit at once or waits for the commit interval.
import { api } from '../api.js';
import { ErrorMessage, Loading } from '../components/feedback.js';
import { formatBytes, formatDate } from '../components/widgets.js';
import { useAsync } from '../hooks.js';
import type { DashboardView, FlashProjection } from '../types.js';

const BINARY = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];

/** Bytes in the charts' units (binary: KiB, MiB), one decimal under 10. */
export function formatBinaryBytes(n: number): string {
  let i = 0;
  while (n >= 1024 && i < BINARY.length - 1) {
    n /= 1024;
    i++;
  }
  return `${i === 0 || n >= 10 ? Math.round(n) : n.toFixed(1)} ${BINARY[i]}`;
}

function windowText(seconds: number): string {
  if (seconds >= 3600) return 'the last 60 min';
  if (seconds >= 120) return `the last ${Math.round(seconds / 60)} min`;
  return `the last ${Math.max(1, Math.round(seconds))} s`;
}

function years(y: number | null): string {
  if (y === null) return 'no end in sight (nothing written)';
  if (y >= 100) return 'more than 100 years';
  return `${y.toFixed(y < 10 ? 1 : 0)} years`;
}

function duration(seconds: number): string {
  if (seconds < 90) return `${Math.max(1, Math.round(seconds))} s`;
  if (seconds < 5400) return `${Math.round(seconds / 60)} min`;
  return `${(seconds / 3600).toFixed(1)} h`;
}

const SETTING: Record<FlashProjection['defaults'][number], string> = {
  capacityBytes: 'storage.flash.capacityBytes',
  ratedWriteCycles: 'storage.flash.ratedWriteCycles',
  writeAmplification: 'storage.flash.writeAmplification',
  lifeYears: 'storage.flash.lifeYears',
};

function Budget(props: { f: FlashProjection }) {
  const { budget, commitIntervalMs } = props.f;
  const interval = `the commit interval (${commitIntervalMs} ms, storage.commitIntervalMs)`;
  if (budget.mode === 'off') return <>off (storage.flash.burstBytes is 0): acknowledgements that wait for the flash wait for {interval}</>;
  const refill = `it refills at ${formatBinaryBytes(budget.bytesPerSecond)}/s, the rate at which the flash lasts the ${budget.lifeYears} years wanted (storage.flash.lifeYears)`;
  if (budget.mode === 'spent') {
    const missing = Math.max(0, budget.burstBytes / 10 - budget.availableBytes);
    return (
      <>
        <strong>spent</strong>
        {budget.spentSince !== null && (
          <>
            {' '}
            since <span data-volatile>{formatDate(budget.spentSince)}</span>
          </>
        )}
        : acknowledgements that wait for the flash wait for {interval}, until a tenth of the allowance is back (in about <span data-volatile>{duration(missing / budget.bytesPerSecond)}</span>); {refill}
      </>
    );
  }
  return (
    <>
      fast acknowledgements: <span data-volatile>{formatBinaryBytes(budget.availableBytes)}</span> of {formatBinaryBytes(budget.burstBytes)} left (storage.flash.burstBytes); {refill}
    </>
  );
}

/** The card's facts, or why there are none yet. */
function FlashFacts(props: { flash: FlashProjection | undefined }) {
  const f = props.flash;
  if (!f) return <p>Not measured on this system.</p>;
  const assumed = `${formatBytes(f.capacityBytes)} flash, rated for ${f.ratedWriteCycles.toLocaleString('en')} write cycles, write amplification ${f.writeAmplification}`;
  const defaults = f.defaults.filter((k) => k !== 'lifeYears');
  return (
    <dl class="facts" data-flash-budget={f.budget.mode}>
      <dt>Written</dt>
      <dd data-volatile>
        {f.writtenBytesPerSecond === null ? (
          'measuring (a first figure two minutes after the start: start-up is left out)'
        ) : (
          <>
            {formatBinaryBytes(f.writtenBytesPerSecond)}/s, the mean of {windowText(f.windowSeconds)} (the chart "Written to flash" shows each sample)
          </>
        )}
      </dd>
      <dt>Projected life</dt>
      <dd>
        <span data-volatile>{f.writtenBytesPerSecond === null ? 'not known yet' : `${years(f.projectedYears)} at that rate`}</span> of a {assumed} (capacity × cycles ÷ (amplification × rate), as in
        the README's table)
      </dd>
      <dt>Assumed</dt>
      <dd>
        {defaults.length === 0
          ? 'the values set for this flash (storage.flash)'
          : `${defaults.map((k) => SETTING[k]).join(', ')} ${defaults.length === 1 ? 'is' : 'are'} the default; set ${defaults.length === 1 ? 'it' : 'them'} from the flash's datasheet`}
      </dd>
      <dt>Wear budget</dt>
      <dd>
        <Budget f={f} />
      </dd>
    </dl>
  );
}

export function FlashCard() {
  // `since` now: the flash figures without the samples the charts already show.
  const data = useAsync(() => api<DashboardView>('GET', '/api/dashboard', { query: { since: Date.now() } }), []);
  return (
    <section class="card wide" aria-labelledby="card-flash">
      <h2 id="card-flash">Flash wear</h2>
      <ErrorMessage error={data.error} />
      {data.data === undefined ? data.error ? null : <Loading /> : <FlashFacts flash={data.data.flash} />}
    </section>
  );
}
