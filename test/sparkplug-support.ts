// Shared by the Sparkplug tests: a press as a Sparkplug device (a Modbus peer of the test kit,
// its endpoints and an edge node) and what an edge node's user may do.
export const GROUP = 'site-a';

export interface PressOptions {
  edgeNodeId?: string;
  runAs?: string;
  primaryHostId?: string;
  /** A third metric, raw, on the setpoint register. */
  extraMetric?: boolean;
  /** `via` as written in YAML (default local). */
  via?: string;
  keepaliveSeconds?: number;
  /** More resources of the service (YAML lines of the resources map, indented by two). */
  resources?: string;
}

/** A press: temperature (holding 5, tenths of a degree) read every 40 ms, a setpoint (holding 10) read and written. */
export function pressService(modbusPort: number, options: PressOptions = {}): string {
  return `description: press 7 as a Sparkplug device
resources:
  plc:
    type: Connection
    properties: {protocol: Modbus, configuration: {host: 127.0.0.1, port: ${modbusPort}, timeoutMs: 500}}
  temperature:
    type: Endpoint
    properties: {connection: !ref plc, operation: read, address: {table: holding, address: 5}, pollIntervalMs: 40, transform: "$[0] / 10"}
  setpointNow:
    type: Endpoint
    properties: {connection: !ref plc, operation: read, address: {table: holding, address: 10}, pollIntervalMs: 40, transform: "$[0]"}
  setpoint:
    type: Endpoint
    properties: {connection: !ref plc, operation: write, address: {table: holding, address: 10}}
${options.resources ?? ''}  edge:
    type: Sparkplug
    properties:
      groupId: ${GROUP}
      edgeNodeId: ${options.edgeNodeId ?? 'gw1'}
      runAs: ${options.runAs ?? 'edge-gw1'}
      via: ${options.via ?? 'local'}
      birthWaitMs: 2000
${options.keepaliveSeconds ? `      keepaliveSeconds: ${options.keepaliveSeconds}\n` : ''}${options.primaryHostId ? `      primaryHostId: ${options.primaryHostId}\n` : ''}      devices:
        - deviceId: press-7
          metrics:
            - {name: temperature, endpoint: !ref temperature, datatype: Float}
            - {name: setpoint, endpoint: !ref setpointNow, writeEndpoint: !ref setpoint, datatype: Int32, writable: true}
${options.extraMetric ? '            - {name: raw, endpoint: !ref setpointNow, datatype: UInt16}\n' : ''}`;
}

/** What an edge node's user may do: publish and subscribe its own Sparkplug topics, write the endpoints. */
export const edgePermissions = (node: string, writeEndpoints = true) => [
  { context: 'mqtt' as const, operation: 'readWrite' as const, resource: `spBv1.0/${GROUP}/+/${node}/#` },
  { context: 'mqtt' as const, operation: 'read' as const, resource: 'spBv1.0/STATE/+' },
  ...(writeEndpoints ? [{ context: 'mqtt' as const, operation: 'write' as const, resource: 'services/#' }] : []),
];
