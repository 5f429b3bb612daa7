// The protocol-mapping runtime (DESIGN §11): the registry of every resource of the running
// services, built from their definitions; each resource drives its currentState toward its
// targetState (connection-resource.ts, endpoint-resource.ts, mapping-resource.ts,
// opcua-resources.ts) and moves data between the protocols and the embedded broker (the data
// plane, runtime-context.ts).
import type { DataPlane } from '../mqtt/index.js';
import type { Logger } from '../log/index.js';
import { NotFoundError } from '../errors/errors.js';
import { ConnectionResource } from './connection-resource.js';
import { createHttpDriver, type HttpConfiguration } from './drivers/http.js';
import { createModbusDriver, type ModbusConfiguration } from './drivers/modbus.js';
import { createMqttDriver, type MqttConfiguration } from './drivers/mqtt.js';
import { createOpcuaDriver, type OpcuaConfiguration } from './drivers/opcua.js';
import { realTimers, type ConnectionDriver, type Timers } from './drivers/types.js';
import { EndpointResource, endpointTopicList } from './endpoint-resource.js';
import { MappingResource } from './mapping-resource.js';
import { NodeSetResource, ServerResource, type OpcuaRuntimeSupport } from './opcua-resources.js';
import type { ConnectionView, EndpointView, MappingView, NodeSetView, ServerView, TopicsView } from './resource-views.js';
import type { RuleLimits } from './rules.js';
import { createRuntimeContext, OPCUA_UNAVAILABLE } from './runtime-context.js';
import type { ConnectionDef, ServiceDef } from './service-files.js';

export type { ConnectionState, ConnectionView, EndpointView, EnableState, MappingView, NodeSetView, ServerView, TopicsView } from './resource-views.js';
export { BACKOFF_INITIAL_MS, BACKOFF_MAX_MS, MAX_MAPPING_HOPS, OPCUA_UNAVAILABLE } from './runtime-context.js';

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
}

export interface MappingRuntime {
  start(): void;
  stop(): Promise<void>;
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
  topics(): TopicsView;
  /** Resolves when `pred` holds (checked on every state change); for tests and tools. */
  waitFor(pred: () => boolean, timeoutMs?: number): Promise<void>;
}

function defaultDriver(def: ConnectionDef): ConnectionDriver {
  switch (def.protocol) {
    case 'Modbus':
      return createModbusDriver(def.configuration as ModbusConfiguration);
    case 'Mqtt':
      return createMqttDriver(def.configuration as MqttConfiguration, `gatewayd-${def.id}`.slice(0, 23));
    case 'Http':
      return createHttpDriver(def.configuration as HttpConfiguration);
    default:
      throw new Error(OPCUA_UNAVAILABLE);
  }
}

export function createMappingRuntime(deps: MappingRuntimeDeps): MappingRuntime {
  const { log, agentName } = deps;
  const ctx = createRuntimeContext({ dataPlane: deps.dataPlane, log, timers: deps.timers ?? realTimers, agentName, limits: deps.limits });
  const driverFor = deps.driverFor ?? defaultDriver;
  const opcua = deps.opcua;

  const newConnection = (def: ConnectionDef): ConnectionResource => {
    if (def.protocol === 'Opcua' && !deps.driverFor) {
      if (!opcua) return new ConnectionResource(ctx, def, undefined, OPCUA_UNAVAILABLE);
      return new ConnectionResource(ctx, def, createOpcuaDriver(def.configuration as OpcuaConfiguration, { support: opcua.support, log, id: def.id }));
    }
    return new ConnectionResource(ctx, def, driverFor(def));
  };

  const connections = new Map<string, ConnectionResource>();
  const endpoints = new Map<string, EndpointResource>();
  const mappings = new Map<string, MappingResource>();
  const servers = new Map<string, ServerResource>();
  const nodeSets = new Map<string, NodeSetResource>();
  const all = deps.services.flatMap((s) => s.resources);
  for (const r of all) if (r.kind === 'connection') connections.set(r.id, newConnection(r));
  for (const r of all) if (r.kind === 'endpoint') endpoints.set(r.id, new EndpointResource(ctx, r, connections.get(r.connectionId)!));
  for (const r of all) if (r.kind === 'mapping') mappings.set(r.id, new MappingResource(ctx, r, (id) => endpoints.get(id)!.def.topic));
  for (const r of all) if (r.kind === 'server') servers.set(r.id, new ServerResource(ctx, r, opcua));
  for (const r of all) if (r.kind === 'nodes') nodeSets.set(r.id, new NodeSetResource(ctx, r, servers.get(r.serverId)!, opcua !== undefined));

  const find = <T>(map: Map<string, T>, id: string, what: string): T => {
    const v = map.get(id);
    if (!v) throw new NotFoundError(`${what} not found`);
    return v;
  };
  const sorted = <T extends { id: string }>(list: T[]) => list.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));

  return {
    start() {
      for (const c of connections.values()) c.reconcile();
      for (const e of endpoints.values()) e.reconcile();
      for (const m of mappings.values()) m.reconcile();
      for (const s of servers.values()) s.reconcile();
      for (const n of nodeSets.values()) n.reconcile();
    },
    async stop() {
      ctx.stop();
      for (const m of mappings.values()) m.reconcile();
      for (const e of endpoints.values()) e.halt();
      for (const n of nodeSets.values()) n.halt();
      await Promise.all([...connections.values()].map((c) => c.shutdown()).concat([...servers.values()].map((s) => s.shutdown())));
      await opcua?.support.dispose();
      ctx.releaseWaiters();
    },
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
    topics: () => ({
      endpoints: sorted([...endpoints.values()].map((e) => ({ id: e.def.id, topics: endpointTopicList(e.def) }))),
      mappings: sorted([...mappings.values()].map((m) => ({ id: m.def.id, topics: m.topics() }))),
      nodes: sorted([...nodeSets.values()].map((n) => ({ id: n.def.id, topics: n.topics() }))),
    }),
    waitFor: (pred, timeoutMs = 10_000) => ctx.waitFor(pred, timeoutMs),
  };
}
