// Service files (docs/design.md §11): one YAML file per service in mapping.servicesDir, the service id
// being the file name without extension. A file holds `description`, `metadata`,
// `parameters` ({name: {type?, default, description?}}) and `resources` ({name: {type,
// properties}}). Tags: `!ref name` is the id of the resource `name` of the same file
// (`<serviceId>.<name>`) or the value of the parameter `name`; `!sub "text ${x}"` substitutes
// parameters and resource ids into text. A file that does not validate is refused as a whole,
// with every problem found (path, reason); the other files load (the directory: service-dir.ts).
import { createRequire } from 'node:module';
import type { ValidateFunction } from 'ajv';
import type * as Yaml from 'yaml';
import { bridgeProblems, type BridgeProperties } from '../bridges/bridge-definition.js';
import { etherNetIpAddressProblems } from './drivers/ethernet-ip-schemas.js';
import { serviceValidators, type Protocol } from './service-file-validators.js';
import { compileRule, RuleError } from './rules.js';
import { customTags, jsonToTags, Ref, Sub, tagsToJson } from './service-tags.js';
import { parseNamedFilter } from './topics.js';
import { s7AddressProblems } from './drivers/s7-schemas.js';
import { sparkplugDef, type SparkplugDef, type SparkplugUpstream } from './sparkplug-file.js';

export type { DatatypeName, SparkplugDef, SparkplugDeviceDef, SparkplugMetricDef, SparkplugUpstream, SparkplugVia } from './sparkplug-file.js';
import type { ResourceType } from './schemas.js';

export type { Protocol } from './service-file-validators.js';

export interface ConnectionDef {
  kind: 'connection';
  id: string;
  serviceId: string;
  name: string;
  protocol: Protocol;
  configuration: Record<string, any>;
  targetState: 'connected' | 'disconnected';
}
export interface EndpointDef {
  kind: 'endpoint';
  id: string;
  serviceId: string;
  name: string;
  connectionId: string;
  protocol: Protocol;
  operation: 'read' | 'write';
  address: Record<string, any>;
  topic: string;
  pollIntervalMs?: number;
  /** Read endpoints: how readings are published (absent: QoS 0, not retained). */
  qos?: 0 | 1 | 2;
  retain?: boolean;
  transform?: string;
  filter?: string;
  targetState: 'enabled' | 'disabled';
}
export interface MappingItemDef {
  label?: string;
  source?: string;
  sourceEndpoint?: string;
  target?: string;
  targetEndpoint?: string;
  /** How the item publishes (absent: QoS 0, not retained). */
  qos?: 0 | 1 | 2;
  retain?: boolean;
  transform?: string;
  filter?: string;
}
export interface MappingDef {
  kind: 'mapping';
  id: string;
  serviceId: string;
  name: string;
  mappings: MappingItemDef[];
  targetState: 'enabled' | 'disabled';
}
export interface ServerDef {
  kind: 'server';
  id: string;
  serviceId: string;
  name: string;
  protocol: 'Opcua';
  options: Record<string, unknown>;
  targetState: 'enabled' | 'disabled';
}
export interface NodeSetDef {
  kind: 'nodes';
  id: string;
  serviceId: string;
  name: string;
  serverId: string;
  nodes: Record<string, unknown>[];
  targetState: 'enabled' | 'disabled';
}
/** A bridge to an upstream broker (docs/design.md §14); its engine is src/bridges. */
export interface BridgeDef {
  kind: 'bridge';
  id: string;
  serviceId: string;
  name: string;
  /** The validated properties, without targetState (defaults are filled in by src/bridges). */
  properties: BridgeProperties;
  targetState: 'connected' | 'disabled';
}
export type ResourceDef = ConnectionDef | EndpointDef | MappingDef | ServerDef | NodeSetDef | SparkplugDef | BridgeDef;

/** Checks of a service file that need the gateway's state. */
export interface ParseOptions {
  /** Is there a gatewayd user of that name (a Bridge's runAs)? Absent: not checked. */
  knownUser?: (username: string) => boolean;
}

export interface ServiceDef {
  id: string;
  file: string;
  description?: string;
  metadata?: Record<string, unknown>;
  resources: ResourceDef[];
}

/** One thing wrong in a service file: where (a dotted path, or a line and column) and why. */
export interface FileProblem {
  path: string;
  reason: string;
}

