// Protocol mapping for the people who run the plant: connections with what they read (reads,
// failures, the last reading: the /metrics figures), endpoints with their addresses in the
// device's words and their last write, mappings, servers, node sets, bridges (queue, forwarded)
// and Sparkplug nodes with their live states (polled every 2 s while the tab is visible, so
// changes appear without a reload), connect/disconnect and enable/disable with the result shown.
// The JSON Schemas are for developers: GET /api/resource-types and the API reference.
import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import { api } from '../api.js';
import { ErrorMessage, Loading, Notice } from '../components/feedback.js';
import { Button } from '../components/forms.js';
import { Table } from '../components/table.js';
import { StateBadge } from '../components/widgets.js';
import { addressText, ago, count, peerText, refusedText, writeText, type WriteOutcome } from '../components/resource-text.js';
import { useAction, useAsync, usePoll } from '../hooks.js';
import { Link } from '../router.js';
import { can } from '../session.js';
import type { MappingResource } from '../types.js';
import { SparkplugSection, type SparkplugNodeView } from './sparkplug-nodes.js';

const POLL_MS = 2000;

interface Kind {
  key: 'connections' | 'endpoints' | 'mappings' | 'servers' | 'nodes' | 'bridges';
  title: string;
  /** The operations PUT …/{id}/operation takes; node sets have none. */
  operations?: [on: string, off: string];
  columns: { title: string; cell: (r: MappingResource) => ComponentChildren }[];
}

function compact(value: unknown): string {
  if (value === undefined || value === null) return '—';
  return typeof value === 'string' ? value : JSON.stringify(value);
}

interface Figures {
  reads: number;
  writes: number;
  failures: number;
  refusedWrites?: number;
  published: number;
  lastReadAt?: string;
}

const kinds: Kind[] = [
  {
    key: 'connections',
    title: 'Connections',
    operations: ['connect', 'disconnect'],
    columns: [
      { title: 'Protocol', cell: (r) => compact((r.connection as { protocol?: string } | undefined)?.protocol) },
      { title: 'Peer', cell: (r) => <code data-volatile>{peerText(r.connection)}</code> },
      {
        title: 'Reads',
        cell: (r) => {
          const f = r.figures as Figures | undefined;
          if (!f) return '—';
          return (
            <span class="figures" data-volatile>
              {count(f.reads, 'read')}
              {f.writes > 0 && `, ${count(f.writes, 'write')}`}
              {f.failures > 0 ? <strong class="failed">, {count(f.failures, 'failure')}</strong> : ', no failure'}
              {f.refusedWrites ? `, ${refusedText(f.refusedWrites)}` : ''}
            </span>
          );
        },
      },
      { title: 'Last reading', cell: (r) => <span data-volatile>{ago((r.figures as Figures | undefined)?.lastReadAt)}</span> },
    ],
  },
  {
    key: 'endpoints',
    title: 'Endpoints',
    operations: ['enable', 'disable'],
    columns: [
      { title: 'Connection', cell: (r) => compact(r.connectionId) },
      { title: 'Address', cell: (r) => addressText(r.address) },
      {
        title: 'Operation',
        cell: (r) => {
          const last = r.lastWrite as WriteOutcome | undefined;
          return (
            <>
              {compact(r.operation)}
              {last && (
                <span class={`hint block ${last.ok ? '' : 'failed'}`} data-volatile>
                  {writeText(last)}
                </span>
              )}
            </>
          );
        },
      },
    ],
  },
  {
    key: 'mappings',
    title: 'Mappings',
    operations: ['enable', 'disable'],
    columns: [
      {
        title: 'Routes',
        cell: (r) => {
          const items = (r.mappings as Record<string, unknown>[] | undefined) ?? [];
          return (
            <ul class="plain-list">
              {items.map((m, i) => (
                <li key={i}>
                  <code>{compact(m.source ?? m.sourceEndpoint)}</code> → <code>{compact(m.target ?? m.targetEndpoint)}</code>
                </li>
              ))}
            </ul>
          );
        },
      },
    ],
  },
  {
    key: 'servers',
    title: 'Servers',
    operations: ['enable', 'disable'],
    columns: [
      { title: 'Protocol', cell: (r) => compact(r.protocol) },
      { title: 'Endpoint URL', cell: (r) => <code>{compact(r.endpointUrl)}</code> },
    ],
  },
  {
    key: 'nodes',
    title: 'Node sets',
    columns: [{ title: 'Nodes', cell: (r) => String(((r.nodes as unknown[] | undefined) ?? []).length) }],
  },
  {
    key: 'bridges',
    title: 'Bridges',
    operations: ['connect', 'disconnect'],
    columns: [
      {
        title: 'Upstream',
        cell: (r) => {
          const remote = (r.remote ?? {}) as { connectedTo?: string; urls?: string[] };
          return <code data-volatile>{remote.connectedTo ?? remote.urls?.join(', ') ?? '—'}</code>;
        },
      },
      {
        title: 'Queue',
        cell: (r) => {
          const q = (r.queue ?? {}) as { messages?: number; bytes?: number; oldestAgeSeconds?: number; dropped?: Record<string, number> };
          const dropped = Object.values(q.dropped ?? {}).reduce((a, b) => a + b, 0);
          return (
            <span data-volatile>
              {q.messages ?? 0} messages, {q.bytes ?? 0} bytes{q.messages ? `, oldest ${Math.round(q.oldestAgeSeconds ?? 0)} s` : ''}
              {dropped ? `, ${dropped} dropped` : ''}
            </span>
          );
        },
      },
      {
        title: 'Forwarded',
        cell: (r) => {
          const c = (r.counters ?? {}) as { forwarded?: number; received?: number };
          return <span data-volatile>{count(c.forwarded ?? 0, 'message')} up, {count(c.received ?? 0, 'message')} in</span>;
        },
      },
    ],
  },
];

