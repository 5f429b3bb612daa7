// The audit trail (GET /api/audit): filters by time range, user, category, action, outcome and
// endpoint, pages newest first with the API's cursor, and exports what the filters select as
// JSON lines or CSV (page by page from the API; the browser never asks for more than a page at a
// time). A control action (a write to a field device) reads as a sentence: who wrote what where.
// One column says who acted (never sometimes "By", sometimes "User"), one whom it was about when
// that is someone else, and the source is the client's address or MQTT client id on every channel.
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
  category: string;
  action: string;
  outcome: '' | 'success' | 'failure';
  endpoint: string;
}
const noFilters: Filters = { from: '', to: '', user: '', category: '', action: '', outcome: '', endpoint: '' };

/** GET /api/audit's categories, in words. */
const categories = [
  { value: '', label: 'Any category' },
  { value: 'control', label: 'Control actions (writes to devices)' },
  { value: 'sign-in', label: 'Sign-ins' },
  { value: 'accounts', label: 'Users, roles and rights' },
  { value: 'mqtt', label: 'MQTT sessions and bridges' },
  { value: 'services', label: 'Services' },
  { value: 'maintenance', label: 'Maintenance' },
  { value: 'other', label: 'Other' },
];

/** The API's query for the filters (datetime-local fields are local times). */
function queryOf(f: Filters): Record<string, string> {
  const q: Record<string, string> = {};
  if (f.from) q.from = new Date(f.from).toISOString();
  if (f.to) q.to = new Date(`${f.to}:59.999`).toISOString();
  if (f.user.trim()) q.user = f.user.trim();
  if (f.category) q.category = f.category;
  if (f.action) q.action = f.action;
  if (f.outcome) q.outcome = f.outcome;
  if (f.endpoint.trim()) q.endpoint = f.endpoint.trim();
  return q;
}

/** A write to a field device in words: "wrote 4321 to line.valve by operator via mapping line.copy (client hmi-1)". */
function controlText(e: AuditEvent): string {
  const d = e.details;
  const value = d.value === undefined ? '' : ` ${typeof d.value === 'string' ? d.value : JSON.stringify(d.value)}`;
  const by = whoActed(e);
  const who = [by ? `by ${by}` : '', typeof d.via === 'string' ? `via ${d.via}` : '', typeof d.clientId === 'string' ? `(client ${d.clientId})` : ''].filter(Boolean).join(' ');
  const what = e.outcome === 'success' ? `wrote${value} to ${String(d.endpoint)}` : `did not write${value} to ${String(d.endpoint)}: ${String(d.error ?? 'refused')}`;
  return who ? `${what} ${who}` : what;
}

/** Events no signed-in request makes that are the doing of the user they name (a sign-in, an MQTT connect, a device's registration). */
const OWN_DOING = /^(login|logout|mfa|ldap login|idp login|password|tokens revoked|mqtt\.connect|registration (requested|refused|delivered))\b/;
/** Who acted when no user did: the gateway itself (the first start's admin, a session closed after a change of rights). */
const GATEWAY = 'the gateway';

/**
 * Who acted: the signed-in caller of the request, the user a write was made for, the user whose
 * own doing the event is; otherwise the gateway itself. A write without a user (an anonymous
 * OPC UA session) names none.
 */
function whoActed(e: AuditEvent): string | undefined {
  if (e.actor) return e.actor.username;
  if (e.category === 'control') return typeof e.details.by === 'string' ? e.details.by : undefined;
  return e.user !== undefined && OWN_DOING.test(e.action) ? e.user : GATEWAY;
}

/** Whom it was about, when that is someone else than who acted (the user created, the client disconnected's user). */
const aboutWhom = (e: AuditEvent) => (e.user !== undefined && e.user !== whoActed(e) ? e.user : undefined);

/**
 * Where it came from, on every channel: the client's address (a request's, an MQTT client's, an
 * OPC UA session's) and the MQTT client id of a write or of a client's own session event (an
 * operator's action on a client names that client in the details instead); a write made for
 * someone by a part of the gateway without a client of its own (a Sparkplug host's command, a
 * bridge) names that part.
 */
function sourceText(e: AuditEvent): string {
  const d = e.details;
  const ownClient = e.category === 'control' || (e.category === 'mqtt' && !e.actor);
  const client = ownClient && typeof d.clientId === 'string' ? `client ${d.clientId}` : undefined;
  const via = e.category === 'control' && !e.source && !client && typeof d.via === 'string' ? d.via : undefined;
  return [e.source, client, via].filter(Boolean).join(' · ');
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
      <SelectField label="Category" value={f.category} onValue={set('category')} options={categories} />
      <SelectField label="Action" value={f.action} onValue={set('action')} options={[{ value: '', label: 'Any action' }, ...(known.includes(f.action) || !f.action ? [] : [f.action]), ...known]} />
      <SelectField label="Outcome" value={f.outcome} onValue={set('outcome')} options={[{ value: '', label: 'Any outcome' }, { value: 'success', label: 'Success' }, { value: 'failure', label: 'Failure' }]} />
      <TextField label="Endpoint" value={f.endpoint} onValue={set('endpoint')} maxLength={256} hint="Writes to this endpoint (service.resource)." />
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
      <p class="hint">Security events of the gateway, newest first: sign-ins and failures, locks, MFA, refused grants, changes of users, roles, permissions, certificates, registrations, services, backups and restores, and every write to a field device (control actions), whoever made it.</p>
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
          <Table columns={['Time', 'Action', 'Outcome', 'Who', 'About', 'Source', 'Details']} rows={items.length} empty="No event matches these filters." caption={`${items.length} events on this page`} region="Audit events">
            {items.map((e) => (
              <tr key={e.id} data-action={e.action}>
                <td>
                  <span data-volatile>{formatDate(e.time)}</span>
                </td>
                <th scope="row">{e.action}</th>
                <td>
                  <span class={`badge ${e.outcome === 'success' ? 'good' : 'bad'}`}>{e.outcome}</span>
                </td>
                <td>{whoActed(e) === GATEWAY ? <span class="hint">{GATEWAY}</span> : (whoActed(e) ?? '')}</td>
                <td>{aboutWhom(e) ?? ''}</td>
                <td>{sourceText(e) ? <code data-volatile>{sourceText(e)}</code> : ''}</td>
                <td class="details">
                  <span data-volatile>{e.category === 'control' ? controlText(e) : detailText(e.details)}</span>
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