/** A service file that does not validate: every problem found, the first one as path/message. */
export class ServiceFileError extends Error {
  readonly path: string;
  constructor(readonly problems: FileProblem[]) {
    super(problems[0]?.reason ?? 'invalid service file');
    this.path = problems[0]?.path ?? '';
  }
}

/** Thrown by a check whose problems are already collected. */
const REPORTED = Symbol('reported');

/** One problem, thrown where a check cannot go on (collected per resource). */
class FileError extends Error {
  constructor(
    readonly path: string,
    reason: string,
  ) {
    super(reason);
  }
}

// The YAML parser and the schema validators (service-file-validators.ts) are loaded by the first
// service file read: a gateway without services keeps their start-up time and memory.
const requireCjs = createRequire(import.meta.url);
let yamlModule: typeof Yaml | undefined;
/** The YAML library, loaded at its first use (service-secrets.ts uses it too). */
export const yaml = (): typeof Yaml => (yamlModule ??= requireCjs('yaml') as typeof Yaml);

/** Modbus over a serial line (RTU) names a `path`; Modbus TCP a `host`. */
function configurationValidator(protocol: Protocol, configuration: unknown): ValidateFunction {
  const v = serviceValidators();
  if (protocol === 'Modbus' && configuration !== null && typeof configuration === 'object' && 'path' in configuration) return v.modbusRtu;
  return v.configuration[protocol];
}

/**
 * The problems of `value` against `validate`, each at `path` + its instance path. Errors inside
 * the branches of oneOf/anyOf are left out: their summary (must match a schema) is enough.
 */
