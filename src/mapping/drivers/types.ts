import type { EndpointDef } from '../service-files.js';

/** Timers of the runtime (injectable so tests can drive backoff with a fake clock). */
export interface Timers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export const realTimers: Timers = {
  setTimeout: (fn, ms) => {
    const t = setTimeout(fn, ms);
    t.unref();
    return t;
  },
  clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout),
};

/** One protocol connection. The runtime owns the state machine; a driver only does I/O. */
export interface ConnectionDriver {
  /** Establishes the connection; rejects when it cannot. */
  connect(): Promise<void>;
  /** Closes it; never rejects. */
  disconnect(): Promise<void>;
  /** Called when an established connection is lost (not after disconnect()). */
  onLost(listener: (reason: string) => void): void;
  /** One reading for a read endpoint (Modbus, Http: from the device; Mqtt: the last message, or null). */
  read(endpoint: EndpointDef): Promise<unknown>;
  /** Writes a value through a write endpoint. */
  write(endpoint: EndpointDef, value: unknown): Promise<void>;
  /** Reads of many endpoints asked for together go out in few requests (S7): the endpoints poll in rounds (poll-groups.ts). */
  readonly readsTogether?: boolean;
  /** Mqtt read endpoints: messages of the external broker. Returns the unsubscribe function. */
  subscribe?(endpoint: EndpointDef, handler: (topic: string, value: unknown) => void): Promise<() => void>;
}

/** A failure of the device itself (it answered with an error): the connection stays up. */
export class DeviceError extends Error {
  override readonly name: string = 'DeviceError';
}

/**
 * A value refused by the gateway before anything was sent to the device (out of range, the wrong
 * type for the address): counted as the connection's refusedWrites, not as a failure of the
 * communication.
 */
export class RefusedWriteError extends DeviceError {
  override readonly name: string = 'RefusedWriteError';
}
