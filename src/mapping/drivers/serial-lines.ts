// Serial lines for Modbus RTU (modbus-serial over serialport). One RS-485 line carries several
// devices (unit ids): every connection naming the same path shares one open port, and requests
// on a line go one at a time (a queue per line), as the bus allows only one master request in
// flight. The line opens with its first connection and closes with its last.
import type { ModbusRTU } from 'modbus-serial/ModbusRTU.js';
import { newModbusClient } from './modbus-client.js';

export interface SerialSettings {
  path: string;
  baudRate: number;
  parity: 'none' | 'even' | 'odd';
  dataBits: 7 | 8;
  stopBits: 1 | 2;
}

export interface SerialLine {
  readonly settings: SerialSettings;
  /**
   * Runs one request for `unitId` on the line, after the requests queued before it. The client
   * waits at most timeoutMs for the answer.
   */
  request<T>(unitId: number, timeoutMs: number, fn: (client: ModbusRTU) => Promise<T>): Promise<T>;
  /** Listens for the port closing or failing (every connection on the line is lost); returns the unsubscribe. */
  onClosed(listener: (reason: string) => void): () => void;
}

export interface SerialLines {
  /** Opens the line, or joins it when it is open; rejects when the port cannot open or is open with other settings. */
  acquire(settings: SerialSettings): Promise<SerialLine>;
  /** Leaves the line; the last connection to leave closes the port. */
  release(line: SerialLine): Promise<void>;
}

const describe = (s: SerialSettings) => `${s.baudRate} ${s.dataBits}${s.parity[0]!.toUpperCase()}${s.stopBits}`;
const sameSettings = (a: SerialSettings, b: SerialSettings) => a.baudRate === b.baudRate && a.parity === b.parity && a.dataBits === b.dataBits && a.stopBits === b.stopBits;
/** Bound on closing a port. */
const CLOSE_TIMEOUT_MS = 1000;

interface OpenLine extends SerialLine {
  users: number;
  client: ModbusRTU;
  /** The port is gone (closed by the system, or failed): the next acquire opens it again. */
  dead: boolean;
  close(): Promise<void>;
}

/**
 * Quiet time on the line after an unanswered request (a few character times, at least 20 ms):
 * a late answer then arrives before the next request and is dropped with the buffer.
 */
function silenceMs(s: SerialSettings): number {
  return Math.max(20, Math.ceil((10 * 11 * 1000) / s.baudRate));
}

/** modbus-serial's "no answer within the timeout". */
export function isTimeout(err: unknown): boolean {
  return (err as { name?: unknown } | null)?.name === 'TransactionTimedOutError';
}

export function createSerialLines(): SerialLines {
  /** Open lines by path, and lines being opened. */
  const lines = new Map<string, OpenLine>();
  const opening = new Map<string, Promise<OpenLine>>();

  async function open(settings: SerialSettings): Promise<OpenLine> {
    const client = await newModbusClient();
    const closedListeners = new Set<(reason: string) => void>();
    let chain: Promise<unknown> = Promise.resolve();
    const line: OpenLine = {
      settings,
      users: 0,
      client,
      dead: false,
      request(unitId, timeoutMs, fn) {
        const run = chain.then(async () => {
          if (line.dead || !client.isOpen) throw new Error(`serial line ${settings.path} is closed`);
          client.setID(unitId);
          client.setTimeout(timeoutMs);
          // Bytes left from an earlier exchange (noise, an answer that came too late) must not
          // be read as the start of this answer: modbus-serial's buffered RTU port keeps them.
          const port = (client as unknown as { _port?: { _buffer?: Buffer } })._port;
          if (port && Buffer.isBuffer(port._buffer)) port._buffer = Buffer.alloc(0);
          return fn(client);
        });
        chain = run.catch(async (err: unknown) => {
          if (isTimeout(err)) await new Promise((r) => setTimeout(r, silenceMs(settings)));
        });
        return run;
      },
      onClosed(listener) {
        closedListeners.add(listener);
        return () => closedListeners.delete(listener);
      },
      close: () =>
        new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, CLOSE_TIMEOUT_MS);
          timer.unref();
          try {
            client.close(() => {
              clearTimeout(timer);
              resolve();
            });
          } catch {
            resolve();
          }
        }),
    };
    const lost = (reason: string) => {
      if (line.dead) return;
      line.dead = true;
      if (lines.get(settings.path) === line) lines.delete(settings.path);
      for (const l of [...closedListeners]) l(reason);
    };
    // An 'error' without a listener would end the process.
    client.on('error', (err: unknown) => lost(`serial line ${settings.path} failed: ${(err as Error).message}`));
    client.on('close', () => lost(`serial line ${settings.path} closed`));
    await client.connectRTUBuffered(settings.path, { baudRate: settings.baudRate, parity: settings.parity, dataBits: settings.dataBits, stopBits: settings.stopBits });
    return line;
  }

  return {
    async acquire(settings) {
      let line = lines.get(settings.path);
      if (!line) {
        let pending = opening.get(settings.path);
        if (!pending) {
          pending = open(settings).finally(() => opening.delete(settings.path));
          opening.set(settings.path, pending);
        }
        line = await pending;
        if (!line.dead && !lines.has(settings.path)) lines.set(settings.path, line);
        if (line.dead) throw new Error(`serial line ${settings.path} closed while opening`);
      }
      if (!sameSettings(line.settings, settings)) {
        throw new Error(`serial line ${settings.path} is open with ${describe(line.settings)}, not ${describe(settings)}: connections on one line share its settings`);
      }
      line.users++;
      return line;
    },
    async release(handle) {
      const line = handle as OpenLine;
      line.users--;
      if (line.users > 0) return;
      if (lines.get(line.settings.path) === line) lines.delete(line.settings.path);
      line.dead = true;
      await line.close();
    },
  };
}
