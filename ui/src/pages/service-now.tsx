// What a service runs, now: every resource of the service file with its state and what it is
// doing — a connection's reads, failures (and values refused before sending, apart) and last
// reading; a read endpoint's last value, when it came, a sparkline of the last five minutes
// (from the broker over /mqtt as the signed-in user; a fresh reading is asked on <topic>/req
// when the user may) and the QoS and retain flag it publishes them with; a write endpoint's
// last write in words ("written 4321 at 10:02:03 by admin", whoever wrote it: GET
// /api/endpoints' lastWrite, and at once the <topic>/set/result of a value written here); a
// mapping's routes; a bridge's queue and what it forwarded; a Sparkplug node's session and
// devices. States and figures are polled every 2 s while the tab is visible.
import type { MqttClient } from 'mqtt/dist/mqtt.esm';
import { useEffect, useRef, useState } from 'preact/hooks';
import { api } from '../api.js';
import { ErrorMessage, Notice } from '../components/feedback.js';
import { Button } from '../components/forms.js';
import { addressText, ago, clockTime, count, peerText, refusedText, writeText, type WriteOutcome } from '../components/resource-text.js';
import { Table } from '../components/table.js';
import { StateBadge } from '../components/widgets.js';
import { useAsync, usePoll } from '../hooks.js';
import { connectAsSession, subscribeChecked } from '../mqtt-session.js';
import { can, session } from '../session.js';
import type { MappingResource } from '../types.js';
import { preview } from './topic-store.js';

const POLL_MS = 2000;
const TREND_MS = 5 * 60_000;
const MAX_POINTS = 600;
const RECONNECT_MS = 3000;

/** Each resource type: the API list it is in, and its name in words. */
const KINDS: Record<string, { list: string; label: string }> = {
  Connection: { list: 'connections', label: 'Connection' },
  Endpoint: { list: 'endpoints', label: 'Endpoint' },
  Mapping: { list: 'mappings', label: 'Mapping' },
  'Server::Opcua': { list: 'servers', label: 'OPC UA server' },
  'Node::Opcua': { list: 'nodes', label: 'OPC UA nodes' },
  Bridge: { list: 'bridges', label: 'Bridge' },
  Sparkplug: { list: 'sparkplug', label: 'Sparkplug edge node' },
};

interface Reading {
  text: string;
  at: number;
  points: { t: number; v: number }[];
  refused?: boolean;
}

/** The number a payload carries: itself, the first of an array, or the first numeric field of an object. */
export function numberOf(text: string): number | undefined {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof v === 'number') return v;
  if (Array.isArray(v)) return typeof v[0] === 'number' ? v[0] : undefined;
  if (v && typeof v === 'object') return Object.values(v).find((x): x is number => typeof x === 'number');
  return undefined;
}

function Sparkline(props: { points: { t: number; v: number }[]; label: string }) {
  const pts = props.points;
  if (pts.length < 2) return null;
  const min = Math.min(...pts.map((p) => p.v));
  const max = Math.max(...pts.map((p) => p.v));
  const t0 = pts[0]!.t;
  const span = Math.max(1, pts[pts.length - 1]!.t - t0);
  const points = pts.map((p) => `${(((p.t - t0) / span) * 118 + 1).toFixed(1)},${(23 - (max > min ? ((p.v - min) / (max - min)) * 22 : 11)).toFixed(1)}`).join(' ');
  return (
    <svg class="sparkline" viewBox="0 0 120 24" role="img" aria-label={`${props.label}: ${pts.length} values, from ${min} to ${max}`}>
      <polyline points={points} />
    </svg>
  );
}

interface EndpointTopics {
  id: string;
  operation: 'read' | 'write';
  /** read: the topic; write: <topic>/set */
  topic: string;
  /** read: <topic>/res; write: <topic>/set/result */
  answer: string;
}

