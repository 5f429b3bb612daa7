import type { IncomingMessage } from 'node:http';
import { Ajv, type ValidateFunction } from 'ajv';
import type { RequestHandler, Response } from 'express';
import type { BrokerHooks, VerneHook } from '../../broker-hooks/index.js';
import { BadRequestError, InternalError, PayloadTooLargeError } from '../../errors/errors.js';
import { loadOpenApiDocument } from '../openapi-document.js';

type Json = any;
const PREFIX = '/api/broker/hooks';

interface HookOperation {
  contentType: 'application/json' | 'application/x-www-form-urlencoded';
  validateBody: ValidateFunction;
  /** Required header parameters and their allowed values (the VerneMQ hook name). */
  headers: { name: string; allowed: readonly string[] }[];
  /** Tests: the 200 answer's schema by content type. */
  validateAnswer?: ValidateFunction;
}

/**
 * The hooks' operations compiled from the OpenAPI document itself (its request body, header and
 * answer schemas), so that the hooks validate exactly what the document says without the
 * generic pipeline (router, express-openapi-validator): a cluster asks once per login, topic or
 * publish, and that pipeline was most of a decision's cost (docs/scaling-out.md).
 */
function compileOperations(validateAnswers: boolean): Map<string, HookOperation> {
  const doc = loadOpenApiDocument() as Json;
  const deref = (node: Json) => (typeof node?.$ref === 'string' ? node.$ref.slice(2).split('/').reduce((o: Json, k: string) => o?.[k], doc) : node);
  const ajv = new Ajv({ strict: false, allErrors: false, validateFormats: false });
  const ops = new Map<string, HookOperation>();
  for (const [path, item] of Object.entries<Json>(doc.paths)) {
    if (!path.startsWith(`${PREFIX}/`) || !item.post) continue;
    const content = deref(item.post.requestBody).content as Record<string, { schema: Json }>;
    const contentType = Object.keys(content)[0] as HookOperation['contentType'];
    const answer = deref(item.post.responses['200']).content as Record<string, { schema: Json }>;
    const answerSchema = Object.values(answer)[0]!.schema;
    ops.set(path.slice(PREFIX.length), {
      contentType,
      validateBody: ajv.compile(deref(content[contentType]!.schema)),
      headers: ((item.post.parameters ?? []) as Json[]).map(deref).filter((p) => p.in === 'header' && p.required).map((p) => ({ name: String(p.name).toLowerCase(), allowed: p.schema.enum ?? [] })),
      ...(validateAnswers ? { validateAnswer: ajv.compile(deref(answerSchema)) } : {}),
    });
  }
  return ops;
}

function readBody(req: IncomingMessage, limit: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        // Answered at once; the rest is read and dropped so the client gets the 413.
        req.off('data', onData);
        req.resume();
        reject(new PayloadTooLargeError('request body is too large'));
        return;
      }
      chunks.push(chunk);
    };
    req.on('data', onData);
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

/** A form body with flat keys, as RabbitMQ sends it (`variable_map.client_id` stays one key). */
function parseForm(text: string): Record<string, string> {
  const out: Record<string, string> = Object.create(null);
  for (const [k, v] of new URLSearchParams(text)) out[k] = v;
  return out;
}

/**
 * The cluster hooks (src/broker-hooks), mounted at /api/broker/hooks after the caller guard:
 * parse and validate against the document, call the hook, answer. Thin like every route.
 */
export function brokerHookEndpoint(deps: { hooks: BrokerHooks; bodyLimitBytes: number; validateAnswers?: boolean }): RequestHandler {
  const { hooks } = deps;
  const ops = compileOperations(deps.validateAnswers ?? false);

  const handlers: Record<string, (body: Json, hook: string | undefined, res: Response) => Promise<unknown> | unknown> = {
    '/rabbitmq/user': async (body) => hooks.rabbitmq.user(body),
    '/rabbitmq/vhost': (body) => hooks.rabbitmq.vhost(body),
    '/rabbitmq/resource': (body) => hooks.rabbitmq.resource(body),
    '/rabbitmq/topic': (body) => hooks.rabbitmq.topic(body),
    '/vernemq': async (body, hook, res) => {
      const answer = await hooks.vernemq.handle(hook as VerneHook, body);
      if (answer.cacheSeconds) res.setHeader('cache-control', `max-age=${answer.cacheSeconds}`);
      return answer.body;
    },
    '/emqx/authn': async (body) => hooks.emqx.authn(body),
    '/emqx/authz': (body) => hooks.emqx.authz(body),
  };

  return async (req, res, next) => {
    const op = ops.get(req.path);
    if (!op || req.method !== 'POST') return next(); // the generic pipeline answers 404 / 405
    const type = (req.get('content-type') ?? '').split(';')[0]!.trim().toLowerCase();
    if (type !== op.contentType) throw Object.assign(new Error(`unsupported media type ${type || '(none)'}: send ${op.contentType}`), { status: 415 });
    let hook: string | undefined;
    for (const header of op.headers) {
      hook = req.get(header.name);
      if (hook === undefined || !header.allowed.includes(hook)) {
        throw new BadRequestError(`header ${header.name} must be one of ${header.allowed.join(', ')}`, [{ path: `/headers/${header.name}`, message: `must be one of ${header.allowed.join(', ')}` }]);
      }
    }
    const text = await readBody(req, deps.bodyLimitBytes);
    let body: Json;
    try {
      body = op.contentType === 'application/json' ? JSON.parse(text) : parseForm(text);
    } catch {
      throw new BadRequestError('request body is not valid JSON');
    }
    if (!op.validateBody(body)) {
      const e = op.validateBody.errors![0]!;
      const at = `/body${e.instancePath}`;
      throw new BadRequestError(`request${at} ${e.message ?? 'is invalid'}`, [{ path: at, message: e.message ?? 'is invalid' }]);
    }
    const answer = await handlers[req.path]!(body, hook, res);
    if (op.validateAnswer && !op.validateAnswer(answer)) throw new InternalError(`answer of ${req.path} breaks the document: ${JSON.stringify(op.validateAnswer.errors)}`);
    if (typeof answer === 'string') res.type('text/plain').send(answer);
    else res.json(answer);
  };
}

