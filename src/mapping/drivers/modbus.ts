// Modbus connections (modbus-serial): TCP (configuration {host, port, unitId, timeoutMs}) and
// RTU over a serial line ({path, baudRate, parity, dataBits, stopBits, unitId, timeoutMs}).
// Both read holding/input registers, coils and discrete inputs by address and quantity, and
// write holding registers (FC16) and coils (FC15); one request at a time per TCP connection
// and per serial line. Modbus TCP frames go through our own port (modbus-tcp-port.ts: the
// 260-byte ADU, the protocol id, the transaction asked); an answer whose values are not what
// was asked (another count, another write echoed) is a ProtocolError, and any failure other
// than an exception response loses the connection at once.
import net from 'node:net';
import type { ModbusRTU } from 'modbus-serial/ModbusRTU.js';
import { ProtocolError } from '../../errors/errors.js';
import { newModbusClient } from './modbus-client.js';
import { ModbusLinkError, ModbusTcpPort, type ModbusSocket } from './modbus-tcp-port.js';
import type { EndpointDef } from '../service-files.js';
import { isTimeout, type SerialLine, type SerialLines, type SerialSettings } from './serial-lines.js';
import { DeviceError, RefusedWriteError, type ConnectionDriver } from './types.js';


export interface ModbusTcpConfiguration {
  host: string;
  port: number;
  unitId: number;
  timeoutMs: number;
}
export interface ModbusRtuConfiguration extends SerialSettings {
  unitId: number;
  timeoutMs: number;
}
export type ModbusConfiguration = ModbusTcpConfiguration | ModbusRtuConfiguration;

/** Runs one request on the connection's client (queued), or rejects. */
type Run = <T>(fn: (c: ModbusRTU) => Promise<T>) => Promise<T>;

/**
 * Gives a failed request its meaning: an exception response (the device is there and refused
 * this request) is a DeviceError; anything else (a timeout, a broken socket or port) means
 * the connection is not usable any more: `lose` is told, the error rethrown.
 */
function classify(err: unknown, lose: (reason: string) => void): never {
  const e = err as { modbusCode?: number; message?: string };
  if (typeof e.modbusCode === 'number') throw new DeviceError(e.message ?? `modbus exception ${e.modbusCode}`);
  lose(e.message ?? String(err));
  throw err;
}

/** An answer that is not the one asked for. */
const mismatch = (what: string) => new ProtocolError('Modbus', what);

/** Registers as asked: exactly `quantity` of them. */
function registers(result: { data: number[]; buffer: Buffer }, quantity: number): number[] {
  if (result.data.length !== quantity || result.buffer.length !== 2 * quantity) throw mismatch(`the device answered ${result.buffer.length} bytes of registers, ${2 * quantity} were asked`);
  return result.data;
}

/** Bits as asked: the bytes of `quantity` bits, the first `quantity` of them. */
function bits(result: { data: boolean[]; buffer: Buffer }, quantity: number): boolean[] {
  if (result.buffer.length !== Math.ceil(quantity / 8)) throw mismatch(`the device answered ${result.buffer.length} bytes of bits, ${Math.ceil(quantity / 8)} were asked`);
  return result.data.slice(0, quantity);
}

/** A write confirmed for the address and quantity written. */
function confirmed(result: { address: number; length: number }, address: number, quantity: number): void {
  if (result.address !== address || result.length !== quantity) throw mismatch(`the device confirmed ${result.length} values at ${result.address}, ${quantity} at ${address} were written`);
}

function read(run: Run, ep: EndpointDef): Promise<unknown> {
  const { table, address } = ep.address as { table: string; address: number; quantity?: number };
  const quantity = (ep.address.quantity as number | undefined) ?? 1;
  return run(async (c) => {
    switch (table) {
      case 'holding':
        return registers(await c.readHoldingRegisters(address, quantity), quantity);
      case 'input':
        return registers(await c.readInputRegisters(address, quantity), quantity);
      case 'coil':
        return bits(await c.readCoils(address, quantity), quantity);
      default:
        return bits(await c.readDiscreteInputs(address, quantity), quantity);
    }
  });
}

function write(run: Run, ep: EndpointDef, value: unknown): Promise<void> {
  const { table, address } = ep.address as { table: string; address: number };
  const values = Array.isArray(value) ? value : [value];
  if (values.length === 0 || values.length > 123) return Promise.reject(new RefusedWriteError('a write needs 1 to 123 values'));
  if (table === 'coil') {
    if (!values.every((v) => typeof v === 'boolean' || v === 0 || v === 1)) return Promise.reject(new RefusedWriteError('coils take booleans (or 0/1)'));
    return run(async (c) => confirmed(await c.writeCoils(address, values.map((v) => v === true || v === 1)), address, values.length));
  }
  if (!values.every((v) => Number.isInteger(v) && (v as number) >= 0 && (v as number) <= 0xffff)) {
    return Promise.reject(new RefusedWriteError('holding registers take integers 0..65535'));
  }
  return run(async (c) => confirmed(await c.writeRegisters(address, values as number[]), address, values.length));
}

export function createModbusDriver(cfg: ModbusConfiguration, deps: { lines: SerialLines }): ConnectionDriver {
  return 'path' in cfg ? createRtuDriver(cfg, deps.lines) : createTcpDriver(cfg);
}

/**
 * The Modbus TCP driver; `dial` opens the socket (tests: a socket of their own), by default a
 * TCP connection to the configured host and port.
 */
