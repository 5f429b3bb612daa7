// The Sparkplug resource of a service file (docs/design.md §14): its definition once resolved and
// checked. Its JSON Schema is in schemas.ts; here, what a schema cannot say: the endpoints it
// names are endpoints of the service with the right operation, device ids and metric names are
// unique, and `via` is local, an upstream broker, or a Bridge of the service (whose remote the
// edge node's own session then uses: the bridge's URLs, credentials and TLS files).
/** The Sparkplug B datatypes a metric may have (the basic types; src/sparkplug/metric-values.ts encodes them). */
export const SPARKPLUG_DATATYPES = ['Int8', 'Int16', 'Int32', 'Int64', 'UInt8', 'UInt16', 'UInt32', 'UInt64', 'Float', 'Double', 'Boolean', 'String', 'DateTime', 'Text', 'UUID'] as const;
export type DatatypeName = (typeof SPARKPLUG_DATATYPES)[number];
/** Group, edge node, device and host ids: UTF-8 without the reserved + / # (and not empty). */
export const SPARKPLUG_ID_PATTERN = '^[^+/#]+$';

/** A metric of a Sparkplug device: its value comes from readEndpoint, DCMDs go to writeEndpoint (writable metrics). */
export interface SparkplugMetricDef {
  name: string;
  datatype: DatatypeName;
  readEndpoint?: string;
  writeEndpoint?: string;
}
export interface SparkplugDeviceDef {
  deviceId: string;
  metrics: SparkplugMetricDef[];
}
/** An upstream broker the edge node's session connects to (via: {urls, ...}, or a Bridge's remote). */
export interface SparkplugUpstream {
  urls: string[];
  username?: string;
  password?: string;
  /** Relative to the data directory (or absolute, via: {urls}). */
  caFile?: string;
  certFile?: string;
  keyFile?: string;
  connectTimeoutMs?: number;
}
export type SparkplugVia =
  | { kind: 'local' }
  | ({ kind: 'remote' } & SparkplugUpstream)
  /** Through a Bridge of the service: a session of the edge node's own on the bridge's remote (in the definition, so a new remote restarts the node). */
  | { kind: 'bridge'; bridgeId: string; upstream: SparkplugUpstream };
/** What an edge node keeps while its host cannot get values live (docs/sparkplug.md "History"). */
export interface SparkplugHistoryDef {
  enabled: boolean;
  maxValues: number;
  /** 0: no age limit. */
  maxAgeSeconds: number;
  /** When a kept value reaches the flash: prompt (within storage.commitIntervalMs) or background (within storage.backgroundCommitMs, fewer commits). */
  durability: 'prompt' | 'background';
}
export const SPARKPLUG_HISTORY_DEFAULTS: Readonly<SparkplugHistoryDef> = Object.freeze({ enabled: true, maxValues: 1_000_000, maxAgeSeconds: 604_800, durability: 'background' as const });
/** A Sparkplug B edge node (docs/design.md §14, src/sparkplug/). */
export interface SparkplugDef {
  kind: 'sparkplug';
  id: string;
  serviceId: string;
  name: string;
  groupId: string;
  edgeNodeId: string;
  primaryHostId?: string;
  via: SparkplugVia;
  runAs: string;
  clientId?: string;
  protocolVersion: 4 | 5;
  keepaliveSeconds: number;
  birthWaitMs: number;
  aggregateMs: number;
  maxMessagesPerSecond: number;
  commandTimeoutMs: number;
  /** DDATA metrics carry their datatype (default), or only alias, value and timestamp (Sparkplug 3.0's SHOULD NOT). */
  datatypeInData: boolean;
  history: SparkplugHistoryDef;
  devices: SparkplugDeviceDef[];
  targetState: 'enabled' | 'disabled';
}
/** What the service-file parser lends the check: lookups and its problem collection. */
export interface SparkplugFileHelpers {
  /** A valid endpoint of the service (undefined: not one, or reported on its own). */
  endpointOf(id: string): { operation: 'read' | 'write' } | undefined;
  declaredType(id: string): string | undefined;
  /** The remote of a valid Bridge of the service (undefined: not one, or reported on its own). */
  bridgeUpstream(id: string): SparkplugUpstream | undefined;
  /** Runs a check; a problem it throws (fail) is collected and false returned. */
  collect(check: () => void): boolean;
  fail(path: string, reason: string): never;
}

