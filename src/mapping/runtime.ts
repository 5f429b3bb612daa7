// The protocol-mapping runtime (docs/design.md §11): the registry of every resource of the running
// services, built from their definitions; each resource drives its currentState toward its
// targetState (connection-resource.ts, endpoint-resource.ts, mapping-resource.ts,
// opcua-resources.ts) and moves data between the protocols (drivers/, picked by protocol in
// drivers/index.ts) and the embedded broker (the data plane, runtime-context.ts). This file keeps
// the registry: building resources, applying changed definitions, operations and views.
import type { DataPlane } from '../mqtt/index.js';
import type { BridgeService } from '../bridges/index.js';
import { BridgeResource } from './bridge-resource.js';
import type { Logger } from '../log/index.js';
import { NotFoundError } from '../errors/errors.js';
import { ConnectionResource } from './connection-resource.js';
import { createProtocolDrivers } from './drivers/index.js';
import { realTimers, type ConnectionDriver, type Timers } from './drivers/types.js';
import { EndpointResource, endpointTopicList } from './endpoint-resource.js';
import { EnableableResource } from './enableable-resource.js';
import { MappingResource } from './mapping-resource.js';
import { NodeSetResource, ServerResource, type OpcuaRuntimeSupport } from './opcua-resources.js';
import type { BridgeView, ConnectionState, ConnectionView, EndpointView, MappingView, NodeSetView, ServerView, SparkplugView, TopicsView } from './resource-views.js';
import { diffResources, keyResources, type KeyedResource, type ResourceChanges } from './definition-diff.js';
import type { RuleLimits } from './rules.js';
import { createRuntimeContext, OPCUA_UNAVAILABLE, type RuntimeContext } from './runtime-context.js';
import type { LastWriteLookup } from './write-audit.js';
import type { ConnectionDef, ServiceDef, SparkplugDef } from './service-files.js';

export type { BridgeView, ConnectionState, ConnectionView, EndpointView, EnableState, MappingView, NodeSetView, ServerView, SparkplugView, TopicsView } from './resource-views.js';
export type { ResourceChanges } from './definition-diff.js';
export { BACKOFF_INITIAL_MS, BACKOFF_MAX_MS, MAX_MAPPING_HOPS, OPCUA_UNAVAILABLE } from './runtime-context.js';

/** Target states set by operations, bound to the definition they were set against (docs/design.md §13). */
export interface StoredTargets {
  /** The target an operation set for resource `id` while its definition hash was `definitionHash`. */
  get(id: string, definitionHash: string): string | undefined;
}

export interface MappingRuntimeDeps {
  services: ServiceDef[];
  /** The embedded broker's port; undefined when the broker is off (nothing is published). */
  dataPlane: DataPlane | undefined;
  log: Logger;
  limits: RuleLimits;
  agentName: string;
  timers?: Timers;
  /** Tests may replace the protocol drivers. */
  driverFor?: (def: ConnectionDef) => ConnectionDriver;
  /** OPC UA (client and server); absent: OPC UA resources report OPCUA_UNAVAILABLE. */
  opcua?: OpcuaRuntimeSupport;
  /** Operations' target states that outlive a restart; absent: every target comes from the files. */
  targets?: StoredTargets;
  /** Builds Sparkplug edge nodes (src/sparkplug); absent: Sparkplug resources are not run (logged). */
  sparkplug?: SparkplugNodes;
  /** The engine of Bridge resources (src/bridges); absent: bridges report BRIDGES_UNAVAILABLE. */
  bridges?: BridgeService;
  /** Write endpoints' last writes of earlier runs, from the audit trail. */
  lastWriteOf?: LastWriteLookup;
}

/** A Sparkplug edge node as the runtime drives it (src/sparkplug/sparkplug-resource.ts). */
export interface SparkplugNode extends EnableableResource {
  readonly def: SparkplugDef;
  view(): SparkplugView;
  stats(): SparkplugStats;
  /** The target of the Bridge it goes through may have changed (via: !ref <Bridge>). */
  uplinkChanged(): void;
}

