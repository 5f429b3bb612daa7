// The broker's clients (/api/broker/clients, /sessions, /retained): who is connected (from
// where, which protocol, since when, how much is waiting), one client's subscriptions,
// disconnecting one; the stored sessions of clients that are away, deleting one; retained
// messages by topic filter, viewing and clearing one. Each list is paged by the API.
import { useState } from 'preact/hooks';
import { api } from '../api.js';
import { CursorPager, useCursorPages, type CursorPage } from '../components/cursor-pager.js';
import { ConfirmButton, Dialog } from '../components/dialog.js';
import { ErrorMessage, Loading, Notice } from '../components/feedback.js';
import { Button, TextField } from '../components/forms.js';
import { Table } from '../components/table.js';
import { formatDate } from '../components/widgets.js';
import { useAsync, usePoll } from '../hooks.js';
import { can } from '../session.js';

const PAGE = 25;
const POLL_MS = 5000;
const enc = encodeURIComponent;

interface BrokerClient {
  clientId: string;
  username?: string;
  address: string;
  transport: string;
  protocolVersion: number;
  clean: boolean;
  connectedSince: string;
  subscriptions: number;
  queued: number;
  inflight: number;
}
interface StoredSession {
  clientId: string;
  username?: string;
  connected: boolean;
  subscriptions: number;
  queued: number;
  inflight: number;
  expiresAt: string | null;
}
interface Retained {
  topic: string;
  qos: number;
  bytes: number;
  payload: string;
  encoding: 'utf8' | 'base64';
  truncated: boolean;
}

const protocolName = (v: number) => (v === 5 ? 'MQTT 5' : v === 3 ? 'MQTT 3.1' : 'MQTT 3.1.1');

function Subscriptions(props: { clientId: string }) {
  const [open, setOpen] = useState(false);
  return (
    <>
      <Button class="small" onClick={() => setOpen(true)} aria-label={`Subscriptions of ${props.clientId}`}>
        Subscriptions
      </Button>
      <Dialog open={open} title={`Subscriptions of ${props.clientId}`} onClose={() => setOpen(false)}>
        {open && <SubscriptionList clientId={props.clientId} />}
        <div class="actions">
          <Button onClick={() => setOpen(false)}>Close</Button>
        </div>
      </Dialog>
    </>
  );
}

