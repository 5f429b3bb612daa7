import type { IncomingMessage } from 'node:http';
import type { RequestHandler, Response } from 'express';
import type { BrokerHooks, VerneHook } from '../../broker-hooks/index.js';
import { BadRequestError, InternalError, PayloadTooLargeError } from '../../errors/errors.js';
import { compileResponseValidators, loadRequestValidators, type SchemaCheck } from '../compiled-validators.js';
import { loadOpenApiDocument } from '../openapi-document.js';
import { describeFailures } from '../request-validator.js';

type Json = any;
const PREFIX = '/api/broker/hooks';

interface HookOperation {
  contentType: string;
  /** The operation's header rules (the VerneMQ hook name), checked on { query, headers, params }. */
  checkHeaders: SchemaCheck;
  /** The body's schema, checked on { body }. */
  checkBody: SchemaCheck;
  /** Tests: the 200 answer's schema, checked on { response }. */
  checkAnswer?: SchemaCheck;
}

/**
 * The hooks' operations with the validators the build compiled from the OpenAPI document (its
 * request body, header and answer schemas), so that the hooks validate exactly what the document
 * says without the generic pipeline (router, request validation middleware): a cluster asks once
 * per login, topic or publish, and that pipeline was most of a decision's cost (docs/scaling-out.md).
 */
function hookOperations(validateAnswers: boolean): Map<string, HookOperation> {
  const validators = loadRequestValidators();
  const answers = validateAnswers ? compileResponseValidators(loadOpenApiDocument()) : undefined;
  const ops = new Map<string, HookOperation>();
  for (const op of validators.operations) {
    const media = op.body?.media[0];
    if (op.method !== 'POST' || !op.template.startsWith(`${PREFIX}/`) || !media?.validator) continue;
    const answer = answers?.plan(`POST ${op.template}`)?.byStatus['200']?.media;
    ops.set(op.template.slice(PREFIX.length), {
      contentType: media.type,
      checkHeaders: validators.check(op.general),
      checkBody: validators.check(media.validator),
      ...(answers && answer ? { checkAnswer: answers.check(Object.values(answer)[0]!) } : {}),
    });
  }
  return ops;
}

/** The first failure of a check as a 400 (a cluster's request: one reason is enough). */
function refusal(check: SchemaCheck): BadRequestError {
  const { message, errors } = describeFailures((check.errors ?? []).slice(0, 1), 'request');
  return new BadRequestError(message, errors);
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
  const ops = hookOperations(deps.validateAnswers ?? false);

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
    if (!op.checkHeaders({ query: {}, headers: req.headers, params: {} })) throw refusal(op.checkHeaders);
    const hook = req.get('vernemq-hook');
    const text = await readBody(req, deps.bodyLimitBytes);
    let body: Json;
    try {
      body = op.contentType === 'application/json' ? JSON.parse(text) : parseForm(text);
    } catch {
      throw new BadRequestError('request body is not valid JSON');
    }
    if (!op.checkBody({ body })) throw refusal(op.checkBody);
    const answer = await handlers[req.path]!(body, hook, res);
    if (op.checkAnswer && !op.checkAnswer({ response: answer })) throw new InternalError(`answer of ${req.path} breaks the document: ${JSON.stringify(op.checkAnswer.errors)}`);
    if (typeof answer === 'string') res.type('text/plain').send(answer);
    else res.json(answer);
  };
}

