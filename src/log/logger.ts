import { createRequire } from 'node:module';
import { EOL } from 'node:os';
import type Winston from 'winston';
import { createLineLayouts, flatLine, secretKeys } from './flat-line.js';

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
  const layouts = createLineLayouts();
  return {
    write(level, msg, fields, meta) {
      const tokens = typeof msg === 'string' && msg.includes('%') && FORMAT_TOKENS.test(msg);
      // Most lines: the record is never built (flat-line.ts).
      const laidOut = typeof msg === 'string' && !tokens ? layouts.line(level, msg, fields, meta) : undefined;
      if (laidOut !== undefined) {
        stream.write(laidOut + EOL);
        return;
      }
      const info: Record<string | symbol, unknown> = {};
      for (const m of meta) Object.assign(info, m);
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
    // A copy: the line layouts format a child's fields once (flat-line.ts).
    child: (fields) => wrap(sink, threshold, [...meta, { ...fields }], closeFn),
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
