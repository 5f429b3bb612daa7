// JSON Schemas of the resource definitions in service files (docs/design.md §11). They validate each
// resource's `properties` and are what GET /api/{connections,endpoints,mappings,servers}/schema
// answer; Sparkplug edge nodes (docs/design.md §14) have theirs here too. The Bridge schema lives with
// the bridges' engine (src/bridges).

import { bridgeSchema } from '../bridges/bridge-definition.js';
import { etherNetIpAddressSchema, etherNetIpConfigurationSchema } from './drivers/ethernet-ip-schemas.js';
import { s7AddressSchema, s7ConfigurationSchema } from './drivers/s7-schemas.js';
import { SPARKPLUG_DATATYPES, SPARKPLUG_HISTORY_DEFAULTS, SPARKPLUG_ID_PATTERN } from './sparkplug-file.js';

type Schema = Record<string, unknown>;

const rule: Schema = { type: 'string', minLength: 1, maxLength: 65536, description: 'JSONata expression; `$` is the payload, `$context` is {topic, vars, label}.' };
const topic: Schema = { type: 'string', minLength: 1, maxLength: 1024, pattern: '^[^#+$][^#+]*$', description: 'A concrete broker topic (no wildcards, not a $ topic).' };
const connectionTarget: Schema = { type: 'string', enum: ['connected', 'disconnected'], default: 'connected' };
const enableTarget: Schema = { type: 'string', enum: ['enabled', 'disabled'], default: 'enabled' };
const description: Schema = { type: 'string', maxLength: 4096 };
// Without `default`: the validator would write it into every definition (and the mapping views).
const publishQos = (what: string): Schema => ({ title: 'QoS', type: 'integer', enum: [0, 1, 2], description: `${what}: 0 (default), 1 or 2.` });
const publishRetain = (what: string): Schema => ({ title: 'Retain', type: 'boolean', description: `${what}; default false.` });

