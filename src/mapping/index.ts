// Protocol mapping (docs/design.md §11): service files → runtime, plus the rule engine of
// POST /api/rule-engine/transform. A daemon part: started after the broker, stopped before it.
import { hostname } from 'node:os';
import { join, resolve } from 'node:path';
import type { Part } from '../daemon.js';
import type { GatewayConfig } from '../config/index.js';
import type { Logger } from '../log/index.js';
import type { Broker } from '../mqtt/index.js';
import type { Timers } from './drivers/types.js';
import { compileRule, type CompiledRule, type RuleLimits } from './rules.js';
import { ConflictError, NotFoundError } from '../errors/errors.js';
import type { MappingOperationRecord, Store } from '../store/index.js';
import { createMappingRuntime, type MappingRuntime, type MappingStats, type SparkplugNodes } from './runtime.js';
import { createServiceCatalog, type ServiceCatalog } from './service-catalog.js';
import { servicesDirOf } from './service-dir.js';
import type { ServiceDef } from './service-files.js';
import { createOperationStore } from './operation-store.js';
import { createOpcuaSupport } from './opcua-support.js';
import type { OpcuaAccess } from './opcua-server.js';
import type { OpcuaRuntimeSupport } from './opcua-resources.js';
import type { BridgeService } from '../bridges/index.js';
import type { LastWriteLookup } from './write-audit.js';

export type { OpcuaAccess, OpcuaUser } from './opcua-server.js';

export { RuleError, compileRule, type RuleLimits } from './rules.js';
export type { BridgeView, ConnectionStats, MappingRuntime, MappingStats, ResourceChanges, SparkplugNode, SparkplugNodes, SparkplugStats, SparkplugView } from './runtime.js';
export type { ServiceCatalog, ServiceSummary, ServiceValidation } from './service-catalog.js';
export { lastWriteOfEvent } from './write-audit.js';
export { serviceJsonToText, serviceTextToJson, ServiceFileError } from './service-files.js';
export { connectionSchema, endpointSchema, mappingSchema, serverSchema, sparkplugSchema, schemaOfType } from './schemas.js';
export { bridgeSchema } from '../bridges/bridge-definition.js';

export interface MappingService {
  part: Part;
  /** The runtime while started (undefined before, after stop, or when mapping.enabled is false). */
  runtime(): MappingRuntime | undefined;
  /** The service files (undefined when mapping.enabled is false or before start). */
  services(): ServiceCatalog | undefined;
  /**
   * Sets a resource's targetState (PUT …/{id}/operation) and keeps it in the store, bound to
   * the resource's definition; answers the resource at once (the runtime drives currentState).
   */
  setOperation(kind: OperationKind, id: string, operation: string): Promise<unknown>;
  /** Per-connection states and message counts (for health and metrics). */
  stats(): MappingStats;
  /** Evaluates an expression on an input (POST /api/rule-engine/transform); throws RuleError. */
  transform(input: unknown, transformation: string): Promise<unknown>;
  limits: RuleLimits;
}

export type OperationKind = 'connection' | 'endpoint' | 'mapping' | 'server' | 'sparkplug' | 'bridge';

/** The agent name of every resource: the gateway's hostname, or "gatewayd" when it has none. */
export function agentName(): string {
  try {
    return hostname() || 'gatewayd';
  } catch {
    return 'gatewayd';
  }
}

const COMPILED_CACHE = 100;

/** Each operable kind: its name in "<Type> not found" and the runtime call that sets its target. */
const operationOf: Record<OperationKind, { type: string; set(rt: MappingRuntime, id: string, operation: string): { targetState: MappingOperationRecord['targetState'] } }> = {
  connection: { type: 'Connection', set: (rt, id, op) => rt.setConnectionOperation(id, op as 'connect' | 'disconnect') },
  endpoint: { type: 'Endpoint', set: (rt, id, op) => rt.setEndpointOperation(id, op as 'enable' | 'disable') },
  mapping: { type: 'Mapping', set: (rt, id, op) => rt.setMappingOperation(id, op as 'enable' | 'disable') },
  server: { type: 'Server', set: (rt, id, op) => rt.setServerOperation(id, op as 'enable' | 'disable') },
  sparkplug: { type: 'Sparkplug edge node', set: (rt, id, op) => rt.setSparkplugOperation(id, op as 'enable' | 'disable') },
  bridge: { type: 'Bridge', set: (rt, id, op) => rt.setBridgeOperation(id, op as 'connect' | 'disconnect') },
};
const usesOpcua = (services: ServiceDef[]) => services.some((s) => s.resources.some((r) => r.kind === 'server' || r.kind === 'nodes' || (r.kind === 'connection' && r.protocol === 'Opcua')));

