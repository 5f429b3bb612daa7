// The audit trail (GET /api/audit): filters by time range, user, action and outcome, pages
// newest first with the API's cursor, and exports what the filters select as JSON lines or CSV
// (page by page from the API; the browser never asks for more than a page at a time).
import { useState } from 'preact/hooks';
import { api, saveBlob } from '../api.js';
import { ErrorMessage, Loading, Notice } from '../components/feedback.js';
import { Button, SelectField, TextField } from '../components/forms.js';
import { CursorPager, useCursorPages } from '../components/cursor-pager.js';
import { Table } from '../components/table.js';
import { formatDate } from '../components/widgets.js';
import { useAction, useAsync } from '../hooks.js';
import { can } from '../session.js';
import type { AuditEvent, AuditPage } from '../types.js';

const PAGE = 50;
const EXPORT_PAGE = 500;
/** An export stops here: a browser tab is no archive (the API pages further for scripts). */
const EXPORT_MAX = 20_000;

interface Filters {
  from: string;
  to: string;
  user: string;
  action: string;
  outcome: '' | 'success' | 'failure';
}
const noFilters: Filters = { from: '', to: '', user: '', action: '', outcome: '' };

/** The API's query for the filters (datetime-local fields are local times). */
function queryOf(f: Filters): Record<string, string> {
  const q: Record<string, string> = {};
  if (f.from) q.from = new Date(f.from).toISOString();
  if (f.to) q.to = new Date(`${f.to}:59.999`).toISOString();
  if (f.user.trim()) q.user = f.user.trim();
  if (f.action) q.action = f.action;
  if (f.outcome) q.outcome = f.outcome;
  return q;
}

function detailText(details: Record<string, unknown>): string {
  return Object.entries(details)
    .map(([k, v]) => `${k}: ${typeof v === 'string' ? v : JSON.stringify(v)}`)
    .join(' · ');
}

/** CSV cells: quoted, and a leading = + - @ neutralised so a spreadsheet never runs a formula from the trail. */
function csvCell(value: unknown): string {
  let text = value === undefined || value === null ? '' : typeof value === 'string' ? value : JSON.stringify(value);
  if (/^[=+\-@\t\r]/.test(text)) text = `'${text}`;
  return `"${text.replace(/"/g, '""')}"`;
}

const CSV_COLUMNS = ['time', 'action', 'outcome', 'actor', 'user', 'source', 'details'] as const;

function toCsvRow(e: AuditEvent): string {
  return [e.time, e.action, e.outcome, e.actor?.username, e.user, e.source, e.details].map(csvCell).join(',');
}

async function exportEvents(filters: Filters, format: 'jsonl' | 'csv'): Promise<string> {
  const lines: string[] = format === 'csv' ? [CSV_COLUMNS.join(',')] : [];
  let cursor: string | undefined;
  let count = 0;
  do {
    const page = await api<AuditPage>('GET', '/api/audit', { query: { ...queryOf(filters), limit: EXPORT_PAGE, cursor } });
    for (const e of page.items) lines.push(format === 'csv' ? toCsvRow(e) : JSON.stringify(e));
    count += page.items.length;
    cursor = page.nextCursor;
  } while (cursor && count < EXPORT_MAX);
  const blob = new Blob([`${lines.join('\n')}\n`], { type: format === 'csv' ? 'text/csv' : 'application/x-ndjson' });
  const name = `gatewayd-audit-${new Date().toISOString().replace(/[:.]/g, '-')}.${format}`;
  saveBlob(blob, name);
  return `${count} event${count === 1 ? '' : 's'} exported as ${name}${cursor ? ` (stopped at ${EXPORT_MAX}; narrow the filters for the rest)` : ''}.`;
}