export const modbusConfigurationSchema: Schema = {
  type: 'object',
  additionalProperties: false,
  required: ['host'],
  properties: {
    host: { title: 'Host', type: 'string', minLength: 1, maxLength: 255 },
    port: { title: 'Port', type: 'integer', minimum: 1, maximum: 65535, default: 502 },
    unitId: { title: 'Unit ID', type: 'integer', minimum: 0, maximum: 255, default: 1 },
    timeoutMs: { title: 'Timeout (ms)', type: 'integer', minimum: 10, maximum: 60000, default: 2000 },
  },
};
export const modbusRtuConfigurationSchema: Schema = {
  type: 'object',
  additionalProperties: false,
  required: ['path'],
  description: 'Modbus RTU over a serial line (RS-485/RS-232). Connections naming the same path share the line: its settings must agree; one request at a time per line.',
  properties: {
    path: { title: 'Serial device', type: 'string', minLength: 1, maxLength: 1024, pattern: '^/', description: 'The serial device, e.g. /dev/ttyUSB0 or /dev/ttyAMA0.' },
    baudRate: { title: 'Baud rate', type: 'integer', enum: [1200, 2400, 4800, 9600, 19200, 38400, 57600, 115200, 230400], default: 9600 },
    parity: { title: 'Parity', type: 'string', enum: ['none', 'even', 'odd'], default: 'even', description: 'Modbus over serial line: even by default.' },
    dataBits: { title: 'Data bits', type: 'integer', enum: [7, 8], default: 8 },
    stopBits: { title: 'Stop bits', type: 'integer', enum: [1, 2], default: 1 },
    unitId: { title: 'Unit ID', type: 'integer', minimum: 1, maximum: 247, default: 1, description: 'The slave address of the device on the line.' },
    timeoutMs: { title: 'Timeout (ms)', type: 'integer', minimum: 10, maximum: 60000, default: 1000, description: 'How long to wait for an answer.' },
  },
};
export const mqttConfigurationSchema: Schema = {
  type: 'object',
  additionalProperties: false,
  required: ['url'],
  properties: {
    url: { title: 'URL', type: 'string', pattern: '^(mqtts?|wss?|tcp)://', maxLength: 2048 },
    clientId: { title: 'Client ID', type: 'string', maxLength: 256 },
    username: { title: 'Username', type: 'string', maxLength: 256 },
    password: { title: 'Password', type: 'string', maxLength: 1024, description: 'Never returned by the API.' },
    timeoutMs: { title: 'Timeout (ms)', type: 'integer', minimum: 10, maximum: 60000, default: 5000 },
  },
};
export const httpConfigurationSchema: Schema = {
  type: 'object',
  additionalProperties: false,
  required: ['baseUrl'],
  properties: {
    baseUrl: { title: 'Base URL', type: 'string', pattern: '^https?://', maxLength: 2048 },
    headers: { title: 'HTTP headers', type: 'object', additionalProperties: { type: 'string', maxLength: 4096 }, description: 'Sent with every request; never returned by the API.' },
    timeoutMs: { title: 'Timeout (ms)', type: 'integer', minimum: 10, maximum: 60000, default: 5000 },
  },
};
export const opcuaConfigurationSchema: Schema = {
  type: 'object',
  additionalProperties: false,
  required: ['endpointUrl'],
  properties: {
    endpointUrl: { title: 'Endpoint URL', type: 'string', pattern: '^opc\\.tcp://', maxLength: 2048 },
    securityMode: { title: 'Security mode', type: 'string', enum: ['None', 'Sign', 'SignAndEncrypt'], default: 'None' },
    securityPolicy: { title: 'Security policy', type: 'string', enum: ['None', 'Basic256Sha256'], default: 'None', description: 'Basic256Sha256 with Sign or SignAndEncrypt.' },
    username: { title: 'Username', type: 'string', maxLength: 256 },
    password: { title: 'Password', type: 'string', maxLength: 1024, description: 'Never returned by the API.' },
    acceptUnknownServerCertificate: {
      title: 'Accept an unknown server certificate',
      type: 'boolean',
      default: false,
      description: 'Sign/SignAndEncrypt: trust a server certificate seen for the first time (store <opcuaPkiDir>/client-accept); otherwise it must be in <opcuaPkiDir>/client/trusted/certs.',
    },
    timeoutMs: { title: 'Timeout (ms)', type: 'integer', minimum: 10, maximum: 60000, default: 5000 },
  },
};
export const connectionSchema: Schema = {
  $schema: 'http://json-schema.org/draft-07/schema#',
  title: 'Connection',
  type: 'object',
  additionalProperties: false,
  required: ['protocol', 'configuration'],
  properties: {
    description: { ...description, title: 'Description' },
    protocol: { title: 'Protocol', type: 'string', enum: ['Modbus', 'Mqtt', 'Http', 'Opcua', 'EtherNetIp', 'S7'] },
    targetState: { ...connectionTarget, title: 'Target state' },
    configuration: { title: 'Connection settings', type: 'object', description: 'Protocol settings: see the definitions (Modbus: Modbus TCP {host} or ModbusRtu {path}; Mqtt, Http, Opcua, EtherNetIp, S7).' },
  },
  definitions: { Modbus: modbusConfigurationSchema, ModbusRtu: modbusRtuConfigurationSchema, Mqtt: mqttConfigurationSchema, Http: httpConfigurationSchema, Opcua: opcuaConfigurationSchema, EtherNetIp: etherNetIpConfigurationSchema, S7: s7ConfigurationSchema },
};

export const modbusAddressSchema: Schema = {
  type: 'object',
  additionalProperties: false,
  required: ['table', 'address'],
  properties: {
    table: { title: 'Table', type: 'string', enum: ['holding', 'input', 'coil', 'discrete'], description: 'write endpoints: holding or coil.' },
    address: { title: 'Address', type: 'integer', minimum: 0, maximum: 65535 },
    quantity: { title: 'Quantity', type: 'integer', minimum: 1, maximum: 125, default: 1 },
  },
};
export const mqttAddressSchema: Schema = {
  type: 'object',
  additionalProperties: false,
  required: ['topic'],
  properties: {
    topic: { title: 'Topic on the external broker', type: 'string', minLength: 1, maxLength: 1024, description: 'Topic on the external broker (read: a filter, write: a concrete topic).' },
    qos: { title: 'QoS', type: 'integer', enum: [0, 1], default: 0 },
  },
};
export const opcuaAddressSchema: Schema = {
  type: 'object',
  additionalProperties: false,
  required: ['nodeId'],
  properties: {
    nodeId: { title: 'Node ID', type: 'string', minLength: 1, maxLength: 4096, description: 'e.g. ns=1;s=Temperature or ns=2;i=42.' },
    samplingIntervalMs: { title: 'Sampling interval (ms)', type: 'integer', minimum: 0, maximum: 86_400_000, description: 'read endpoints: subscribe (a monitored item) instead of polling.' },
  },
};
export const httpAddressSchema: Schema = {
  type: 'object',
  additionalProperties: false,
  required: ['path'],
  properties: {
    path: { title: 'Path', type: 'string', pattern: '^/', maxLength: 2048, description: 'Appended to the connection baseUrl. read: GET; write: POST of the JSON value.' },
  },
};