function Actions(props: { kind: Kind; resource: MappingResource; onResult: (text: string | null, error: unknown) => void }) {
  const action = useAction();
  const [on, off] = props.kind.operations!;
  const r = props.resource;
  const active = r.targetState === 'connected' || r.targetState === 'enabled';
  const operation = active ? off : on;
  if (!can('write', `/api/${props.kind.key}/${r.id}/operation`)) return null;
  return (
    <Button
      class="small"
      variant={active ? 'plain' : 'primary'}
      busy={action.busy}
      aria-label={`${operation[0]!.toUpperCase()}${operation.slice(1)} ${r.id}`}
      onClick={() =>
        action.run(async () => {
          try {
            const updated = await api<MappingResource>('PUT', `/api/${props.kind.key}/${encodeURIComponent(r.id)}/operation`, { body: { operation } });
            props.onResult(`${operation} ${updated.id}: target ${updated.targetState}, now ${updated.currentState}.`, null);
          } catch (err) {
            props.onResult(null, err);
          }
        })
      }
    >
      {operation[0]!.toUpperCase() + operation.slice(1)}
    </Button>
  );
}

function ResourceSection(props: { kind: Kind; list: MappingResource[] | undefined; error: unknown; reload: () => Promise<void> }) {
  const { kind, list } = props;
  const [result, setResult] = useState<{ text: string | null; error: unknown } | null>(null);
  const titleId = `${kind.key}-title`;
  return (
    <section class="panel" aria-labelledby={titleId}>
      <h2 id={titleId}>{kind.title}</h2>
      <ErrorMessage error={props.error} />
      {result?.error ? <ErrorMessage error={result.error} /> : result?.text ? <Notice kind="success">{result.text}</Notice> : null}
      {!list ? (
        props.error ? null : <Loading />
      ) : (
        <Table columns={['Id', ...kind.columns.map((c) => c.title), 'State', 'Message', ...(kind.operations ? [null] : [])]} rows={list.length} empty={`No ${kind.title.toLowerCase()}.`}>
          {list.map((r) => (
            <tr key={r.id} data-resource={r.id}>
              <th scope="row">{r.id}</th>
              {kind.columns.map((c) => (
                <td key={c.title}>{c.cell(r)}</td>
              ))}
              <td>
                <StateBadge state={r.currentState} />
                {r.targetState !== r.currentState && <span class="hint"> → {r.targetState}</span>}
              </td>
              <td>{r.message ? <span data-volatile>{r.message}</span> : ''}</td>
              {kind.operations && (
                <td class="actions">
                  <Actions
                    kind={kind}
                    resource={r}
                    onResult={(text, error) => {
                      setResult({ text, error });
                      void props.reload();
                    }}
                  />
                </td>
              )}
            </tr>
          ))}
        </Table>
      )}
    </section>
  );
}

export function MappingPage() {
  const visible = kinds.filter((k) => can('read', `/api/${k.key}`));
  const lists = useAsync(async () => {
    const entries = await Promise.all(
      visible.map(async (k) => {
        try {
          return [k.key, { list: await api<MappingResource[]>('GET', `/api/${k.key}`), error: null }] as const;
        } catch (error) {
          return [k.key, { list: undefined, error }] as const;
        }
      }),
    );
    return Object.fromEntries(entries) as Record<Kind['key'], { list?: MappingResource[]; error: unknown }>;
  }, []);
  // Sparkplug edge nodes (src/sparkplug): their own view, polled with the rest.
  const sparkplug = useAsync(async () => (can('read', '/api/sparkplug') ? api<SparkplugNodeView[]>('GET', '/api/sparkplug') : undefined), []);
  usePoll(sparkplug.reload, POLL_MS);
  usePoll(lists.reload, POLL_MS);
  // Kinds the gateway runs none of are one line, not an empty table each.
  const isUnused = (k: Kind) => lists.data?.[k.key]?.list?.length === 0;
  const shown = visible.filter((k) => !isUnused(k));
  const sparkplugUnused = sparkplug.data?.length === 0;
  const unused = [...visible.filter(isUnused).map((k) => k.title.toLowerCase()), ...(sparkplugUnused ? ['Sparkplug edge nodes'] : [])];
  return (
    <section class="page">
      <h1>Protocol mapping</h1>
      <p class="hint">
        States refresh every {POLL_MS / 1000} s. Resources come from the services: create and edit them on the <Link href="/services">services page</Link>; a rule can be tried in the <Link href="/rules">rule sandbox</Link>.
      </p>
      <ErrorMessage error={lists.error} />
      {shown.map((k) => (
        <ResourceSection key={k.key} kind={k} list={lists.data?.[k.key]?.list} error={lists.data?.[k.key]?.error ?? null} reload={lists.reload} />
      ))}
      {can('read', '/api/sparkplug') && !sparkplugUnused && <SparkplugSection list={sparkplug.data} error={sparkplug.error} reload={sparkplug.reload} />}
      {unused.length > 0 && <p class="hint">Not used on this gateway: {unused.join(', ')}.</p>}
    </section>
  );
}