/** The definition, or undefined when something in it is wrong (the problems are collected). */
export function sparkplugDef(p: Record<string, any>, base: { id: string; serviceId: string; name: string }, path: string, h: SparkplugFileHelpers): SparkplugDef | undefined {
  const notAn = (what: string, value: unknown) => `"${String(value)}" is not ${what} of this service (use !ref <name>)`;
  let via: SparkplugVia | undefined;
  const viaOk = h.collect(() => {
    const v = p.via as string | Record<string, any>;
    if (v === 'local') via = { kind: 'local' };
    else if (typeof v === 'string') {
      if (h.declaredType(v) !== 'Bridge') h.fail(`${path}.via`, `"${v}" is not local, an upstream broker {urls: [...]}, or a Bridge of this service (!ref <name>)`);
      const upstream = h.bridgeUpstream(v);
      // A Bridge that is itself wrong is reported on its own (the edge node is then left out).
      if (upstream) via = { kind: 'bridge', bridgeId: v, upstream };
    } else {
      if ((v.certFile === undefined) !== (v.keyFile === undefined)) h.fail(`${path}.via`, 'certFile and keyFile go together');
      via = { kind: 'remote', ...v } as SparkplugVia;
    }
  });
  const devices: SparkplugDeviceDef[] = [];
  const deviceIds = new Set<string>();
  let complete = viaOk;
  (p.devices as Array<{ deviceId: string; metrics: Array<Record<string, any>> }>).forEach((d, i) => {
    const at = `${path}.devices[${i}]`;
    // Sparkplug 3.0 "Case Sensitivity": ids that differ only in case are one for many hosts.
    const deviceKey = d.deviceId.toLowerCase();
    if (!h.collect(() => (deviceIds.has(deviceKey) ? h.fail(`${at}.deviceId`, `device id "${d.deviceId}" is used twice (ids are compared ignoring case)`) : deviceIds.add(deviceKey)))) complete = false;
    const names = new Set<string>();
    const metrics: SparkplugMetricDef[] = [];
    d.metrics.forEach((m, j) => {
      const mat = `${at}.metrics[${j}]`;
      const metric: SparkplugMetricDef = { name: m.name, datatype: m.datatype };
      const ok = [
        h.collect(() => {
          // Hosts and their databases often ignore case (Sparkplug 3.0 "Case Sensitivity").
          const key = (m.name as string).toLowerCase();
          if (names.has(key)) h.fail(`${mat}.name`, `metric "${m.name}" is used twice in device ${d.deviceId} (names are compared ignoring case)`);
          names.add(key);
        }),
        h.collect(() => {
          if (h.declaredType(m.endpoint) !== 'Endpoint') h.fail(`${mat}.endpoint`, notAn('an Endpoint', m.endpoint));
          const ep = h.endpointOf(m.endpoint);
          if (!ep) return;
          if (ep.operation === 'read') {
            metric.readEndpoint = m.endpoint;
            if (m.writable && m.writeEndpoint === undefined) h.fail(`${mat}.writeEndpoint`, 'a writable metric fed by a read endpoint needs writeEndpoint (the write endpoint a DCMD goes to)');
          } else {
            if (!m.writable) h.fail(`${mat}.writable`, `"${m.endpoint}" is a write endpoint: set writable: true (the value is then what was last written)`);
            if (m.writeEndpoint !== undefined) h.fail(`${mat}.writeEndpoint`, 'endpoint is already the write endpoint');
            metric.writeEndpoint = m.endpoint;
          }
        }),
        h.collect(() => {
          if (m.writeEndpoint === undefined) return;
          if (!m.writable) h.fail(`${mat}.writable`, 'writeEndpoint needs writable: true');
          if (h.declaredType(m.writeEndpoint) !== 'Endpoint') h.fail(`${mat}.writeEndpoint`, notAn('an Endpoint', m.writeEndpoint));
          const ep = h.endpointOf(m.writeEndpoint);
          if (ep && ep.operation !== 'write') h.fail(`${mat}.writeEndpoint`, `"${m.writeEndpoint}" is not a write endpoint`);
          if (ep) metric.writeEndpoint = m.writeEndpoint;
        }),
      ];
      if (!ok.every(Boolean) || (metric.readEndpoint === undefined && metric.writeEndpoint === undefined)) complete = false;
      metrics.push(metric);
    });
    devices.push({ deviceId: d.deviceId, metrics });
  });
  if (!complete || !via) return undefined;
  const def: SparkplugDef = {
    kind: 'sparkplug',
    ...base,
    groupId: p.groupId,
    edgeNodeId: p.edgeNodeId,
    via,
    runAs: p.runAs,
    protocolVersion: p.protocolVersion,
    keepaliveSeconds: p.keepaliveSeconds,
    birthWaitMs: p.birthWaitMs,
    aggregateMs: p.aggregateMs,
    maxMessagesPerSecond: p.maxMessagesPerSecond,
    commandTimeoutMs: p.commandTimeoutMs,
    datatypeInData: p.datatypeInData,
    history: { ...SPARKPLUG_HISTORY_DEFAULTS, ...p.history },
    devices,
    targetState: p.targetState,
  };
  if (p.primaryHostId !== undefined) def.primaryHostId = p.primaryHostId;
  if (p.clientId !== undefined) def.clientId = p.clientId;
  return def;
}