export const endpointSchema: Schema = {
  $schema: 'http://json-schema.org/draft-07/schema#',
  title: 'Endpoint',
  type: 'object',
  additionalProperties: false,
  required: ['connection', 'operation', 'address'],
  properties: {
    description: { ...description, title: 'Description' },
    connection: { title: 'Connection', type: 'string', minLength: 1, description: 'The connection: !ref <resourceName>.' },
    operation: { title: 'Operation', type: 'string', enum: ['read', 'write'] },
    address: { title: 'Address', type: 'object', description: 'Protocol address: see the definitions (Modbus, Mqtt, Http, Opcua, EtherNetIp, S7).' },
    topic: { title: 'Broker topic', ...topic, description: 'Broker topic; default services/<serviceId>/<resourceName>.' },
    pollIntervalMs: { title: 'Poll interval (ms)', type: 'integer', minimum: 10, maximum: 86_400_000, description: 'read endpoints of Modbus, Http, Opcua, EtherNetIp and S7: publish a reading at this interval.' },
    qos: publishQos('read endpoints: the QoS of the readings on the topic'),
    retain: publishRetain('read endpoints: readings are retained (a subscriber that comes later gets the last one at once)'),
    transform: { ...rule, title: 'Transform (JSONata)' },
    filter: { ...rule, title: 'Filter (JSONata)' },
    targetState: { ...enableTarget, title: 'Target state' },
  },
  definitions: { Modbus: modbusAddressSchema, Mqtt: mqttAddressSchema, Http: httpAddressSchema, Opcua: opcuaAddressSchema, EtherNetIp: etherNetIpAddressSchema, S7: s7AddressSchema },
};

export const mappingItemSchema: Schema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    label: { title: 'Label', type: 'string', maxLength: 256 },
    source: { title: 'Source topic', type: 'string', minLength: 1, maxLength: 1024, description: 'Broker topic filter; `+name` is a named wildcard filling $context.vars.name.' },
    sourceEndpoint: { title: 'Source endpoint', type: 'string', minLength: 1, description: 'Instead of source: an endpoint (!ref) whose topic is the source.' },
    target: { title: 'Target topic', type: 'string', minLength: 1, maxLength: 1024, description: 'Broker topic; `{name}` is replaced by a named wildcard value.' },
    targetEndpoint: { title: 'Target endpoint', type: 'string', minLength: 1, description: 'Instead of target: a write endpoint (!ref); the result goes to its <topic>/set.' },
    qos: publishQos('the QoS of what the item publishes'),
    retain: publishRetain('what the item publishes to its target is retained (not for a targetEndpoint: a retained write would be written again)'),
    transform: { ...rule, title: 'Transform (JSONata)' },
    filter: { ...rule, title: 'Filter (JSONata)' },
  },
  oneOf: [{ required: ['source'] }, { required: ['sourceEndpoint'] }],
  anyOf: [{ required: ['target'] }, { required: ['targetEndpoint'] }],
};

export const mappingSchema: Schema = {
  $schema: 'http://json-schema.org/draft-07/schema#',
  title: 'Mapping',
  type: 'object',
  additionalProperties: false,
  required: ['mappings'],
  properties: {
    description: { ...description, title: 'Description' },
    mappings: { title: 'Routes', type: 'array', minItems: 1, maxItems: 1000, items: mappingItemSchema },
    targetState: { ...enableTarget, title: 'Target state' },
  },
};