export function createTcpDriver(cfg: ModbusTcpConfiguration, dial: () => ModbusSocket = () => net.connect({ host: cfg.host, port: cfg.port })): ConnectionDriver {
  let client: ModbusRTU | undefined;
  let port: ModbusTcpPort | undefined;
  /** Rejects when the port fails: the request in flight fails with it at once, not at its timeout. */
  let portFailed: Promise<never> = new Promise(() => {});
  let lostListener: (reason: string) => void = () => {};
  // One request at a time per connection: small devices handle no more.
  let chain: Promise<unknown> = Promise.resolve();
  /**
   * What failed, typed: an exception response stays as modbus-serial made it (a DeviceError
   * later), a timeout says so, the link's failures are ModbusLinkErrors, and whatever
   * modbus-serial's parsers refused (CRC, length, unit, function, or a RangeError of theirs)
   * is a ProtocolError: a malformed answer.
   */
  const typed = (err: unknown): unknown => {
    if (typeof (err as { modbusCode?: unknown })?.modbusCode === 'number' || err instanceof ProtocolError || err instanceof ModbusLinkError) return err;
    if (isTimeout(err)) return new ModbusLinkError(`the device did not answer within ${cfg.timeoutMs} ms`);
    return new ProtocolError('Modbus', (err as { message?: string })?.message ?? String(err));
  };
  const run: Run = <T>(fn: (c: ModbusRTU) => Promise<T>): Promise<T> => {
    const next = chain.then(() => {
      if (!client || !client.isOpen) throw new ModbusLinkError('not connected');
      return Promise.race([fn(client), portFailed]).catch((err: unknown) => {
        throw typed(err);
      });
    });
    chain = next.catch(() => undefined);
    return next.catch((err: unknown) => classify(err, lose));
  };
  const lose = (reason: string) => {
    const c = client;
    if (!c) return;
    client = undefined;
    port = undefined;
    (c as unknown as NodeJS.EventEmitter).removeAllListeners('close');
    // destroy, not close: the request in flight's timer goes too.
    c.destroy(() => {});
    lostListener(reason);
  };

  return {
    async connect() {
      const p = new ModbusTcpPort(dial);
      const c = await newModbusClient(p);
      c.setTimeout(cfg.timeoutMs);
      let timer: NodeJS.Timeout | undefined;
      try {
        await Promise.race([
          new Promise<void>((resolve, reject) => c.open((err: unknown) => (err ? reject(err) : resolve()))),
          new Promise((_r, reject) => {
            timer = setTimeout(() => reject(new Error(`connect timed out after ${cfg.timeoutMs} ms`)), cfg.timeoutMs);
          }),
        ]);
      } catch (err) {
        p.destroy();
        throw err;
      } finally {
        clearTimeout(timer);
      }
      c.setID(cfg.unitId);
      portFailed = new Promise<never>((_resolve, reject) => {
        c.on('close', () => {
          const reason = p.failure?.message ?? 'connection closed by the device';
          reject(p.failure ?? new ModbusLinkError(reason));
          if (client === c) lose(reason);
        });
      });
      portFailed.catch(() => undefined);
      client = c;
      port = p;
    },
    async disconnect() {
      const c = client;
      client = undefined;
      port?.destroy();
      port = undefined;
      if (!c) return;
      (c as unknown as NodeJS.EventEmitter).removeAllListeners('close');
      c.destroy(() => {});
    },
    onLost(listener) {
      lostListener = listener;
    },
    read: (ep) => read(run, ep),
    write: (ep, value) => write(run, ep, value),
  };
}

/**
 * Modbus RTU: one unit on a shared serial line. An open port proves nothing about the device,
 * so connecting also asks the unit for holding register 0: any answer, an exception response
 * included, shows it is there; silence (a pulled cable, a device switched off) fails the
 * attempt. A request that goes unanswered later loses the connection (the line stays open for
 * the other units); the port closing loses every connection on it.
 */
function createRtuDriver(cfg: ModbusRtuConfiguration, lines: SerialLines): ConnectionDriver {
  let line: SerialLine | undefined;
  let offClosed: (() => void) | undefined;
  let lostListener: (reason: string) => void = () => {};
  const leave = () => {
    const l = line;
    line = undefined;
    offClosed?.();
    offClosed = undefined;
    return l ? lines.release(l) : Promise.resolve();
  };
  const lose = (reason: string) => {
    if (!line) return;
    void leave();
    lostListener(reason);
  };
  const silence = () => new Error(`unit ${cfg.unitId} on ${cfg.path} did not answer within ${cfg.timeoutMs} ms`);
  const run: Run = <T>(fn: (c: ModbusRTU) => Promise<T>): Promise<T> => {
    if (!line) return Promise.reject(new Error('not connected'));
    return line.request(cfg.unitId, cfg.timeoutMs, fn).catch((err: unknown) => classify(isTimeout(err) ? silence() : err, lose));
  };

  return {
    async connect() {
      const l = await lines.acquire(cfg);
      try {
        await l.request(cfg.unitId, cfg.timeoutMs, (c) => c.readHoldingRegisters(0, 1)).catch((err: unknown) => {
          if (typeof (err as { modbusCode?: unknown }).modbusCode === 'number') return; // it answered
          throw isTimeout(err) ? silence() : err;
        });
      } catch (err) {
        await lines.release(l);
        throw err;
      }
      line = l;
      offClosed = l.onClosed((reason) => lose(reason));
    },
    disconnect: () => leave(),
    onLost(listener) {
      lostListener = listener;
    },
    read: (ep) => read(run, ep),
    write: (ep, value) => write(run, ep, value),
  };
}
