// Fuzz target: the REST API (issue 35 B), at random beyond the deterministic pass of
// test/openapi-fuzz.test.ts: an operation of the OpenAPI document, then either one of its
// one-constraint cases (wire/rest-cases.ts) or its sample body with random values at random places
// (JSON of any shape, naughty strings, edge numbers, extra and prototype keys) and random query
// values, sent by the administrator to a real in-process gateway. Oracles: never a 5xx (but
// 501/503), a 4xx in the contract's shape and the store unchanged (digest of every table), no
// unhandled rejection (the runner's), ≤ 200 ms of CPU per request (HTTP and a store digest around it).
import fc from 'fast-check';
import { startGateway, type TestGateway } from '../../support/harness.js';
import { changedRecords, storeRecords } from '../../support/store-digest.js';
import { FuzzFinding, typedTarget, type TypedTarget } from '../support/typed-target.js';
import { casesOf, errorShapeProblem, loadSpec, NAUGHTY_STRINGS, operations, resolve, sample, type Json, type Operation, type RestCase } from '../wire/rest-cases.js';

export interface RestState {
  gw: TestGateway;
  admin: string;
  spec: Json;
  ops: Operation[];
  cases: RestCase[][];
}

/** Paths of the properties of an object schema (down to depth 3). */
function propertyPaths(spec: Json, schemaIn: Json | undefined, prefix: string[] = [], depth = 0): string[][] {
  const s = resolve(spec, schemaIn);
  const out: string[][] = [];
  for (const [name, prop] of Object.entries((s.properties ?? {}) as Json)) {
    out.push([...prefix, name]);
    if (depth < 3) out.push(...propertyPaths(spec, prop as Json, [...prefix, name], depth + 1));
  }
  return out;
}

const valueArb: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 3, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
  { weight: 2, arbitrary: fc.constantFrom(...NAUGHTY_STRINGS) },
  { weight: 2, arbitrary: fc.constantFrom(0, -1, 1, 0.5, -0, 2 ** 31, 2 ** 53, -(2 ** 53), Number.MAX_VALUE, Number.MIN_VALUE, 1e21) },
  { weight: 1, arbitrary: fc.string({ unit: 'grapheme', maxLength: 300 }) },
  { weight: 1, arbitrary: fc.nat(70_000).map((n) => 'x'.repeat(n)) },
  { weight: 1, arbitrary: fc.dictionary(fc.constantFrom('__proto__', 'constructor', 'prototype', 'toString', 'x'), fc.jsonValue({ maxDepth: 1 })) },
);

export function restInputArb(state: RestState): fc.Arbitrary<RestCase> {
  const { spec, ops, cases } = state;
  const fromCases = fc.nat(ops.length - 1).chain((i) => fc.constantFrom(...(cases[i]!.length ? cases[i]! : [{ label: 'no case', method: ops[i]!.method, key: ops[i]!.key, path: ops[i]!.template }])));
  const randomBody = fc.nat(ops.length - 1).chain((i) => {
    const op = ops[i]!;
    const schema = op.op.requestBody?.content?.['application/json']?.schema;
    const paths = schema ? propertyPaths(spec, schema) : [];
    const params = [...(op.pathItem.parameters ?? []), ...(op.op.parameters ?? [])].map((p: Json) => resolve(spec, p));
    return fc.record({
      changes: fc.array(fc.record({ path: paths.length ? fc.constantFrom(...paths) : fc.constant(['x']), value: valueArb }), { maxLength: 4 }),
      query: fc.array(fc.record({ name: fc.constantFrom(...params.filter((p) => p.in === 'query').map((p) => p.name as string), 'x'), value: fc.string({ maxLength: 40 }) }), { maxLength: 3 }),
      pathValue: fc.oneof(fc.constant('no-such-id'), fc.string({ minLength: 1, maxLength: 40 })),
      contentType: fc.constantFrom('application/json', 'application/json', 'application/json', 'text/plain', 'application/json; charset=latin1', 'application/merge-patch+json'),
    }).map(({ changes, query, pathValue, contentType }) => {
      let body: unknown = schema ? sample(spec, schema) : undefined;
      for (const c of changes) {
        if (!body || typeof body !== 'object') body = {};
        let node = body as Json;
        for (const k of c.path.slice(0, -1)) node = (typeof node[k] === 'object' && node[k] !== null ? node[k] : (node[k] = {})) as Json;
        node[c.path[c.path.length - 1]!] = c.value;
      }
      const qs = new URLSearchParams(query.map((q) => [q.name, q.value] as [string, string])).toString();
      const path = op.template.replace(/\{[^}]+\}/g, () => encodeURIComponent(pathValue.replace(/[\ud800-\udfff]/g, 'x'))) + (qs ? `?${qs}` : '');
      return { label: 'random', method: op.method, key: op.key, path, ...(schema ? { body: JSON.stringify(body), contentType } : {}) };
    });
  });
  return fc.oneof({ weight: 1, arbitrary: fromCases }, { weight: 2, arbitrary: randomBody });
}