export const serverOptionsSchema: Schema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    port: { title: 'Port', type: 'integer', minimum: 0, maximum: 65535, description: 'Default 4840; 0: any free port.' },
    hostname: { title: 'Host name', type: 'string', minLength: 1, maxLength: 255, description: 'Bind address; default the gateway\'s host setting.' },
    resourcePath: { title: 'Resource path', type: 'string', maxLength: 256, pattern: '^(/[A-Za-z0-9._~-]+)*$', description: 'e.g. /UA/gatewayd' },
    allowAnonymous: { title: 'Allow anonymous sessions', type: 'boolean', description: 'Default false. Anonymous sessions read and write every node. Otherwise gatewayd users log in (username and password) and need mqtt read/write permission on the node topics.' },
    securityModes: { title: 'Security modes', type: 'array', items: { type: 'string', enum: ['None', 'Sign', 'SignAndEncrypt'] }, minItems: 1, uniqueItems: true, description: "Default ['None', 'SignAndEncrypt'] (SignAndEncrypt with Basic256Sha256)." },
    acceptUnknownClientCertificates: { title: 'Accept unknown client certificates', type: 'boolean', description: 'Default false. Sign/SignAndEncrypt: trust a client certificate seen for the first time (store <opcuaPkiDir>/server-accept); otherwise it must be in <opcuaPkiDir>/server/trusted/certs.' },
    maxSessions: { title: 'Sessions at most', type: 'integer', minimum: 1, maximum: 1000, description: 'Default 20.' },
  },
};

export const serverSchema: Schema = {
  $schema: 'http://json-schema.org/draft-07/schema#',
  title: 'Server::Opcua',
  type: 'object',
  additionalProperties: false,
  properties: {
    description: { ...description, title: 'Description' },
    options: { title: 'Server options', ...serverOptionsSchema, description: 'OPC UA server options.' },
    targetState: { ...enableTarget, title: 'Target state' },
  },
};

export const nodeItemSchema: Schema = {
  type: 'object',
  additionalProperties: false,
  required: ['topic'],
  properties: {
    browseName: { title: 'Browse name', type: 'string', minLength: 1, maxLength: 256, description: 'Default: the nodeId\'s identifier, else the topic.' },
    nodeId: { title: 'Node ID', type: 'string', minLength: 1, maxLength: 4096, description: 'Default: ns=1;s=<topic>.' },
    dataType: { title: 'Data type', type: 'string', enum: ['Boolean', 'SByte', 'Byte', 'Int16', 'UInt16', 'Int32', 'UInt32', 'Int64', 'UInt64', 'Float', 'Double', 'String', 'DateTime', 'Variant'], description: 'Default Variant (the type follows the JSON value).' },
    topic: { ...topic, title: 'Topic' },
    access: { title: 'Access', type: 'string', enum: ['read', 'write', 'readWrite'], description: 'Default read.' },
    transform: { ...rule, title: 'Transform (JSONata)' },
    setTopic: { title: 'Set topic', ...topic, description: 'Where OPC UA writes are published; default <topic>/set.' },
  },
};

export const nodeSchema: Schema = {
  $schema: 'http://json-schema.org/draft-07/schema#',
  title: 'Node::Opcua',
  type: 'object',
  additionalProperties: false,
  required: ['server', 'nodes'],
  properties: {
    description: { ...description, title: 'Description' },
    server: { title: 'Server', type: 'string', minLength: 1, description: 'The Server::Opcua resource: !ref <resourceName>.' },
    nodes: { title: 'Nodes', type: 'array', maxItems: 10000, items: nodeItemSchema },
    targetState: { ...enableTarget, title: 'Target state' },
  },
};

const sparkplugId = (what: string): Schema => ({ type: 'string', minLength: 1, maxLength: 128, pattern: SPARKPLUG_ID_PATTERN, description: `${what}: UTF-8 without + / # (Sparkplug 3.0).` });

