// Every API request is checked against the OpenAPI document before a route sees it, with the
// validators the build compiled from it (compiled-validators.ts): the rules and messages are
// those express-openapi-validator 5 applied until issue 32, which compiled the document at every
// start (a third of the daemon's start-up CPU). In order: a method the path lacks (405), the
// body's media type (415), query values with reserved characters left unencoded, unknown or
// empty query parameters, then the values themselves (coerced to their types, defaults filled
// in) — all 400 with the rule that failed.
import type { RequestHandler } from 'express';
import { BadRequestError, MethodNotAllowedError, UnsupportedMediaTypeError, type ValidationIssue } from '../errors/errors.js';
import type { RequestValidators, ValidationFailure } from './compiled-validators.js';
import type { OperationIndex } from './operation-index.js';
import type { OperationPlan } from './openapi-operations.js';

const RESERVED = /[:/?#[\]@!$&'()*+,;=]/;
const RESERVED_BUT_COMMA = /[:/?#[\]@!$&'()*+;=]/;

/** The raw (undecoded) values of each query name, as the URL spells them. */
function rawQueryValues(url: string): Map<string, (string | undefined)[]> {
  const out = new Map<string, (string | undefined)[]>();
  const q = url.indexOf('?');
  if (q < 0) return out;
  for (const pair of url.slice(q + 1).split('&')) {
    const [name, value] = pair.split('=') as [string, string | undefined];
    if (!out.has(name)) out.set(name, []);
    out.get(name)!.push(value);
  }
  return out;
}

/** Ajv's failures as the API reports them: `request/body/x must …` and one issue per failure. */
export function describeFailures(failures: ValidationFailure[], dataVar: string): { message: string; errors: ValidationIssue[] } {
  const errors = failures.map((e) => {
    let message = e.message ?? 'is invalid';
    const allowed = e.params.allowedValues;
    if (e.keyword === 'enum' && Array.isArray(allowed)) message = `${message}: ${allowed.join(', ')}`;
    const named = e.params.missingProperty ?? e.params.additionalProperty;
    return { path: named !== undefined ? `${e.instancePath}/${String(named)}` : e.instancePath, message, at: e.instancePath };
  });
  return { message: errors.map((e) => `${dataVar}${e.at} ${e.message}`).join(', '), errors: errors.map(({ path, message }) => ({ path, message })) };
}

function mediaTypeOf(header: string | undefined): string | undefined {
  const type = header?.split(';')[0]!.trim().toLowerCase();
  return type || undefined;
}

/** The body's validator for the request's media type, or the reason it has none. */
function bodyValidator(op: OperationPlan, contentType: string | undefined, path: string): string | null {
  const body = op.body!;
  const type = mediaTypeOf(contentType);
  const media = body.media.find((m) => m.type === type) ?? body.media.find((m) => m.type === '*/*' || (m.type.endsWith('/*') && type?.startsWith(m.type.slice(0, -1))));
  if (media) return media.validator;
  if (!type && body.optional) return null;
  const message = type ? `unsupported media type ${contentType!.trim().toLowerCase()}` : 'media type not specified';
  throw new UnsupportedMediaTypeError(message, [{ path, message }]);
}

function checkQuery(op: OperationPlan, query: Record<string, unknown>, url: string): void {
  const plan = op.query;
  const raw = plan.names.length ? rawQueryValues(url) : undefined;
  for (const name of plan.names) {
    if (plan.reservedAllowed.includes(name)) continue;
    const reserved = plan.commaAllowed.includes(name) ? RESERVED_BUT_COMMA : RESERVED;
    if (raw!.get(name)?.some((v) => v !== undefined && reserved.test(v))) {
      const message = `Parameter '${name}' must be url encoded. Its value may not contain reserved characters.`;
      throw new BadRequestError(message, [{ path: `/query/${name}`, message }]);
    }
  }
  for (const name of plan.arrays) {
    const value = query[name];
    if (value !== undefined && !Array.isArray(value)) query[name] = [value];
  }
  for (const name of Object.keys(query)) {
    if (!plan.names.includes(name)) {
      const message = `Unknown query parameter '${name}'`;
      throw new BadRequestError(message, [{ path: `/query/${name}`, message }]);
    }
    if (query[name] === '') {
      const message = `Empty value found for query parameter '${name}'`;
      throw new BadRequestError(message, [{ path: `/query/${name}`, message }]);
    }
  }
}

/** The request validation middleware; res.locals.operation names the operation ("GET /api/users/{id}") for the handlers after it. */
export function requestValidator(deps: { operations: OperationIndex; validators: RequestValidators }): RequestHandler {
  const { operations, validators } = deps;
  return (req, res, next) => {
    const path = req.path;
    const found = operations.match(req.method, path);
    // Not the document's path: the not-found handler answers.
    if (!found) return next();
    if ('allowed' in found) {
      res.setHeader('Allow', found.allowed.join(', '));
      const message = `${req.method} method not allowed`;
      throw new MethodNotAllowedError(message, [{ path, message }]);
    }
    const op = found.operation;
    const params: Record<string, string> = {};
    try {
      op.pathParams.forEach((name, i) => (params[name] = decodeURIComponent(found.rawParams[i]!)));
    } catch {
      throw new BadRequestError('malformed uri', [{ path, message: 'malformed uri' }]);
    }
    const bodyCheck = op.body ? bodyValidator(op, req.headers['content-type'], op.template) : null;
    // Express 5 parses req.query anew at each read: parse it once, validate and coerce that.
    const query = req.query as Record<string, unknown>;
    Object.defineProperty(req, 'query', { value: query, writable: true, enumerable: true, configurable: true });
    checkQuery(op, query, req.originalUrl);
    if (op.body?.media.some((m) => m.type === 'multipart/form-data') && mediaTypeOf(req.headers['content-type']) === 'multipart/form-data') req.body ??= {};

    const data = { query, headers: req.headers, params, body: req.body as unknown };
    const general = validators.check(op.general);
    const body = bodyCheck ? validators.check(bodyCheck) : undefined;
    const generalValid = general(data);
    const bodyValid = body ? body(data) : true;
    if (!generalValid || !bodyValid) {
      const failures = [...(generalValid ? [] : (general.errors ?? [])), ...(bodyValid ? [] : (body!.errors ?? []))];
      const { message, errors } = describeFailures(failures, 'request');
      throw new BadRequestError(message, errors);
    }
    // Coercion and defaults may have replaced the body itself (a bare value).
    req.body = data.body;
    res.locals.operation = found.key;
    next();
  };
}
