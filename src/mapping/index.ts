// Protocol mapping (DESIGN §11): service files → runtime, plus the rule engine of
// POST /api/rule-engine/transform. A daemon part: started after the broker, stopped before it.
import { hostname } from 'node:os';
import { join, resolve } from 'node:path';
import type { Part } from '../daemon.js';
import type { GatewayConfig } from '../config/index.js';
import type { Logger } from '../log/index.js';
import type { Broker } from '../mqtt/index.js';
import type { Timers } from './drivers/types.js';
import { compileRule, type CompiledRule, type RuleLimits } from './rules.js';
import { createMappingRuntime, type MappingRuntime } from './runtime.js';
import { loadServiceDir } from './service-files.js';
import { createOpcuaSupport } from './opcua-support.js';
import type { OpcuaAccess } from './opcua-server.js';

export type { OpcuaAccess, OpcuaUser } from './opcua-server.js';

export { RuleError, compileRule, type RuleLimits } from './rules.js';
export type { MappingRuntime } from './runtime.js';
export { connectionSchema, endpointSchema, mappingSchema, serverSchema } from './schemas.js';

export interface MappingService {
  part: Part;
  /** The runtime while started (undefined before, after stop, or when mapping.enabled is false). */
  runtime(): MappingRuntime | undefined;
  /** Evaluates an expression on an input (POST /api/rule-engine/transform); throws RuleError. */
  transform(input: unknown, transformation: string): Promise<unknown>;
  limits: RuleLimits;
}

/** The agent name of every resource: the gateway's hostname, or "gatewayd" when it has none. */
export function agentName(): string {
  try {
    return hostname() || 'gatewayd';
  } catch {
    return 'gatewayd';
  }
}

const COMPILED_CACHE = 100;

export function createMappingService(deps: {
  config: GatewayConfig['mapping'];
  log: Logger;
  broker: () => Broker | undefined;
  timers?: Timers;
  /** The data directory: OPC UA certificates go to <dataDir>/opcua-pki unless mapping.opcuaPkiDir is set. */
  dataDir?: string;
  /** The gateway's bind address: the OPC UA server's default hostname. */
  host?: string;
  /** gatewayd's users and permissions for sessions of the OPC UA server (absent: anonymous only). */
  opcuaAccess?: OpcuaAccess;
}): MappingService {
  const { config, broker } = deps;
  const log = deps.log.child({ part: 'mapping' });
  const limits: RuleLimits = { timeoutMs: config.ruleTimeoutMs, maxDepth: config.ruleMaxDepth, maxSequence: config.ruleMaxSequence, maxBytes: config.ruleMaxBytes };
  let runtime: MappingRuntime | undefined;
  // Recently used expressions stay compiled (insertion order = age).
  const compiled = new Map<string, CompiledRule>();

  return {
    limits,
    runtime: () => runtime,
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
        const dir = resolve(config.servicesDir);
        const { services, problems, missing } = loadServiceDir(dir);
        if (missing) log.info('no service files: the services directory does not exist', { servicesDir: dir });
        for (const p of problems) log.error('service file skipped', { file: p.file, path: p.path, reason: p.reason });
        const b = broker();
        // OPC UA (node-opcua) is loaded only when a service declares it: gateways without OPC UA
        // keep their start-up time and memory.
        const usesOpcua = services.some((s) => s.resources.some((r) => r.kind === 'server' || r.kind === 'nodes' || (r.kind === 'connection' && r.protocol === 'Opcua')));
        const pkiDir = config.opcuaPkiDir ? resolve(config.opcuaPkiDir) : join(resolve(deps.dataDir ?? '.'), 'opcua-pki');
        if (!b) log.warn('the embedded broker is off (mqtt.enabled is false): endpoints and mappings publish nothing');
        runtime = createMappingRuntime({
          services,
          dataPlane: b?.dataPlane(),
          log,
          limits,
          agentName: agentName(),
          ...(deps.timers ? { timers: deps.timers } : {}),
          ...(usesOpcua
            ? { opcua: { support: createOpcuaSupport({ pkiDir, log }), defaultHost: deps.host ?? '0.0.0.0', ...(deps.opcuaAccess ? { access: deps.opcuaAccess } : {}) } }
            : {}),
        });
        runtime.start();
        log.info('protocol mapping started', {
          servicesDir: dir,
          services: services.map((s) => s.id),
          resources: services.reduce((n, s) => n + s.resources.length, 0),
          skippedFiles: problems.length,
        });
      },
      async stop() {
        const r = runtime;
        runtime = undefined;
        await r?.stop();
      },
    },
  };
}
