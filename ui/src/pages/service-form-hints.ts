import type { FormHints, ResourceRef } from '../components/schema-form.js';

/** The name a `!ref` value points at. */
const refName = (v: unknown): string | undefined => (v && typeof v === 'object' && typeof (v as { '!ref'?: unknown })['!ref'] === 'string' ? (v as { '!ref': string })['!ref'] : undefined);

/** The protocol of the connection an endpoint names. */
function protocolOf(connection: unknown, resources: ResourceRef[]): unknown {
  const name = refName(connection);
  return resources.find((r) => r.name === name && r.type === 'Connection')?.properties.protocol;
}

/**
 * What the resource schemas cannot say (schema-form.tsx): which type of resource a `!ref`
 * property names, the names of the definitions a connection's settings follow, and which of a
 * resource's fields apply. A type without an entry (a bridge, a Sparkplug node) still gets its
 * form from its schema; its `!ref` properties (described "!ref <name>") then offer every
 * resource of the service. Sparkplug's metric endpoints are named here; its `via` (text or
 * upstream settings) is a oneOf the form offers as a choice of shapes.
 *
 * Fields: every type folds its description and target state under "More settings"; an
 * endpoint folds its filter and transform there too (they apply to writes as well, but are
 * rarely set). The QoS and retain flag of a read endpoint's readings stay in view (how a
 * subscriber gets the values is decided here, and the service page shows it). No poll interval
 * where none is taken — a write endpoint, or one on an MQTT connection (it relays what the
 * broker pushes) — nor, on a write endpoint, the readings' QoS and retain flag.
 */
export const serviceFormHints: FormHints = {
  refTypes: { connection: 'Connection', server: 'Server::Opcua', sourceEndpoint: 'Endpoint', targetEndpoint: 'Endpoint', endpoint: 'Endpoint', writeEndpoint: 'Endpoint' },
  definitionLabels: {
    Connection: { Modbus: 'Modbus TCP', ModbusRtu: 'Modbus RTU (serial line)', Mqtt: 'MQTT broker', Http: 'HTTP server', Opcua: 'OPC UA server', EtherNetIp: 'EtherNet/IP (Logix controller)', S7: 'Siemens S7 CPU' },
    Endpoint: { Modbus: 'Modbus register or bit', Mqtt: 'MQTT topic', Http: 'HTTP path', Opcua: 'OPC UA node', EtherNetIp: 'Logix tag', S7: 'S7 address (DB, I, Q, M)' },
  },
  fieldRules: {
    '*': { folded: ['description', 'targetState'] },
    Endpoint: {
      folded: ['filter', 'transform'],
      hidden: (value, resources) => (value.operation === 'write' ? ['pollIntervalMs', 'qos', 'retain'] : protocolOf(value.connection, resources) === 'Mqtt' ? ['pollIntervalMs'] : []),
    },
  },
};
