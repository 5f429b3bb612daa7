// Query numbers as the document declares them, nothing looser. Coercing validators (Ajv's
// coerceTypes, used by express-openapi-validator) read "1e309" as Infinity, "0x10" as 16 and
// " 10" or "10.0" as 10, and Infinity passes `type: integer` without a maximum: such values
// are refused here (400) before validation. An integer is decimal digits with an optional sign,
// without leading zeros, and a safe integer (no silent rounding beyond 2^53).
import type { RequestHandler } from 'express';
import { BadRequestError } from '../errors/errors.js';
import type { OperationIndex } from './operation-index.js';

type Json = Record<string, any>;
const INTEGER = /^-?(0|[1-9][0-9]*)$/;
const NUMBER = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?$/;

/** "METHOD /template" → query parameter name → 'integer' | 'number' (including arrays of them). */
function numericQueryParameters(spec: Json): Map<string, Map<string, 'integer' | 'number'>> {
  const shared = (spec.components?.parameters ?? {}) as Json;
  const resolve = (p: Json): Json => (typeof p.$ref === 'string' ? (shared[p.$ref.split('/').pop()!] ?? {}) : p);
  const out = new Map<string, Map<string, 'integer' | 'number'>>();
  for (const [template, item] of Object.entries((spec.paths ?? {}) as Json)) {
    for (const [method, op] of Object.entries(item as Json)) {
      if (method === 'parameters' || typeof op !== 'object') continue;
      const params = new Map<string, 'integer' | 'number'>();
      for (const raw of [...((item as Json).parameters ?? []), ...((op as Json).parameters ?? [])]) {
        const p = resolve(raw as Json);
        if (p.in !== 'query') continue;
        const schema = p.schema ?? {};
        const type = schema.type === 'array' ? schema.items?.type : schema.type;
        if (type === 'integer' || type === 'number') params.set(p.name as string, type);
      }
      if (params.size) out.set(`${method.toUpperCase()} ${template}`, params);
    }
  }
  return out;
}

export function strictQueryNumbers(spec: Json, operations: OperationIndex): RequestHandler {
  const byOperation = numericQueryParameters(spec);
  return (req, _res, next) => {
    const key = operations.find(req.method, req.baseUrl + req.path);
    const params = key ? byOperation.get(key) : undefined;
    if (!params) return next();
    const query = req.query as Record<string, unknown>;
    for (const [name, type] of params) {
      const value = query[name];
      if (value === undefined) continue;
      for (const v of Array.isArray(value) ? value : [value]) {
        const text = String(v);
        const ok = (type === 'integer' ? INTEGER : NUMBER).test(text) && (type === 'number' || Number.isSafeInteger(Number(text)));
        if (!ok) {
          const message = `must be ${type === 'integer' ? 'a decimal integer' : 'a decimal number'} within range`;
          return next(new BadRequestError(`query parameter ${name}: ${message}`, [{ path: `query.${name}`, message }]));
        }
      }
    }
    next();
  };
}
