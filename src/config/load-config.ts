import { readFileSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import type { ValidateFunction } from 'ajv';
import { configSchema, type GatewayConfig } from './config-schema.js';
import { parseAddressRanges } from './address-ranges.js';

/** Exit code for an unusable configuration (sysexits EX_CONFIG); systemd does not restart on it. */
export const CONFIG_EXIT_CODE = 78;

export class ConfigError extends Error {
  readonly key: string;
  constructor(key: string, message: string) {
    super(`invalid configuration: ${key}: ${message}`);
    this.name = 'ConfigError';
    this.key = key;
  }
}

export const defaultConfigPath = fileURLToPath(new URL('../../../config/default.json', import.meta.url));

/** The documented shortcut variables; any other key is reachable as GATEWAYD_SET__SECTION__KEY. */
export const envShortcuts: Record<string, string> = {
  GATEWAYD_DATA_DIR: 'dataDir',
  GATEWAYD_HOST: 'host',
  GATEWAYD_HTTP_PORT: 'http.port',
  GATEWAYD_HTTPS_PORT: 'http.tlsPort',
  GATEWAYD_MQTT_PORT: 'mqtt.port',
  GATEWAYD_MQTTS_PORT: 'mqtt.tlsPort',
  GATEWAYD_LOG_LEVEL: 'log.level',
  GATEWAYD_ADMIN_PASSWORD: 'auth.adminPassword',
};
const genericPrefix = 'GATEWAYD_SET__';

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type JsonObject = { [k: string]: Json };

function isObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function readJson(path: string, key: string): JsonObject {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError(key, `cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new ConfigError(key, `${path} is not valid JSON: ${(err as Error).message}`);
  }
  if (!isObject(parsed)) throw new ConfigError(key, `${path} must hold a JSON object`);
  return parsed;
}

/** Deep merge where objects merge key by key and everything else (arrays included) replaces. */
function merge(base: JsonObject, over: JsonObject): JsonObject {
  const out: JsonObject = { ...base };
  for (const [k, v] of Object.entries(over)) {
    const b = out[k];
    out[k] = isObject(b) && isObject(v) ? merge(b, v) : v;
  }
  return out;
}

interface SchemaNode {
  type?: string;
  enum?: unknown[];
  properties?: Record<string, SchemaNode>;
}

/** Resolves a case-insensitive path (from an environment variable) to the schema's spelling. */
function resolvePath(parts: string[]): { path: string[]; node: SchemaNode } | null {
  let node = configSchema as unknown as SchemaNode;
  const path: string[] = [];
  for (const part of parts) {
    const props = node.properties;
    if (!props) return null;
    const key = Object.keys(props).find((k) => k.toLowerCase() === part.toLowerCase().replace(/_/g, ''));
    if (!key) return null;
    path.push(key);
    node = props[key]!;
  }
  return { path, node };
}

function parseEnvValue(raw: string, node: SchemaNode, key: string): Json {
  switch (node.type) {
    case 'integer':
    case 'number': {
      if (!/^-?\d+(\.\d+)?$/.test(raw.trim())) throw new ConfigError(key, `must be a number, got "${raw}"`);
      return Number(raw);
    }
    case 'boolean':
      if (/^(true|1|yes|on)$/i.test(raw)) return true;
      if (/^(false|0|no|off)$/i.test(raw)) return false;
      throw new ConfigError(key, `must be true or false, got "${raw}"`);
    case 'array':
    case 'object':
      try {
        return JSON.parse(raw) as Json;
      } catch {
        throw new ConfigError(key, `must be JSON, got "${raw}"`);
      }
    default:
      return raw;
  }
}

function setPath(target: JsonObject, path: string[], value: Json): JsonObject {
  const [head, ...rest] = path;
  if (head === undefined) return target;
  const child = target[head];
  return { ...target, [head]: rest.length === 0 ? value : setPath(isObject(child) ? child : {}, rest, value) };
}

function envOverrides(env: NodeJS.ProcessEnv, base: JsonObject): JsonObject {
  let out = base;
  const apply = (envName: string, parts: string[]) => {
    const raw = env[envName];
    if (raw === undefined || raw === '') return;
    const resolved = resolvePath(parts);
    if (!resolved) throw new ConfigError(envName, 'names no configuration key');
    out = setPath(out, resolved.path, parseEnvValue(raw, resolved.node, resolved.path.join('.')));
  };
  for (const [name, path] of Object.entries(envShortcuts)) apply(name, path.split('.'));
  for (const name of Object.keys(env).sort()) {
    if (name.startsWith(genericPrefix)) apply(name, name.slice(genericPrefix.length).split('__'));
  }
  return out;
}

/** The configuration schema's validator, compiled by `npm run build` (scripts/build-openapi.ts) next to this module. */
export const CONFIG_VALIDATOR_FILE = './config-validator.cjs';
const requireHere = createRequire(import.meta.url);

// Loaded when needed and only weakly held: the daemon reads its configuration once, and the
// validator would otherwise stay on the heap for good (docs/footprint.md); tests that load many
// configurations reuse it while it lives.
let validatorRef: WeakRef<ValidateFunction> | undefined;
function configValidator(): ValidateFunction {
  let validate = validatorRef?.deref();
  if (!validate) {
    const file = requireHere.resolve(CONFIG_VALIDATOR_FILE);
    validate = (requireHere(file) as { validateConfig: ValidateFunction }).validateConfig;
    delete requireHere.cache[file];
    validatorRef = new WeakRef(validate);
  }
  return validate;
}

export interface LoadConfigOptions {
  env?: NodeJS.ProcessEnv;
  /** Extra overrides applied after the environment (used by tests and embedders). */
  overrides?: Record<string, unknown>;
  defaultsPath?: string;
  cwd?: string;
}

/**
 * Reads config/default.json, then the file named by GATEWAYD_CONFIG, then the environment,
 * validates the result and resolves paths. Throws ConfigError naming the offending key.
 */
export function loadConfig(options: LoadConfigOptions = {}): GatewayConfig {
  const env = options.env ?? process.env;
  const cwd = options.cwd ?? process.cwd();
  let merged = readJson(options.defaultsPath ?? defaultConfigPath, 'defaults');
  const file = env.GATEWAYD_CONFIG;
  if (file) merged = merge(merged, readJson(resolve(cwd, file), 'GATEWAYD_CONFIG'));
  merged = envOverrides(env, merged);
  if (options.overrides) merged = merge(merged, options.overrides as JsonObject);
  const validate = configValidator();
  if (!validate(merged)) {
    const e = validate.errors![0]!;
    const where = e.instancePath.replace(/^\//, '').replace(/\//g, '.');
    const extra = e.keyword === 'additionalProperties' ? ` "${(e.params as { additionalProperty: string }).additionalProperty}"` : '';
    const allowed = e.keyword === 'enum' ? ` (${(e.params as { allowedValues: unknown[] }).allowedValues.join(', ')})` : '';
    throw new ConfigError(where || '(root)', `${e.message ?? 'is invalid'}${extra}${allowed}`);
  }
  const config = merged as unknown as GatewayConfig;
  if (config.auth.tokenLifetimeHours > config.auth.maxTokenLifetimeHours) {
    throw new ConfigError('auth.tokenLifetimeHours', 'must not exceed auth.maxTokenLifetimeHours');
  }
  if (config.registry.defaultDurationMs > config.registry.maxDurationMs) {
    throw new ConfigError('registry.defaultDurationMs', 'must not exceed registry.maxDurationMs');
  }
  if (!config.http.tlsCertFile !== !config.http.tlsKeyFile) {
    throw new ConfigError(config.http.tlsCertFile ? 'http.tlsKeyFile' : 'http.tlsCertFile', 'http.tlsCertFile and http.tlsKeyFile are set together (or both left empty for the gateway CA\'s certificate)');
  }
  try {
    parseAddressRanges(config.http.plainAllowedFrom);
  } catch (err) {
    throw new ConfigError('http.plainAllowedFrom', (err as Error).message);
  }
  try {
    parseAddressRanges(config.brokerHooks.allowFrom);
  } catch (err) {
    throw new ConfigError('brokerHooks.allowFrom', (err as Error).message);
  }
  const site = config.site;
  if (site.role === 'central' && site.postgres.hosts.length === 0) throw new ConfigError('site.postgres.hosts', 'a central needs the hosts of the site\'s PostgreSQL');
  if (site.role === 'edge' && site.centrals.length === 0) throw new ConfigError('site.centrals', 'an edge needs the URLs of the site\'s centrals');
  if (site.postgres.password && site.postgres.passwordFile) throw new ConfigError('site.postgres.passwordFile', 'set site.postgres.password or site.postgres.passwordFile, not both');
  if (site.joinToken && site.joinTokenFile) throw new ConfigError('site.joinTokenFile', 'set site.joinToken or site.joinTokenFile, not both');
  const abs = (p: string) => (isAbsolute(p) ? p : resolve(cwd, p));
  return {
    ...config,
    dataDir: abs(config.dataDir),
    http: { ...config.http, tlsCertFile: config.http.tlsCertFile && abs(config.http.tlsCertFile), tlsKeyFile: config.http.tlsKeyFile && abs(config.http.tlsKeyFile) },
    // Empty stays empty: <dataDir>/services, decided where the directory is used (src/mapping/service-dir.ts).
    mapping: { ...config.mapping, servicesDir: config.mapping.servicesDir && abs(config.mapping.servicesDir) },
    site: {
      ...site,
      caFile: site.caFile && abs(site.caFile),
      joinTokenFile: site.joinTokenFile && abs(site.joinTokenFile),
      postgres: { ...site.postgres, passwordFile: site.postgres.passwordFile && abs(site.postgres.passwordFile), caFile: site.postgres.caFile && abs(site.postgres.caFile) },
    },
  };
}
