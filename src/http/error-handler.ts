import { randomUUID } from 'node:crypto';
import type { ErrorRequestHandler, RequestHandler } from 'express';
import { AppError, NotFoundError, ServiceUnavailableError, TooManyRequestsError } from '../errors/errors.js';
import type { Logger } from '../log/index.js';

const reasons: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  409: 'Conflict',
  413: 'Payload Too Large',
  415: 'Unsupported Media Type',
  422: 'Unprocessable Entity',
  423: 'Locked',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  501: 'Not Implemented',
  503: 'Service Unavailable',
};

interface ErrorBody {
  statusCode: number;
  error: string;
  message: string;
  errors?: { path: string; message: string }[];
  correlationId?: string;
}

/** body-parser's errors (and other libraries') carry a status of their own. */
function statusOf(err: unknown): number | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const s = (err as { status?: unknown; statusCode?: unknown }).status ?? (err as { statusCode?: unknown }).statusCode;
  return typeof s === 'number' && s >= 400 && s < 600 ? s : undefined;
}

/** The one mapping of errors to HTTP answers: JSON, never a stack trace or a secret. */
export function createErrorHandler(log: Logger): ErrorRequestHandler {
  return (err, req, res, _next) => {
    let body: ErrorBody;
    if (err instanceof AppError) {
      body = { statusCode: err.status, error: err.reason, message: err.message };
      if (err.errors) body.errors = err.errors;
      if ((err instanceof TooManyRequestsError || err instanceof ServiceUnavailableError) && err.retryAfterSeconds) res.setHeader('Retry-After', String(err.retryAfterSeconds));
    } else if (statusOf(err) !== undefined && statusOf(err)! < 500) {
      const status = statusOf(err)!;
      const e = err as { message?: string; errors?: { path?: string; message?: string }[]; type?: string };
      let message = e.message ?? reasons[status] ?? 'request failed';
      if (e.type === 'entity.parse.failed') message = 'request body is not valid JSON';
      if (e.type === 'entity.too.large') message = 'request body is too large';
      body = { statusCode: status, error: reasons[status] ?? 'Error', message };
      if (Array.isArray(e.errors) && e.errors.length) {
        body.errors = e.errors.map((x) => ({ path: String(x.path ?? ''), message: String(x.message ?? '') }));
      }
    } else {
      const correlationId = randomUUID();
      // The cause goes to the log only; the client gets the id to quote.
      log.error('request failed', { correlationId, method: req.method, path: req.path, error: err instanceof Error ? { name: err.name, message: err.message, stack: err.stack } : String(err) });
      body = { statusCode: 500, error: reasons[500]!, message: `internal error (correlation id ${correlationId})`, correlationId };
    }
    if (res.headersSent) return void res.end();
    res.status(body.statusCode).json(body);
  };
}

export const notFoundHandler: RequestHandler = (req, _res, next) => {
  next(new NotFoundError(`no route for ${req.method} ${req.path}`));
};
