import { createRequire } from 'node:module';
import { EOL } from 'node:os';
import type Winston from 'winston';

/** Keys whose values never reach a log line, at any depth. */
const secretKeys = new Set([
  'password',
  'newpassword',
  'token',
  'secret',
  'otp',
  'backupcode',
  'backupcodes',
  'authorization',
  'cookie',
  'bindpassword',
  'clientsecret',
  'csr',
  'privatekey',
]);

export function redact(value: unknown, depth = 0): unknown {
  if (depth > 6 || value === null || typeof value !== 'object') return value;
  if (value instanceof Error) return { name: value.name, message: value.message };
  if (Array.isArray(value)) return value.map((v) => redact(v, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    out[k] = secretKeys.has(k.toLowerCase()) ? '[redacted]' : redact(v, depth + 1);
  }
  return out;
}

/**
 * winston's formats (redact, timestamp, JSON), made at the first record that is not flat: most
 * records are (flatLine), and a daemon that never logs another kind never loads winston (1.6 MiB
 * of heap).
 */
let winstonFormat: Winston.Logform.Format | undefined;
function recordFormat(): Winston.Logform.Format {
  if (winstonFormat === undefined) {
    const winston = createRequire(import.meta.url)('winston') as typeof Winston;
    const redactFormat = winston.format((info) => {
      for (const key of Object.keys(info)) {
        if (key === 'level' || key === 'message') continue;
        info[key] = secretKeys.has(key.toLowerCase()) ? '[redacted]' : redact(info[key]);
      }
      return info;
    });
    winstonFormat = winston.format.combine(redactFormat(), winston.format.timestamp(), winston.format.json());
  }
  return winstonFormat;
}

export interface Logger {
  error(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  debug(msg: string, fields?: Record<string, unknown>): void;
  /** A security event (login, change of users, roles, permissions...): always logged, never with secrets. */
  audit(event: string, fields?: Record<string, unknown>): void;
  /** Lifecycle lines (ready, stopping, stopped) that supervisors wait for: logged at any level. */
  lifecycle(msg: string, fields?: Record<string, unknown>): void;
  child(fields: Record<string, unknown>): Logger;
  close(): Promise<void>;
}

export interface LoggerOptions {
  level: string;
  /** Defaults to stdout; tests pass a stream to read what was logged. */
  stream?: NodeJS.WritableStream;
}

/** npm levels, as winston numbers them (a lower number is more severe). */
const LEVELS: Record<string, number> = { error: 0, warn: 1, info: 2, http: 3, verbose: 4, debug: 5, silly: 6 };
/** winston's token test: a message with one of these carries no fields (splat semantics). */
const FORMAT_TOKENS = /%[scdjifoO%]/;
const LEVEL = Symbol.for('level');
const MESSAGE = Symbol.for('message');

interface Sink {
  /** Formats (redact, timestamp, JSON: winston's own formats) and writes one record. */
  write(level: string, msg: string, fields: Record<string, unknown> | undefined, meta: Record<string, unknown>[]): void;
}

/**
 * The record winston would build for `logger.child(meta...).log(level, msg, fields)`: child
 * fields (outer first), then the call's, then level and message. Written at once, synchronously,
 * with winston's formats: the line is byte for byte what winston's Stream transport wrote, but
 * without its object-mode Transform and pipe per line (the broker writes one info line per
 * connect, and the pipeline was most of its cost).
 */
function createSink(stream: NodeJS.WritableStream): Sink {
  return {
    write(level, msg, fields, meta) {
      const info: Record<string | symbol, unknown> = {};
      for (const m of meta) Object.assign(info, m);
      const tokens = typeof msg === 'string' && msg.includes('%') && FORMAT_TOKENS.test(msg);
      if (fields && !tokens) Object.assign(info, fields);
      info[LEVEL] = level;
      info.level = level;
      info.message = msg;
      if (fields && !tokens) {
        if (fields.message) info.message = `${msg} ${String(fields.message)}`;
        if (fields.stack) info.stack = fields.stack;
        if (fields.cause) info.cause = fields.cause;
      }
      const line = flatLine(info);
      if (line !== undefined) {
        stream.write(line + EOL);
        return;
      }
      const format = recordFormat();
      const out = format.transform(info as Winston.Logform.TransformableInfo, format.options) as Record<symbol, unknown> | false;
      if (out) stream.write(String(out[MESSAGE]) + EOL);
    },
  };
}

/** A field name as it appears in a line (`"name":`), and whether its value is redacted. */
interface KeyForm {
  json: string;
  secret: boolean;
}
/** Field names come from the code (a few dozen); bounded all the same. */
const KEY_FORMS_MAX = 1024;
const keyForms = new Map<string, KeyForm>();

function keyForm(key: string): KeyForm {
  let form = keyForms.get(key);
  if (form === undefined) {
    form = { json: `${JSON.stringify(key)}:`, secret: key !== 'level' && key !== 'message' && secretKeys.has(key.toLowerCase()) };
    if (keyForms.size < KEY_FORMS_MAX) keyForms.set(key, form);
  }
  return form;
}

/**
 * new Date().toISOString(): its date and time of day formatted once per second, the
 * milliseconds appended (a connect storm logs a line every few hundred microseconds).
 */
let stampMs = -1;
let stamp = '';
let stampSecond = Number.NaN;
/** "YYYY-MM-DDTHH:MM:SS." of stampSecond. */
let stampPrefix = '';
function timestampNow(): string {
  const ms = Date.now();
  if (ms !== stampMs) {
    const second = Math.floor(ms / 1000);
    if (second !== stampSecond) {
      stampSecond = second;
      stampPrefix = new Date(second * 1000).toISOString().slice(0, -4);
    }
    const millis = ms - second * 1000;
    stampMs = ms;
    stamp = `${stampPrefix}${millis < 10 ? '00' : millis < 100 ? '0' : ''}${millis}Z`;
  }
  return stamp;
}

/** An array element JSON.stringify writes as winston's JSON format does (non-finite numbers: null). */
const isFlatElement = (v: unknown): boolean => v === null || typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean';

/**
 * The line winston's formats (redact, timestamp, JSON with sorted keys) make of a record whose
 * values are all strings, numbers, booleans, null, undefined or arrays of those, built directly: a fraction of the
 * cost (the broker logs one such line per connect; field names and the timestamp are formatted
 * once, not per line). Anything else (objects, errors, bigints): undefined, and winston formats
 * it. test/logger.test.ts compares both byte for byte.
 */
function flatLine(info: Record<string, unknown>): string | undefined {
  const keys = Object.keys(info);
  if (!Object.prototype.hasOwnProperty.call(info, 'timestamp')) keys.push('timestamp');
  keys.sort();
  let line = '{';
  let separator = '';
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i]!;
    let value = key === 'timestamp' ? timestampNow() : info[key];
    if (value === undefined) continue;
    const form = keyForm(key);
    if (form.secret) value = '[redacted]';
    let json: string;
    switch (typeof value) {
      case 'string':
        json = JSON.stringify(value);
        break;
      case 'boolean':
        json = value ? 'true' : 'false';
        break;
      case 'number':
        json = Number.isFinite(value) ? String(value) : 'null';
        break;
      case 'object':
        if (value === null) json = 'null';
        else if (Array.isArray(value) && value.every(isFlatElement)) json = JSON.stringify(value);
        else return undefined;
        break;
      default:
        return undefined;
    }
    line += separator + form.json + json;
    separator = ',';
  }
  return `${line}}`;
}

