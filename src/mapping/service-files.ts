// Service files (DESIGN §11): one YAML file per service in mapping.servicesDir, the service id
// being the file name without extension. A file holds `description`, `metadata`,
// `parameters` ({name: {type?, default, description?}}) and `resources` ({name: {type,
// properties}}). Tags: `!ref name` is the id of the resource `name` of the same file
// (`<serviceId>.<name>`) or the value of the parameter `name`; `!sub "text ${x}"` substitutes
// parameters and resource ids into text. A bad file is reported with (file, path, reason) and
// skipped as a whole; the other files load.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, extname, join } from 'node:path';
import { Ajv, type ValidateFunction } from 'ajv';
import { parseDocument, type ScalarTag } from 'yaml';
import { compileRule, RuleError } from './rules.js';
import { parseNamedFilter } from './topics.js';
import {
  httpAddressSchema,
  httpConfigurationSchema,
  modbusAddressSchema,
  modbusConfigurationSchema,
  mqttAddressSchema,
  mqttConfigurationSchema,
  opcuaAddressSchema,
  opcuaConfigurationSchema,
  schemaOfType,
  serviceFileSchema,
  type ResourceType,
} from './schemas.js';

export type Protocol = 'Modbus' | 'Mqtt' | 'Http' | 'Opcua';

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
export type ResourceDef = ConnectionDef | EndpointDef | MappingDef | ServerDef | NodeSetDef;

export interface ServiceDef {
  id: string;
  file: string;
  description?: string;
  metadata?: Record<string, unknown>;
  resources: ResourceDef[];
}

export interface ServiceFileProblem {
  file: string;
  path: string;
  reason: string;
}

class FileError extends Error {
  constructor(
    readonly path: string,
    reason: string,
  ) {
    super(reason);
  }
}

class Ref {
  constructor(readonly name: string) {}
}
class Sub {
  constructor(readonly text: string) {}
}

const customTags: ScalarTag[] = [
  { tag: '!ref', identify: (v) => v instanceof Ref, resolve: (str: string) => new Ref(str.trim()) },
  { tag: '!sub', identify: (v) => v instanceof Sub, resolve: (str: string) => new Sub(str) },
];

const ajv = new Ajv({ allErrors: false, strict: false, useDefaults: true });
const validateFile = ajv.compile(serviceFileSchema);
const validators = Object.fromEntries(Object.entries(schemaOfType).map(([t, s]) => [t, ajv.compile(s)])) as Record<ResourceType, ValidateFunction>;
const configurationValidators: Record<Protocol, ValidateFunction> = {
  Modbus: ajv.compile(modbusConfigurationSchema),
  Mqtt: ajv.compile(mqttConfigurationSchema),
  Http: ajv.compile(httpConfigurationSchema),
  Opcua: ajv.compile(opcuaConfigurationSchema),
};
const addressValidators: Partial<Record<Protocol, ValidateFunction>> = {
  Modbus: ajv.compile(modbusAddressSchema),
  Mqtt: ajv.compile(mqttAddressSchema),
  Http: ajv.compile(httpAddressSchema),
  Opcua: ajv.compile(opcuaAddressSchema),
};

function check(validate: ValidateFunction, value: unknown, path: string): void {
  if (validate(value)) return;
  const e = validate.errors?.[0];
  const at = (e ? path + (e.instancePath ? e.instancePath.replaceAll('/', '.') : '') : path).replace(/^\./, '');
  throw new FileError(at, e ? `${e.message ?? 'invalid'}${e.params && 'allowedValues' in e.params ? ` (${(e.params.allowedValues as unknown[]).join(', ')})` : ''}${e.params && 'additionalProperty' in e.params ? ` (${String(e.params.additionalProperty)})` : ''}` : 'invalid');
}

const SERVICE_ID = /^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/;

