// Requests that break the REST API's contract (src/http/openapi.yaml) one constraint at a time,
// derived from the document itself (issue 11 point 4, issue 35 B): for every path, query and body
// field a value of the wrong type, at and beyond its bounds (minimum/maximum, minLength/
// maxLength, minItems/maxItems), outside its enum, a required property missing, a property the
// schema does not have, `__proto__` and `constructor` keys, 1e309, NaN, 10,000 nested arrays,
// naughty strings; bodies of the wrong media type, malformed, or beyond http.bodyLimitBytes.
// Used by test/openapi-fuzz.test.ts (every case, deterministic) and the REST fuzz target
// (targets/rest.ts: random combinations, for `npm run fuzz`).
import { loadOpenApiDocument } from '../../../src/http/create-http-app.js';

export type Json = Record<string, any>;

export interface RestCase {
  label: string;
  method: string;
  /** The operation: method and path template. */
  key: string;
  path: string;
  body?: string | Buffer;
  contentType?: string;
}

export interface Operation {
  key: string;
  method: string;
  template: string;
  op: Json;
  pathItem: Json;
}

/** Operations the fuzz passes leave out, and why. */
export const SKIPPED = new Set([
  // Ends the administrator's own session, which the rest of the pass uses.
  'POST /api/logout',
  // Multipart upload, fuzzed by test/fuzz/archive.test.ts (hostile archives and multipart bodies);
  // a refused restore is recorded on purpose, as the last operation's result (GET /api/maintenance/db).
  'POST /api/maintenance/db/restore',
]);

export const ODD_STRINGS = ['', ' ', 'x'.repeat(70_000), '\u0000', '../../etc/passwd', '%2e%2e%2f', '${jndi:ldap://127.0.0.1/x}', '😀'.repeat(100), '<script>', 'a/#/b', '+', '$SYS/x'];
export const ODD_NUMBERS = ['1e309', '-1e309', 'NaN', 'Infinity', '-1', '0', '1.5', '0x10', '99999999999999999999', '010', ' 7'];
export const ODD_JSON_VALUES: unknown[] = [null, true, -1, 0, 1.5, 2 ** 53 + 2, '', 'x'.repeat(70_000), [], {}, [[[[[[[[[[]]]]]]]]]], { nested: { deeper: { deepest: [1, 2, 3] } } }];
/** Strings that have broken parsers, templates, databases and terminals (our own list). */
export const NAUGHTY_STRINGS = [
  '\uFEFF',
  '\u202Eevil',
  '\ud800',
  'admin\u0000x',
  '%s%s%s%n',
  '{{7*7}}',
  "'; DROP TABLE users;--",
  '<img src=x onerror=alert(1)>',
  'Ω≈ç√∫˜µ≤≥÷',
  'null',
  'undefined',
  '__proto__',
  'constructor',
  'CON',
  '\r\nSet-Cookie: x=1',
  '#',
  '+/#',
  '😀'.repeat(2000),
];
const NESTED_10K = `${'['.repeat(10_000)}${']'.repeat(10_000)}`;

export function resolve(spec: Json, node: Json | undefined): Json {
  let n = node ?? {};
  for (let i = 0; i < 10 && typeof n.$ref === 'string'; i++) {
    n = n.$ref.split('/').slice(1).reduce((o: Json, k: string) => o?.[k], spec) ?? {};
  }
  return n;
}

/** A value the schema accepts, as far as a quick reading tells (the base the mutations start from). */
export function sample(spec: Json, schemaIn: Json | undefined, depth = 0): unknown {
  const schema = resolve(spec, schemaIn);
  if (depth > 6) return null;
  if (schema.example !== undefined) return schema.example;
  if (schema.enum) return schema.enum[0];
  const variants = schema.oneOf ?? schema.anyOf ?? schema.allOf;
  if (variants) return sample(spec, variants[0], depth + 1);
  switch (schema.type) {
    case 'object': {
      const out: Json = {};
      for (const name of schema.required ?? []) out[name] = sample(spec, schema.properties?.[name], depth + 1);
      return out;
    }
    case 'array':
      return schema.minItems ? [sample(spec, schema.items, depth + 1)] : [];
    case 'integer':
    case 'number':
      return schema.minimum ?? 1;
    case 'boolean':
      return true;
    default:
      return 'fuzz-value'.padEnd(schema.minLength ?? 0, 'x').slice(0, Math.max(schema.minLength ?? 0, Math.min(schema.maxLength ?? 10, 10)));
  }
}

export function loadSpec(): Json {
  return loadOpenApiDocument() as Json;
}

export function operations(spec: Json): Operation[] {
  const out: Operation[] = [];
  for (const [template, pathItem] of Object.entries(spec.paths as Json)) {
    for (const [method, op] of Object.entries(pathItem as Json)) {
      if (method === 'parameters') continue;
      const key = `${method.toUpperCase()} ${template}`;
      if (!SKIPPED.has(key)) out.push({ key, method: method.toUpperCase(), template, op: op as Json, pathItem: pathItem as Json });
    }
  }
  return out;
}