export const sparkplugMetricSchema: Schema = {
  type: 'object',
  additionalProperties: false,
  required: ['name', 'endpoint', 'datatype'],
  properties: {
    name: { title: 'Metric name', type: 'string', minLength: 1, maxLength: 256, description: 'The metric name the host sees (unique in its device, ignoring case).' },
    endpoint: { title: 'Endpoint', type: 'string', minLength: 1, description: 'A read endpoint (!ref): its readings, after its transform, are the value. Or a write endpoint: the value is what was last written.' },
    writeEndpoint: { title: 'Write endpoint', type: 'string', minLength: 1, description: 'writable metrics fed by a read endpoint: the write endpoint (!ref) a DCMD writes through.' },
    datatype: { title: 'Data type', type: 'string', enum: SPARKPLUG_DATATYPES, description: 'Sparkplug B datatype of the metric.' },
    writable: { title: 'Writable', type: 'boolean', default: false, description: 'A DCMD on this metric writes through the write endpoint (endpoint or writeEndpoint).' },
  },
};

export const sparkplugRemoteSchema: Schema = {
  type: 'object',
  additionalProperties: false,
  required: ['urls'],
  description: 'An upstream MQTT broker of the Sparkplug host: its ACL decides who may send NCMD/DCMD there.',
  properties: {
    urls: { title: 'Broker URLs', type: 'array', minItems: 1, maxItems: 16, items: { type: 'string', pattern: '^(mqtts?|wss?|tcp)://', maxLength: 2048 }, description: 'Tried in order (the next one after a failure, or when the primary host is offline there).' },
    username: { title: 'Username', type: 'string', maxLength: 256 },
    password: { title: 'Password', type: 'string', maxLength: 1024, description: 'Never returned by the API.' },
    caFile: { title: 'CA certificates file', type: 'string', minLength: 1, maxLength: 1024, description: 'PEM CA certificates for mqtts/wss (a path, relative to the data directory).' },
    certFile: { title: 'Client certificate file', type: 'string', minLength: 1, maxLength: 1024, description: 'PEM client certificate for mutual TLS.' },
    keyFile: { title: 'Client key file', type: 'string', minLength: 1, maxLength: 1024, description: 'PEM private key of certFile.' },
  },
};