/** Makes edge nodes; `endpointOf` gives the running endpoints its metrics name, `bridgeTarget` the target of a Bridge (via). */
export interface SparkplugNodes {
  create(ctx: RuntimeContext, def: SparkplugDef, endpointOf: (id: string) => EndpointResource, bridgeTarget: (id: string) => 'connected' | 'disabled' | undefined): SparkplugNode;
  /** The resource left the service files (not restarted): what it kept goes with it. */
  discard?(id: string): void;
}

/** Per connection: its state and what went through it since it was (re)built. */
export interface ConnectionStats {
  id: string;
  serviceId: string;
  protocol: string;
  state: ConnectionState;
  /** Readings taken from the device (polls, /req answers, messages it pushed). */
  reads: number;
  /** When the last reading was taken (epoch ms; 0: none yet). */
  lastReadAt: number;
  /** Values written to the device. */
  writes: number;
  /** Reads, writes and rule evaluations that failed (not the values refused before sending: refusedWrites). */
  failures: number;
  /** Values refused before anything was sent to the device (out of range, the wrong type for the address). */
  refusedWrites: number;
  /** Messages published on the data plane (readings, /res answers, write acknowledgements). */
  published: number;
}

/** Per Sparkplug edge node: its session state and message counts (for /metrics). */
export interface SparkplugStats {
  id: string;
  state: SparkplugView['node']['state'];
  messages: SparkplugView['messages'];
  commands: SparkplugView['commands'];
  /** Values kept while the host is away (absent: the gateway keeps none, no store). */
  history?: { values: number; published: number; dropped: Record<string, number> };
}

export interface MappingStats {
  services: number;
  resources: number;
  /** Messages the mappings published (routed) since they started. */
  routed: number;
  connections: ConnectionStats[];
  sparkplug: SparkplugStats[];
}

export interface MappingRuntime {
  start(): void;
  stop(): Promise<void>;
  /**
   * Runs `services` instead of the current ones: resources whose definition (or what they run
   * on) changed are stopped and started again, new ones started, removed ones stopped; the
   * others keep running untouched. Resolves once every stopped resource is closed and every
   * new one started (connecting, enabling...). Calls are queued: one apply at a time.
   */
  apply(services: ServiceDef[]): Promise<ResourceChanges>;
  /** What apply(services) would change, without changing anything. */
  plan(services: ServiceDef[]): ResourceChanges;
  /** The hash of a running resource's definition (what a stored operation is bound to). */
  definitionHash(id: string): string | undefined;
  stats(): MappingStats;
  listConnections(): ConnectionView[];
  getConnection(id: string): ConnectionView;
  setConnectionOperation(id: string, operation: 'connect' | 'disconnect'): ConnectionView;
  listEndpoints(): EndpointView[];
  getEndpoint(id: string): EndpointView;
  endpointTopics(id: string): string[];
  setEndpointOperation(id: string, operation: 'enable' | 'disable'): EndpointView;
  listMappings(): MappingView[];
  getMapping(id: string): MappingView;
  mappingEndpointTopics(id: string): Record<string, string[]>;
  setMappingOperation(id: string, operation: 'enable' | 'disable'): MappingView;
  listServers(): ServerView[];
  getServer(id: string): ServerView;
  setServerOperation(id: string, operation: 'enable' | 'disable'): ServerView;
  listNodes(): NodeSetView[];
  getNodeSet(id: string): NodeSetView;
  listBridges(): BridgeView[];
  getBridge(id: string): BridgeView;
  setBridgeOperation(id: string, operation: 'connect' | 'disconnect'): BridgeView;
  topics(): TopicsView;
  listSparkplug(): SparkplugView[];
  getSparkplug(id: string): SparkplugView;
  setSparkplugOperation(id: string, operation: 'enable' | 'disable'): SparkplugView;
  /** Resolves when `pred` holds (checked on every state change); for tests and tools. */
  waitFor(pred: () => boolean, timeoutMs?: number): Promise<void>;
}

type Resource = ConnectionResource | EndpointResource | MappingResource | ServerResource | NodeSetResource | SparkplugNode | BridgeResource;