function wrap(sink: Sink, threshold: number, meta: Record<string, unknown>[], closeFn: () => Promise<void>): Logger {
  const at = (level: string) => {
    const enabled = threshold >= LEVELS[level]!;
    return (msg: string, fields?: Record<string, unknown>) => {
      if (enabled) sink.write(level, msg, fields, meta);
    };
  };
  return {
    error: at('error'),
    warn: at('warn'),
    info: at('info'),
    // Filtered out before a record is built: the broker logs each disconnect at debug.
    debug: at('debug'),
    // Audit records are written at info whatever the level: an operator lowering verbosity must
    // not lose security events.
    audit: (event, fields) => sink.write('info', event, { audit: true, ...(fields ?? {}) }, meta),
    lifecycle: (msg, fields) => sink.write('info', msg, fields, meta),
    child: (fields) => wrap(sink, threshold, [...meta, fields], closeFn),
    close: closeFn,
  };
}

export function createLogger(options: LoggerOptions): Logger {
  const stream = options.stream ?? process.stdout;
  // An unknown level logs nothing but audit and lifecycle lines, as winston did.
  const threshold = LEVELS[options.level] ?? -1;
  // Stdout is never ended; a caller's stream is left to its owner too.
  const close = async () => {};
  return wrap(createSink(stream), threshold, [], close);
}

/** A logger that drops everything, for benchmarks. */
export function createSilentLogger(): Logger {
  const noop = () => {};
  const self: Logger = {
    error: noop,
    warn: noop,
    info: noop,
    debug: noop,
    audit: noop,
    lifecycle: noop,
    child: () => self,
    close: async () => {},
  };
  return self;
}
