// Overview: one card per area the signed-in user may read, each loaded on its own (one small
// call each: a page of one row gives a count).
import { Fragment, type ComponentChildren, type FunctionComponent } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api } from '../api.js';
import { ErrorMessage, Loading } from '../components/feedback.js';
import { SiteCard } from '../components/site-status.js';
import { formatBytes, formatDate, plural } from '../components/widgets.js';
import { useAsync } from '../hooks.js';
import { Link } from '../router.js';
import { can, session } from '../session.js';
import type { DashboardView, FlashProjection, MaintenanceStatus, MappingResource, Pagination, PendingRegistration, RegistryStatus } from '../types.js';

function Card<T>(props: { title: string; href: string; load: () => Promise<T>; children: (data: T) => ComponentChildren }) {
  const data = useAsync(props.load, []);
  return (
    <section class="card" aria-labelledby={`card-${props.href.slice(1)}`}>
      <h2 id={`card-${props.href.slice(1)}`}>
        <Link href={props.href}>{props.title}</Link>
      </h2>
      <ErrorMessage error={data.error} />
      {data.data === undefined ? data.error ? null : <Loading /> : props.children(data.data)}
    </section>
  );
}

/** The charts are a chunk of their own, loaded with this page (the first page stays small). */
function Activity() {
  const [Charts, setCharts] = useState<FunctionComponent | null>(null);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    import('./dashboard-charts.js').then((m) => setCharts(() => m.DashboardCharts), setError);
  }, []);
  return (
    <section class="panel" aria-labelledby="activity-title">
      <h2 id="activity-title">Gateway activity</h2>
      <ErrorMessage error={error} title="The charts could not be loaded" />
      {Charts ? <Charts /> : error ? null : <Loading what="the charts" />}
    </section>
  );
}

/** What the mapping runs, by kind (those the user may read), with their states. */
async function loadMappingCounts(): Promise<[string, MappingResource[]][]> {
  const kinds: [string, string][] = [
    ['Connections', '/api/connections'],
    ['Endpoints', '/api/endpoints'],
    ['Bridges', '/api/bridges'],
    ['Sparkplug nodes', '/api/sparkplug'],
  ];
  const readable = kinds.filter(([, path]) => can('read', path));
  return Promise.all(
    readable.map(async ([label, path]) => {
      const list = await api<MappingResource[]>('GET', path);
      // An edge node by its session (born, dead...), the state a Sparkplug host sees.
      return [label, path === '/api/sparkplug' ? list.map((n) => ({ ...n, currentState: (n.node as { state: string }).state })) : list] as [string, MappingResource[]];
    }),
  );
}

function countStates(list: MappingResource[]): string {
  if (list.length === 0) return 'none';
  const counts = new Map<string, number>();
  for (const r of list) counts.set(r.currentState, (counts.get(r.currentState) ?? 0) + 1);
  return [...counts].map(([state, n]) => `${n} ${state}`).join(', ');
}

/** The flash's wear in words: what the gateway writes, and how long its flash lasts at that rate. */
function FlashWear(props: { flash: FlashProjection | undefined }) {
  const f = props.flash;
  if (!f) return <p>Not measured on this system.</p>;
  const flash = `${formatBytes(f.capacityBytes)} flash rated for ${f.ratedWriteCycles.toLocaleString('en')} write cycles`;
  if (f.writtenBytesPerSecond === null) return <p>Measuring the write rate (a first figure after a minute).</p>;
  const over = f.windowSeconds >= 3600 ? 'the last hour' : `the last ${Math.max(1, Math.round(f.windowSeconds / 60))} min`;
  return (
    <dl class="facts">
      <dt>Writes</dt>
      <dd>
        {formatBytes(f.writtenBytesPerSecond)}/s over {over}
      </dd>
      <dt>Projected life</dt>
      <dd>
        {f.projectedYears === null ? 'nothing written' : f.projectedYears >= 100 ? 'more than 100 years' : `${f.projectedYears.toFixed(f.projectedYears < 10 ? 1 : 0)} years`} of the {flash} (write amplification {f.writeAmplification})
      </dd>
    </dl>
  );
}

function FlashCard() {
  // `since` now: the flash figures without the samples the charts already show.
  const data = useAsync(() => api<DashboardView>('GET', '/api/dashboard', { query: { since: Date.now() } }), []);
  return (
    <section class="card" aria-labelledby="card-flash">
      <h2 id="card-flash">Flash wear</h2>
      <ErrorMessage error={data.error} />
      {data.data === undefined ? data.error ? null : <Loading /> : <FlashWear flash={data.data.flash} />}
    </section>
  );
}

export function OverviewPage() {
  const s = session.value!;
  return (
    <section class="page">
      <h1>Overview</h1>
      <p>
        Signed in as <strong>{s.username}</strong>
        {s.expiresAt && (
          <>
            {' '}
            · session valid until <span data-volatile>{formatDate(s.expiresAt)}</span>
          </>
        )}
        .
      </p>
      {can('read', '/api/dashboard') && <Activity />}
      <div class="grid">
        {can('read', '/api/listUsers') && (
          <Card title="Users" href="/users" load={() => api<{ pagination: Pagination }>('GET', '/api/listUsers', { query: { rowsPerPage: 1, pageNumber: 1, excludeAutoGenerated: true } })}>
            {(d) => <p>{plural(d.pagination.totalRows, 'user')}</p>}
          </Card>
        )}
        {can('read', '/api/client-registry/status') && (
          <Card
            title="Devices"
            href="/devices"
            load={async () => ({
              status: await api<RegistryStatus>('GET', '/api/client-registry/status'),
              pending: can('read', '/api/client-registry') ? await api<PendingRegistration[]>('GET', '/api/client-registry') : undefined,
            })}
          >
            {(d) => (
              <p>
                Registration is <strong>{d.status.status}</strong>
                {d.pending && ` · ${plural(d.pending.filter((p) => !p.granted).length, 'pending request')}`}
              </p>
            )}
          </Card>
        )}
        {can('read', '/api/connections') && (
          <Card title="Protocol mapping" href="/mapping" load={loadMappingCounts}>
            {(d) => (
              <dl class="facts">
                {d.map(([label, list]) => (
                  <Fragment key={label}>
                    <dt>{label}</dt>
                    <dd>{countStates(list)}</dd>
                  </Fragment>
                ))}
              </dl>
            )}
          </Card>
        )}
        {can('read', '/api/dashboard') && <FlashCard />}
        <SiteCard />
        {can('read', '/api/maintenance/db') && (
          <Card title="Maintenance" href="/maintenance" load={() => api<MaintenanceStatus>('GET', '/api/maintenance/db')}>
            {(d) => (
              <p>
                {d.running ? 'A backup or restore is running.' : d.backup ? (
                  <>
                    Last backup: {d.backup.succeeded ? 'succeeded' : 'failed'}, <span data-volatile>{formatDate(d.backup.endDate ?? d.backup.startDate)}</span>
                  </>
                ) : (
                  'No backup yet.'
                )}
              </p>
            )}
          </Card>
        )}
        <Card title="Your account" href="/account" load={async () => s}>
          {(d) => <p>Two-factor authentication: {d.mfa.enabled ? 'on' : 'off'}</p>}
        </Card>
      </div>
    </section>
  );
}
