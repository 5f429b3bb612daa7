// Modbus TCP connection (modbus-serial): reads holding/input registers, coils and discrete
// inputs by address and quantity; writes holding registers (FC16) and coils (FC15).
import modbusSerial from 'modbus-serial';
import type { ModbusRTU } from 'modbus-serial/ModbusRTU.js';
import type { EndpointDef } from '../service-files.js';
import { DeviceError, type ConnectionDriver } from './types.js';

// A CommonJS module: at run time its default import is the client class itself.
const ModbusClient = modbusSerial as unknown as new () => ModbusRTU;

export interface ModbusConfiguration {
  host: string;
  port: number;
  unitId: number;
  timeoutMs: number;
}

export function createModbusDriver(cfg: ModbusConfiguration): ConnectionDriver {
  let client: ModbusRTU | undefined;
  let lostListener: (reason: string) => void = () => {};
  // One request at a time per connection: small devices handle no more.
  let chain: Promise<unknown> = Promise.resolve();
  const serial = <T>(fn: (c: ModbusRTU) => Promise<T>): Promise<T> => {
    const run = chain.then(() => {
      if (!client || !client.isOpen) throw new Error('not connected');
      return fn(client);
    });
    chain = run.catch(() => undefined);
    return run.catch((err: unknown) => {
      const e = err as { modbusCode?: number; message?: string };
      // An exception response: the device is there and refused this request.
      if (typeof e.modbusCode === 'number') throw new DeviceError(e.message ?? `modbus exception ${e.modbusCode}`);
      // Timeout or a broken socket: the connection is not usable any more.
      lose(e.message ?? String(err));
      throw err;
    });
  };
  const lose = (reason: string) => {
    const c = client;
    if (!c) return;
    client = undefined;
    (c as unknown as NodeJS.EventEmitter).removeAllListeners('close');
    try {
      c.close(() => {});
    } catch {
      // already closed
    }
    lostListener(reason);
  };

  return {
    async connect() {
      const c = new ModbusClient();
      c.setTimeout(cfg.timeoutMs);
      let timer: NodeJS.Timeout | undefined;
      try {
        await Promise.race([
          c.connectTCP(cfg.host, { port: cfg.port }),
          new Promise((_r, reject) => {
            timer = setTimeout(() => reject(new Error(`connect timed out after ${cfg.timeoutMs} ms`)), cfg.timeoutMs);
          }),
        ]);
      } catch (err) {
        try {
          c.close(() => {});
        } catch {
          // nothing open
        }
        throw err;
      } finally {
        clearTimeout(timer);
      }
      c.setID(cfg.unitId);
      c.on('close', () => {
        if (client === c) lose('connection closed by the device');
      });
      client = c;
    },
    async disconnect() {
      const c = client;
      client = undefined;
      if (!c) return;
      (c as unknown as NodeJS.EventEmitter).removeAllListeners('close');
      await new Promise<void>((resolve) => {
        try {
          c.close(() => resolve());
        } catch {
          resolve();
        }
        setTimeout(resolve, 1000).unref();
      });
    },
    onLost(listener) {
      lostListener = listener;
    },
    read(ep: EndpointDef) {
      const { table, address } = ep.address as { table: string; address: number; quantity?: number };
      const quantity = (ep.address.quantity as number | undefined) ?? 1;
      return serial(async (c) => {
        switch (table) {
          case 'holding':
            return (await c.readHoldingRegisters(address, quantity)).data;
          case 'input':
            return (await c.readInputRegisters(address, quantity)).data;
          case 'coil':
            return (await c.readCoils(address, quantity)).data.slice(0, quantity);
          default:
            return (await c.readDiscreteInputs(address, quantity)).data.slice(0, quantity);
        }
      });
    },
    write(ep: EndpointDef, value: unknown) {
      const { table, address } = ep.address as { table: string; address: number };
      const values = Array.isArray(value) ? value : [value];
      if (values.length === 0 || values.length > 123) return Promise.reject(new DeviceError('a write needs 1 to 123 values'));
      if (table === 'coil') {
        if (!values.every((v) => typeof v === 'boolean' || v === 0 || v === 1)) return Promise.reject(new DeviceError('coils take booleans (or 0/1)'));
        return serial(async (c) => void (await c.writeCoils(address, values.map((v) => v === true || v === 1))));
      }
      if (!values.every((v) => Number.isInteger(v) && (v as number) >= 0 && (v as number) <= 0xffff)) {
        return Promise.reject(new DeviceError('holding registers take integers 0..65535'));
      }
      return serial(async (c) => void (await c.writeRegisters(address, values as number[])));
    },
  };
}