function FilterForm(props: { applied: Filters; onApply: (f: Filters) => void }) {
  const [f, setF] = useState<Filters>(props.applied);
  const actions = useAsync(() => (can('read', '/api/audit/actions') ? api<{ actions: string[] }>('GET', '/api/audit/actions') : Promise.resolve({ actions: [] })), []);
  const set = <K extends keyof Filters>(key: K) => (value: Filters[K]) => setF({ ...f, [key]: value });
  const known = actions.data?.actions ?? [];
  return (
    <form
      class="filters"
      role="search"
      aria-label="Audit filters"
      onSubmit={(e) => {
        e.preventDefault();
        props.onApply(f);
      }}
    >
      <TextField label="From" type="datetime-local" value={f.from} onValue={set('from')} />
      <TextField label="To" type="datetime-local" value={f.to} onValue={set('to')} />
      <TextField label="User" value={f.user} onValue={set('user')} maxLength={256} hint="Who acted or whom it was about (exact name)." />
      <SelectField label="Action" value={f.action} onValue={set('action')} options={[{ value: '', label: 'Any action' }, ...(known.includes(f.action) || !f.action ? [] : [f.action]), ...known]} />
      <SelectField label="Outcome" value={f.outcome} onValue={set('outcome')} options={[{ value: '', label: 'Any outcome' }, { value: 'success', label: 'Success' }, { value: 'failure', label: 'Failure' }]} />
      <div class="actions">
        <Button type="submit" variant="primary">
          Apply filters
        </Button>
        <Button onClick={() => (setF(noFilters), props.onApply(noFilters))}>Clear</Button>
      </div>
    </form>
  );
}

export function AuditPage() {
  const [filters, setFilters] = useState<Filters>(noFilters);
  const pages = useCursorPages((cursor) => api<AuditPage>('GET', '/api/audit', { query: { ...queryOf(filters), limit: PAGE, cursor } }), [filters]);
  const page = pages.page;
  const exporting = useAction();
  const items = page.data?.items;
  return (
    <section class="page">
      <h1>Audit trail</h1>
      <p class="hint">Security events of the gateway, newest first: sign-ins and failures, locks, MFA, refused grants, changes of users, roles, permissions, certificates, registrations, services, backups and restores.</p>
      <FilterForm
        applied={filters}
        onApply={(f) => {
          setFilters(f);
          pages.reset();
        }}
      />
      <div class="actions export">
        <Button busy={exporting.busy} onClick={() => exporting.run(() => exportEvents(filters, 'jsonl'))}>
          Export JSON lines
        </Button>
        <Button busy={exporting.busy} onClick={() => exporting.run(() => exportEvents(filters, 'csv'))}>
          Export CSV
        </Button>
      </div>
      <ErrorMessage error={exporting.error} title="Export failed" />
      {exporting.done && <Notice kind="success">{exporting.done}</Notice>}
      <ErrorMessage error={page.error} />
      {!items ? (
        page.error ? null : <Loading what="the audit trail" />
      ) : (
        <>
          <Table columns={['Time', 'Action', 'Outcome', 'By', 'User', 'Source', 'Details']} rows={items.length} empty="No event matches these filters." caption={`${items.length} events on this page`} region="Audit events">
            {items.map((e) => (
              <tr key={e.id} data-action={e.action}>
                <td>
                  <span data-volatile>{formatDate(e.time)}</span>
                </td>
                <th scope="row">{e.action}</th>
                <td>
                  <span class={`badge ${e.outcome === 'success' ? 'good' : 'bad'}`}>{e.outcome}</span>
                </td>
                <td>{e.actor?.username ?? ''}</td>
                <td>{e.user ?? ''}</td>
                <td>{e.source ? <code data-volatile>{e.source}</code> : ''}</td>
                <td class="details">
                  <span data-volatile>{detailText(e.details)}</span>
                </td>
              </tr>
            ))}
          </Table>
          <CursorPager pages={pages} what="the audit trail" back="Newer events" forward="Older events" />
        </>
      )}
    </section>
  );
}
