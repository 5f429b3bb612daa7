// GET /metrics in the Prometheus text format. One set of counters feeds it, $SYS/broker/... and
// the web UI (docs/design.md §13): the broker's BrokerStats, the mapping runtime's stats, the engine's and
// the auth service's counters. Values are read when scraped, so nothing here costs per message.
// prom-client (default process metrics: CPU, RSS, heap, event-loop lag) is loaded by the first
// scrape; HTTP requests are counted before that in a small table of our own, rendered with it.
import type { Registry } from 'prom-client';

export interface HttpObservation {
  method: string;
  /** The OpenAPI route template ("/api/users/{id}"), never the concrete path (bounded labels). */
  route: string;
  status: number;
  seconds: number;
}

/** What the broker reports (BrokerStats); optional fields light up when present. */
export interface BrokerMetricsSource {
  clients: number;
  connectsAccepted: number;
  connectsRefused: number;
  publishesRefused: number;
  subscriptionsRefused: number;
  queueDrops: number;
  messagesReceived?: number;
  messagesSent?: number;
  bytesReceived?: number;
  bytesSent?: number;
  connectsRefusedByReason?: Record<string, number>;
  persistence?: { sessions: number; subscriptions: number; queuedMessages: number; retainedMessages: number; retainedBytes: number };
}

export interface MappingMetricsSource {
  connections: { id: string; serviceId: string; protocol: string; state: string; reads: number; writes: number; failures: number; refusedWrites: number; published: number; lastReadAt: number }[];
  /** Sparkplug B edge nodes: session state, messages published by type, commands by type and outcome. */
  sparkplug?: { id: string; state: string; messages: Record<string, number>; commands: Record<string, Record<string, number>>; history?: { values: number; published: number; dropped: Record<string, number> } }[];
}

/** What each bridge reports (src/bridges BridgeFigures). */
export interface BridgeMetricsSource {
  id: string;
  state: string;
  queue: { messages: number; bytes: number; oldestAgeSeconds: number; dropped: Record<string, number> };
  forwarded: number;
  resent: number;
  received: number;
  refused: { out: number; in: number };
}

export interface MetricsSources {
  broker: () => BrokerMetricsSource | undefined;
  mapping: () => MappingMetricsSource;
  /** Bridges to upstream brokers (absent: none). */
  bridges?: () => BridgeMetricsSource[];
  permissions: () => { decisions: number; denials: number };
  logins: () => { succeeded: number; failed: number };
  storeBytes: () => number | undefined;
  storeWritable: () => boolean;
  /** /proc/self/io write_bytes of the process (undefined: not offered by the kernel). */
  storageWrittenBytes?: () => number | undefined;
  /** LMDB commits since the start (every writer's). */
  storageCommits?: () => number;
  /** Writes staged in memory by the storage policy, and its group commits. */
  storagePolicy?: () => { stagedWrites: number; commits: number; committedWrites: number; cancelledWrites: number };
  /** Projected years of the flash's rated endurance at the last hour's rate (null: unknown). */
  flashYears?: () => number | null;
  freeDiskBytes: () => Promise<number | undefined>;
  /** End of the last successful backup (ISO), if any. */
  lastBackupEnd: () => string | undefined;
  /** Bytes of the archives under <data>/backups, the copies taken before data format upgrades included. */
  backupBytes?: () => Promise<number>;
  /** A gateway of a site (src/site): its replica and its link. */
  site?: () => { role: string; state: string; revision?: number; ageSeconds?: number; central?: Record<string, unknown>; edge?: Record<string, unknown> };
}

export interface Metrics {
  observeHttp(o: HttpObservation): void;
  /** The exposition text and its content type. */
  render(): Promise<{ contentType: string; body: string }>;
}

const BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const MAX_HTTP_SERIES = 2000;

interface HttpSeries {
  labels: string;
  count: number;
  sum: number;
  buckets: number[];
}

const escapeLabel = (v: string) => v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');

