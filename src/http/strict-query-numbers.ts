// Query numbers as the document declares them, nothing looser. Coercing validators (Ajv's
// coerceTypes, which request validation uses for query values) read "1e309" as Infinity, "0x10" as 16 and
// " 10" or "10.0" as 10, and Infinity passes `type: integer` without a maximum: such values
// are refused here (400) before validation. An integer is decimal digits with an optional sign,
// without leading zeros, and a safe integer (no silent rounding beyond 2^53).
import type { RequestHandler } from 'express';
import { BadRequestError } from '../errors/errors.js';
import type { OperationIndex } from './operation-index.js';

const INTEGER = /^-?(0|[1-9][0-9]*)$/;
const NUMBER = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?$/;

export function strictQueryNumbers(operations: OperationIndex): RequestHandler {
  return (req, _res, next) => {
    const found = operations.match(req.method, req.baseUrl + req.path);
    const params = found && 'operation' in found ? Object.entries(found.operation.query.numbers) : [];
    if (!params.length) return next();
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