let naughtyTurn = 0;
/** Six of the naughty strings, the next six at the next call: every one is sent, not every one to every field. */
function someNaughtyStrings(): string[] {
  const from = (naughtyTurn++ * 6) % NAUGHTY_STRINGS.length;
  return [...NAUGHTY_STRINGS, ...NAUGHTY_STRINGS].slice(from, from + 6);
}

/** Values that break one constraint of `schema` each (the value, and which constraint). */
export function violationsOf(spec: Json, schemaIn: Json | undefined): Array<[string, unknown]> {
  const s = resolve(spec, schemaIn);
  const out: Array<[string, unknown]> = [];
  const type = s.type as string | undefined;
  if (type && type !== 'string') out.push(['type (a string)', 'not-a-' + type]);
  if (type && type !== 'number' && type !== 'integer') out.push(['type (a number)', 7]);
  if (type && type !== 'object') out.push(['type (an object)', { x: 1 }]);
  if (type && type !== 'array') out.push(['type (an array)', ['x']]);
  if (type && type !== 'boolean') out.push(['type (a boolean)', false]);
  out.push(['type (null)', null]);
  if (type === 'integer') out.push(['integer (1.5)', 1.5]);
  if (typeof s.minimum === 'number') out.push(['minimum - 1', s.minimum - 1]);
  if (typeof s.maximum === 'number') out.push(['maximum + 1', s.maximum + 1]);
  if (typeof s.exclusiveMinimum === 'number') out.push(['exclusiveMinimum', s.exclusiveMinimum]);
  if (typeof s.exclusiveMaximum === 'number') out.push(['exclusiveMaximum', s.exclusiveMaximum]);
  if (typeof s.minLength === 'number' && s.minLength > 0) out.push(['minLength - 1', 'x'.repeat(s.minLength - 1)]);
  if (typeof s.maxLength === 'number') out.push(['maxLength + 1', 'x'.repeat(s.maxLength + 1)]);
  if (typeof s.minItems === 'number' && s.minItems > 0) out.push(['minItems - 1', []]);
  if (typeof s.maxItems === 'number') out.push(['maxItems + 1', Array.from({ length: s.maxItems + 1 }, () => sample(spec, s.items))]);
  if (Array.isArray(s.enum)) out.push(['enum', 'not-in-the-enum']);
  if (type === 'string' || (!type && !s.$ref)) for (const n of someNaughtyStrings()) out.push([`naughty ${JSON.stringify(n).slice(0, 16)}`, n]);
  return out;
}

function setAt(base: Json, path: string[], value: unknown): Json {
  const copy: Json = structuredClone(base);
  let node: Json = copy;
  for (const k of path.slice(0, -1)) node = (node[k] ??= {}) as Json;
  node[path[path.length - 1]!] = value;
  return copy;
}

function deleteAt(base: Json, path: string[]): Json {
  const copy: Json = structuredClone(base);
  let node: Json | undefined = copy;
  for (const k of path.slice(0, -1)) node = node?.[k] as Json | undefined;
  if (node) delete node[path[path.length - 1]!];
  return copy;
}

/** Bodies breaking one constraint of an object schema each, down to nested objects (depth 3). */
function bodyViolations(spec: Json, schemaIn: Json, base: Json, path: string[] = [], depth = 0): Array<{ label: string; body: string }> {
  const s = resolve(spec, schemaIn);
  const out: Array<{ label: string; body: string }> = [];
  const at = path.length ? path.join('.') : 'body';
  for (const name of s.required ?? []) out.push({ label: `${at}: required ${name} missing`, body: JSON.stringify(deleteAt(base, [...path, name])) });
  if (s.additionalProperties === false) out.push({ label: `${at}: an extra property`, body: JSON.stringify(setAt(base, [...path, 'noSuchField'], 1)) });
  for (const [name, prop] of Object.entries((s.properties ?? {}) as Json)) {
    const p = [...path, name];
    for (const [what, value] of violationsOf(spec, prop as Json)) out.push({ label: `${p.join('.')}: ${what}`, body: JSON.stringify(setAt(base, p, value)) });
    const marker = 424242.5;
    const withMarker = JSON.stringify(setAt(base, p, marker));
    out.push({ label: `${p.join('.')}: 1e309`, body: withMarker.replace(String(marker), '1e309') });
    out.push({ label: `${p.join('.')}: NaN`, body: withMarker.replace(String(marker), 'NaN') });
    out.push({ label: `${p.join('.')}: 10,000 nested arrays`, body: withMarker.replace(String(marker), NESTED_10K) });
    const r = resolve(spec, prop as Json);
    if (depth < 3 && r.type === 'object' && r.properties) {
      const nestedBase = setAt(base, p, sample(spec, r));
      out.push(...bodyViolations(spec, r, nestedBase, p, depth + 1));
    }
  }
  return out;
}