function WriteForm(props: { endpoint: EndpointTopics; client: MqttClient | null }) {
  const [value, setValue] = useState('');
  const [sent, setSent] = useState<string | null>(null);
  const id = `write-${props.endpoint.id.replace(/[^A-Za-z0-9_-]/g, '_')}`;
  if (!can('write', props.endpoint.topic, 'mqtt')) return <p class="hint">You may not write it ({props.endpoint.topic}).</p>;
  return (
    <form
      class="inline write"
      onSubmit={(e) => {
        e.preventDefault();
        const c = props.client;
        if (!c?.connected) return setSent('Not connected to the broker yet.');
        setSent(null);
        c.publish(props.endpoint.topic, value, { qos: 1, retain: false }, (err) => err && setSent(`Not sent: ${err.message}`));
      }}
    >
      <div class="field">
        <label for={id}>Value for {props.endpoint.id}</label>
        <input id={id} type="text" value={value} required placeholder="e.g. 42" onInput={(e) => setValue(e.currentTarget.value)} aria-describedby={`${id}-hint`} />
        <p class="hint" id={`${id}-hint`}>
          JSON, e.g. 42, true or [1, 2].
        </p>
      </div>
      <Button type="submit" class="small">
        Write
      </Button>
      {sent && <p class="hint failed">{sent}</p>}
    </form>
  );
}

/** The state column: the resource's state (a Sparkplug node: its session's), and where it is going. */
function States(props: { type: string; view: MappingResource }) {
  const v = props.view;
  const node = props.type === 'Sparkplug' ? (v.node as { state: string } | undefined) : undefined;
  return (
    <>
      <StateBadge state={node && v.currentState === 'enabled' ? node.state : v.currentState} />
      {v.targetState !== v.currentState && <span class="hint"> → {v.targetState}</span>}
    </>
  );
}

/** The "now" column of resources other than endpoints. */
function Doing(props: { type: string; view: MappingResource }) {
  const v = props.view as Record<string, any>;
  switch (props.type) {
    case 'Connection': {
      const f = v.figures as { reads: number; writes: number; failures: number; refusedWrites?: number; lastReadAt?: string } | undefined;
      return (
        <span data-volatile>
          {peerText(v.connection)}
          {f && ` · ${count(f.reads, 'read')}${f.writes ? `, ${count(f.writes, 'write')}` : ''}, ${f.failures ? count(f.failures, 'failure') : 'no failure'}${f.refusedWrites ? `, ${refusedText(f.refusedWrites)}` : ''} · last reading ${ago(f.lastReadAt)}`}
        </span>
      );
    }
    case 'Mapping': {
      const items = (v.mappings as Record<string, unknown>[] | undefined) ?? [];
      return (
        <ul class="plain-list">
          {items.slice(0, 3).map((m, i) => (
            <li key={i}>
              <code>{String(m.source ?? m.sourceEndpoint)}</code> → <code>{String(m.target ?? m.targetEndpoint)}</code>
            </li>
          ))}
          {items.length > 3 && <li class="hint">and {count(items.length - 3, 'more route')}</li>}
        </ul>
      );
    }
    case 'Bridge': {
      const q = v.queue as { messages: number; oldestAgeSeconds: number };
      const c = v.counters as { forwarded: number; received: number };
      return (
        <span data-volatile>
          {v.remote?.connectedTo ?? (v.remote?.urls as string[] | undefined)?.join(', ')} · queue {count(q.messages, 'message')}
          {q.messages ? `, oldest ${Math.round(q.oldestAgeSeconds)} s` : ''} · {c.forwarded.toLocaleString('en')} forwarded, {c.received.toLocaleString('en')} in
        </span>
      );
    }
    case 'Sparkplug': {
      const devices = (v.devices as { deviceId: string; state: string }[] | undefined) ?? [];
      const m = (v.messages ?? {}) as Record<string, number>;
      return (
        <span>
          {devices.map((d) => `${d.deviceId} ${d.state}`).join(', ') || 'no device'} ·{' '}
          <span data-volatile>{count((m.NDATA ?? 0) + (m.DDATA ?? 0), 'data message')}</span>
        </span>
      );
    }
    case 'Server::Opcua':
      return v.endpointUrl ? <code data-volatile>{String(v.endpointUrl)}</code> : <span class="hint">not listening</span>;
    case 'Node::Opcua':
      return <span>{count(((v.nodes as unknown[] | undefined) ?? []).length, 'node')}</span>;
    default:
      return null;
  }
}