/** Loads every *.yaml / *.yml file of `dir`. A missing directory means no services. */
export function loadServiceDir(dir: string): { services: ServiceDef[]; problems: ServiceFileProblem[]; missing: boolean } {
  let names: string[];
  try {
    if (!statSync(dir).isDirectory()) return { services: [], problems: [{ file: dir, path: '', reason: 'not a directory' }], missing: false };
    names = readdirSync(dir).filter((n) => /\.ya?ml$/i.test(n)).sort();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { services: [], problems: [], missing: true };
    return { services: [], problems: [{ file: dir, path: '', reason: (err as Error).message }], missing: false };
  }
  const services: ServiceDef[] = [];
  const problems: ServiceFileProblem[] = [];
  const seen = new Set<string>();
  for (const name of names) {
    const file = join(dir, name);
    const id = basename(name, extname(name));
    try {
      if (!SERVICE_ID.test(id)) throw new FileError('', `service id "${id}" (the file name) must match ${SERVICE_ID.source}`);
      if (seen.has(id)) throw new FileError('', `service id "${id}" is used by another file`);
      services.push(parseServiceFile(id, file, readFileSync(file, 'utf8')));
      seen.add(id);
    } catch (err) {
      problems.push({ file, path: err instanceof FileError ? err.path : '', reason: (err as Error).message });
    }
  }
  return { services, problems, missing: false };
}

