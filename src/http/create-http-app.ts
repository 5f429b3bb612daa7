import { randomUUID } from 'node:crypto';
import express, { type Express, type RequestHandler, type Response, type Router } from 'express';
import { ForbiddenError, NotImplementedError } from '../errors/errors.js';
import type { Logger } from '../log/index.js';
import type { Principal } from '../auth/auth-service.js';
import type { PermissionEngine } from '../permissions/permission-engine.js';
import { operationFor } from '../permissions/permission-set.js';
import { accessClassOf, enrollmentOperations } from './access-classes.js';
import { createErrorHandler, notFoundHandler } from './error-handler.js';
import { compileResponseValidators, loadRequestValidators } from './compiled-validators.js';
import { createOperationIndex } from './operation-index.js';
import { loadOpenApiDocument, readOpenApiJson } from './openapi-document.js';
import { requestValidator } from './request-validator.js';
import { responseValidator } from './response-validator.js';
import { strictQueryNumbers } from './strict-query-numbers.js';

export { loadOpenApiDocument, openApiPath } from './openapi-document.js';

/** A route module adds its handlers to the API router; handlers may be async (Express 5). */
export type RouteModule = (router: Router) => void;

export interface HttpAppOptions {
  log: Logger;
  bodyLimitBytes: number;
  logRequests: boolean;
  trustProxy: boolean;
  /** `source`: the client's address, for the per-address login limit. */
  authenticate: (authorization: string | undefined, source?: string) => Promise<Principal>;
  engine: PermissionEngine;
  routes: RouteModule[];
  /** Tests validate every response against the OpenAPI document too. */
  validateResponses?: boolean;
  /** Runs right before the routes, after authentication and validation (the audit trail's request context). */
  routeContext?: RequestHandler;
  /** Middlewares that run before request validation for one "METHOD /path" (multipart uploads). */
  preValidation?: { method: string; path: string; handler: RequestHandler }[];
  /** Answers 423 while a restore swaps the store (set by the maintenance part). */
  gate?: RequestHandler;
  /** The web UI's static files (src/http/web-ui.ts); before the gate: they never touch the store. */
  webUi?: RequestHandler;
  /** /health, /health/ready and /metrics: outside the API, answered even while a restore swaps the store. */
  probes?: RequestHandler[];
  /** What the plain port serves to whom (plain-http-policy.ts): before everything but the request log. */
  plainHttpPolicy?: RequestHandler;
  /** Told about every answered request with its OpenAPI route template (metrics). */
  observe?: (o: { method: string; route: string; status: number; seconds: number }) => void;
  /**
   * Handlers for a path prefix that run before the maintenance gate, authentication, body
   * parsing and validation: the broker hooks' caller check (a refused caller learns nothing).
   */
  callerGuards?: { path: string; handler: RequestHandler }[];
  /**
   * Path prefixes whose requests are not logged one by one unless they fail with 5xx
   * (machine-to-machine hooks: their refusals are logged, rate-limited, where they are decided).
   */
  quietPaths?: string[];
}

export function principalOf(res: Response): Principal {
  const p = res.locals.principal as Principal | undefined;
  if (!p) throw new Error('route needs a principal but the operation is public');
  return p;
}

