import type { FormHints } from '../components/schema-form.js';

/**
 * What the resource schemas cannot say (schema-form.tsx): which type of resource a `!ref`
 * property names, and the names of the definitions a connection's settings follow. A type
 * without an entry (a bridge, a Sparkplug node) still gets its form from its schema; its
 * `!ref` properties (described "!ref <name>") then offer every resource of the service.
 * Sparkplug's metric endpoints are named here; its `via` (text or upstream settings) is a
 * oneOf the form offers as a choice of shapes.
 */
export const serviceFormHints: FormHints = {
  refTypes: { connection: 'Connection', server: 'Server::Opcua', sourceEndpoint: 'Endpoint', targetEndpoint: 'Endpoint', endpoint: 'Endpoint', writeEndpoint: 'Endpoint' },
  definitionLabels: {
    Connection: { Modbus: 'Modbus TCP', ModbusRtu: 'Modbus RTU (serial line)', Mqtt: 'MQTT broker', Http: 'HTTP server', Opcua: 'OPC UA server', EtherNetIp: 'EtherNet/IP (Logix controller)', S7: 'Siemens S7 CPU' },
    Endpoint: { Modbus: 'Modbus register or bit', Mqtt: 'MQTT topic', Http: 'HTTP path', Opcua: 'OPC UA node', EtherNetIp: 'Logix tag', S7: 'S7 address (DB, I, Q, M)' },
  },
};
