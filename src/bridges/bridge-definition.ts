// The `Bridge` resource of service files (docs/design.md §14): its JSON Schema (what GET
// /api/bridges/schema answers and service files are validated with), the checks a schema cannot
// make (URLs, topic rules, files, the runAs user), and the definition with every default filled
// in. Defaults follow Mosquitto's bridges where the issue is silent (docs/bridges.md).
import { isAbsolute, resolve as resolvePath } from 'node:path';
import { ruleProblems, type TopicRuleSpec } from './topic-rules.js';
import type { RemoteOptions } from './upstream.js';

type Schema = Record<string, unknown>;

export const REMOTE_DEFAULTS = {
  protocolVersion: 4 as 4 | 5,
  keepaliveSeconds: 60,
  connectTimeoutMs: 10_000,
  sessionExpirySeconds: 604_800,
  tryPrivate: true,
  maxInflight: 100,
  reconnectMinSeconds: 1,
  reconnectMaxSeconds: 30,
};
export const QUEUE_DEFAULTS = { maxMessages: 100_000, maxBytes: 64 * 1024 * 1024, maxAgeSeconds: 604_800, drainRatePerSecond: 0 };

const file: Schema = {
  type: 'string',
  minLength: 1,
  maxLength: 1024,
  description: 'A PEM file in the data directory, relative to it (no absolute paths, no ..).',
};

export const bridgeRemoteSchema: Schema = {
  type: 'object',
  additionalProperties: false,
  required: ['urls'],
  properties: {
    urls: {
      title: 'Broker URLs',
      type: 'array',
      minItems: 1,
      maxItems: 16,
      items: { type: 'string', minLength: 1, maxLength: 2048 },
      description: 'mqtt://, mqtts://, ws:// or wss:// URLs, tried in order (failover); credentials go in username/password, not in the URL.',
    },
    protocolVersion: { title: 'MQTT version', type: 'integer', enum: [4, 5], default: 4, description: '4 (MQTT 3.1.1) or 5.' },
    clientId: { title: 'Client ID', type: 'string', minLength: 1, maxLength: 256, description: 'Default <hostname>.<bridge id> (Mosquitto: <hostname>.<connection name>). The session upstream is persistent.' },
    username: { title: 'Username', type: 'string', maxLength: 256 },
    password: { title: 'Password', type: 'string', maxLength: 1024, description: 'Never returned by the API (use !ref to a parameter).' },
    caFile: { title: 'CA certificates file', ...file, description: 'CA certificates that the upstream server certificate must chain to (mqtts, wss); default: the system CAs.' },
    certFile: { title: 'Client certificate file', ...file, description: 'Client certificate (mutual TLS), with keyFile.' },
    keyFile: { title: 'Client key file', ...file, description: 'Private key of certFile (keep it mode 0600).' },
    keepaliveSeconds: { title: 'Keepalive (s)', type: 'integer', minimum: 1, maximum: 65535, default: 60 },
    connectTimeoutMs: { title: 'Connect timeout (ms)', type: 'integer', minimum: 100, maximum: 120_000, default: 10_000 },
    sessionExpirySeconds: { title: 'Session expiry (s)', type: 'integer', minimum: 0, maximum: 4_294_967_295, default: 604_800, description: 'MQTT 5: how long upstream keeps the session (and queues for the in rules) while the gateway is away.' },
    tryPrivate: { title: 'Announce a bridge (MQTT 3.1.1)', type: 'boolean', default: true, description: 'MQTT 3.1.1: announce a bridge (protocol level 0x84) so that Mosquitto does not send the bridge its own messages back; a broker refusing it is asked again without.' },
    maxInflight: { title: 'In flight at most', type: 'integer', minimum: 1, maximum: 65535, default: 100, description: 'Messages sent upstream and not yet acknowledged, at most (also bounded by the broker\'s receive maximum).' },
    reconnectMinSeconds: { title: 'Reconnect after at least (s)', type: 'integer', minimum: 1, maximum: 3600, default: 1, description: 'First wait before connecting again; doubles up to reconnectMaxSeconds.' },
    reconnectMaxSeconds: { title: 'Reconnect after at most (s)', type: 'integer', minimum: 1, maximum: 3600, default: 30 },
  },
};

export const topicRuleSchema: Schema = {
  type: 'object',
  additionalProperties: false,
  required: ['pattern', 'direction'],
  properties: {
    pattern: { title: 'Topic filter', type: 'string', maxLength: 1024, description: 'Topic filter below the prefixes; empty: the prefixes name one topic.' },
    direction: { title: 'Direction', type: 'string', enum: ['out', 'in', 'both'], description: 'out: gateway → upstream; in: upstream → gateway.' },
    qos: { title: 'QoS', type: 'integer', enum: [0, 1, 2], default: 0, description: 'The highest QoS used on the bridge for these messages.' },
    localPrefix: { title: 'Local prefix', type: 'string', maxLength: 1024, default: '' },
    remotePrefix: { title: 'Upstream prefix', type: 'string', maxLength: 1024, default: '' },
    retainAsPublished: { title: 'Retain as published', type: 'boolean', default: true, description: 'Keep the retained flag (false: forwarded messages are never retained).' },
  },
};

export const bridgeQueueSchema: Schema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    maxMessages: { title: 'Messages at most', type: 'integer', minimum: 1, maximum: 100_000_000, default: QUEUE_DEFAULTS.maxMessages },
    maxBytes: { title: 'Bytes at most', type: 'integer', minimum: 1024, maximum: 1_099_511_627_776, default: QUEUE_DEFAULTS.maxBytes },
    maxAgeSeconds: { title: 'Age at most (s)', type: 'integer', minimum: 0, maximum: 315_360_000, default: QUEUE_DEFAULTS.maxAgeSeconds, description: '0: no age limit.' },
    drainRatePerSecond: { title: 'Drain rate (messages/s)', type: 'integer', minimum: 0, maximum: 1_000_000, default: 0, description: 'Messages sent upstream per second at most (a backlog drains at this rate, live messages behind it); 0: as fast as upstream acknowledges.' },
  },
};