export function createHttpApp(options: HttpAppOptions): Express {
  const { log, engine } = options;
  const app = express();
  app.disable('x-powered-by');
  app.set('trust proxy', options.trustProxy);
  app.set('query parser', 'simple');
  // The validator matches paths exactly; Express must too, or /api/users/IDS would reach a
  // handler under a different operation than the one validated and authorized.
  app.set('case sensitive routing', true);
  app.set('strict routing', true);

  // One spelling per path: a trailing slash is dropped before anything looks at the path, so
  // authorization, validation and routing all see the same canonical path.
  app.use((req, _res, next) => {
    const q = req.url.indexOf('?');
    const path = q < 0 ? req.url : req.url.slice(0, q);
    if (path.length > 1 && path.endsWith('/')) req.url = (path.replace(/\/+$/, '') || '/') + (q < 0 ? '' : req.url.slice(q));
    next();
  });

  app.use((req, res, next) => {
    const started = process.hrtime.bigint();
    const requestId = randomUUID();
    res.locals.requestId = requestId;
    res.setHeader('X-Request-Id', requestId);
    if (options.observe) {
      const observe = options.observe;
      res.on('finish', () => {
        const path = req.path;
        // Templates only (bounded labels): the operation, else the part of the gateway.
        const route = path.startsWith('/api') ? (operations.find(req.method, path)?.split(' ')[1] ?? 'unknown') : path.startsWith('/health') || path === '/metrics' ? path : 'ui';
        observe({ method: req.method, route, status: res.statusCode, seconds: Number(process.hrtime.bigint() - started) / 1e9 });
      });
    }
    const quiet = options.quietPaths?.some((p) => req.path.startsWith(p)) ?? false;
    // One line per request at debug; at info only with log.requests: the journal usually sits on
    // the same flash as the data, and the web UI polls (docs/operations.md "Logs").
    const line = options.logRequests ? log.info : log.debug;
    {
      res.on('finish', () => {
        if (quiet && res.statusCode < 500) return;
        const principal = res.locals.principal as Principal | undefined;
        // Path only: query strings can carry ids and tokens.
        line.call(log, 'request', {
          requestId,
          method: req.method,
          path: req.path,
          status: res.statusCode,
          ms: Number(process.hrtime.bigint() - started) / 1e6,
          ...(principal ? { user: principal.username } : {}),
        });
      });
    }
    next();
  });

  if (options.plainHttpPolicy) app.use(options.plainHttpPolicy);
  for (const probe of options.probes ?? []) app.use(probe);
  if (options.webUi) app.use(options.webUi);
  // The document as text (90 KB), read when first asked for: the daemon itself works from the
  // validators the build compiled from it (compiled-validators.ts).
  let specJson: string | undefined;
  app.get('/api/openapi.json', (_req, res) => void res.type('application/json').send((specJson ??= readOpenApiJson())));
  const validators = loadRequestValidators();
  for (const guard of options.callerGuards ?? []) app.use(guard.path, guard.handler);
  if (options.gate) app.use(options.gate);

  // Authentication and authorization come before request validation: an anonymous caller
  // learns nothing about request schemas. Decided once per request from the operation.
  const operations = createOperationIndex(validators.operations);
  app.use('/api', async (req, res, next) => {
    const path = req.baseUrl + req.path;
    const key = operations.find(req.method, path) ?? `${req.method} ${path}`;
    const access = accessClassOf(key);
    if (access === 'public') return next();
    const principal = await options.authenticate(req.get('authorization'), req.ip);
    res.locals.principal = principal;
    if (principal.token?.scope === 'mfa-enrollment' && !enrollmentOperations.has(key)) {
      throw new ForbiddenError('MFA enrollment is required before this call');
    }
    if (access === 'permission' && !engine.allows(principal.userId, 'http', operationFor(req.method), path)) {
      throw new ForbiddenError(`no ${operationFor(req.method)} permission on ${path}`);
    }
    next();
  });

  app.use('/api', strictQueryNumbers(operations));

  // strict: false because some operations take a bare JSON string (POST /api/certificates).
  app.use(express.json({ limit: options.bodyLimitBytes, strict: false, type: ['application/json', 'application/*+json'] }));
  for (const pre of options.preValidation ?? []) {
    app.use(pre.path, (req, res, next) => (req.method === pre.method ? pre.handler(req, res, next) : next()));
  }

  if (options.validateResponses) app.use(responseValidator({ operations, validators: compileResponseValidators(loadOpenApiDocument()) }));
  app.use(requestValidator({ operations, validators }));

  const api = express.Router({ caseSensitive: true, strict: true });
  for (const register of options.routes) register(api);
  if (options.routeContext) app.use(options.routeContext);
  app.use(api);

  // Declared in the contract but not built yet: say so instead of faking data.
  app.use('/api', (req, res, next) => {
    if (res.locals.operation) {
      return next(new NotImplementedError(`${req.method} ${req.baseUrl}${req.path} is not implemented yet`));
    }
    next();
  });
  app.use(notFoundHandler);
  app.use(createErrorHandler(log));
  return app;
}
