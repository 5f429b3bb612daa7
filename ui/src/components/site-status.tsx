// A gateway of a site (docs/scaling-out.md): its place in the site on the overview, and, on an
// edge, a note on the users and roles pages that they are administered at the centrals. The
// anonymous GET /health says whether the gateway is part of a site (a gateway on its own is
// asked nothing more: an answer 501 would be an error in the browser's console).
import { api } from '../api.js';
import { useAsync } from '../hooks.js';
import { can } from '../session.js';
import { ErrorMessage, Notice } from './feedback.js';
import { formatDuration } from './widgets.js';

interface SiteStatus {
  role: 'central' | 'edge';
  state: string;
  revision?: number;
  ageSeconds?: number;
  edge?: { offline?: string; central?: string };
  central?: { edges?: { name: string; inStep?: boolean }[] };
}

/** The site's status, or null for a gateway on its own (or a user who may not read it). */
async function loadSite(): Promise<SiteStatus | null> {
  if (!can('read', '/api/site')) return null;
  const health = await api<{ site?: unknown }>('GET', '/health', { auth: false });
  return health.site ? api<SiteStatus>('GET', '/api/site') : null;
}

const STATE_WORDS: Record<string, string> = {
  following: 'following the site',
  offline: 'cut off: deciding from its last copy',
  syncing: 'loading the site',
  unjoined: 'not joined yet',
  refused: 'refused by the site',
};

export function SiteCard() {
  const site = useAsync(loadSite, []);
  const s = site.data;
  if (!s && !site.error) return null;
  return (
    <section class="card" aria-labelledby="card-site">
      <h2 id="card-site">Site</h2>
      <ErrorMessage error={site.error} />
      {s && (
        <dl class="facts">
          <dt>This gateway</dt>
          <dd>{s.role === 'central' ? 'a central (writes to the site\'s PostgreSQL)' : 'an edge (users administered at the centrals)'}</dd>
          <dt>Link</dt>
          <dd>
            {STATE_WORDS[s.state] ?? s.state}
            {s.edge?.offline === 'stale' && ' · stale'}
            {s.edge?.offline === 'denying' && ' · refusing the site\'s users'}
          </dd>
          <dt>Revision</dt>
          <dd data-volatile>{s.revision ?? 'none yet'}</dd>
          {s.ageSeconds !== undefined && (
            <>
              <dt>Last answer</dt>
              <dd data-volatile>{formatDuration(s.ageSeconds * 1000)} ago</dd>
            </>
          )}
          {s.central?.edges && (
            <>
              <dt>Edges</dt>
              <dd data-volatile>{s.central.edges.length === 0 ? 'none' : `${s.central.edges.filter((e) => e.inStep).length} of ${s.central.edges.length} in step`}</dd>
            </>
          )}
        </dl>
      )}
    </section>
  );
}

/** On an edge: the site's users, roles and permissions are read-only here. */
export function SiteReadOnlyNote() {
  const site = useAsync(loadSite, []);
  if (site.data?.role !== 'edge') return null;
  return <Notice kind="info">Users, roles and permissions are administered at the site's central gateways; on this edge they are read-only (its break-glass administrator <code>local-admin</code> is its own).</Notice>;
}