export const bridgeSchema: Schema = {
  $schema: 'http://json-schema.org/draft-07/schema#',
  title: 'Bridge',
  type: 'object',
  additionalProperties: false,
  required: ['remote', 'runAs', 'topics'],
  properties: {
    description: { title: 'Description', type: 'string', maxLength: 4096 },
    remote: { ...bridgeRemoteSchema, title: 'Upstream broker' },
    runAs: { title: 'Run as (user)', type: 'string', minLength: 1, maxLength: 256, description: 'A gatewayd user: its MQTT read permissions bound what leaves, its write permissions (with its publish prefix) what comes in.' },
    topics: { title: 'Topic rules', type: 'array', minItems: 1, maxItems: 100, items: topicRuleSchema },
    queue: { title: 'Queue', ...bridgeQueueSchema, description: 'The store-and-forward queue: beyond a limit the oldest messages are dropped.' },
    targetState: { title: 'Target state', type: 'string', enum: ['connected', 'disabled'], default: 'connected' },
  },
};

/** A bridge's properties with every default filled in (what runs). */
export interface BridgeDefinition {
  id: string;
  remote: RemoteOptions & { maxInflight: number; reconnectMinSeconds: number; reconnectMaxSeconds: number };
  runAs: string;
  topics: Required<TopicRuleSpec>[];
  queue: { maxMessages: number; maxBytes: number; maxAgeSeconds: number; drainRatePerSecond: number };
}

/** The properties of a Bridge resource after schema validation (defaults not yet applied). */
export interface BridgeProperties {
  remote: Partial<BridgeDefinition['remote']> & { urls: string[] };
  runAs: string;
  topics: TopicRuleSpec[];
  queue?: Partial<BridgeDefinition['queue']>;
  targetState?: 'connected' | 'disabled';
}

const SCHEMES = new Set(['mqtt:', 'mqtts:', 'ws:', 'wss:']);

/**
 * What the schema cannot check: each URL, the topic rules, the files, the runAs user. Paths are
 * relative to the resource's properties (`remote.urls[1]`).
 */
export function bridgeProblems(p: BridgeProperties, knownUser?: (username: string) => boolean): { path: string; reason: string }[] {
  const problems: { path: string; reason: string }[] = [];
  p.remote.urls.forEach((text, i) => {
    const at = `remote.urls[${i}]`;
    let url: URL;
    try {
      url = new URL(text);
    } catch {
      problems.push({ path: at, reason: 'not a URL' });
      return;
    }
    if (!SCHEMES.has(url.protocol)) problems.push({ path: at, reason: `scheme ${url.protocol.slice(0, -1)} is not mqtt, mqtts, ws or wss` });
    else if (!url.hostname) problems.push({ path: at, reason: 'no host' });
    else if (url.username || url.password) problems.push({ path: at, reason: 'credentials go in remote.username and remote.password, not in the URL' });
    else if (url.search || url.hash) problems.push({ path: at, reason: 'no query or fragment' });
    else if ((url.protocol === 'mqtt:' || url.protocol === 'mqtts:') && url.pathname !== '' && url.pathname !== '/') problems.push({ path: at, reason: 'an mqtt(s) URL has no path' });
  });
  for (const key of ['caFile', 'certFile', 'keyFile'] as const) {
    const f = p.remote[key];
    if (f !== undefined && (isAbsolute(f) || f.split(/[\\/]/).includes('..'))) problems.push({ path: `remote.${key}`, reason: 'a file in the data directory: a relative path without ..' });
  }
  if ((p.remote.certFile === undefined) !== (p.remote.keyFile === undefined)) problems.push({ path: p.remote.certFile === undefined ? 'remote.certFile' : 'remote.keyFile', reason: 'certFile and keyFile go together' });
  if ((p.remote.reconnectMaxSeconds ?? REMOTE_DEFAULTS.reconnectMaxSeconds) < (p.remote.reconnectMinSeconds ?? REMOTE_DEFAULTS.reconnectMinSeconds)) {
    problems.push({ path: 'remote.reconnectMaxSeconds', reason: 'below reconnectMinSeconds' });
  }
  p.topics.forEach((rule, i) => {
    for (const problem of ruleProblems(rule)) problems.push({ path: `topics[${i}].${problem.path}`, reason: problem.reason });
  });
  if (knownUser && !knownUser(p.runAs)) problems.push({ path: 'runAs', reason: `no gatewayd user "${p.runAs}"` });
  return problems;
}

/** The definition that runs: defaults filled in, files resolved in the data directory. */
export function bridgeDefinition(id: string, p: BridgeProperties, defaults: { clientIdPrefix: string; dataDir: string }): BridgeDefinition {
  const r = p.remote;
  const remote: BridgeDefinition['remote'] = {
    ...REMOTE_DEFAULTS,
    ...r,
    urls: [...r.urls],
    clientId: r.clientId ?? `${defaults.clientIdPrefix}.${id}`.slice(0, 256),
  };
  for (const key of ['caFile', 'certFile', 'keyFile'] as const) if (r[key] !== undefined) remote[key] = resolvePath(defaults.dataDir, r[key]!);
  return {
    id,
    remote,
    runAs: p.runAs,
    topics: p.topics.map((t) => ({ qos: 0, localPrefix: '', remotePrefix: '', retainAsPublished: true, ...t })),
    queue: { ...QUEUE_DEFAULTS, ...p.queue },
  };
}