/** Every case of one operation. */
export function casesOf(spec: Json, operation: Operation): RestCase[] {
  const { template, method, op, pathItem, key } = operation;
  const params = [...(pathItem.parameters ?? []), ...(op.parameters ?? [])].map((p: Json) => resolve(spec, p));
  const fill = (overrides: Record<string, string> = {}) => template.replace(/\{([^}]+)\}/g, (_, name: string) => encodeURIComponent(overrides[name] ?? 'no-such-id'));
  const query = (q: Record<string, string>) => {
    const s = new URLSearchParams(q).toString();
    return s ? `?${s}` : '';
  };
  const out: RestCase[] = [];
  const add = (c: Omit<RestCase, 'method' | 'key'>) => out.push({ ...c, method, key });
  for (const p of params.filter((x) => x.in === 'path')) {
    for (const v of ['', '%00', 'x'.repeat(3000), '..', '1e309', '__proto__']) add({ label: `path ${p.name}=${v.slice(0, 12)}`, path: fill({ [p.name]: v }) });
  }
  for (const p of params.filter((x) => x.in === 'query')) {
    for (const v of [...ODD_NUMBERS, ...ODD_STRINGS.slice(0, 6)]) add({ label: `query ${p.name}=${v.slice(0, 12)}`, path: fill() + query({ [p.name]: v }) });
    for (const [what, value] of violationsOf(spec, p.schema).filter(([, v]) => typeof v === 'string' || typeof v === 'number')) add({ label: `query ${p.name}: ${what}`, path: fill() + query({ [p.name]: String(value) }) });
  }
  add({ label: 'unknown query parameter', path: fill() + query({ 'no-such-parameter': '1' }) });
  add({ label: 'a repeated query parameter', path: `${fill()}?__proto__=1&__proto__=2&constructor=x` });
  const content = (op.requestBody?.content ?? {}) as Json;
  const schema = content['application/json']?.schema;
  if (schema) {
    const base = sample(spec, schema);
    const json = (label: string, body: string | Buffer, contentType = 'application/json') => add({ label, path: fill(), body, contentType });
    json('malformed JSON', '{"a":');
    json('JSON 1e309', '1e309');
    json('JSON NaN', 'NaN');
    json('10,000 nested arrays', NESTED_10K);
    json('a body beyond http.bodyLimitBytes', Buffer.alloc(1024 * 1024 + 10, 0x20));
    json('__proto__ and constructor keys', JSON.stringify(base).replace(/^\{/, '{"__proto__":{"isAdmin":true,"permissions":["*"]},"constructor":{"prototype":{"polluted":true}},').replace(/,\}$/, '}'));
    json('the body as text/plain', JSON.stringify(base), 'text/plain');
    json('the body form-encoded', 'a=1&b=2', 'application/x-www-form-urlencoded');
    json('the body as UTF-16', Buffer.from(`\ufeff${JSON.stringify(base)}`, 'utf16le'), 'application/json; charset=utf-16');
    json('multipart instead of JSON', '--b\r\nContent-Disposition: form-data; name="x"\r\n\r\n1\r\n--b--\r\n', 'multipart/form-data; boundary=b');
    for (const v of ODD_JSON_VALUES) json(`body ${JSON.stringify(v).slice(0, 20)}`, JSON.stringify(v));
    const resolved = resolve(spec, schema);
    if (resolved.type === 'object' && base && typeof base === 'object') for (const v of bodyViolations(spec, resolved, base as Json)) json(v.label, v.body);
  }
  for (const [mediaType] of Object.entries(content).filter(([t]) => t !== 'application/json' && t !== 'multipart/form-data')) {
    add({ label: `${mediaType}: garbage`, path: fill(), body: Buffer.from([0xff, 0xfe, 0x00, 0x7b, 0x3a, 0x0a]), contentType: mediaType });
    add({ label: `${mediaType}: beyond http.bodyLimitBytes`, path: fill(), body: Buffer.alloc(1024 * 1024 + 10, 0x61), contentType: mediaType });
    add({ label: `${mediaType}: as JSON`, path: fill(), body: '{"a":1}', contentType: 'application/json' });
  }
  return out;
}

/** The contract's error shape: {statusCode (the status), error, message[, errors, correlationId]}. */
export function errorShapeProblem(status: number, body: unknown): string | undefined {
  if (typeof body !== 'object' || body === null) return `not a JSON error body: ${String(body).slice(0, 100)}`;
  const b = body as Json;
  if (b.statusCode !== status) return `statusCode ${JSON.stringify(b.statusCode)} for a ${status}`;
  if (typeof b.error !== 'string' || typeof b.message !== 'string') return `error/message missing: ${JSON.stringify(b).slice(0, 200)}`;
  return undefined;
}