function SubscriptionList(props: { clientId: string }) {
  const detail = useAsync(() => api<BrokerClient & { subscriptionList: { topic: string; qos: number }[]; keepaliveSeconds: number }>('GET', `/api/broker/clients/${enc(props.clientId)}`), [props.clientId]);
  if (detail.error) return <ErrorMessage error={detail.error} />;
  if (!detail.data) return <Loading what="the subscriptions" />;
  const list = detail.data.subscriptionList;
  return (
    <div class="dialog-body">
      <p class="hint">Keep alive {detail.data.keepaliveSeconds} s · {detail.data.clean ? 'clean session' : 'persistent session'}</p>
      {list.length === 0 ? (
        <p>No subscription.</p>
      ) : (
        <ul class="plain-list">
          {list.map((s) => (
            <li key={s.topic}>
              <code>{s.topic}</code> <span class="hint">QoS {s.qos}</span>
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}

function SearchForm(props: { fields: { key: string; label: string; hint?: string; value: string }[]; onApply: (values: Record<string, string>) => void; label: string }) {
  const [values, setValues] = useState<Record<string, string>>(Object.fromEntries(props.fields.map((f) => [f.key, f.value])));
  return (
    <form
      class="inline"
      role="search"
      aria-label={props.label}
      onSubmit={(e) => {
        e.preventDefault();
        props.onApply(Object.fromEntries(Object.entries(values).map(([k, v]) => [k, v.trim()])));
      }}
    >
      {props.fields.map((f) => (
        <TextField key={f.key} label={f.label} value={values[f.key] ?? ''} onValue={(v) => setValues({ ...values, [f.key]: v })} maxLength={256} hint={f.hint} />
      ))}
      <Button type="submit">Find</Button>
    </form>
  );
}

function ConnectedClients() {
  const [filter, setFilter] = useState({ prefix: '', username: '' });
  const [done, setDone] = useState<string | null>(null);
  const pages = useCursorPages(
    (cursor) => api<CursorPage<BrokerClient>>('GET', '/api/broker/clients', { query: { limit: PAGE, cursor, prefix: filter.prefix || undefined, username: filter.username || undefined } }),
    [filter],
  );
  usePoll(pages.page.reload, POLL_MS);
  const items = pages.page.data?.items;
  return (
    <section class="panel" aria-labelledby="connected-title">
      <h2 id="connected-title">Connected clients</h2>
      <SearchForm
        label="Find connected clients"
        fields={[
          { key: 'prefix', label: 'Client id starts with', value: filter.prefix },
          { key: 'username', label: 'User', value: filter.username, hint: 'Exact name.' },
        ]}
        onApply={(v) => {
          setFilter({ prefix: v.prefix ?? '', username: v.username ?? '' });
          pages.reset();
        }}
      />
      {done && <Notice kind="success">{done}</Notice>}
      <ErrorMessage error={pages.page.error} />
      {!items ? (
        pages.page.error ? null : <Loading what="the clients" />
      ) : (
        <Table columns={['Client id', 'User', 'Address', 'Protocol', 'Connected since', 'Subscriptions', 'Queued / in flight', null]} rows={items.length} empty="No client connected." region="Connected clients">
          {items.map((c) => (
            <tr key={c.clientId} data-client={c.clientId}>
              <th scope="row">
                <code class="wrap">{c.clientId}</code>
              </th>
              <td>{c.username ?? <span class="hint">anonymous</span>}</td>
              <td>
                <code data-volatile>{c.address}</code> <span class="hint">{c.transport}</span>
              </td>
              <td>
                {protocolName(c.protocolVersion)}
                {c.clean ? '' : <span class="hint"> · persistent</span>}
              </td>
              <td>
                <span data-volatile>{formatDate(c.connectedSince)}</span>
              </td>
              <td>{c.subscriptions}</td>
              <td>
                {c.queued} / {c.inflight}
              </td>
              <td class="actions">
                <Subscriptions clientId={c.clientId} />
                {can('write', `/api/broker/clients/${enc(c.clientId)}`) && (
                  <ConfirmButton
                    label="Disconnect"
                    class="small"
                    aria-label={`Disconnect ${c.clientId}`}
                    title={`Disconnect ${c.clientId}`}
                    question={
                      <p>
                        The connection is closed now (an MQTT 5 client is told: administrative action) and its will is published. A client that reconnects by itself comes back: take its
                        permission away to keep it out.
                      </p>
                    }
                    confirmLabel="Disconnect"
                    onConfirm={async () => {
                      await api('DELETE', `/api/broker/clients/${enc(c.clientId)}`);
                      setDone(`${c.clientId} disconnected.`);
                      await pages.page.reload();
                    }}
                  />
                )}
              </td>
            </tr>
          ))}
        </Table>
      )}
      <CursorPager pages={pages} what="the connected clients" />
    </section>
  );
}

function OfflineSessions() {
  const [prefix, setPrefix] = useState('');
  const [done, setDone] = useState<string | null>(null);
  const pages = useCursorPages(
    (cursor) => api<CursorPage<StoredSession>>('GET', '/api/broker/sessions', { query: { limit: PAGE, cursor, connected: false, prefix: prefix || undefined } }),
    [prefix],
  );
  const items = pages.page.data?.items;
  return (
    <section class="panel" aria-labelledby="sessions-title">
      <h2 id="sessions-title">Sessions of clients away</h2>
      <p class="hint">Persistent sessions the broker keeps for clients that are not connected: their subscriptions and the messages waiting for them, until they return or the session expires.</p>
      <SearchForm label="Find sessions" fields={[{ key: 'prefix', label: 'Client id starts with', value: prefix }]} onApply={(v) => (setPrefix(v.prefix ?? ''), pages.reset())} />
      {done && <Notice kind="success">{done}</Notice>}
      <ErrorMessage error={pages.page.error} />
      {!items ? (
        pages.page.error ? null : <Loading what="the sessions" />
      ) : (
        <Table columns={['Client id', 'User', 'Subscriptions', 'Queued messages', 'Expires', null]} rows={items.length} empty="No session of a client that is away." region="Sessions of clients away">
          {items.map((s) => (
            <tr key={s.clientId} data-session={s.clientId}>
              <th scope="row">
                <code class="wrap">{s.clientId}</code>
              </th>
              <td>{s.username ?? ''}</td>
              <td>{s.subscriptions}</td>
              <td>{s.queued + s.inflight}</td>
              <td>
                <span data-volatile>{s.expiresAt ? formatDate(s.expiresAt) : '—'}</span>
              </td>
              <td class="actions">
                {can('write', `/api/broker/sessions/${enc(s.clientId)}`) && (
                  <ConfirmButton
                    label="Delete"
                    class="small"
                    aria-label={`Delete the session of ${s.clientId}`}
                    title={`Delete the session of ${s.clientId}`}
                    question={<p>Its subscriptions and the {s.queued + s.inflight} messages waiting for it are deleted; when the client returns it starts afresh.</p>}
                    confirmLabel="Delete session"
                    onConfirm={async () => {
                      await api('DELETE', `/api/broker/sessions/${enc(s.clientId)}`);
                      setDone(`The session of ${s.clientId} is deleted.`);
                      await pages.page.reload();
                    }}
                  />
                )}
              </td>
            </tr>
          ))}
        </Table>
      )}
      <CursorPager pages={pages} what="the sessions" />
    </section>
  );
}

function payloadText(m: Retained, max: number): string {
  const text = m.encoding === 'utf8' ? m.payload : `(binary, base64) ${m.payload}`;
  return text.length > max ? `${text.slice(0, max)}…` : text;
}

function ViewRetained(props: { message: Retained }) {
  const [open, setOpen] = useState(false);
  const m = props.message;
  return (
    <>
      <Button class="small" onClick={() => setOpen(true)} aria-label={`View ${m.topic}`}>
        View
      </Button>
      <Dialog open={open} title={`Retained on ${m.topic}`} onClose={() => setOpen(false)} wide>
        <div class="dialog-body">
          <p class="hint">
            QoS {m.qos} · {m.bytes} bytes{m.truncated ? ' · the first 4 KiB' : ''}
            {m.encoding === 'base64' ? ' · binary, shown as base64' : ''}
          </p>
          <pre aria-label={`Payload of ${m.topic}`}>{m.payload}</pre>
        </div>
        <div class="actions">
          <Button onClick={() => setOpen(false)}>Close</Button>
        </div>
      </Dialog>
    </>
  );
}

function RetainedMessages() {
  const [filter, setFilter] = useState('#');
  const [done, setDone] = useState<string | null>(null);
  const pages = useCursorPages((cursor) => api<CursorPage<Retained>>('GET', '/api/broker/retained', { query: { limit: PAGE, cursor, filter } }), [filter]);
  const items = pages.page.data?.items;
  return (
    <section class="panel" aria-labelledby="retained-title">
      <h2 id="retained-title">Retained messages</h2>
      <SearchForm label="Find retained messages" fields={[{ key: 'filter', label: 'Topic filter', value: filter, hint: '+ matches one level, # the rest; e.g. plant/+/state.' }]} onApply={(v) => (setFilter(v.filter || '#'), pages.reset())} />
      {done && <Notice kind="success">{done}</Notice>}
      <ErrorMessage error={pages.page.error} />
      {!items ? (
        pages.page.error ? null : <Loading what="the retained messages" />
      ) : (
        <Table columns={['Topic', 'QoS', 'Size', 'Payload', null]} rows={items.length} empty={`No retained message matches ${filter}.`} region="Retained messages">
          {items.map((m) => (
            <tr key={m.topic} data-topic={m.topic}>
              <th scope="row">
                <code class="wrap">{m.topic}</code>
              </th>
              <td>{m.qos}</td>
              <td>{m.bytes} B</td>
              <td class="details">
                <code>{payloadText(m, 80)}</code>
              </td>
              <td class="actions">
                <ViewRetained message={m} />
                {can('write', '/api/broker/retained') && (
                  <ConfirmButton
                    label="Clear"
                    class="small"
                    aria-label={`Clear the retained message of ${m.topic}`}
                    title={`Clear ${m.topic}`}
                    question={<p>New subscribers no longer get this message; nothing is published.</p>}
                    confirmLabel="Clear"
                    onConfirm={async () => {
                      await api('DELETE', '/api/broker/retained', { query: { topic: m.topic } });
                      setDone(`The retained message of ${m.topic} is cleared.`);
                      await pages.page.reload();
                    }}
                  />
                )}
              </td>
            </tr>
          ))}
        </Table>
      )}
      <CursorPager pages={pages} what="the retained messages" />
    </section>
  );
}

export function ClientsPage() {
  return (
    <section class="page">
      <h1>MQTT clients</h1>
      <p class="hint">The embedded broker's connected clients (refreshed every {POLL_MS / 1000} s), the sessions it keeps for clients that are away, and its retained messages.</p>
      <ConnectedClients />
      {can('read', '/api/broker/sessions') && <OfflineSessions />}
      {can('read', '/api/broker/retained') && <RetainedMessages />}
    </section>
  );
}
