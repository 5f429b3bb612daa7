// A fuzz pass over every operation of the OpenAPI document (issue 11 point 4), generated from the
// document itself: for each path, query and body field, values of the wrong type, at and beyond
// their bounds, oversized, malformed JSON and exotic numbers, sent by the administrator (who gets
// furthest into the code). No answer may be a 500, the daemon must keep answering, and a refused
// request (4xx) must leave the store exactly as it was. Deterministic (no randomness) and
// bounded: a fixed list of values per field.
import { createHash } from 'node:crypto';
import { expect } from 'chai';
import { loadOpenApiDocument } from '../src/http/create-http-app.js';
import { startGateway, type TestGateway } from './support/harness.js';

type Json = Record<string, any>;

/** Operations the fuzzer leaves out, and why. */
const SKIPPED = new Set([
  // Ends the administrator's own session, which the rest of the pass uses.
  'POST /api/logout',
  // Multipart upload, fuzzed by the maintenance tests (size limits, wrong fields, bad archives);
  // a refused restore is recorded on purpose, as the last operation's result (GET /api/maintenance/db).
  'POST /api/maintenance/db/restore',
]);

const ODD_STRINGS = ['', ' ', 'x'.repeat(70_000), '\u0000', '../../etc/passwd', '%2e%2e%2f', '${jndi:ldap://127.0.0.1/x}', '😀'.repeat(100), '<script>', 'a/#/b', '+', '$SYS/x'];
const ODD_NUMBERS = ['1e309', '-1e309', 'NaN', 'Infinity', '-1', '0', '1.5', '0x10', '99999999999999999999', '010', ' 7'];
const ODD_JSON_VALUES: unknown[] = [null, true, -1, 0, 1.5, 2 ** 53 + 2, '', 'x'.repeat(70_000), [], {}, [[[[[[[[[[]]]]]]]]]], { nested: { deeper: { deepest: [1, 2, 3] } } }];

function resolve(spec: Json, node: Json | undefined): Json {
  let n = node ?? {};
  for (let i = 0; i < 10 && typeof n.$ref === 'string'; i++) {
    n = n.$ref.split('/').slice(1).reduce((o: Json, k: string) => o?.[k], spec) ?? {};
  }
  return n;
}

/** A value the schema accepts, as far as a quick reading tells (the base the mutations start from). */
function sample(spec: Json, schemaIn: Json | undefined, depth = 0): unknown {
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

interface Case {
  label: string;
  path: string;
  body?: string;
}

function casesOf(spec: Json, template: string, method: string, op: Json, pathItem: Json): Case[] {
  const params = [...(pathItem.parameters ?? []), ...(op.parameters ?? [])].map((p: Json) => resolve(spec, p));
  const fill = (overrides: Record<string, string> = {}) =>
    template.replace(/\{([^}]+)\}/g, (_, name: string) => encodeURIComponent(overrides[name] ?? 'no-such-id'));
  const query = (q: Record<string, string>) => {
    const s = new URLSearchParams(q).toString();
    return s ? `?${s}` : '';
  };
  const out: Case[] = [];
  for (const p of params.filter((x) => x.in === 'path')) {
    for (const v of ['', '%00', 'x'.repeat(3000), '..', '1e309']) out.push({ label: `path ${p.name}=${v.slice(0, 12)}`, path: fill({ [p.name]: v }) });
  }
  for (const p of params.filter((x) => x.in === 'query')) {
    for (const v of [...ODD_NUMBERS, ...ODD_STRINGS.slice(0, 6)]) out.push({ label: `query ${p.name}=${v.slice(0, 12)}`, path: fill() + query({ [p.name]: v }) });
  }
  out.push({ label: 'unknown query parameter', path: fill() + query({ 'no-such-parameter': '1' }) });
  const schema = op.requestBody?.content?.['application/json']?.schema;
  if (schema) {
    const base = sample(spec, schema);
    out.push({ label: 'malformed JSON', path: fill(), body: '{"a":' });
    out.push({ label: 'JSON 1e309', path: fill(), body: '1e309' });
    for (const v of ODD_JSON_VALUES) out.push({ label: `body ${JSON.stringify(v).slice(0, 20)}`, path: fill(), body: JSON.stringify(v) });
    const resolved = resolve(spec, schema);
    if (resolved.type === 'object' && base && typeof base === 'object') {
      for (const name of Object.keys(resolved.properties ?? {})) {
        for (const v of ODD_JSON_VALUES) out.push({ label: `body.${name}=${JSON.stringify(v).slice(0, 20)}`, path: fill(), body: JSON.stringify({ ...(base as Json), [name]: v }) });
        out.push({ label: `body.${name}=1e309`, path: fill(), body: JSON.stringify({ ...(base as Json), [name]: 0 }).replace(/0}$/, '1e309}') });
      }
      out.push({ label: 'extra property', path: fill(), body: JSON.stringify({ ...(base as Json), noSuchField: 1 }) });
    }
  }
  return out;
}

describe('fuzz over the OpenAPI document', function () {
  this.timeout(300_000);
  let gw: TestGateway;
  let admin: string;

  before(async () => {
    gw = await startGateway();
    admin = await gw.login();
  });
  after(() => gw.stop());

  /** SHA-256 over every record of every database of the store. */
  function storeDigest(): string {
    const hash = createHash('sha256');
    const store = gw.services.store as unknown as Record<string, { getRange?: () => Iterable<{ key: unknown; value: unknown }> }>;
    for (const name of Object.keys(store).sort()) {
      const db = store[name];
      if (!db || typeof db.getRange !== 'function') continue;
      hash.update(name);
      for (const { key, value } of db.getRange()) hash.update(JSON.stringify([key, value]) ?? '');
    }
    return hash.digest('hex');
  }

  it('never answers 500, keeps answering, and changes nothing on a refused request', async () => {
    const spec = loadOpenApiDocument() as Json;
    let sent = 0;
    const problems: string[] = [];
    for (const [template, pathItem] of Object.entries(spec.paths as Json)) {
      for (const [method, op] of Object.entries(pathItem as Json)) {
        if (method === 'parameters') continue;
        const key = `${method.toUpperCase()} ${template}`;
        if (SKIPPED.has(key)) continue;
        for (const c of casesOf(spec, template, method, op as Json, pathItem as Json)) {
          const before = storeDigest();
          const res = await gw.api(method.toUpperCase(), c.path, {
            token: admin,
            ...(c.body !== undefined ? { raw: c.body, headers: { 'content-type': 'application/json' } } : {}),
          });
          sent++;
          if (res.status >= 500 && res.status !== 501 && res.status !== 503) problems.push(`${key} [${c.label}] -> ${res.status} ${JSON.stringify(res.body).slice(0, 200)}`);
          if (res.status >= 400 && storeDigest() !== before) problems.push(`${key} [${c.label}] -> ${res.status} but the store changed`);
        }
      }
    }
    expect(problems, problems.join('\n')).to.deep.equal([]);
    expect(sent).to.be.above(500);
    expect((await gw.api('GET', '/api/session', { token: admin })).status, 'still answering, admin session intact').to.equal(200);
  });
});