function schemaProblems(validate: ValidateFunction, value: unknown, path: string): FileProblem[] {
  if (validate(value)) return [];
  const out: FileProblem[] = [];
  const seen = new Set<string>();
  for (const e of validate.errors ?? []) {
    if (/\/(oneOf|anyOf)\/\d+\//.test(e.schemaPath)) continue;
    const at = (path + (e.instancePath ? e.instancePath.replace(/\/(\d+)(?=\/|$)/g, '[$1]').replaceAll('/', '.') : '')).replace(/^\./, '').replace(/\.\[/g, '[');
    const params = e.params as Record<string, unknown>;
    const reason = `${e.message ?? 'invalid'}${'allowedValues' in params ? ` (${(params.allowedValues as unknown[]).join(', ')})` : ''}${'additionalProperty' in params ? ` (${String(params.additionalProperty)})` : ''}`;
    const key = `${at}\n${reason}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push({ path: at, reason });
  }
  return out.length ? out : [{ path, reason: 'invalid' }];
}

/** The YAML document of a service file (tags kept as values: see refName), for edits that keep comments. */
export function parseServiceDocument(text: string): Yaml.Document.Parsed {
  return yaml().parseDocument(text, { customTags, uniqueKeys: true });
}

/** The parameter or resource a `!ref` value names (undefined for any other value). */
export const refName = (value: unknown): string | undefined => (value instanceof Ref ? value.name : undefined);

export const SERVICE_ID = /^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/;
/** The YAML text of a service file as JSON: `!ref x` becomes {"!ref": "x"}, `!sub t` {"!sub": "t"}. */
export function serviceTextToJson(text: string): unknown {
  const doc = yaml().parseDocument(text, { customTags, uniqueKeys: true });
  if (doc.errors.length) throw new ServiceFileError(yamlProblems(doc.errors));
  return tagsToJson(doc.toJS({ maxAliasCount: 100 } as never));
}

/** A service as JSON (tags as {"!ref": name} / {"!sub": text}) written as the YAML of a service file. */
export function serviceJsonToText(value: unknown): string {
  return new (yaml().Document)(jsonToTags(value), { customTags }).toString();
}

function yamlProblems(errors: readonly { message: string; linePos?: [{ line: number; col: number }, ...unknown[]] }[]): FileProblem[] {
  return errors.map((e) => {
    const line = e.linePos?.[0];
    return { path: line ? `line ${line.line}, column ${line.col}` : '', reason: e.message.split('\n')[0]! };
  });
}

/** Parses and validates one service file; throws ServiceFileError with every problem found. */
export function parseServiceFile(serviceId: string, file: string, text: string, options: ParseOptions = {}): ServiceDef {
  const doc = yaml().parseDocument(text, { customTags, prettyErrors: true, uniqueKeys: true });
  if (doc.errors.length) throw new ServiceFileError(yamlProblems(doc.errors as never));
  const raw = doc.toJS({ maxAliasCount: 100 } as never) as unknown;
  const fileProblems = schemaProblems(serviceValidators().file, raw, '');
  if (fileProblems.length) throw new ServiceFileError(fileProblems);
  const problems: FileProblem[] = [];
  /** Runs one check; a problem it throws is collected (false) and the next check goes on. */
  const collect = (fn: () => void): boolean => {
    try {
      fn();
      return true;
    } catch (err) {
      if (err === REPORTED) return false;
      if (!(err instanceof FileError)) throw err;
      problems.push({ path: err.path, reason: err.message });
      return false;
    }
  };
  /** Schema problems: all are collected, then the check stops. */
  const check = (validate: ValidateFunction, value: unknown, path: string): void => {
    const found = schemaProblems(validate, value, path);
    if (found.length === 0) return;
    problems.push(...found);
    throw REPORTED;
  };
  const body = raw as { description?: string; metadata?: Record<string, unknown>; parameters?: Record<string, { default?: unknown }>; resources: Record<string, { type: ResourceType; properties: Record<string, unknown> }> };
  const params = new Map<string, unknown>();
  for (const [name, p] of Object.entries(body.parameters ?? {})) {
    collect(() => {
      if (!('default' in p)) throw new FileError(`parameters.${name}`, 'a parameter needs a default');
      if (p.default instanceof Ref || p.default instanceof Sub) throw new FileError(`parameters.${name}.default`, 'tags are not allowed in parameter defaults');
      params.set(name, p.default);
    });
  }
  const resourceNames = new Set(Object.keys(body.resources));
  for (const name of resourceNames) collect(() => {
    if (params.has(name)) throw new FileError(`resources.${name}`, `"${name}" is both a parameter and a resource`);
  });
  const idOf = (name: string) => `${serviceId}.${name}`;

  const resolve = (value: unknown, path: string): unknown => {
    if (value instanceof Ref) {
      if (resourceNames.has(value.name)) return idOf(value.name);
      if (params.has(value.name)) return params.get(value.name);
      throw new FileError(path, `!ref ${value.name}: no such resource or parameter`);
    }
    if (value instanceof Sub) {
      return value.text.replace(/\$\{([^}]*)\}/g, (_m, name: string) => {
        const key = name.trim();
        if (resourceNames.has(key)) return idOf(key);
        if (params.has(key)) return String(params.get(key));
        throw new FileError(path, `!sub: \${${key}} is no resource or parameter`);
      });
    }
    if (Array.isArray(value)) return value.map((v, i) => resolve(v, `${path}[${i}]`));
    if (value !== null && typeof value === 'object') {
      const out: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(value)) out[k] = resolve(v, `${path}.${k}`);
      return out;
    }
    return value;
  };

  // Every resource that resolves and fits its type's schema; the others are reported and
  // left out of the checks below (no follow-up errors about them).
  const resolved = new Map<string, { type: ResourceType; properties: Record<string, any> }>();
  for (const [name, r] of Object.entries(body.resources)) {
    const path = `resources.${name}.properties`;
    collect(() => {
      const properties = resolve(r.properties, path) as Record<string, any>;
      check(serviceValidators().resources[r.type], properties, path);
      resolved.set(name, { type: r.type, properties });
    });
  }
  const declaredType = (id: string): ResourceType | undefined => {
    if (typeof id !== 'string' || !id.startsWith(`${serviceId}.`)) return undefined;
    return body.resources[id.slice(serviceId.length + 1)]?.type;
  };
  const compiles = (expr: string | undefined, path: string) => {
    if (expr === undefined) return;
    try {
      compileRule(expr);
    } catch (err) {
      throw new FileError(path, `invalid JSONata: ${err instanceof RuleError ? err.message : String(err)}`);
    }
  };

  const resources: ResourceDef[] = [];
  const endpoints = new Map<string, EndpointDef>();
  const bridges = new Map<string, BridgeDef>();
  const notA = (what: string, value: unknown) => `"${String(value)}" is not ${what} of this service (use !ref <name>)`;
  // Endpoints first pass: their protocol comes from their connection.
  for (const [name, { type, properties: p }] of resolved) {
    const path = `resources.${name}.properties`;
    const base = { id: idOf(name), serviceId, name };
    switch (type) {
      case 'Connection': {
        const protocol = p.protocol as Protocol;
        if (collect(() => check(configurationValidator(protocol, p.configuration), p.configuration, `${path}.configuration`))) {
          resources.push({ kind: 'connection', ...base, protocol, configuration: p.configuration, targetState: p.targetState });
        }
        break;
      }
      case 'Endpoint': {
        const rulesOk = [collect(() => compiles(p.transform, `${path}.transform`)), collect(() => compiles(p.filter, `${path}.filter`))].every(Boolean);
        const connectionOk = collect(() => {
          if (declaredType(p.connection) !== 'Connection') throw new FileError(`${path}.connection`, notA('a Connection', p.connection));
        });
        // A connection that is itself wrong is reported on its own; its endpoints are not checked against it.
        const connection = connectionOk ? resolved.get((p.connection as string).slice(serviceId.length + 1)) : undefined;
        if (!connection) break;
        const protocol = connection.properties.protocol as Protocol;
        const addressOk = collect(() => {
          const addressValidator = serviceValidators().address[protocol];
          if (addressValidator) check(addressValidator, p.address, `${path}.address`);
        });
        const usageOk = collect(() => {
          if (!addressOk) return;
          if (protocol === 'Modbus' && p.operation === 'write' && !['holding', 'coil'].includes(p.address.table)) {
            throw new FileError(`${path}.address.table`, 'a write endpoint writes holding registers or coils');
          }
          if (protocol === 'Mqtt' && p.operation === 'write' && /[#+]/.test(p.address.topic)) throw new FileError(`${path}.address.topic`, 'a write endpoint needs a concrete topic');
          if (protocol === 'EtherNetIp') for (const problem of etherNetIpAddressProblems(p.address)) throw new FileError(`${path}.address.${problem.path}`, problem.reason);
          if (protocol === 'S7') {
            const found = s7AddressProblems(p.address);
            for (const problem of found) problems.push({ path: `${path}.address.${problem.path}`, reason: problem.reason });
            if (found.length) throw REPORTED;
          }
          if (p.pollIntervalMs !== undefined && (p.operation !== 'read' || protocol === 'Mqtt')) {
            throw new FileError(`${path}.pollIntervalMs`, 'only read endpoints of Modbus, Http, Opcua, EtherNetIp and S7 connections poll');
          }
          for (const key of ['qos', 'retain'] as const) {
            if (p.operation === 'write' && p[key] !== undefined) throw new FileError(`${path}.${key}`, `a write endpoint publishes no readings (${key} is for read endpoints)`);
          }
          if (protocol === 'Opcua' && p.address.samplingIntervalMs !== undefined) {
            if (p.operation !== 'read') throw new FileError(`${path}.address.samplingIntervalMs`, 'only read endpoints subscribe');
            if (p.pollIntervalMs !== undefined) throw new FileError(`${path}.pollIntervalMs`, 'an endpoint either polls (pollIntervalMs) or subscribes (address.samplingIntervalMs)');
          }
        });
        if (!addressOk || !usageOk || !rulesOk) break;
        const topic = (p.topic as string | undefined) ?? `services/${serviceId}/${name}`;
        const def: EndpointDef = { kind: 'endpoint', ...base, connectionId: p.connection, protocol, operation: p.operation, address: p.address, topic, targetState: p.targetState };
        if (p.pollIntervalMs !== undefined) def.pollIntervalMs = p.pollIntervalMs;
        if (p.qos !== undefined) def.qos = p.qos;
        if (p.retain !== undefined) def.retain = p.retain;
        if (p.transform !== undefined) def.transform = p.transform;
        if (p.filter !== undefined) def.filter = p.filter;
        endpoints.set(def.id, def);
        resources.push(def);
        break;
      }
      case 'Server::Opcua':
        resources.push({ kind: 'server', ...base, protocol: 'Opcua', options: p.options ?? {}, targetState: p.targetState });
        break;
      case 'Node::Opcua': {
        const ok = [
          collect(() => {
            if (declaredType(p.server) !== 'Server::Opcua') throw new FileError(`${path}.server`, notA('a Server::Opcua', p.server));
          }),
          ...(p.nodes as Array<{ transform?: string }>).map((n, i) => collect(() => compiles(n.transform, `${path}.nodes[${i}].transform`))),
        ].every(Boolean);
        if (ok && resolved.has((p.server as string).slice(serviceId.length + 1))) resources.push({ kind: 'nodes', ...base, serverId: p.server, nodes: p.nodes, targetState: p.targetState });
        break;
      }
      case 'Bridge': {
        const { targetState, description: _d, ...properties } = p as BridgeProperties & { description?: string };
        const found = bridgeProblems(properties, options.knownUser);
        for (const problem of found) problems.push({ path: `${path}.${problem.path}`, reason: problem.reason });
        if (found.length) break;
        const def: BridgeDef = { kind: 'bridge', ...base, properties, targetState: targetState ?? 'connected' };
        bridges.set(def.id, def);
        resources.push(def);
        break;
      }
      case 'Mapping':
      case 'Sparkplug':
        break; // below, once every endpoint is known
    }
  }
  for (const [name, { type, properties: p }] of resolved) {
    if (type !== 'Mapping') continue;
    const path = `resources.${name}.properties`;
    const items = p.mappings as MappingItemDef[];
    /** An endpoint the item names: declared (else a problem) and valid (else reported on its own). */
    const endpointOf = (id: string, at: string): EndpointDef | undefined => {
      if (declaredType(id) !== 'Endpoint') throw new FileError(at, notA('an Endpoint', id));
      return endpoints.get(id);
    };
    let complete = true;
    items.forEach((item, i) => {
      const at = `${path}.mappings[${i}]`;
      const checks = [
        collect(() => {
          if (item.sourceEndpoint !== undefined && !endpointOf(item.sourceEndpoint, `${at}.sourceEndpoint`)) complete = false;
        }),
        collect(() => {
          if (item.targetEndpoint === undefined) return;
          const ep = endpointOf(item.targetEndpoint, `${at}.targetEndpoint`);
          if (!ep) complete = false;
          else if (ep.operation !== 'write') throw new FileError(`${at}.targetEndpoint`, `"${item.targetEndpoint}" is not a write endpoint`);
        }),
        collect(() => {
          if (item.source === undefined) return;
          const levels = parseNamedFilter(item.source).filter.split('/');
          if (levels.some((l, j) => (l.includes('#') && (l !== '#' || j !== levels.length - 1)) || (l.includes('+') && l !== '+'))) {
            throw new FileError(`${at}.source`, 'not a valid topic filter (+name, + and a final # are the wildcards)');
          }
        }),
        collect(() => {
          if (item.target !== undefined && /[#+]/.test(item.target)) throw new FileError(`${at}.target`, 'a target is a concrete topic ({name} inserts a wildcard value)');
        }),
        collect(() => {
          // A retained write request would be written to the device again whenever its endpoint subscribes.
          if (item.targetEndpoint !== undefined && item.retain) throw new FileError(`${at}.retain`, 'a write endpoint\'s <topic>/set is never retained');
        }),
        collect(() => compiles(item.transform, `${at}.transform`)),
        collect(() => compiles(item.filter, `${at}.filter`)),
      ];
      if (!checks.every(Boolean)) complete = false;
    });
    if (complete) resources.push({ kind: 'mapping', id: idOf(name), serviceId, name, mappings: items, targetState: p.targetState });
  }
  for (const [name, { type, properties: p }] of resolved) {
    if (type !== 'Sparkplug') continue;
    const def = sparkplugDef(p, { id: idOf(name), serviceId, name }, `resources.${name}.properties`, {
      endpointOf: (id) => endpoints.get(id),
      declaredType,
      bridgeUpstream: (id) => {
        const remote = bridges.get(id)?.properties.remote;
        if (!remote) return undefined;
        // What a session needs of the remote; the bridge's own settings (client id, keepalive, inflight) stay its own.
        const upstream: SparkplugUpstream = { urls: [...remote.urls] };
        for (const key of ['username', 'password', 'caFile', 'certFile', 'keyFile', 'connectTimeoutMs'] as const) if (remote[key] !== undefined) Object.assign(upstream, { [key]: remote[key] });
        return upstream;
      },
      collect,
      fail: (path, reason) => {
        throw new FileError(path, reason);
      },
    });
    if (def) resources.push(def);
  }
  if (problems.length) throw new ServiceFileError(problems);
  const service: ServiceDef = { id: serviceId, file, resources };
  if (body.description !== undefined) service.description = body.description;
  if (body.metadata !== undefined) service.metadata = body.metadata;
  return service;
}
