// What the REST API shows of each protocol-mapping resource (docs/design.md §11), and the states.

export type ConnectionState = 'disconnected' | 'connecting' | 'connected' | 'reconnecting' | 'disconnecting';
export type EnableState = 'disabled' | 'enabling' | 'enabled' | 'disabling';

export interface ConnectionView {
  id: string;
  currentState: ConnectionState;
  targetState: 'connected' | 'disconnected';
  connection: Record<string, unknown>;
  /** What went through it since it was (re)built (the /metrics figures). */
  figures: { reads: number; writes: number; failures: number; refusedWrites: number; published: number; lastReadAt?: string };
  agentName: string;
  message?: string;
}
export interface EndpointView {
  id: string;
  currentState: EnableState;
  targetState: 'enabled' | 'disabled';
  connectionId: string;
  operation: string;
  address: Record<string, unknown>;
  /** Read endpoints: where and how readings are published (the definition's topic, qos and retain, with their defaults). */
  publish?: { topic: string; qos: 0 | 1 | 2; retain: boolean };
  /** Write endpoints: the last value written or refused, and for whom (after a restart: the audit trail's newest). */
  lastWrite?: { ok: boolean; value?: unknown; error?: string; at: string; by?: string; clientId?: string; via?: string };
  agentName: string;
  message?: string;
}
export interface MappingView {
  id: string;
  currentState: EnableState;
  targetState: 'enabled' | 'disabled';
  mappings: Record<string, unknown>[];
  agentName: string;
  message?: string;
}
export interface ServerView {
  id: string;
  options: Record<string, unknown>;
  /** The server's endpoint URL while it runs. */
  endpointUrl?: string;
  currentState: EnableState;
  targetState: 'enabled' | 'disabled';
  protocol: string;
  agentName: string;
  message?: string;
}
export interface NodeSetView {
  id: string;
  currentState: EnableState;
  targetState: 'enabled' | 'disabled';
  nodes: Record<string, unknown>[];
  agentName: string;
  message?: string;
}
export interface TopicsView {
  endpoints: { id: string; topics: string[] }[];
  mappings: { id: string; topics: string[] }[];
  nodes: { id: string; topics: string[] }[];
}
export type BridgeState = 'connecting' | 'connected' | 'reconnecting' | 'disabled';
export interface BridgeView {
  id: string;
  currentState: BridgeState;
  targetState: 'connected' | 'disabled';
  /** The upstream broker: the URLs in order of preference, and the one connected to (no password). */
  remote: Record<string, unknown> & { urls: string[]; connectedTo?: string };
  runAs: string;
  topics: Record<string, unknown>[];
  queue: {
    messages: number;
    bytes: number;
    oldestAgeSeconds: number;
    dropped: Record<string, number>;
    limits: Record<string, number>;
  };
  /** Since the bridge was (re)built: acknowledged upstream, sent again, received, refused by the runAs user's rights. */
  counters: { forwarded: number; resent: number; received: number; refusedOut: number; refusedIn: number; echoes: number };
  agentName: string;
  message?: string;
}

/** A Sparkplug B edge node (docs/design.md §14): the resource, its session with the host's broker, its devices. */
export interface SparkplugView {
  id: string;
  currentState: EnableState;
  targetState: 'enabled' | 'disabled';
  groupId: string;
  edgeNodeId: string;
  primaryHostId?: string;
  /** local, an upstream broker (URLs without credentials), or a bridge (its remote's URLs). */
  via: { kind: 'local' } | { kind: 'remote'; urls: string[]; username?: string } | { kind: 'bridge'; bridgeId: string; urls: string[]; username?: string };
  runAs: string;
  node: {
    state: 'disabled' | 'connecting' | 'waitingForHost' | 'born' | 'dead';
    /** Why it is dead (or last was). */
    message?: string;
    /** bdSeq of the current (or last) session. */
    bdSeq?: number;
    /** seq of the next message. */
    seq: number;
    /** The broker it is connected to. */
    server?: string;
    /** When the current NBIRTH went out (epoch ms). */
    bornAt?: number;
  };
  devices: {
    deviceId: string;
    /** born: DBIRTH out; dead: its endpoints are down (DDEATH); waiting: up, not born yet (node not born, or fresh readings awaited). */
    state: 'born' | 'dead' | 'waiting';
    metrics: { name: string; alias: number; datatype: string; writable: boolean; value: string | number | boolean | null; quality: 'GOOD' | 'BAD' | 'STALE'; timestamp?: number; error?: string }[];
  }[];
  /** Messages published in each type's name, since the resource started. */
  messages: Record<'NBIRTH' | 'NDEATH' | 'DBIRTH' | 'DDEATH' | 'NDATA' | 'DDATA', number>;
  /** Commands received: accepted, refused (unknown metric, not writable, not permitted, bad value), failed (the endpoint's write failed). */
  commands: Record<'NCMD' | 'DCMD', { accepted: number; refused: number; failed: number }>;
  /** Values kept while the host cannot get them live, delivered after the births (docs/sparkplug.md "History"). */
  history?: {
    enabled: boolean;
    maxValues: number;
    maxAgeSeconds: number;
    durability: 'prompt' | 'background';
    /** Kept now (on flash, or staged in memory). */
    values: number;
    /** Of those, not on flash yet. */
    staged: number;
    oldestAgeSeconds: number;
    /** Delivered as historical metrics since the daemon started. */
    published: number;
    dropped: Record<'maxValues' | 'maxAge' | 'notInDefinition' | 'storeFailure', number>;
  };
  agentName: string;
  message?: string;
}
