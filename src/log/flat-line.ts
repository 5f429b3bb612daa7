// The JSON line winston's formats (redact, timestamp, JSON with sorted keys) make of a flat record
// (values: strings, numbers, booleans, null, undefined, arrays of those), built directly: the
// broker logs one such line per connect, and winston's formats cost several times as much.
// test/logger.test.ts compares the lines with winston's byte for byte.

/** Keys whose values never reach a log line, at any depth. */
export const secretKeys = new Set([
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

/** A value's JSON as winston writes it, or undefined when it is not flat (objects, errors, bigints). */
function flatJson(value: unknown): string | undefined {
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'number':
      return Number.isFinite(value) ? String(value) : 'null';
    case 'object':
      if (value === null) return 'null';
      if (Array.isArray(value) && value.every(isFlatElement)) return JSON.stringify(value);
      return undefined;
    default:
      return undefined;
  }
}

const REDACTED = JSON.stringify('[redacted]');

/** The line of a whole record (`info`: what winston would format), or undefined when it is not flat. */
export function flatLine(info: Record<string, unknown>): string | undefined {
  const keys = Object.keys(info);
  if (!Object.prototype.hasOwnProperty.call(info, 'timestamp')) keys.push('timestamp');
  keys.sort();
  let line = '{';
  let separator = '';
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i]!;
    const value = key === 'timestamp' ? timestampNow() : info[key];
    if (value === undefined) continue;
    const form = keyForm(key);
    const json = form.secret ? REDACTED : flatJson(value);
    if (json === undefined) return undefined;
    line += separator + form.json + json;
    separator = ',';
  }
  return `${line}}`;
}

/**
 * One part of a line in key order: the child loggers' fields formatted once (`text`), or where
 * the call's field, the level, the message or the timestamp goes.
 */
type Part = { kind: 'fixed'; text: string } | { kind: 'field'; key: string; form: KeyForm } | { kind: 'level' | 'message' | 'timestamp' };

/** The parts of the lines of one message of one logger, for calls with these field names. */
interface Layout {
  fieldKeys: string[];
  /** Undefined: a child field is not flat (the caller builds the record). */
  parts: Part[] | undefined;
}

/** Messages per logger whose layout is kept (log calls are sites in the code: a few per logger). */
const LAYOUTS_PER_LOGGER = 64;

/**
 * flatLine for a call `log(level, msg, fields)` of a logger whose child fields are `meta`
 * (outer first, never changed after the child was made), without building the record: the key
 * order and the child fields' JSON are worked out once per logger, message and set of field
 * names, and a call formats only its own values. Undefined: not flat, or fields with a `message`
 * (winston appends it), and the caller builds the record.
 */
export function createLineLayouts() {
  const byLogger = new WeakMap<readonly object[], Map<string, Layout>>();

  function layoutOf(meta: readonly Record<string, unknown>[], msg: string, fieldKeys: string[]): Layout {
    let layouts = byLogger.get(meta);
    if (!layouts) byLogger.set(meta, (layouts = new Map()));
    const layout = { fieldKeys, parts: partsOf(meta, fieldKeys) };
    if (layouts.size < LAYOUTS_PER_LOGGER || layouts.has(msg)) layouts.set(msg, layout);
    return layout;
  }

  function partsOf(meta: readonly Record<string, unknown>[], fieldKeys: string[]): Part[] | undefined {
    const merged: Record<string, unknown> = {};
    for (const m of meta) Object.assign(merged, m);
    const keys = new Set([...Object.keys(merged), ...fieldKeys, 'level', 'message', 'timestamp']);
    const fields = new Set(fieldKeys);
    const parts: Part[] = [];
    for (const key of [...keys].sort()) {
      if (key === 'level' || key === 'message' || key === 'timestamp') parts.push({ kind: key });
      else if (fields.has(key)) parts.push({ kind: 'field', key, form: keyForm(key) });
      else {
        const value = merged[key];
        if (value === undefined) continue;
        const form = keyForm(key);
        const json = form.secret ? REDACTED : flatJson(value);
        if (json === undefined) return undefined;
        parts.push({ kind: 'fixed', text: form.json + json });
      }
    }
    return parts;
  }

  const sameKeys = (a: string[], b: string[]) => {
    if (a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
    return true;
  };

  return {
    line(level: string, msg: string, fields: Record<string, unknown> | undefined, meta: readonly Record<string, unknown>[]): string | undefined {
      const fieldKeys = fields ? Object.keys(fields) : [];
      if (fields && Object.prototype.hasOwnProperty.call(fields, 'message')) return undefined;
      let layout = byLogger.get(meta)?.get(msg);
      if (!layout || !sameKeys(layout.fieldKeys, fieldKeys)) layout = layoutOf(meta, msg, fieldKeys);
      const parts = layout.parts;
      if (!parts) return undefined;
      let line = '{';
      let separator = '';
      for (const part of parts) {
        let text: string;
        switch (part.kind) {
          case 'fixed':
            text = part.text;
            break;
          case 'level':
            text = `"level":${JSON.stringify(level)}`;
            break;
          case 'message':
            text = `"message":${JSON.stringify(msg)}`;
            break;
          case 'timestamp':
            text = `"timestamp":"${timestampNow()}"`;
            break;
          case 'field': {
            const value = fields![part.key];
            if (value === undefined) continue;
            const json = part.form.secret ? REDACTED : flatJson(value);
            if (json === undefined) return undefined;
            text = part.form.json + json;
            break;
          }
        }
        line += separator + text;
        separator = ',';
      }
      return `${line}}`;
    },
  };
}
