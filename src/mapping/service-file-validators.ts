// The validators of service files: every schema a file is checked against, compiled by
// `npm run build` into standalone code next to this module (scripts/build-openapi.ts) and loaded
// by the first service file read, so that neither a start nor a read compiles a schema.
import { createRequire } from 'node:module';
import type { ValidateFunction } from 'ajv';
import { etherNetIpAddressSchema, etherNetIpConfigurationSchema } from './drivers/ethernet-ip-schemas.js';
import { s7AddressSchema, s7ConfigurationSchema } from './drivers/s7-schemas.js';
import {
  httpAddressSchema,
  httpConfigurationSchema,
  modbusAddressSchema,
  modbusConfigurationSchema,
  modbusRtuConfigurationSchema,
  mqttAddressSchema,
  mqttConfigurationSchema,
  opcuaAddressSchema,
  opcuaConfigurationSchema,
  schemaOfType,
  serviceFileSchema,
  type ResourceType,
} from './schemas.js';

export type Protocol = 'Modbus' | 'Mqtt' | 'Http' | 'Opcua' | 'EtherNetIp' | 'S7';

/** Written by the build: one export per name of serviceFileSchemas(). */
export const SERVICE_VALIDATORS_FILE = './service-file-validators.cjs';
/** Options of the compiled validators: every problem of a file at once (the API's dry run, the log), defaults filled in. */
export const SERVICE_VALIDATOR_OPTIONS = { allErrors: true, strict: false, useDefaults: true } as const;

const configurationSchemas: Record<Protocol, object> = {
  Modbus: modbusConfigurationSchema,
  Mqtt: mqttConfigurationSchema,
  Http: httpConfigurationSchema,
  Opcua: opcuaConfigurationSchema,
  EtherNetIp: etherNetIpConfigurationSchema,
  S7: s7ConfigurationSchema,
};
const addressSchemas: Partial<Record<Protocol, object>> = {
  Modbus: modbusAddressSchema,
  Mqtt: mqttAddressSchema,
  Http: httpAddressSchema,
  Opcua: opcuaAddressSchema,
  EtherNetIp: etherNetIpAddressSchema,
  S7: s7AddressSchema,
};

/** A JavaScript identifier for a validator ('Server::Opcua' → resource_Server__Opcua). */
const nameOf = (group: string, key: string) => `${group}_${key.replace(/[^A-Za-z0-9_]/g, '_')}`;

/** Every schema by the name of its compiled validator (what the build compiles). */
export function serviceFileSchemas(): Record<string, object> {
  return {
    file: serviceFileSchema,
    modbusRtu: modbusRtuConfigurationSchema,
    ...Object.fromEntries(Object.entries(schemaOfType).map(([type, schema]) => [nameOf('resource', type), schema])),
    ...Object.fromEntries(Object.entries(configurationSchemas).map(([protocol, schema]) => [nameOf('configuration', protocol), schema])),
    ...Object.fromEntries(Object.entries(addressSchemas).map(([protocol, schema]) => [nameOf('address', protocol), schema])),
  };
}

export interface ServiceValidators {
  file: ValidateFunction;
  resources: Record<ResourceType, ValidateFunction>;
  modbusRtu: ValidateFunction;
  configuration: Record<Protocol, ValidateFunction>;
  address: Partial<Record<Protocol, ValidateFunction>>;
}

const requireHere = createRequire(import.meta.url);
let loaded: ServiceValidators | undefined;

/** The build's validators, loaded at the first call. */
export function serviceValidators(): ServiceValidators {
  if (loaded) return loaded;
  let compiled: Record<string, ValidateFunction>;
  try {
    compiled = requireHere(SERVICE_VALIDATORS_FILE) as Record<string, ValidateFunction>;
  } catch (err) {
    throw new Error(`the service file validators are missing (${(err as Error).message}): run npm run build`);
  }
  const pick = (name: string): ValidateFunction => {
    if (typeof compiled[name] !== 'function') throw new Error(`no service file validator ${name}: run npm run build`);
    return compiled[name];
  };
  loaded = {
    file: pick('file'),
    modbusRtu: pick('modbusRtu'),
    resources: Object.fromEntries(Object.keys(schemaOfType).map((type) => [type, pick(nameOf('resource', type))])) as Record<ResourceType, ValidateFunction>,
    configuration: Object.fromEntries(Object.keys(configurationSchemas).map((p) => [p, pick(nameOf('configuration', p))])) as Record<Protocol, ValidateFunction>,
    address: Object.fromEntries(Object.keys(addressSchemas).map((p) => [p, pick(nameOf('address', p))])) as Partial<Record<Protocol, ValidateFunction>>,
  };
  return loaded;
}