export function createMetrics(sources: MetricsSources): Metrics {
  const http = new Map<string, HttpSeries>();
  let registry: Promise<Registry> | undefined;

  function httpText(): string {
    const lines = [
      '# HELP gatewayd_http_requests_total HTTP requests by route, method and status.',
      '# TYPE gatewayd_http_requests_total counter',
    ];
    for (const s of http.values()) lines.push(`gatewayd_http_requests_total{${s.labels}} ${s.count}`);
    lines.push('# HELP gatewayd_http_request_duration_seconds HTTP request latency by route, method and status.', '# TYPE gatewayd_http_request_duration_seconds histogram');
    for (const s of http.values()) {
      BUCKETS.forEach((le, i) => lines.push(`gatewayd_http_request_duration_seconds_bucket{${s.labels},le="${le}"} ${s.buckets[i]}`));
      lines.push(`gatewayd_http_request_duration_seconds_bucket{${s.labels},le="+Inf"} ${s.count}`);
      lines.push(`gatewayd_http_request_duration_seconds_sum{${s.labels}} ${s.sum}`);
      lines.push(`gatewayd_http_request_duration_seconds_count{${s.labels}} ${s.count}`);
    }
    return lines.join('\n') + '\n';
  }

  async function buildRegistry(): Promise<Registry> {
    const client = await import('prom-client');
    const reg = new client.Registry();
    client.collectDefaultMetrics({ register: reg, prefix: 'gatewayd_' });
    type Set = (value: number, labels?: Record<string, string>) => void;
    /**
     * A metric whose values are read from the sources at each scrape. Counters hold totals kept
     * elsewhere: reset, then add the current total.
     */
    const metric = (kind: 'gauge' | 'counter', name: string, help: string, labelNames: string[], read: (set: Set) => void | Promise<void>) => {
      const Metric = kind === 'gauge' ? client.Gauge : client.Counter;
      new Metric({
        name,
        help,
        labelNames,
        registers: [reg],
        async collect() {
          this.reset();
          const m = this as unknown as { set(l: Record<string, string>, v: number): void; inc(l: Record<string, string>, v: number): void };
          await read((v, l = {}) => (kind === 'gauge' ? m.set(l, v) : m.inc(l, v)));
        },
      });
    };
    const broker = () => sources.broker();
    metric('gauge', 'gatewayd_mqtt_clients_connected', 'MQTT clients connected.', [], (set) => set(broker()?.clients ?? 0));
    metric('counter', 'gatewayd_mqtt_connects_total', 'MQTT CONNECTs accepted.', [], (set) => set(broker()?.connectsAccepted ?? 0));
    metric('counter', 'gatewayd_mqtt_connects_refused_total', 'MQTT CONNECTs refused, by reason.', ['reason'], (set) => {
      const b = broker();
      const byReason = b?.connectsRefusedByReason;
      if (byReason) for (const [reason, n] of Object.entries(byReason)) set(n, { reason });
      else if (b) set(b.connectsRefused, { reason: 'any' });
    });
    metric('counter', 'gatewayd_mqtt_messages_total', 'MQTT messages received from and sent to clients.', ['direction'], (set) => {
      const b = broker();
      if (b?.messagesReceived !== undefined) set(b.messagesReceived, { direction: 'received' });
      if (b?.messagesSent !== undefined) set(b.messagesSent, { direction: 'sent' });
    });
    metric('counter', 'gatewayd_mqtt_bytes_total', 'MQTT bytes received and sent.', ['direction'], (set) => {
      const b = broker();
      if (b?.bytesReceived !== undefined) set(b.bytesReceived, { direction: 'received' });
      if (b?.bytesSent !== undefined) set(b.bytesSent, { direction: 'sent' });
    });
    metric('counter', 'gatewayd_mqtt_messages_dropped_total', 'MQTT messages dropped: full session queues.', [], (set) => set(broker()?.queueDrops ?? 0));
    metric('counter', 'gatewayd_mqtt_refused_total', 'MQTT publishes and subscriptions refused.', ['kind'], (set) => {
      const b = broker();
      if (!b) return;
      set(b.publishesRefused, { kind: 'publish' });
      set(b.subscriptionsRefused, { kind: 'subscribe' });
    });
    metric('gauge', 'gatewayd_mqtt_queued_messages', 'QoS 1/2 messages queued for persistent sessions.', [], (set) => set(broker()?.persistence?.queuedMessages ?? 0));
    metric('gauge', 'gatewayd_mqtt_retained_messages', 'Retained messages stored.', [], (set) => set(broker()?.persistence?.retainedMessages ?? 0));
    metric('gauge', 'gatewayd_mqtt_sessions', 'Persistent MQTT sessions stored.', [], (set) => set(broker()?.persistence?.sessions ?? 0));
    metric('counter', 'gatewayd_permission_decisions_total', 'Permission decisions and denials.', ['result'], (set) => {
      const p = sources.permissions();
      set(p.decisions - p.denials, { result: 'allowed' });
      set(p.denials, { result: 'denied' });
    });
    metric('counter', 'gatewayd_logins_total', 'Password checks by outcome.', ['result'], (set) => {
      const l = sources.logins();
      set(l.succeeded, { result: 'succeeded' });
      set(l.failed, { result: 'failed' });
    });
    metric('gauge', 'gatewayd_mapping_connection_up', 'Mapping connections: 1 when connected.', ['connection', 'service', 'protocol'], (set) => {
      for (const c of sources.mapping().connections) set(c.state === 'connected' ? 1 : 0, { connection: c.id, service: c.serviceId, protocol: c.protocol });
    });
    metric('counter', 'gatewayd_mapping_messages_total', 'Mapping reads, writes, failures, values refused before sending (refused_write) and published messages per connection.', ['connection', 'kind'], (set) => {
      for (const c of sources.mapping().connections) {
        set(c.reads, { connection: c.id, kind: 'read' });
        set(c.writes, { connection: c.id, kind: 'write' });
        set(c.failures, { connection: c.id, kind: 'failure' });
        set(c.refusedWrites, { connection: c.id, kind: 'refused_write' });
        set(c.published, { connection: c.id, kind: 'published' });
      }
    });
    metric('gauge', 'gatewayd_mapping_last_read_timestamp_seconds', 'Mapping connections: when the last reading was taken from the device (Unix time; 0: none yet).', ['connection'], (set) => {
      for (const c of sources.mapping().connections) set(c.lastReadAt / 1000, { connection: c.id });
    });
    // Sparkplug B edge nodes (docs/sparkplug.md).
    const edgeNodes = () => sources.mapping().sparkplug ?? [];
    metric('gauge', 'gatewayd_sparkplug_edge_node_born', 'Sparkplug edge nodes: 1 while born (NBIRTH out in a live session).', ['edge_node'], (set) => {
      for (const n of edgeNodes()) set(n.state === 'born' ? 1 : 0, { edge_node: n.id });
    });
    metric('counter', 'gatewayd_sparkplug_messages_total', 'Sparkplug messages published, by edge node and type (NBIRTH, DBIRTH, NDATA, DDATA, NDEATH, DDEATH).', ['edge_node', 'type'], (set) => {
      for (const n of edgeNodes()) for (const [type, count] of Object.entries(n.messages)) set(count, { edge_node: n.id, type });
    });
    metric('counter', 'gatewayd_sparkplug_commands_total', 'Sparkplug commands received, by edge node, type (NCMD, DCMD) and result (accepted, refused, failed).', ['edge_node', 'type', 'result'], (set) => {
      for (const n of edgeNodes()) for (const [type, results] of Object.entries(n.commands)) for (const [result, count] of Object.entries(results)) set(count, { edge_node: n.id, type, result });
    });
    metric('gauge', 'gatewayd_sparkplug_history_values', 'Sparkplug values kept while the host cannot get them live, not delivered yet, by edge node.', ['edge_node'], (set) => {
      for (const n of edgeNodes()) if (n.history) set(n.history.values, { edge_node: n.id });
    });
    metric('counter', 'gatewayd_sparkplug_history_published_total', 'Sparkplug kept values delivered as historical metrics (is_historical) after the births, by edge node.', ['edge_node'], (set) => {
      for (const n of edgeNodes()) if (n.history) set(n.history.published, { edge_node: n.id });
    });
    metric('counter', 'gatewayd_sparkplug_history_dropped_total', 'Sparkplug kept values dropped, by edge node and reason (maxValues, maxAge: the bounds; notInDefinition: the metric left the definition; storeFailure).', ['edge_node', 'reason'], (set) => {
      for (const n of edgeNodes()) for (const [reason, count] of Object.entries(n.history?.dropped ?? {})) set(count, { edge_node: n.id, reason });
    });
    // A gateway of a site (docs/scaling-out.md): the replica's revision, the link's state and age.
    const site = sources.site;
    if (site) {
      const following = (s: ReturnType<typeof site>) => (s.state === 'following' ? 1 : 0);
      metric('gauge', 'gatewayd_site_link_up', 'A site\'s gateway: 1 while it follows the site (central: PostgreSQL; edge: a central).', ['role'], (set) => {
        const s = site();
        set(following(s), { role: s.role });
      });
      metric('gauge', 'gatewayd_site_revision', 'The site revision the replica holds.', [], (set) => set(site().revision ?? 0));
      metric('gauge', 'gatewayd_site_link_age_seconds', 'Seconds since the site (central: PostgreSQL; edge: a central) last answered.', [], (set) => {
        const age = site().ageSeconds;
        if (age !== undefined) set(age);
      });
      metric('counter', 'gatewayd_site_resyncs_total', 'Snapshots the replica loaded (first sync, a new epoch, a gap, a digest that differed).', [], (set) => {
        const s = site();
        set(Number((s.central ?? s.edge)?.resyncs ?? 0));
      });
      metric('counter', 'gatewayd_site_changes_applied_total', 'Site revisions applied one by one.', [], (set) => {
        const s = site();
        set(Number((s.central ?? s.edge)?.applied ?? 0));
      });
    }
    // Bridges to upstream brokers (docs/bridges.md).
    const bridges = () => sources.bridges?.() ?? [];
    metric('gauge', 'gatewayd_bridge_connected', 'Bridges: 1 while connected upstream.', ['bridge'], (set) => {
      for (const b of bridges()) set(b.state === 'connected' ? 1 : 0, { bridge: b.id });
    });
    metric('gauge', 'gatewayd_bridge_queue_messages', 'Messages in the bridge queue.', ['bridge'], (set) => {
      for (const b of bridges()) set(b.queue.messages, { bridge: b.id });
    });
    metric('gauge', 'gatewayd_bridge_queue_bytes', 'Bytes of the messages in the bridge queue (on disk).', ['bridge'], (set) => {
      for (const b of bridges()) set(b.queue.bytes, { bridge: b.id });
    });
    metric('gauge', 'gatewayd_bridge_queue_oldest_seconds', 'Age of the oldest message in the bridge queue (0 when empty).', ['bridge'], (set) => {
      for (const b of bridges()) set(b.queue.oldestAgeSeconds, { bridge: b.id });
    });
    metric('counter', 'gatewayd_bridge_forwarded_total', 'Messages the upstream broker acknowledged (QoS 0: written).', ['bridge'], (set) => {
      for (const b of bridges()) set(b.forwarded, { bridge: b.id });
    });
    metric('counter', 'gatewayd_bridge_dropped_total', 'Messages dropped from the bridge queue, by reason.', ['bridge', 'reason'], (set) => {
      for (const b of bridges()) for (const [reason, n] of Object.entries(b.queue.dropped)) set(n, { bridge: b.id, reason: reason.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`) });
    });
    metric('counter', 'gatewayd_bridge_resent_total', 'Messages sent upstream again after a lost connection.', ['bridge'], (set) => {
      for (const b of bridges()) set(b.resent, { bridge: b.id });
    });
    metric('counter', 'gatewayd_bridge_received_total', 'Messages from upstream published on the gateway.', ['bridge'], (set) => {
      for (const b of bridges()) set(b.received, { bridge: b.id });
    });
    metric('counter', 'gatewayd_bridge_refused_total', 'Messages the bridge user may not read (out) or write (in).', ['bridge', 'direction'], (set) => {
      for (const b of bridges()) {
        set(b.refused.out, { bridge: b.id, direction: 'out' });
        set(b.refused.in, { bridge: b.id, direction: 'in' });
      }
    });
    metric('gauge', 'gatewayd_store_bytes', 'Size of the store file.', [], (set) => {
      const n = sources.storeBytes();
      if (n !== undefined) set(n);
    });
    metric('gauge', 'gatewayd_store_writable', '1 while the store can write.', [], (set) => set(sources.storeWritable() ? 1 : 0));
    metric('counter', 'gatewayd_storage_written_bytes_total', 'Bytes the process caused to be written to the block device (/proc/self/io write_bytes).', [], (set) => {
      const n = sources.storageWrittenBytes?.();
      if (n !== undefined) set(n);
    });
    metric('counter', 'gatewayd_storage_commits_total', 'LMDB commits (each one transaction and one flush).', [], (set) => {
      const n = sources.storageCommits?.();
      if (n !== undefined) set(n);
    });
    metric('gauge', 'gatewayd_storage_staged_writes', 'Writes the storage policy holds in memory, not on flash yet.', [], (set) => {
      const p = sources.storagePolicy?.();
      if (p) set(p.stagedWrites);
    });
    metric('counter', 'gatewayd_storage_writes_total', 'Staged writes by outcome: committed to flash, or cancelled (acknowledged within the hold, never written).', ['outcome'], (set) => {
      const p = sources.storagePolicy?.();
      if (!p) return;
      set(p.committedWrites, { outcome: 'committed' });
      set(p.cancelledWrites, { outcome: 'cancelled' });
    });
    metric('gauge', 'gatewayd_storage_flash_projected_years', "Years until the flash's rated endurance is used at the last hour's write rate (storage.flash).", [], (set) => {
      const y = sources.flashYears?.();
      if (y !== undefined && y !== null) set(y);
    });
    metric('gauge', 'gatewayd_disk_free_bytes', 'Free bytes on the data directory filesystem.', [], async (set) => {
      const n = await sources.freeDiskBytes();
      if (n !== undefined) set(n);
    });
    metric('gauge', 'gatewayd_backup_bytes', 'Bytes of the backup archives in the data directory, the copies taken before data format upgrades included.', [], async (set) => {
      const n = await sources.backupBytes?.();
      if (n !== undefined) set(n);
    });
    metric('gauge', 'gatewayd_last_backup_age_seconds', 'Seconds since the last successful backup ended (absent: none).', [], (set) => {
      const end = sources.lastBackupEnd();
      if (end) set(Math.max(0, (Date.now() - Date.parse(end)) / 1000));
    });
    return reg;
  }

  return {
    observeHttp(o) {
      const key = `${o.method} ${o.route} ${o.status}`;
      let s = http.get(key);
      if (!s) {
        if (http.size >= MAX_HTTP_SERIES) return;
        s = { labels: `route="${escapeLabel(o.route)}",method="${escapeLabel(o.method)}",status="${o.status}"`, count: 0, sum: 0, buckets: BUCKETS.map(() => 0) };
        http.set(key, s);
      }
      s.count++;
      s.sum += o.seconds;
      for (let i = 0; i < BUCKETS.length; i++) if (o.seconds <= BUCKETS[i]!) s.buckets[i]!++;
    },
    async render() {
      registry ??= buildRegistry();
      const reg = await registry;
      return { contentType: reg.contentType, body: (await reg.metrics()) + httpText() };
    },
  };
}
