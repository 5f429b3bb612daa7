// Tests check every JSON answer of the API against the OpenAPI document (the daemon does not):
// an answer that breaks it becomes a 500 that says how, so the test that caused it fails.
import type { RequestHandler } from 'express';
import type { ResponseValidators } from './compiled-validators.js';
import type { OperationIndex } from './operation-index.js';
import { describeFailures } from './request-validator.js';

/** Why `body`, sent with `status` as the answer of `operation`, breaks the document (undefined: it does not). */
function breach(validators: ResponseValidators, operation: string, status: number, contentType: string | undefined, body: unknown): string | undefined {
  const plan = validators.plan(operation);
  if (!plan) return undefined;
  const code = String(status);
  const declared = plan.byStatus[code] ?? plan.byStatus[`${code[0]}XX`] ?? plan.byStatus.default;
  if (!declared) return `no schema defined for status code '${code}' in the openapi spec`;
  if (!declared.content) return body === undefined ? undefined : 'response should NOT have a body';
  // res.json answers JSON: the document's JSON media type (another is not checked here).
  const type = contentType?.split(';')[0]!.trim().toLowerCase();
  const json = Object.keys(declared.media).filter((t) => /^[^/]+\/(.+\+)?json$/.test(t.split(';')[0]!.trim()));
  const name = declared.media[type && json.includes(type) ? type : json[0]!];
  if (!name) return undefined;
  if (body === undefined || body === null) return 'response body required.';
  // What goes over the wire (a Date as its ISO text).
  const data = { response: JSON.parse(JSON.stringify(body)) as unknown };
  const check = validators.check(name);
  if (check(data)) return undefined;
  return describeFailures(check.errors ?? [], '').message;
}

export function responseValidator(deps: { operations: OperationIndex; validators: ResponseValidators }): RequestHandler {
  const { operations, validators } = deps;
  return (req, res, next) => {
    const operation = operations.find(req.method, req.path);
    if (!operation) return next();
    const json = res.json.bind(res);
    res.json = (body: unknown) => {
      const problem = breach(validators, operation, res.statusCode, res.getHeader('content-type') as string | undefined, body);
      if (!problem) return json(body);
      res.status(500);
      return json({ statusCode: 500, error: 'Internal Server Error', message: `the answer of ${operation} breaks the OpenAPI document: ${problem}` });
    };
    next();
  };
}
