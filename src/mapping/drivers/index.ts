// Which driver runs a connection, by protocol: the one place that changes when a protocol is
// added. Modbus RTU connections of one runtime share its serial lines; OPC UA needs the
// runtime's OPC UA support, which comes with the first service that declares it.
import type { Logger } from '../../log/index.js';
import type { ConnectionDef } from '../service-files.js';
import { createEtherNetIpDriver, type EtherNetIpConfiguration } from './ethernet-ip.js';
import { createHttpDriver, type HttpConfiguration } from './http.js';
import { createModbusDriver, type ModbusConfiguration } from './modbus.js';
import { createMqttDriver, type MqttConfiguration } from './mqtt.js';
import { createOpcuaDriver, type OpcuaConfiguration } from './opcua.js';
import { createS7Driver } from './s7.js';
import type { S7Configuration } from './s7-schemas.js';
import type { OpcuaSupport } from '../opcua-support.js';
import { createSerialLines } from './serial-lines.js';
import type { ConnectionDriver } from './types.js';

/** A connection's driver; undefined for OPC UA while the runtime has no OPC UA support. */
export type DriverFactory = (def: ConnectionDef) => ConnectionDriver | undefined;

export function createProtocolDrivers(deps: { log: Logger; opcua: () => OpcuaSupport | undefined }): DriverFactory {
  const lines = createSerialLines();
  return (def) => {
    switch (def.protocol) {
      case 'Modbus':
        return createModbusDriver(def.configuration as ModbusConfiguration, { lines });
      case 'Mqtt':
        return createMqttDriver(def.configuration as MqttConfiguration, `gatewayd-${def.id}`.slice(0, 23));
      case 'Http':
        return createHttpDriver(def.configuration as HttpConfiguration);
      case 'EtherNetIp':
        return createEtherNetIpDriver(def.configuration as EtherNetIpConfiguration);
      case 'S7':
        return createS7Driver(def.configuration as S7Configuration);
      case 'Opcua': {
        const support = deps.opcua();
        return support ? createOpcuaDriver(def.configuration as OpcuaConfiguration, { support, log: deps.log, id: def.id }) : undefined;
      }
    }
  };
}
