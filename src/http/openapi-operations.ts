// What request validation needs of the OpenAPI document, worked out once: per operation its
// parameters, body media types and the JSON schemas to validate them with. `npm run build`
// (scripts/build-openapi.ts) compiles those schemas into standalone code next to the document,
// so the daemon never compiles a schema at start (docs/footprint.md); tests compile the
// response schemas on first use (response-validator.ts). Pure: no Ajv here.

type Json = any;

/** A query parameter's number type, for the strict decimal check (strict-query-numbers.ts). */
export type QueryNumberType = 'integer' | 'number';

export interface QueryPlan {
  /** Declared names (literal: `username[eq]` is one name). */
  names: string[];
  /** Arrays sent as repeated parameters (style form, explode): a single value becomes [value]. */
  arrays: string[];
  /** Names whose raw (undecoded) value may hold reserved characters (allowReserved). */
  reservedAllowed: string[];
  /** Names whose raw value may hold commas (explode false) though not other reserved characters. */
  commaAllowed: string[];
  numbers: Record<string, QueryNumberType>;
}

export interface BodyPlan {
  /** requestBody.required is false: a request without a body and without a content type passes. */
  optional: boolean;
  /** Media types of the document in its order, each with its validator (null: not validated, e.g. binary). */
  media: { type: string; validator: string | null }[];
}

export interface OperationPlan {
  method: string;
  template: string;
  /** Path parameter names in template order. */
  pathParams: string[];
  query: QueryPlan;
  /** Validates { query, headers, params } (coercing, filling defaults). */
  general: string;
  body?: BodyPlan;
}

export interface RequestValidationPlan {
  operations: OperationPlan[];
  /** Validator name → JSON schema; `$ref`s point into the document registered as COMPONENTS_ID. */
  schemas: Record<string, Json>;
  /** The document's components, registered under COMPONENTS_ID before compiling `schemas`. */
  components: Json;
}

export const COMPONENTS_ID = 'api.json';
const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];
/** Formats the validators know; another one in the document stops the build. */
export const KNOWN_FORMATS = ['date-time', 'date', 'time', 'uri', 'uri-reference', 'email', 'hostname', 'ipv4', 'ipv6', 'uuid', 'byte', 'binary', 'password'];

function deref(doc: Json, node: Json): Json {
  if (typeof node?.$ref !== 'string') return node;
  const target = (node.$ref as string).slice(2).split('/').reduce((o: Json, k: string) => o?.[k.replace(/~1/g, '/').replace(/~0/g, '~')], doc);
  if (target === undefined) throw new Error(`unresolved $ref ${node.$ref}`);
  return deref(doc, target);
}

/** A copy of a schema whose local `$ref`s point into the registered components. */
function rebased(schema: Json): Json {
  if (Array.isArray(schema)) return schema.map(rebased);
  if (schema === null || typeof schema !== 'object') return schema;
  const out: Json = {};
  for (const [k, v] of Object.entries(schema)) {
    if (k === 'example' || k === 'examples') continue;
    out[k] = k === '$ref' && typeof v === 'string' && v.startsWith('#/') ? `${COMPONENTS_ID}${v}` : rebased(v);
  }
  return out;
}

function objectOf(props: Record<string, Json>, required: string[]): Json {
  if (Object.keys(props).length === 0) return {};
  return { type: 'object', properties: props, ...(required.length ? { required } : {}) };
}

/** Refuses what the request validator does not implement, so the document cannot drift past it. */
function checkSupported(where: string, p: Json, schema: Json): void {
  if (p.in === 'cookie') throw new Error(`${where}: cookie parameters are not supported`);
  if (p.content) throw new Error(`${where}: parameters with content are not supported`);
  if (!schema || schema.type === 'object' || schema.allOf || schema.oneOf || schema.anyOf) throw new Error(`${where}: object parameters are not supported`);
  if (p.style && !(p.in === 'query' && p.style === 'form') && !(p.in !== 'query' && p.style === 'simple')) throw new Error(`${where}: style ${p.style} is not supported`);
  if (schema.type === 'array' && p.in === 'query' && p.explode === false) throw new Error(`${where}: arrays need explode (repeated parameters)`);
  if (p.allowEmptyValue) throw new Error(`${where}: allowEmptyValue is not supported`);
}

function collectFormats(node: Json, into: Set<string>): void {
  if (Array.isArray(node)) return node.forEach((n) => collectFormats(n, into));
  if (node === null || typeof node !== 'object') return;
  for (const [k, v] of Object.entries(node)) {
    if (k === 'format' && typeof v === 'string') into.add(v);
    else collectFormats(v, into);
  }
}