export function createMappingService(deps: {
  config: GatewayConfig['mapping'];
  log: Logger;
  broker: () => Broker | undefined;
  /** Where operations' target states are kept; absent: they last until the next restart. */
  store?: Store;
  timers?: Timers;
  /** The data directory: OPC UA certificates go to <dataDir>/opcua-pki unless mapping.opcuaPkiDir is set. */
  dataDir?: string;
  /** The gateway's bind address: the OPC UA server's default hostname. */
  host?: string;
  /** gatewayd's users and permissions for sessions of the OPC UA server (absent: anonymous only). */
  opcuaAccess?: OpcuaAccess;
  /** Builds Sparkplug edge nodes (src/sparkplug). */
  sparkplug?: SparkplugNodes;
  /** The engine of Bridge resources (absent: they do not run). */
  bridges?: BridgeService;
  /** Write endpoints' last writes of earlier runs (the audit trail); absent: from this run on. */
  lastWriteOf?: LastWriteLookup;
}): MappingService {
  const { config, broker } = deps;
  const log = deps.log.child({ part: 'mapping' });
  const limits: RuleLimits = { timeoutMs: config.ruleTimeoutMs, maxDepth: config.ruleMaxDepth, maxSequence: config.ruleMaxSequence, maxBytes: config.ruleMaxBytes };
  const operations = deps.store ? createOperationStore(deps.store) : undefined;
  let runtime: MappingRuntime | undefined;
  let catalog: ServiceCatalog | undefined;
  // Recently used expressions stay compiled (insertion order = age).
  const compiled = new Map<string, CompiledRule>();

  /** Drops stored operations of resources whose definition changed or left (logged). */
  const pruneOperations = async () => {
    const rt = runtime;
    if (!operations || !rt) return;
    const dropped = await operations.prune((id) => rt.definitionHash(id));
    if (dropped) log.info('stored operations dropped: their resources changed', { count: dropped });
  };

  return {
    limits,
    runtime: () => runtime,
    services: () => catalog,
    async setOperation(kind, id, operation) {
      const rt = runtime;
      if (!rt) throw new NotFoundError(`${operationOf[kind].type} not found`);
      const view = operationOf[kind].set(rt, id, operation);
      const hash = rt.definitionHash(id);
      if (operations && hash) await operations.save(id, view.targetState, hash);
      return view;
    },
    stats: () => runtime?.stats() ?? { services: 0, resources: 0, routed: 0, connections: [], sparkplug: [] },
    async transform(input, transformation) {
      let rule = compiled.get(transformation);
      if (rule) compiled.delete(transformation);
      else rule = compileRule(transformation, limits);
      compiled.set(transformation, rule);
      if (compiled.size > COMPILED_CACHE) compiled.delete(compiled.keys().next().value!);
      return rule.evaluate(input);
    },
    part: {
      name: 'mapping',
      async start() {
        if (!config.enabled) {
          log.info('protocol mapping disabled (mapping.enabled is false)');
          return;
        }
        const dir = servicesDirOf(config.servicesDir, deps.dataDir ?? '.', log);
        const b = broker();
        if (!b) log.warn('the embedded broker is off (mqtt.enabled is false): endpoints and mappings publish nothing');
        const pkiDir = config.opcuaPkiDir ? resolve(config.opcuaPkiDir) : join(resolve(deps.dataDir ?? '.'), 'opcua-pki');
        // OPC UA (node-opcua) is loaded only once a service declares it: gateways without OPC UA
        // keep their start-up time and memory.
        let opcua: OpcuaRuntimeSupport | undefined;
        const opcuaSupport = () =>
          (opcua ??= { support: createOpcuaSupport({ pkiDir, log }), defaultHost: deps.host ?? '0.0.0.0', ...(deps.opcuaAccess ? { access: deps.opcuaAccess } : {}) });
        const cat = createServiceCatalog({
          dir,
          log,
          debounceMs: config.watchDebounceMs,
          apply: async (services) => {
            if (!runtime) throw new ConflictError('protocol mapping is not running');
            if (usesOpcua(services)) opcuaSupport();
            const changes = await runtime.apply(services);
            await pruneOperations();
            return changes;
          },
          plan: (services) => runtime!.plan(services),
          ...(deps.bridges ? { parseOptions: { knownUser: deps.bridges.knownUser } } : {}),
        });
        const services = cat.load();
        if (usesOpcua(services)) opcuaSupport();
        runtime = createMappingRuntime({
          services,
          dataPlane: b?.dataPlane(),
          log,
          limits,
          agentName: agentName(),
          ...(deps.timers ? { timers: deps.timers } : {}),
          ...(operations ? { targets: operations } : {}),
          ...(deps.sparkplug ? { sparkplug: deps.sparkplug } : {}),
          ...(deps.bridges ? { bridges: deps.bridges } : {}),
          ...(deps.lastWriteOf ? { lastWriteOf: deps.lastWriteOf } : {}),
          // Resolved when a resource is built: OPC UA support may arrive with a later service.
          get opcua() {
            return opcua;
          },
        });
        catalog = cat;
        await pruneOperations();
        runtime.start();
        if (config.watch) cat.watch();
        log.info('protocol mapping started', {
          servicesDir: dir,
          services: services.map((s) => s.id),
          resources: services.reduce((n, s) => n + s.resources.length, 0),
          skippedFiles: cat.list().filter((s) => s.state === 'refused').length,
          watching: config.watch,
        });
      },
      async stop() {
        const c = catalog;
        catalog = undefined;
        await c?.close();
        const r = runtime;
        runtime = undefined;
        await r?.stop();
      },
    },
  };
}
