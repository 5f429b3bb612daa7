// Live MQTT view (a chunk of its own: mqtt.js weighs ~100 KB gzipped and only this page needs it).
// It connects to the broker's WebSocket endpoint /mqtt as the signed-in user, with the session
// token as password, so it sees and may publish exactly what the broker allows that user. It
// subscribes at once to what the user may read (its MQTT read permissions), so the retained
// messages — the state of the plant as last published — are on the page when it opens.
import type { MqttClient } from 'mqtt/dist/mqtt.esm';
import { useEffect, useRef, useState } from 'preact/hooks';
import { api } from '../api.js';
import { ErrorMessage, Notice } from '../components/feedback.js';
import { Button, Checkbox, SelectField, TextArea, TextField } from '../components/forms.js';
import { brokerUrl, connectAsSession, subscribeChecked } from '../mqtt-session.js';
import { session } from '../session.js';
import type { Permission } from '../types.js';
import { TopicStore, type TopicNode } from './topic-store.js';

const MAX_TOPICS = 5000;
const RECONNECT_MS = 3000;

/** `url`, when set, is shown after the text (masked in screenshots: its port changes from run to run). */
type Status = { kind: 'connecting' | 'connected' | 'closed' | 'refused'; text: string; url?: string; after?: string };
interface Subscription {
  filter: string;
  state: 'pending' | 'granted' | 'refused';
}

function refusedPublishResult(topic: string): { ok: false; text: string } {
  return { ok: false, text: `The broker closed the connection instead of accepting the message: you may not publish to “${topic}”. Reconnecting…` };
}

/** The filters the user may read over MQTT ('#' alone when it may read everything), at most 20. */
function readFilters(permissions: Permission[]): string[] {
  const filters = [...new Set(permissions.filter((p) => p.context === 'mqtt' && p.operation !== 'write').map((p) => p.resource))];
  return filters.includes('#') ? ['#'] : filters.slice(0, 20);
}

function subscribeTo(c: MqttClient, f: string, setSubs: (update: (list: Subscription[]) => Subscription[]) => void): void {
  subscribeChecked(c, f, (granted) => setSubs((list) => list.map((x) => (x.filter === f ? { ...x, state: granted ? 'granted' : 'refused' } : x))));
}

function Tree(props: { node: TopicNode; root?: boolean }) {
  const children = [...props.node.children.values()];
  return (
    <ul class={props.root ? 'tree root' : 'tree'}>
      {children.map((c) => {
        const row = (
          <span class="topic-row" data-topic={c.stat ? c.path : undefined}>
            <span class="level">{c.name === '' ? '(empty level)' : c.name}</span>
            {c.stat && (
              <>
                <span class="value">{c.stat.last}</span>
                {c.stat.retained && <span class="badge off">retained</span>}
                <span class="rate" data-volatile>
                  {c.stat.count} msg · {c.stat.rate.toFixed(1)} msg/s
                </span>
              </>
            )}
          </span>
        );
        return (
          <li key={c.path}>
            {c.children.size > 0 ? (
              <details open>
                <summary>{row}</summary>
                <Tree node={c} />
              </details>
            ) : (
              row
            )}
          </li>
        );
      })}
    </ul>
  );
}