export function createMappingRuntime(deps: MappingRuntimeDeps): MappingRuntime {
  const { log, agentName } = deps;
  const ctx = createRuntimeContext({ dataPlane: deps.dataPlane, log, timers: deps.timers ?? realTimers, agentName, limits: deps.limits, ...(deps.lastWriteOf ? { lastWriteOf: deps.lastWriteOf } : {}) });
  // Read when resources are built: OPC UA support may come with a later service.
  const opcuaNow = () => deps.opcua;
  const driverFor = deps.driverFor ?? createProtocolDrivers({ log, opcua: () => opcuaNow()?.support });

  const connections = new Map<string, ConnectionResource>();
  const endpoints = new Map<string, EndpointResource>();
  const mappings = new Map<string, MappingResource>();
  const servers = new Map<string, ServerResource>();
  const nodeSets = new Map<string, NodeSetResource>();
  const sparkplugNodes = new Map<string, SparkplugNode>();
  const bridges = new Map<string, BridgeResource>();
  /** The definitions running now, keyed (hash, run key). */
  let running = new Map<string, KeyedResource>();
  let serviceCount = 0;
  let started = false;

  const newConnection = (def: ConnectionDef): ConnectionResource => {
    const driver = driverFor(def);
    return driver ? new ConnectionResource(ctx, def, driver) : new ConnectionResource(ctx, def, undefined, OPCUA_UNAVAILABLE);
  };

  /** Builds the resources of `keyed` (dependencies first) and registers them; `targetOf` gives each its target. */
  function build(keyed: KeyedResource[], targetOf: (k: KeyedResource) => string | undefined): Resource[] {
    const built: Resource[] = [];
    const add = <R extends Resource>(map: Map<string, R>, r: R, k: KeyedResource) => {
      const target = targetOf(k);
      if (target !== undefined) r.target = target as never;
      map.set(k.def.id, r);
      built.push(r);
    };
    for (const k of keyed) if (k.def.kind === 'connection') add(connections, newConnection(k.def), k);
    const opcua = opcuaNow();
    for (const k of keyed) if (k.def.kind === 'server') add(servers, new ServerResource(ctx, k.def, opcua), k);
    for (const k of keyed) if (k.def.kind === 'endpoint') add(endpoints, new EndpointResource(ctx, k.def, connections.get(k.def.connectionId)!), k);
    for (const k of keyed) if (k.def.kind === 'nodes') add(nodeSets, new NodeSetResource(ctx, k.def, servers.get(k.def.serverId)!, opcua !== undefined), k);
    for (const k of keyed) if (k.def.kind === 'mapping') add(mappings, new MappingResource(ctx, k.def, (id) => endpoints.get(id)!.def.topic), k);
    for (const k of keyed) {
      if (k.def.kind !== 'sparkplug') continue;
      if (deps.sparkplug) add(sparkplugNodes, deps.sparkplug.create(ctx, k.def, (id) => endpoints.get(id)!, (id) => bridges.get(id)?.target), k);
      else log.warn('Sparkplug resource not run: this runtime has no Sparkplug support', { id: k.def.id });
    }
    for (const k of keyed) if (k.def.kind === 'bridge') add(bridges, new BridgeResource(ctx, k.def, deps.bridges), k);
    return built;
  }
  const storedTarget = (k: KeyedResource) => deps.targets?.get(k.def.id, k.hash);
  const resourceOf = (id: string): Resource | undefined => connections.get(id) ?? endpoints.get(id) ?? mappings.get(id) ?? servers.get(id) ?? nodeSets.get(id) ?? sparkplugNodes.get(id) ?? bridges.get(id);
  const unregister = (id: string) => [connections, endpoints, mappings, servers, nodeSets, sparkplugNodes, bridges].some((m) => m.delete(id));

  /** Keys of the service definitions seen (unchanged files are the same objects: not hashed again). */
  const keyCache = new WeakMap<ServiceDef, KeyedResource[]>();
  running = keyResources(deps.services, keyCache);
  serviceCount = deps.services.length;
  build([...running.values()], storedTarget);

  /** Edge nodes going through a Bridge follow its target (disabled: their session is held down too). */
  const followBridges = () => {
    for (const s of sparkplugNodes.values()) if (s.def.via.kind === 'bridge') s.uplinkChanged();
  };

  /** Order of stopping: what uses others first (mappings, node sets, edge nodes, endpoints), then what they use. */
  const stopOrder = (r: Resource) => (r instanceof MappingResource || r instanceof NodeSetResource || (r instanceof EnableableResource && r.kind === 'sparkplug') ? 0 : r instanceof EndpointResource ? 1 : 2);

  async function applyNow(services: ServiceDef[]): Promise<ResourceChanges> {
    const next = keyResources(services, keyCache);
    const changes = diffResources(running, next);
    if (ctx.stopped()) return changes;
    // Restarted resources keep a target set by an operation when their own definition is the same.
    const previousTarget = new Map<string, string>();
    const leaving = [...changes.removed, ...changes.restarted].map((id) => resourceOf(id)!).filter(Boolean);
    for (const id of changes.restarted) if (running.get(id)!.hash === next.get(id)!.hash) previousTarget.set(id, resourceOf(id)!.target);
    for (const id of [...changes.removed, ...changes.restarted]) unregister(id);
    for (const order of [0, 1, 2]) await Promise.all(leaving.filter((r) => stopOrder(r) === order).map((r) => r.retire()));
    // A bridge that left the files takes its queue with it (a restarted one keeps it).
    for (const r of leaving) if (r instanceof BridgeResource && changes.removed.includes(r.def.id)) r.discard();
    for (const r of leaving) if (r instanceof EnableableResource && r.kind === 'sparkplug' && changes.removed.includes(r.id)) deps.sparkplug?.discard?.(r.id);
    for (const id of changes.retargeted) {
      const r = resourceOf(id)!;
      const k = next.get(id)!;
      r.target = (storedTarget(k) ?? k.def.targetState) as never;
    }
    const built = build(
      [...changes.added, ...changes.restarted].map((id) => next.get(id)!),
      (k) => previousTarget.get(k.def.id) ?? storedTarget(k),
    );
    running = next;
    serviceCount = services.length;
    if (started) {
      for (const r of [...changes.retargeted.map((id) => resourceOf(id)!), ...built]) r.reconcile();
      followBridges();
    }
    ctx.changed();
    const { added, restarted, retargeted, removed } = changes;
    if (added.length + restarted.length + retargeted.length + removed.length) log.info('mapping applied', { added, restarted, retargeted, removed, unchanged: changes.unchanged.length });
    return changes;
  }
  let applying: Promise<unknown> = Promise.resolve();

  const find = <T>(map: Map<string, T>, id: string, what: string): T => {
    const v = map.get(id);
    if (!v) throw new NotFoundError(`${what} not found`);
    return v;
  };
  const sorted = <T extends { id: string }>(list: T[]) => list.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));

  return {
    start() {
      started = true;
      for (const c of connections.values()) c.reconcile();
      for (const e of endpoints.values()) e.reconcile();
      for (const m of mappings.values()) m.reconcile();
      for (const s of servers.values()) s.reconcile();
      for (const n of nodeSets.values()) n.reconcile();
      for (const s of sparkplugNodes.values()) s.reconcile();
      for (const b of bridges.values()) b.reconcile();
    },
    async stop() {
      ctx.stop();
      await applying.catch(() => undefined);
      // Edge nodes first: their NDEATH goes out while the endpoints and the broker still run.
      await Promise.all([...sparkplugNodes.values()].map((s) => s.retire()));
      for (const m of mappings.values()) m.reconcile();
      for (const e of endpoints.values()) e.halt();
      for (const n of nodeSets.values()) n.halt();
      await Promise.all([...connections.values()].map((c) => c.shutdown()).concat([...servers.values()].map((s) => s.shutdown()), [...bridges.values()].map((b) => b.shutdown())));
      await opcuaNow()?.support.dispose();
      ctx.releaseWaiters();
    },
    apply(services) {
      const run = applying.then(() => applyNow(services));
      applying = run.catch(() => undefined);
      return run;
    },
    plan: (services) => diffResources(running, keyResources(services, keyCache)),
    definitionHash: (id) => running.get(id)?.hash,
    stats: () => ({
      services: serviceCount,
      resources: running.size,
      routed: [...mappings.values()].reduce((n, m) => n + m.published, 0),
      connections: sorted(
        [...connections.values()].map((c) => ({ id: c.def.id, serviceId: c.def.serviceId, protocol: c.def.protocol, state: c.current, ...c.counters })),
      ),
      sparkplug: sorted([...sparkplugNodes.values()].map((s) => s.stats())),
    }),
    listConnections: () => sorted([...connections.values()].map((c) => c.view())),
    getConnection: (id) => find(connections, id, 'Connection').view(),
    setConnectionOperation(id, operation) {
      const c = find(connections, id, 'Connection');
      c.target = operation === 'connect' ? 'connected' : 'disconnected';
      log.info('connection operation', { id, operation });
      c.reconcile();
      ctx.changed();
      return c.view();
    },
    listEndpoints: () => sorted([...endpoints.values()].map((e) => e.view())),
    getEndpoint: (id) => find(endpoints, id, 'Endpoint').view(),
    endpointTopics: (id) => endpointTopicList(find(endpoints, id, 'Endpoint').def),
    setEndpointOperation(id, operation) {
      const e = find(endpoints, id, 'Endpoint');
      e.target = operation === 'enable' ? 'enabled' : 'disabled';
      log.info('endpoint operation', { id, operation });
      e.reconcile();
      ctx.changed();
      return e.view();
    },
    listMappings: () => sorted([...mappings.values()].map((m) => m.view())),
    getMapping: (id) => find(mappings, id, 'Mapping').view(),
    mappingEndpointTopics(id) {
      const m = find(mappings, id, 'Mapping');
      const out: Record<string, string[]> = {};
      for (const item of m.def.mappings) {
        for (const epId of [item.sourceEndpoint, item.targetEndpoint]) {
          if (epId !== undefined) out[epId] = endpointTopicList(endpoints.get(epId)!.def);
        }
      }
      return out;
    },
    setMappingOperation(id, operation) {
      const m = find(mappings, id, 'Mapping');
      m.target = operation === 'enable' ? 'enabled' : 'disabled';
      log.info('mapping operation', { id, operation });
      m.reconcile();
      ctx.changed();
      return m.view();
    },
    listServers: () => sorted([...servers.values()].map((s) => s.view())),
    getServer: (id) => find(servers, id, 'Server').view(),
    setServerOperation(id, operation) {
      const s = find(servers, id, 'Server');
      s.target = operation === 'enable' ? 'enabled' : 'disabled';
      log.info('server operation', { id, operation });
      s.reconcile();
      for (const n of s.nodeSets) n.reconcile();
      ctx.changed();
      return s.view();
    },
    listNodes: () => sorted([...nodeSets.values()].map((n) => n.view())),
    getNodeSet: (id) => find(nodeSets, id, 'Node set').view(),
    listBridges: () => sorted([...bridges.values()].map((b) => b.view())),
    getBridge: (id) => find(bridges, id, 'Bridge').view(),
    setBridgeOperation(id, operation) {
      const b = find(bridges, id, 'Bridge');
      b.target = operation === 'connect' ? 'connected' : 'disabled';
      log.info('bridge operation', { id, operation });
      b.reconcile();
      followBridges();
      ctx.changed();
      return b.view();
    },
    topics: () => ({
      endpoints: sorted([...endpoints.values()].map((e) => ({ id: e.def.id, topics: endpointTopicList(e.def) }))),
      mappings: sorted([...mappings.values()].map((m) => ({ id: m.def.id, topics: m.topics() }))),
      nodes: sorted([...nodeSets.values()].map((n) => ({ id: n.def.id, topics: n.topics() }))),
    }),
    listSparkplug: () => sorted([...sparkplugNodes.values()].map((s) => s.view())),
    getSparkplug: (id) => find(sparkplugNodes, id, 'Sparkplug edge node').view(),
    setSparkplugOperation(id, operation) {
      const s = find(sparkplugNodes, id, 'Sparkplug edge node');
      s.target = operation === 'enable' ? 'enabled' : 'disabled';
      log.info('sparkplug operation', { id, operation });
      s.reconcile();
      ctx.changed();
      return s.view();
    },
    waitFor: (pred, timeoutMs = 10_000) => ctx.waitFor(pred, timeoutMs),
  };
}