export const sparkplugSchema: Schema = {
  $schema: 'http://json-schema.org/draft-07/schema#',
  title: 'Sparkplug',
  type: 'object',
  additionalProperties: false,
  required: ['groupId', 'edgeNodeId', 'runAs', 'devices'],
  properties: {
    description: { ...description, title: 'Description' },
    groupId: { ...sparkplugId('Sparkplug group id'), title: 'Group ID' },
    edgeNodeId: { ...sparkplugId('Edge node id'), title: 'Edge node ID' },
    primaryHostId: { ...sparkplugId('Births wait for spBv1.0/STATE/<primaryHostId> online'), title: 'Primary host ID' },
    via: {
      title: 'Via',
      description: '"local" (the embedded broker, default), an upstream broker {urls, ...}, or !ref <Bridge>.',
      default: 'local',
      oneOf: [{ type: 'string', minLength: 1 }, sparkplugRemoteSchema],
    },
    runAs: { title: 'Run as (user)', type: 'string', minLength: 1, maxLength: 256, description: 'The gatewayd user the edge node publishes and writes as.' },
    clientId: { title: 'Client ID', type: 'string', minLength: 1, maxLength: 256, description: 'MQTT client id; default gatewayd-<groupId>-<edgeNodeId>.' },
    protocolVersion: { title: 'MQTT version', type: 'integer', enum: [4, 5], default: 4, description: 'MQTT 3.1.1 (4) or 5.' },
    keepaliveSeconds: { title: 'Keepalive (s)', type: 'integer', minimum: 5, maximum: 3600, default: 30, description: 'How soon the broker notices a dead gateway and sends the NDEATH (1.5 times this).' },
    birthWaitMs: { title: 'Birth wait (ms)', type: 'integer', minimum: 0, maximum: 600_000, default: 5000, description: 'A device that comes up waits at most this long for fresh readings before its DBIRTH.' },
    aggregateMs: { title: 'Gather changes for (ms)', type: 'integer', minimum: 0, maximum: 60_000, default: 0, description: 'A DDATA gathers the changes of its device for this long (0: the changes of the same I/O turn). Fewer, larger messages for the host, later by at most this.' },
    maxMessagesPerSecond: {
      title: 'Messages per second at most',
      type: 'integer',
      minimum: 1,
      maximum: 1_000_000,
      default: 500,
      description: "At most this many DDATA per second (a burst of one second's worth); beyond it changes wait and are gathered, the latest value of each metric kept. Keep it under the broker's limit per client (the embedded broker's mqtt.maxPublishesPerSecond).",
    },
    commandTimeoutMs: { title: 'Command timeout (ms)', type: 'integer', minimum: 100, maximum: 600_000, default: 10_000, description: 'How long a DCMD write waits for the endpoint\'s acknowledgement.' },
    datatypeInData: {
      title: 'Datatype in DDATA',
      type: 'boolean',
      default: true,
      description: 'DDATA metrics carry their datatype, as Eclipse Tahu\'s encoder does (its decoder, and Node-RED nodes built on it, read a metric without one as null). false: only alias, value and timestamp, as Sparkplug 3.0 recommends (Ignition reads either).',
    },
    history: {
      title: 'History (store and forward)',
      type: 'object',
      additionalProperties: false,
      default: {},
      description: 'Values read while the node is not born (primary host offline, broker unreachable, link cut) are kept and published after the next births as historical metrics (is_historical), in order, before live values resume. Beyond a bound the oldest go first.',
      properties: {
        enabled: { title: 'Keep values', type: 'boolean', default: SPARKPLUG_HISTORY_DEFAULTS.enabled, description: 'false: nothing is kept (what was kept before is still delivered).' },
        maxValues: { title: 'Values at most', type: 'integer', minimum: 1, maximum: 100_000_000, default: SPARKPLUG_HISTORY_DEFAULTS.maxValues, description: 'Values kept at most (about 50 bytes each on flash).' },
        maxAgeSeconds: { title: 'Age at most (s)', type: 'integer', minimum: 0, maximum: 315_360_000, default: SPARKPLUG_HISTORY_DEFAULTS.maxAgeSeconds, description: 'Values older than this are dropped; 0: no age limit.' },
        durability: {
          title: 'Durability',
          type: 'string',
          enum: ['prompt', 'background'],
          default: SPARKPLUG_HISTORY_DEFAULTS.durability,
          description: 'When kept values reach the flash, i.e. what a kill -9 or a power cut can cost of them: background (default) within storage.backgroundCommitMs, in few commits (about 90 bytes written per value; an outage shorter than that writes nothing); prompt within storage.commitIntervalMs, about 7 times the bytes (docs/sparkplug.md).',
        },
      },
    },
    devices: {
      title: 'Devices',
      type: 'array',
      minItems: 1,
      maxItems: 1000,
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['deviceId', 'metrics'],
        properties: { deviceId: { ...sparkplugId('Device id'), title: 'Device ID' }, metrics: { title: 'Metrics', type: 'array', minItems: 1, maxItems: 10_000, items: sparkplugMetricSchema } },
      },
    },
    targetState: { ...enableTarget, title: 'Target state' },
  },
};

export type ResourceType = 'Connection' | 'Endpoint' | 'Mapping' | 'Server::Opcua' | 'Node::Opcua' | 'Sparkplug' | 'Bridge';
export const resourceTypes: readonly ResourceType[] = ['Connection', 'Endpoint', 'Mapping', 'Server::Opcua', 'Node::Opcua', 'Sparkplug', 'Bridge'];

export const schemaOfType: Record<ResourceType, Schema> = {
  Connection: connectionSchema,
  Endpoint: endpointSchema,
  Mapping: mappingSchema,
  'Server::Opcua': serverSchema,
  'Node::Opcua': nodeSchema,
  Sparkplug: sparkplugSchema,
  Bridge: bridgeSchema,
};

export const serviceFileSchema: Schema = {
  type: 'object',
  additionalProperties: false,
  required: ['resources'],
  properties: {
    description: { title: 'Description', type: 'string' },
    metadata: { type: 'object' },
    parameters: {
      type: 'object',
      propertyNames: { pattern: '^[A-Za-z][A-Za-z0-9_]*$' },
      additionalProperties: {
        type: 'object',
        properties: { type: { type: 'string' }, default: {}, description: { type: 'string' } },
      },
    },
    resources: {
      type: 'object',
      propertyNames: { pattern: '^[A-Za-z][A-Za-z0-9_-]*$', maxLength: 128 },
      additionalProperties: {
        type: 'object',
        additionalProperties: false,
        required: ['type', 'properties'],
        properties: { type: { type: 'string', enum: resourceTypes as unknown as string[] }, properties: { type: 'object' } },
      },
    },
  },
};