/** Parses and validates one service file; throws FileError (path, reason). */
export function parseServiceFile(serviceId: string, file: string, text: string): ServiceDef {
  const doc = parseDocument(text, { customTags, prettyErrors: true, uniqueKeys: true });
  if (doc.errors.length) {
    const e = doc.errors[0]!;
    const line = e.linePos?.[0];
    throw new FileError(line ? `line ${line.line}, column ${line.col}` : '', e.message.split('\n')[0]!);
  }
  const raw = doc.toJS({ maxAliasCount: 100 } as never) as unknown;
  check(validateFile, raw, '');
  const body = raw as { description?: string; metadata?: Record<string, unknown>; parameters?: Record<string, { default?: unknown }>; resources: Record<string, { type: ResourceType; properties: Record<string, unknown> }> };
  const params = new Map<string, unknown>();
  for (const [name, p] of Object.entries(body.parameters ?? {})) {
    if (!('default' in p)) throw new FileError(`parameters.${name}`, 'a parameter needs a default');
    if (p.default instanceof Ref || p.default instanceof Sub) throw new FileError(`parameters.${name}.default`, 'tags are not allowed in parameter defaults');
    params.set(name, p.default);
  }
  const resourceNames = new Set(Object.keys(body.resources));
  for (const name of resourceNames) if (params.has(name)) throw new FileError(`resources.${name}`, `"${name}" is both a parameter and a resource`);
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

  const resolved = new Map<string, { type: ResourceType; properties: Record<string, any> }>();
  for (const [name, r] of Object.entries(body.resources)) {
    const path = `resources.${name}.properties`;
    const properties = resolve(r.properties, path) as Record<string, any>;
    check(validators[r.type], properties, path);
    resolved.set(name, { type: r.type, properties });
  }

  const typeOfId = (id: string): ResourceType | undefined => {
    if (!id.startsWith(`${serviceId}.`)) return undefined;
    return resolved.get(id.slice(serviceId.length + 1))?.type;
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
  const endpointTopics = new Map<string, string>();
  // Endpoints first pass: their protocol comes from their connection.
  for (const [name, { type, properties: p }] of resolved) {
    const path = `resources.${name}.properties`;
    const base = { id: idOf(name), serviceId, name };
    switch (type) {
      case 'Connection': {
        check(configurationValidators[p.protocol as Protocol], p.configuration, `${path}.configuration`);
        resources.push({ kind: 'connection', ...base, protocol: p.protocol, configuration: p.configuration, targetState: p.targetState });
        break;
      }
      case 'Endpoint': {
        if (typeOfId(p.connection) !== 'Connection') throw new FileError(`${path}.connection`, `"${p.connection}" is not a Connection of this service (use !ref <name>)`);
        const protocol = resolved.get((p.connection as string).slice(serviceId.length + 1))!.properties.protocol as Protocol;
        const addressValidator = addressValidators[protocol];
        if (addressValidator) check(addressValidator, p.address, `${path}.address`);
        if (protocol === 'Modbus' && p.operation === 'write' && !['holding', 'coil'].includes(p.address.table)) {
          throw new FileError(`${path}.address.table`, 'a write endpoint writes holding registers or coils');
        }
        if (protocol === 'Mqtt' && p.operation === 'write' && /[#+]/.test(p.address.topic)) throw new FileError(`${path}.address.topic`, 'a write endpoint needs a concrete topic');
        if (p.pollIntervalMs !== undefined && (p.operation !== 'read' || protocol === 'Mqtt')) {
          throw new FileError(`${path}.pollIntervalMs`, 'only read endpoints of Modbus, Http and Opcua connections poll');
        }
        if (protocol === 'Opcua' && p.address.samplingIntervalMs !== undefined) {
          if (p.operation !== 'read') throw new FileError(`${path}.address.samplingIntervalMs`, 'only read endpoints subscribe');
          if (p.pollIntervalMs !== undefined) throw new FileError(`${path}.pollIntervalMs`, 'an endpoint either polls (pollIntervalMs) or subscribes (address.samplingIntervalMs)');
        }
        compiles(p.transform, `${path}.transform`);
        compiles(p.filter, `${path}.filter`);
        const topic = (p.topic as string | undefined) ?? `services/${serviceId}/${name}`;
        endpointTopics.set(base.id, topic);
        const def: EndpointDef = { kind: 'endpoint', ...base, connectionId: p.connection, protocol, operation: p.operation, address: p.address, topic, targetState: p.targetState };
        if (p.pollIntervalMs !== undefined) def.pollIntervalMs = p.pollIntervalMs;
        if (p.transform !== undefined) def.transform = p.transform;
        if (p.filter !== undefined) def.filter = p.filter;
        resources.push(def);
        break;
      }
      case 'Server::Opcua':
        resources.push({ kind: 'server', ...base, protocol: 'Opcua', options: p.options ?? {}, targetState: p.targetState });
        break;
      case 'Node::Opcua':
        if (typeOfId(p.server) !== 'Server::Opcua') throw new FileError(`${path}.server`, `"${p.server}" is not a Server::Opcua of this service (use !ref <name>)`);
        (p.nodes as Array<{ transform?: string }>).forEach((n, i) => compiles(n.transform, `${path}.nodes[${i}].transform`));
        resources.push({ kind: 'nodes', ...base, serverId: p.server, nodes: p.nodes, targetState: p.targetState });
        break;
      case 'Mapping':
        break; // below, once every endpoint is known
    }
  }
  for (const [name, { type, properties: p }] of resolved) {
    if (type !== 'Mapping') continue;
    const path = `resources.${name}.properties`;
    const items = p.mappings as MappingItemDef[];
    items.forEach((item, i) => {
      const at = `${path}.mappings[${i}]`;
      if (item.sourceEndpoint !== undefined && !endpointTopics.has(item.sourceEndpoint)) throw new FileError(`${at}.sourceEndpoint`, `"${item.sourceEndpoint}" is not an Endpoint of this service (use !ref <name>)`);
      if (item.targetEndpoint !== undefined) {
        const ep = resources.find((r): r is EndpointDef => r.kind === 'endpoint' && r.id === item.targetEndpoint);
        if (!ep) throw new FileError(`${at}.targetEndpoint`, `"${item.targetEndpoint}" is not an Endpoint of this service (use !ref <name>)`);
        if (ep.operation !== 'write') throw new FileError(`${at}.targetEndpoint`, `"${item.targetEndpoint}" is not a write endpoint`);
      }
      if (item.source !== undefined) {
        const nf = parseNamedFilter(item.source);
        const levels = nf.filter.split('/');
        if (levels.some((l, j) => (l.includes('#') && (l !== '#' || j !== levels.length - 1)) || (l.includes('+') && l !== '+'))) {
          throw new FileError(`${at}.source`, 'not a valid topic filter (+name, + and a final # are the wildcards)');
        }
      }
      if (item.target !== undefined && /[#+]/.test(item.target)) throw new FileError(`${at}.target`, 'a target is a concrete topic ({name} inserts a wildcard value)');
      compiles(item.transform, `${at}.transform`);
      compiles(item.filter, `${at}.filter`);
    });
    resources.push({ kind: 'mapping', id: idOf(name), serviceId, name, mappings: items, targetState: p.targetState });
  }
  const service: ServiceDef = { id: serviceId, file, resources };
  if (body.description !== undefined) service.description = body.description;
  if (body.metadata !== undefined) service.metadata = body.metadata;
  return service;
}
