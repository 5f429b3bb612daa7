// Sparkplug B edge nodes on the mapping page (GET /api/sparkplug, polled with the page): each
// node's session (connecting, waiting for its primary host, born, dead and why), where it
// publishes, its message counts, enable/disable; its devices (born, waiting, dead) with the last
// value, quality and time of every metric.
import { useState } from 'preact/hooks';
import { api } from '../api.js';
import { ErrorMessage, Loading, Notice } from '../components/feedback.js';
import { Button } from '../components/forms.js';
import { Table } from '../components/table.js';
import { StateBadge, formatDate } from '../components/widgets.js';
import { useAction } from '../hooks.js';
import { can } from '../session.js';

export interface SparkplugMetric {
  name: string;
  alias: number;
  datatype: string;
  writable: boolean;
  value: string | number | boolean | null;
  quality: 'GOOD' | 'BAD' | 'STALE';
  timestamp?: number;
  error?: string;
}
export interface SparkplugNodeView {
  id: string;
  currentState: string;
  targetState: string;
  groupId: string;
  edgeNodeId: string;
  primaryHostId?: string;
  via: { kind: 'local' } | { kind: 'remote'; urls: string[]; username?: string } | { kind: 'bridge'; bridgeId: string };
  runAs: string;
  node: { state: string; message?: string; bdSeq?: number; seq: number; server?: string; bornAt?: number };
  devices: { deviceId: string; state: string; metrics: SparkplugMetric[] }[];
  messages: Record<string, number>;
  /** Values kept while the host could not get them live, delivered as historical metrics after the births. */
  history?: { enabled: boolean; values: number; oldestAgeSeconds: number; published: number; dropped: Record<string, number> };
  message?: string;
}

/** The history line: what is kept now, delivered, dropped. */
function historyLine(h: NonNullable<SparkplugNodeView['history']>): string {
  const dropped = Object.values(h.dropped).reduce((a, b) => a + b, 0);
  const kept = h.values ? `${h.values} kept (oldest ${Math.round(h.oldestAgeSeconds)} s ago)` : h.enabled ? 'nothing kept' : 'off';
  return `${kept} · ${h.published} delivered${dropped ? ` · ${dropped} dropped` : ''}`;
}

function via(v: SparkplugNodeView['via']): string {
  return v.kind === 'local' ? 'the embedded broker' : v.kind === 'bridge' ? `bridge ${v.bridgeId}` : v.urls.join(', ');
}

function Operation(props: { node: SparkplugNodeView; onResult: (text: string | null, error: unknown) => void }) {
  const action = useAction();
  const n = props.node;
  const active = n.targetState === 'enabled';
  const operation = active ? 'disable' : 'enable';
  if (!can('write', `/api/sparkplug/${n.id}/operation`)) return null;
  return (
    <Button
      class="small"
      variant={active ? 'plain' : 'primary'}
      busy={action.busy}
      aria-label={`${active ? 'Disable' : 'Enable'} ${n.id}`}
      onClick={() =>
        action.run(async () => {
          try {
            const updated = await api<SparkplugNodeView>('PUT', `/api/sparkplug/${encodeURIComponent(n.id)}/operation`, { body: { operation } });
            props.onResult(`${operation} ${updated.id}: target ${updated.targetState}, now ${updated.currentState}.`, null);
          } catch (err) {
            props.onResult(null, err);
          }
        })
      }
    >
      {active ? 'Disable' : 'Enable'}
    </Button>
  );
}

function Devices(props: { node: SparkplugNodeView }) {
  return (
    <>
      {props.node.devices.map((d) => (
        <div key={d.deviceId} class="sparkplug-device" data-device={d.deviceId}>
          <h4>
            Device {d.deviceId} <StateBadge state={d.state} />
          </h4>
          <Table columns={['Metric', 'Datatype', 'Value', 'Quality', 'Acquired']} rows={d.metrics.length} empty="No metric." region={`Metrics of ${d.deviceId}`}>
            {d.metrics.map((m) => (
              <tr key={m.name} data-metric={m.name}>
                <th scope="row">
                  {m.name}
                  {m.writable ? <span class="hint"> (writable)</span> : null}
                </th>
                <td>{m.datatype}</td>
                <td class="value">
                  <code data-volatile>{m.value === null ? '—' : String(m.value)}</code>
                </td>
                <td>
                  <span class={`badge ${m.quality === 'GOOD' ? 'good' : m.quality === 'STALE' ? 'moving' : 'bad'}`}>{m.quality}</span>
                  {m.error ? <span class="hint"> {m.error}</span> : null}
                </td>
                <td>
                  <span data-volatile>{m.timestamp ? formatDate(m.timestamp) : ''}</span>
                </td>
              </tr>
            ))}
          </Table>
        </div>
      ))}
    </>
  );
}

export function SparkplugSection(props: { list: SparkplugNodeView[] | undefined; error: unknown; reload: () => Promise<void> }) {
  const [result, setResult] = useState<{ text: string | null; error: unknown } | null>(null);
  const list = props.list;
  return (
    <section class="panel" aria-labelledby="sparkplug-title">
      <h2 id="sparkplug-title">Sparkplug edge nodes</h2>
      <ErrorMessage error={props.error} />
      {result?.error ? <ErrorMessage error={result.error} /> : result?.text ? <Notice kind="success">{result.text}</Notice> : null}
      {!list ? (
        props.error ? null : <Loading />
      ) : list.length === 0 ? (
        <p>No Sparkplug edge node.</p>
      ) : (
        list.map((n) => (
          <article key={n.id} class="sparkplug-node" data-resource={n.id} aria-labelledby={`sp-${n.id}`}>
            <div class="row">
              <h3 class="grow" id={`sp-${n.id}`}>
                {n.id} <span class="hint">{`spBv1.0/${n.groupId}/…/${n.edgeNodeId}`}</span>
              </h3>
              <Operation
                node={n}
                onResult={(text, error) => {
                  setResult({ text, error });
                  void props.reload();
                }}
              />
            </div>
            <dl class="facts">
              <dt>Resource</dt>
              <dd>
                <StateBadge state={n.currentState} />
                {n.targetState !== n.currentState && <span class="hint"> → {n.targetState}</span>}
              </dd>
              <dt>Edge node</dt>
              <dd>
                <StateBadge state={n.node.state} />
                {n.node.message ? <span class="hint"> {n.node.message}</span> : null}
                {n.node.state === 'waitingForHost' && n.primaryHostId ? <span class="hint"> (primary host {n.primaryHostId})</span> : null}
              </dd>
              <dt>Publishes through</dt>
              <dd>
                {via(n.via)} as {n.runAs}
              </dd>
              <dt>Session</dt>
              <dd data-volatile>
                bdSeq {n.node.bdSeq ?? '—'} · seq {n.node.seq}
                {n.node.bornAt ? ` · born ${formatDate(n.node.bornAt)}` : ''}
              </dd>
              <dt>Messages sent</dt>
              <dd data-volatile>
                {Object.entries(n.messages)
                  .map(([k, v]) => `${k} ${v}`)
                  .join(' · ')}
              </dd>
              {n.history ? (
                <>
                  <dt>History</dt>
                  <dd data-volatile>{historyLine(n.history)}</dd>
                </>
              ) : null}
            </dl>
            {n.message ? <p class="hint">{n.message}</p> : null}
            <Devices node={n} />
          </article>
        ))
      )}
    </section>
  );
}