export const restTarget: TypedTarget<RestCase, RestState> = {
  name: 'rest',
  description: 'never a 5xx (but 501/503); a 4xx in the contract\'s error shape with every record of every table unchanged (but the maintenance status a backup it started writes when it ends); no unhandled rejection; ≤ 200 ms of CPU per request',
  maxCaseMs: 200,
  // An answer of the API (JSON, response validation) and a digest of the store around it.
  allowance: (n) => 16 * n + 4 * 1024 * 1024,
  arbitrary: (state) => restInputArb(state),
  encode: (c) => Buffer.from(JSON.stringify({ ...c, body: c.body === undefined ? undefined : Buffer.from(c.body).toString('base64') })),
  decode: (bytes) => {
    const c = JSON.parse(bytes.toString('utf8')) as RestCase & { body?: string };
    return { ...c, ...(c.body !== undefined ? { body: Buffer.from(c.body, 'base64') } : {}) };
  },
  async setup() {
    // Login delays are the throttle's design, not a hang; the per-address lock would keep the
    // administrator out once the fuzz failed 100 logins.
    const gw = await startGateway({ overrides: { log: { level: 'error', requests: false }, auth: { loginThrottle: { delayStepMs: 0, maxDelayMs: 0, maxFailuresPerAddress: 0 } } } });
    const admin = await gw.login();
    const spec = loadSpec();
    const ops = operations(spec);
    return { gw, admin, spec, ops, cases: ops.map((op) => casesOf(spec, op)) };
  },
  teardown: (state) => state.gw.stop(),
  async execute(state, c) {
    const records = storeRecords(state.gw);
    const res = await state.gw.api(c.method, c.path, { token: state.admin, ...(c.body !== undefined ? { raw: c.body, headers: { 'content-type': c.contentType ?? 'application/json' } } : {}) });
    const what = `${c.key} [${c.label}] -> ${res.status}`;
    if (res.status >= 500 && res.status !== 501 && res.status !== 503) throw new FuzzFinding(`${what} ${JSON.stringify(res.body).slice(0, 300)}`);
    if (res.status >= 400 && res.status < 500) {
      const shape = errorShapeProblem(res.status, res.body);
      if (shape) throw new FuzzFinding(`${what}: ${shape}`);
      // A backup the fuzz started (202) records its end in the maintenance status when it ends.
      const changed = changedRecords(records, storeRecords(state.gw)).filter((k) => k !== 'kv ["maintenance","status"]');
      if (changed.length) throw new FuzzFinding(`${what} but the store changed: ${changed.slice(0, 5).join('; ')}`);
    }
    if (res.status === 401) state.admin = await state.gw.login();
  },
};

/** The runner's form of it (test/fuzz/support/typed-target.ts). */
export const target = typedTarget(restTarget);