export function TopicsPage() {
  const s = session.value!;
  const [status, setStatus] = useState<Status>({ kind: 'connecting', text: 'Connecting to the broker…' });
  const [subs, setSubs] = useState<Subscription[]>(() => readFilters(s.permissions).map((filter) => ({ filter, state: 'pending' })));
  const [filter, setFilter] = useState('#');
  const [pubTopic, setPubTopic] = useState('');
  const [payload, setPayload] = useState('');
  const [qos, setQos] = useState<'0' | '1'>('1');
  const [retain, setRetain] = useState(false);
  const [pubResult, setPubResult] = useState<{ ok: boolean; text: string } | null>(null);
  const [, setVersion] = useState(0);
  const store = useRef(new TopicStore(MAX_TOPICS));
  const client = useRef<MqttClient | null>(null);
  const subsRef = useRef<Subscription[]>([]);
  /** A publish awaiting its PUBACK: if the broker closes the connection instead, it was refused. */
  const pendingPublish = useRef<string | null>(null);
  subsRef.current = subs;

  useEffect(() => {
    let stopped = false;
    let retry: ReturnType<typeof setTimeout> | undefined;
    let dirty = false;

    const connect = () => {
      setStatus({ kind: 'connecting', text: 'Connecting to the broker…' });
      // Our own reconnect (reconnectPeriod 0): a fresh client never re-sends a refused publish.
      const c = connectAsSession(s, 'gatewayd-ui');
      client.current = c;
      c.on('connect', () => {
        setStatus({ kind: 'connected', text: 'Connected to ', url: brokerUrl(), after: ` as ${s.username}.` });
        for (const sub of subsRef.current) if (sub.state !== 'refused') subscribeTo(c, sub.filter, setSubs);
      });
      c.on('message', (topic, body, packet) => {
        store.current.add(topic, body, !!packet.retain);
        dirty = true;
      });
      c.on('error', (err) => {
        // CONNACK refusals: 4 bad username or password (the session ended), 5 not authorized.
        if (err.code === 4 || err.code === 5) {
          stopped = true;
          setStatus({
            kind: 'refused',
            text: err.code === 5 ? 'The broker refused the connection: your user has no MQTT permission.' : 'The broker refused the connection: the session token is no longer valid.',
          });
          void api('GET', '/api/session').catch(() => {});
        }
      });
      c.on('close', () => {
        if (client.current !== c) return;
        client.current = null;
        c.end(true);
        const refusedPublish = pendingPublish.current;
        pendingPublish.current = null;
        if (refusedPublish !== null) setPubResult(refusedPublishResult(refusedPublish));
        if (stopped) return;
        setStatus({ kind: 'closed', text: `The connection to the broker closed; reconnecting in ${RECONNECT_MS / 1000} s…` });
        retry = setTimeout(connect, RECONNECT_MS);
      });
    };
    connect();

    // Rates every second; the tree is redrawn at most twice a second while messages arrive.
    const tick = setInterval(() => {
      store.current.tick();
      setVersion((v) => v + 1);
    }, 1000);
    const draw = setInterval(() => {
      if (dirty) {
        dirty = false;
        setVersion((v) => v + 1);
      }
    }, 500);
    return () => {
      stopped = true;
      clearTimeout(retry);
      clearInterval(tick);
      clearInterval(draw);
      const c = client.current;
      client.current = null;
      c?.end(true);
    };
  }, [s.token]);

  const addSubscription = (e: Event) => {
    e.preventDefault();
    const f = filter.trim();
    if (!f || subs.some((x) => x.filter === f && x.state !== 'refused')) return;
    setSubs((list) => [...list.filter((x) => x.filter !== f), { filter: f, state: 'pending' }]);
    const c = client.current;
    if (c?.connected) subscribeTo(c, f, setSubs);
  };

  const removeSubscription = (f: string) => {
    client.current?.unsubscribe(f);
    setSubs((list) => list.filter((x) => x.filter !== f));
  };

  const publish = (e: Event) => {
    e.preventDefault();
    const c = client.current;
    const topic = pubTopic.trim();
    if (!c?.connected) {
      setPubResult({ ok: false, text: 'Not connected to the broker; wait for the connection and try again.' });
      return;
    }
    setPubResult(null);
    const q = qos === '1' ? 1 : 0;
    if (q === 1) pendingPublish.current = topic;
    c.publish(topic, payload, { qos: q, retain }, (err) => {
      const awaited = pendingPublish.current === topic;
      if (awaited) pendingPublish.current = null;
      // The connection closed under an unacknowledged publish: the broker refused it.
      if (err) setPubResult(awaited && !c.connected ? refusedPublishResult(topic) : { ok: false, text: `Not published: ${err.message}` });
      else setPubResult({ ok: true, text: q === 1 ? `Published to “${topic}”; the broker acknowledged it.` : `Sent to “${topic}” (QoS 0: no acknowledgement).` });
    });
  };

  const st = store.current;
  const tree = st.tree();
  return (
    <section class="page">
      <h1>Topic explorer</h1>
      <p class="hint">
        Live messages from the gateway's broker, as <strong>{s.username}</strong> sees them: the broker applies your MQTT permissions to every subscription and publish.
      </p>
      {status.kind === 'refused' ? (
        <ErrorMessage error={new Error(status.text)} title="Broker" />
      ) : (
        <Notice kind={status.kind === 'connected' ? 'success' : 'warning'}>
          {status.text}
          {status.url && <span data-volatile>{status.url}</span>}
          {status.after}
        </Notice>
      )}

      <div class="split">
        <section class="panel" aria-labelledby="sub-title">
          <h2 id="sub-title">Subscriptions</h2>
          <form class="inline" onSubmit={addSubscription}>
            <TextField label="Topic filter" value={filter} onValue={setFilter} required maxLength={65535} hint="+ matches one level, # the rest; e.g. services/# or factory/+/temp." />
            <Button type="submit" variant="primary">
              Subscribe
            </Button>
          </form>
          <p class="hint">Subscribed when the page opens to what you may read, so retained messages show at once.</p>
          {subs.length === 0 ? (
            <p class="hint">No subscription yet.</p>
          ) : (
            <ul class="subs">
              {subs.map((x) => (
                <li key={x.filter}>
                  <code>{x.filter}</code>{' '}
                  {x.state === 'granted' ? <span class="badge good">subscribed</span> : x.state === 'pending' ? <span class="badge moving">pending</span> : <span class="badge bad">refused by the broker: no read permission</span>}{' '}
                  <Button class="small" variant="plain" aria-label={`Unsubscribe ${x.filter}`} onClick={() => removeSubscription(x.filter)}>
                    Unsubscribe
                  </Button>
                </li>
              ))}
            </ul>
          )}
        </section>

        <section class="panel" aria-labelledby="pub-title">
          <h2 id="pub-title">Publish a test message</h2>
          <form onSubmit={publish}>
            <TextField label="Topic" value={pubTopic} onValue={setPubTopic} required maxLength={65535} />
            <TextArea label="Payload" value={payload} onValue={setPayload} rows={3} maxLength={262144} />
            <div class="row">
              <SelectField label="QoS" value={qos} options={[{ value: '0', label: '0 (at most once)' }, { value: '1', label: '1 (acknowledged)' }]} onValue={setQos} />
              <Checkbox label="Retain" checked={retain} onValue={setRetain} />
            </div>
            {pubResult && (pubResult.ok ? <Notice kind="success">{pubResult.text}</Notice> : <ErrorMessage error={new Error(pubResult.text)} title="Publish" />)}
            <Button type="submit" variant="primary">
              Publish
            </Button>
          </form>
        </section>
      </div>

      <section class="panel" aria-labelledby="tree-title">
        <h2 id="tree-title">Topics</h2>
        <p class="hint" aria-live="off">
          {st.topics.size} topics, <span data-volatile>{st.total}</span> messages{st.dropped > 0 ? ` · ${st.dropped} messages of further topics not shown (at most ${MAX_TOPICS} topics)` : ''}.{' '}
          <Button class="small" onClick={() => (st.clear(), setVersion((v) => v + 1))}>
            Clear
          </Button>
        </p>
        {st.topics.size === 0 ? <p class="hint">No message yet.</p> : <Tree node={tree} root />}
      </section>
    </section>
  );
}
