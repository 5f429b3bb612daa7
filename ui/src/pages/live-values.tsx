// Live values of a service's endpoints, from the broker (the data plane) over /mqtt as the
// signed-in user: a read endpoint's last value, when it came and a sparkline of the last five
// minutes when it carries a number (a fresh reading is asked on <topic>/req when the user may);
// a write endpoint takes a value to publish on <topic>/set and shows its <topic>/set/result.
import type { MqttClient } from 'mqtt/dist/mqtt.esm';
import { useEffect, useRef, useState } from 'preact/hooks';
import { api } from '../api.js';
import { ErrorMessage, Notice } from '../components/feedback.js';
import { Button } from '../components/forms.js';
import { Table } from '../components/table.js';
import { StateBadge, formatDate } from '../components/widgets.js';
import { useAsync, usePoll } from '../hooks.js';
import { connectAsSession, subscribeChecked } from '../mqtt-session.js';
import { can, session } from '../session.js';
import type { MappingResource } from '../types.js';
import { preview } from './topic-store.js';

const TREND_MS = 5 * 60_000;
const MAX_POINTS = 600;
const RECONNECT_MS = 3000;

interface Reading {
  text: string;
  at: number;
  points: { t: number; v: number }[];
  refused?: boolean;
}
interface WriteResult {
  ok: boolean;
  text: string;
  at: number;
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

function WriteForm(props: { endpoint: EndpointTopics; client: MqttClient | null; result?: WriteResult }) {
  const [value, setValue] = useState('');
  const [sent, setSent] = useState<string | null>(null);
  const mayWrite = can('write', props.endpoint.topic, 'mqtt');
  const id = `write-${props.endpoint.id.replace(/[^A-Za-z0-9_-]/g, '_')}`;
  if (!mayWrite) return <p class="hint">You may not publish to {props.endpoint.topic}.</p>;
  return (
    <form
      class="inline"
      onSubmit={(e) => {
        e.preventDefault();
        const c = props.client;
        if (!c?.connected) return setSent('Not connected to the broker yet.');
        c.publish(props.endpoint.topic, value, { qos: 1, retain: false }, (err) => setSent(err ? `Not published: ${err.message}` : `Sent ${value} to ${props.endpoint.topic}.`));
      }}
    >
      <div class="field">
        <label for={id}>Value for {props.endpoint.id}</label>
        <input id={id} type="text" value={value} required onInput={(e) => setValue(e.currentTarget.value)} aria-describedby={`${id}-hint`} />
        <p class="hint" id={`${id}-hint`}>
          JSON, e.g. 42, true or [1, 2].
        </p>
      </div>
      <Button type="submit" class="small">
        Write
      </Button>
      {sent && <span class="hint">{sent}</span>}
    </form>
  );
}

export function LiveValues(props: { serviceId: string; version: number }) {
  const s = session.value!;
  const prefix = `${props.serviceId}.`;
  const endpoints = useAsync(async () => (await api<MappingResource[]>('GET', '/api/endpoints')).filter((e) => e.id.startsWith(prefix)), [props.serviceId, props.version]);
  usePoll(endpoints.reload, 2000);
  const ids = (endpoints.data ?? []).map((e) => e.id).join('\n');
  const topics = useAsync(async () => {
    const list = ids ? ids.split('\n') : [];
    return Promise.all(
      list.map(async (id) => {
        const t = await api<string[]>('GET', `/api/endpoints/${encodeURIComponent(id)}/topics`);
        const write = t[0]!.endsWith('/set');
        return { id, operation: write ? 'write' : 'read', topic: t[0]!, answer: write ? t[1]! : t[2]! } satisfies EndpointTopics;
      }),
    );
  }, [ids]);
  const [readings, setReadings] = useState<Record<string, Reading>>({});
  const [results, setResults] = useState<Record<string, WriteResult>>({});
  const [status, setStatus] = useState<{ ok: boolean; text: string }>({ ok: false, text: 'Connecting to the broker…' });
  const client = useRef<MqttClient | null>(null);
  const list = topics.data ?? [];
  const key = list.map((t) => t.topic).join('\n');

  useEffect(() => {
    if (!list.length) return;
    let stopped = false;
    let retry: ReturnType<typeof setTimeout> | undefined;
    const byTopic = new Map<string, EndpointTopics>();
    for (const t of list) {
      if (t.operation === 'read') byTopic.set(t.topic, t).set(t.answer, t);
      else byTopic.set(t.answer, t);
    }
    const connect = () => {
      const c = connectAsSession(s, 'gatewayd-live');
      client.current = c;
      c.on('connect', () => {
        setStatus({ ok: true, text: 'Live from the broker.' });
        for (const t of list) {
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
          let ok = false;
          try {
            ok = (JSON.parse(text) as { ok?: boolean }).ok === true;
          } catch {
            // shown as text
          }
          setResults((r) => ({ ...r, [t.id]: { ok, text, at: now } }));
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

  const states = new Map((endpoints.data ?? []).map((e) => [e.id, e]));
  return (
    <section class="panel" aria-labelledby="live-title">
      <h2 id="live-title">Live values</h2>
      <ErrorMessage error={endpoints.error ?? topics.error} />
      {list.length === 0 ? (
        <p class="hint">{endpoints.data ? 'This service has no running endpoint yet: add one and apply.' : 'Loading the endpoints…'}</p>
      ) : (
        <>
          <Notice kind={status.ok ? 'success' : 'warning'}>{status.text}</Notice>
          <Table columns={['Endpoint', 'State', 'Value', 'When', 'Trend or write']} rows={list.length} empty="" region="Live values of the endpoints">
            {list.map((t) => {
              const r = readings[t.id];
              const w = results[t.id];
              const e = states.get(t.id);
              return (
                <tr key={t.id} data-endpoint={t.id}>
                  <th scope="row">
                    {t.id}
                    <span class="hint"> ({t.operation})</span>
                  </th>
                  <td>{e ? <StateBadge state={e.currentState} /> : ''}</td>
                  <td class="value">
                    {t.operation === 'read' ? (
                      r ? (
                        <code data-volatile>{r.text}</code>
                      ) : (
                        <span class="hint">waiting for a value…</span>
                      )
                    ) : w ? (
                      <span class={w.ok ? 'ok' : 'failed'} data-testid={`result-${t.id}`}>
                        <span class={`badge ${w.ok ? 'good' : 'bad'}`}>{w.ok ? 'written' : 'not written'}</span> <code data-volatile>{w.text}</code>
                      </span>
                    ) : (
                      <span class="hint">no write yet</span>
                    )}
                  </td>
                  <td>
                    <span data-volatile>{(t.operation === 'read' ? r?.at : w?.at) ? formatDate((t.operation === 'read' ? r!.at : w!.at)) : ''}</span>
                  </td>
                  <td>{t.operation === 'read' ? <Sparkline points={r?.points ?? []} label={`Trend of ${t.id}`} /> : <WriteForm endpoint={t} client={client.current} result={w} />}</td>
                </tr>
              );
            })}
          </Table>
        </>
      )}
    </section>
  );
}
