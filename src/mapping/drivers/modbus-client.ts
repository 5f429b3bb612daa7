import type { ModbusRTU } from 'modbus-serial/ModbusRTU.js';

/**
 * A new modbus-serial client, on `port` (Modbus TCP: modbus-tcp-port.ts) or on none yet (RTU:
 * the client opens a serial port). The library (and serialport under it) is loaded by the first
 * Modbus connection, so a gateway without Modbus keeps its start-up time and memory.
 */
export async function newModbusClient(port?: unknown): Promise<ModbusRTU> {
  // A CommonJS module: at run time its default import is the client class itself.
  const { default: ModbusClient } = await import('modbus-serial');
  return new (ModbusClient as unknown as new (port?: unknown) => ModbusRTU)(port);
}