export function ServiceNow(props: { serviceId: string; version: number; resources: { name: string; type: string }[] }) {
  const s = session.value!;
  const prefix = `${props.serviceId}.`;
  const lists = [...new Set(props.resources.map((r) => KINDS[r.type]?.list).filter((l): l is string => !!l && can('read', `/api/${l}`)))];
  const views = useAsync(async () => {
    const all = await Promise.all(lists.map(async (l) => (await api<MappingResource[]>('GET', `/api/${l}`)).filter((r) => r.id.startsWith(prefix))));
    return new Map(all.flat().map((r) => [r.id, r]));
  }, [props.serviceId, props.version, lists.join()]);
  usePoll(views.reload, POLL_MS, lists.length > 0);
  const endpointIds = props.resources
    .filter((r) => r.type === 'Endpoint')
    .map((r) => prefix + r.name)
    .filter((id) => views.data?.has(id))
    .join('\n');
  const topics = useAsync(async () => {
    const list = endpointIds ? endpointIds.split('\n') : [];
    return Promise.all(
      list.map(async (id) => {
        const t = await api<string[]>('GET', `/api/endpoints/${encodeURIComponent(id)}/topics`);
        const write = t[0]!.endsWith('/set');
        return { id, operation: write ? 'write' : 'read', topic: t[0]!, answer: write ? t[1]! : t[2]! } satisfies EndpointTopics;
      }),
    );
  }, [endpointIds]);
  const [readings, setReadings] = useState<Record<string, Reading>>({});
  const [results, setResults] = useState<Record<string, WriteOutcome>>({});
  const [status, setStatus] = useState<{ ok: boolean; text: string }>({ ok: false, text: 'Connecting to the broker…' });
  const client = useRef<MqttClient | null>(null);
  const endpointTopics = topics.data ?? [];
  const key = endpointTopics.map((t) => t.topic).join('\n');
  const reload = useRef(views.reload);
  reload.current = views.reload;

  useEffect(() => {
    if (!endpointTopics.length) return;
    let stopped = false;
    let retry: ReturnType<typeof setTimeout> | undefined;
    const byTopic = new Map<string, EndpointTopics>();
    for (const t of endpointTopics) {
      if (t.operation === 'read') byTopic.set(t.topic, t).set(t.answer, t);
      else byTopic.set(t.answer, t);
    }
    const connect = () => {
      const c = connectAsSession(s, 'gatewayd-live');
      client.current = c;
      c.on('connect', () => {
        setStatus({ ok: true, text: 'Values live from the broker.' });
        for (const t of endpointTopics) {
          const filter = t.operation === 'read' ? t.topic : t.answer;
          subscribeChecked(c, filter, (granted) => {
            if (!granted) setReadings((r) => ({ ...r, [t.id]: { text: 'no read permission on its topic', at: 0, points: [], refused: true } }));
            // A fresh reading now rather than at the next poll (a refused publish would close a 3.1.1 connection: only when allowed).
            else if (t.operation === 'read' && can('write', `${t.topic}/req`, 'mqtt')) {
              c.subscribe(t.answer, { qos: 1 }, () => c.publish(`${t.topic}/req`, '', { qos: 0, retain: false }, () => {}));
            }
          });
        }
      });
      c.on('message', (topic, body) => {
        const t = byTopic.get(topic);
        if (!t) return;
        const text = preview(body);
        const now = Date.now();
        if (t.operation === 'write') {
          let result: { ok?: boolean; value?: unknown; error?: string; timestamp?: number } = {};
          try {
            result = JSON.parse(text) as typeof result;
          } catch {
            // not an acknowledgement of the gateway's
          }
          setResults((r) => ({ ...r, [t.id]: { ok: result.ok === true, value: result.value, ...(result.error ? { error: result.error } : {}), at: result.timestamp ?? now } }));
          // Who wrote it: the endpoint's view has it now.
          void reload.current();
          return;
        }
        const v = numberOf(text);
        setReadings((r) => {
          const old = r[t.id]?.points ?? [];
          const points = v === undefined ? old : [...old.filter((p) => p.t > now - TREND_MS), { t: now, v }].slice(-MAX_POINTS);
          return { ...r, [t.id]: { text, at: now, points } };
        });
      });
      c.on('error', (err) => {
        if (err.code === 4 || err.code === 5) {
          stopped = true;
          setStatus({ ok: false, text: 'The broker refused the connection: no MQTT access for your user.' });
        }
      });
      c.on('close', () => {
        if (client.current !== c) return;
        client.current = null;
        c.end(true);
        if (stopped) return;
        setStatus({ ok: false, text: 'The connection to the broker closed; reconnecting…' });
        retry = setTimeout(connect, RECONNECT_MS);
      });
    };
    connect();
    return () => {
      stopped = true;
      clearTimeout(retry);
      const c = client.current;
      client.current = null;
      c?.end(true);
    };
  }, [key, s.token]);

  const byId = new Map(endpointTopics.map((t) => [t.id, t]));
  /** The newer of the endpoint's last write (with who) and the acknowledgement just seen here. */
  const lastWrite = (id: string, view: MappingResource): WriteOutcome | undefined => {
    const fromView = view.lastWrite as WriteOutcome | undefined;
    const seen = results[id];
    if (!seen) return fromView;
    return fromView && new Date(fromView.at).getTime() >= new Date(seen.at).getTime() ? fromView : seen;
  };

  return (
    <section class="panel" aria-labelledby="now-title">
      <div class="panel-title">
        <h2 id="now-title">Running now</h2>
        {endpointTopics.length > 0 && status.ok && <span class="hint">States every {POLL_MS / 1000} s; {status.text.toLowerCase()}</span>}
      </div>
      <ErrorMessage error={views.error ?? topics.error} />
      {props.resources.length === 0 ? (
        <p class="hint">Nothing runs yet: add a resource below and apply.</p>
      ) : (
        <>
          {endpointTopics.length > 0 && !status.ok && <Notice kind="warning">{status.text}</Notice>}
          <Table columns={['Resource', 'State', 'Now', 'Trend or write']} rows={props.resources.length} empty="" region="What the service runs">
            {props.resources.map((r) => {
              const id = prefix + r.name;
              const view = views.data?.get(id);
              const t = byId.get(id);
              const reading = readings[id];
              const kind = KINDS[r.type]?.label ?? r.type;
              const write = view && t?.operation === 'write' ? lastWrite(id, view) : undefined;
              // How a read endpoint's values reach subscribers, beside the values (issue 38 point 3).
              const publish = r.type === 'Endpoint' ? (view?.publish as { qos: number; retain: boolean } | undefined) : undefined;
              return (
                <tr key={id} data-resource-id={id} data-endpoint={r.type === 'Endpoint' ? id : undefined}>
                  <th scope="row">
                    {r.name}
                    <span class="hint block">
                      {kind}
                      {view && r.type === 'Endpoint' ? `, ${String(view.operation)} ${addressText(view.address)}` : ''}
                    </span>
                  </th>
                  <td>{view ? <States type={r.type} view={view} /> : <span class="badge off">not running</span>}</td>
                  <td class="value">
                    {!view ? (
                      <span class="hint">{views.data ? 'Not running: apply the service, or see the problems above.' : 'Loading…'}</span>
                    ) : r.type !== 'Endpoint' ? (
                      <Doing type={r.type} view={view} />
                    ) : t?.operation === 'read' ? (
                      reading ? (
                        <>
                          <code data-volatile>{reading.text}</code>
                          {reading.at > 0 && (
                            <span class="hint block" data-volatile>
                              at {clockTime(reading.at)}
                            </span>
                          )}
                        </>
                      ) : (
                        <span class="hint">waiting for a value…</span>
                      )
                    ) : write ? (
                      <span class={write.ok ? 'written' : 'failed'} data-testid={`result-${id}`} aria-live="polite" data-volatile>
                        {writeText(write)}
                      </span>
                    ) : (
                      <span class="hint">no write yet</span>
                    )}
                    {publish && (
                      <span class="hint block publish">
                        published at QoS {publish.qos}, {publish.retain ? 'retained' : 'not retained'}
                      </span>
                    )}
                    {view?.message && <span class="hint block failed">{view.message}</span>}
                  </td>
                  <td>{t?.operation === 'read' ? <Sparkline points={reading?.points ?? []} label={`Trend of ${id}`} /> : t ? <WriteForm endpoint={t} client={client.current} /> : null}</td>
                </tr>
              );
            })}
          </Table>
        </>
      )}
    </section>
  );
}