/** The request validation plan of a document (OpenAPI 3.0). Throws on what it cannot validate. */
export function requestValidationPlan(doc: Json): RequestValidationPlan {
  const formats = new Set<string>();
  collectFormats(doc.components?.schemas, formats);
  collectFormats(doc.paths, formats);
  const unknown = [...formats].filter((f) => !KNOWN_FORMATS.includes(f));
  if (unknown.length) throw new Error(`the OpenAPI document uses formats the validators do not know: ${unknown.join(', ')}`);

  const operations: OperationPlan[] = [];
  const schemas: Record<string, Json> = {};
  // Operations with the same rules share one validator (most have no path or header parameters).
  const nameOf = new Map<string, string>();
  const named = (name: string, schema: Json): string => {
    const text = JSON.stringify(schema);
    if (!nameOf.has(text)) {
      nameOf.set(text, name);
      schemas[name] = schema;
    }
    return nameOf.get(text)!;
  };
  let n = 0;
  for (const [template, rawItem] of Object.entries<Json>(doc.paths ?? {})) {
    const item = deref(doc, rawItem);
    for (const method of Object.keys(item).filter((m) => HTTP_METHODS.includes(m))) {
      const op = item[method];
      const where = `${method.toUpperCase()} ${template}`;
      // Operation-level parameters override path-level ones of the same name and place.
      const params = new Map<string, Json>();
      for (const raw of [...(item.parameters ?? []), ...(op.parameters ?? [])]) {
        const p = deref(doc, raw);
        params.set(`${p.in}:${p.name}`, p);
      }
      const parts: Record<'query' | 'headers' | 'params', { props: Record<string, Json>; required: string[] }> = {
        query: { props: {}, required: [] },
        headers: { props: {}, required: [] },
        params: { props: {}, required: [] },
      };
      const query: QueryPlan = { names: [], arrays: [], reservedAllowed: [], commaAllowed: [], numbers: {} };
      for (const p of params.values()) {
        // A named scalar schema (an enum in components) is what it names; validated through its $ref.
        const schema = p.schema ? deref(doc, p.schema) : p.schema;
        checkSupported(`${where} parameter ${p.name}`, p, schema);
        const part = p.in === 'query' ? 'query' : p.in === 'header' ? 'headers' : 'params';
        const name = p.in === 'header' ? String(p.name).toLowerCase() : String(p.name);
        parts[part].props[name] = rebased(p.schema);
        if (p.required) parts[part].required.push(name);
        if (p.in !== 'query') continue;
        query.names.push(name);
        if (schema.type === 'array') query.arrays.push(name);
        if (p.allowReserved) query.reservedAllowed.push(name);
        else if (p.explode === false) query.commaAllowed.push(name);
        const numberType = schema.type === 'array' ? schema.items?.type : schema.type;
        if (numberType === 'integer' || numberType === 'number') query.numbers[name] = numberType;
      }
      const pathParams = [...template.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]!);
      for (const name of pathParams) if (!parts.params.props[name]) throw new Error(`${where}: path parameter ${name} is not declared`);
      const id = `op${n++}`;
      const general = named(`${id}_general`, {
        type: 'object',
        required: ['query', 'headers', 'params'],
        properties: { query: objectOf(parts.query.props, parts.query.required), headers: objectOf(parts.headers.props, parts.headers.required), params: objectOf(parts.params.props, parts.params.required) },
      });
      const plan: OperationPlan = { method: method.toUpperCase(), template, pathParams, query, general };
      const requestBody = op.requestBody ? deref(doc, op.requestBody) : undefined;
      if (requestBody?.content) {
        plan.body = { optional: requestBody.required === false, media: [] };
        Object.entries<Json>(requestBody.content).forEach(([type, media], k) => {
          const schema = media?.schema;
          const resolved = schema ? deref(doc, schema) : undefined;
          // A binary body is not JSON: not validated here (as the document's upload is received by its own handler).
          if (!schema || resolved?.format === 'binary') return void plan.body!.media.push({ type: type.toLowerCase(), validator: null });
          // The body is required when its schema names required properties.
          const name = named(`${id}_body${k}`, { type: 'object', properties: { body: rebased(schema) }, ...(resolved?.required ? { required: ['body'] } : {}) });
          plan.body!.media.push({ type: type.toLowerCase(), validator: name });
        });
      }
      operations.push(plan);
    }
  }
  return { operations, schemas, components: rebased({ components: doc.components ?? {} }) };
}

export interface ResponsePlan {
  /** status ('200', '4XX', 'default') → whether the document declares content, and each media type's schema name. */
  byStatus: Record<string, { content: boolean; media: Record<string, string> }>;
}

/** A copy of the components where a writeOnly property is never required (a response leaves it out). */
function withoutRequiredWriteOnly(doc: Json, node: Json): Json {
  if (Array.isArray(node)) return node.map((n) => withoutRequiredWriteOnly(doc, n));
  if (node === null || typeof node !== 'object') return node;
  const out: Json = {};
  for (const [k, v] of Object.entries(node)) out[k] = withoutRequiredWriteOnly(doc, v);
  if (Array.isArray(out.required) && out.properties) {
    const local = (s: Json) => (typeof s?.$ref === 'string' ? deref(doc, { $ref: s.$ref.slice(COMPONENTS_ID.length) }) : s);
    out.required = out.required.filter((name: string) => !local(out.properties[name])?.writeOnly);
    if (out.required.length === 0) delete out.required;
  }
  return out;
}

/** Response schemas per operation ("METHOD /template"), for the tests' response validation. */
export function responseValidationPlan(doc: Json): { operations: Map<string, ResponsePlan>; schemas: Record<string, Json>; components: Json } {
  const operations = new Map<string, ResponsePlan>();
  const schemas: Record<string, Json> = {};
  let n = 0;
  for (const [template, rawItem] of Object.entries<Json>(doc.paths ?? {})) {
    const item = deref(doc, rawItem);
    for (const method of Object.keys(item).filter((m) => HTTP_METHODS.includes(m))) {
      const plan: ResponsePlan = { byStatus: {} };
      for (const [status, raw] of Object.entries<Json>(item[method].responses ?? {})) {
        const response = deref(doc, raw);
        const byType: Record<string, string> = {};
        for (const [type, media] of Object.entries<Json>(response.content ?? {})) {
          if (!media?.schema) continue;
          const name = `res${n++}`;
          schemas[name] = withoutRequiredWriteOnly(doc, { type: 'object', properties: { response: rebased(media.schema) } });
          byType[type.toLowerCase()] = name;
        }
        plan.byStatus[status] = { content: !!response.content, media: byType };
      }
      operations.set(`${method.toUpperCase()} ${template}`, plan);
    }
  }
  return { operations, schemas, components: withoutRequiredWriteOnly(doc, rebased({ components: doc.components ?? {} })) };
}
