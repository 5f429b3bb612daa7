// One error taxonomy for the whole daemon. Services throw these; the HTTP layer
// (src/http/error-handler.ts) and the MQTT layer (src/mqtt) each map them once.

export interface ValidationIssue {
  path: string;
  message: string;
}

export class AppError extends Error {
  readonly status: number;
  /** Reason phrase used as `error` in the JSON body. */
  readonly reason: string;
  readonly errors?: ValidationIssue[];
  constructor(status: number, reason: string, message: string, errors?: ValidationIssue[]) {
    super(message);
    this.name = new.target.name;
    this.status = status;
    this.reason = reason;
    if (errors) this.errors = errors;
  }
}

export class BadRequestError extends AppError {
  constructor(message = 'invalid request', errors?: ValidationIssue[]) {
    super(400, 'Bad Request', message, errors);
  }
}
export class UnauthorizedError extends AppError {
  constructor(message = 'authentication required') {
    super(401, 'Unauthorized', message);
  }
}
export class ForbiddenError extends AppError {
  constructor(message = 'not permitted') {
    super(403, 'Forbidden', message);
  }
}
export class NotFoundError extends AppError {
  constructor(message = 'not found') {
    super(404, 'Not Found', message);
  }
}
export class MethodNotAllowedError extends AppError {
  constructor(message = 'method not allowed', errors?: ValidationIssue[]) {
    super(405, 'Method Not Allowed', message, errors);
  }
}
export class ConflictError extends AppError {
  constructor(message = 'conflict') {
    super(409, 'Conflict', message);
  }
}
export class PayloadTooLargeError extends AppError {
  constructor(message = 'payload too large') {
    super(413, 'Payload Too Large', message);
  }
}
export class UnsupportedMediaTypeError extends AppError {
  constructor(message = 'unsupported media type', errors?: ValidationIssue[]) {
    super(415, 'Unsupported Media Type', message, errors);
  }
}
export class PolicyViolationError extends AppError {
  constructor(message: string) {
    super(422, 'Unprocessable Entity', message);
  }
}
export class LockedError extends AppError {
  constructor(message = 'locked') {
    super(423, 'Locked', message);
  }
}
export class TooManyRequestsError extends AppError {
  /** Seconds until the client may try again, for the Retry-After header. */
  readonly retryAfterSeconds: number | undefined;
  constructor(message = 'too many failed attempts', retryAfterSeconds?: number) {
    super(429, 'Too Many Requests', message);
    this.retryAfterSeconds = retryAfterSeconds;
  }
}
export class NotImplementedError extends AppError {
  constructor(message = 'not implemented yet') {
    super(501, 'Not Implemented', message);
  }
}
/** The store cannot write (disk full, read-only data directory, map size reached): nothing was changed. */
export class InsufficientStorageError extends AppError {
  constructor(message = 'the gateway cannot store data right now (disk full or read-only); nothing was changed') {
    super(507, 'Insufficient Storage', message);
  }
}

export class ServiceUnavailableError extends AppError {
  /** Seconds after which trying again may succeed, for the Retry-After header. */
  readonly retryAfterSeconds: number | undefined;
  constructor(message = 'service unavailable', retryAfterSeconds?: number) {
    super(503, 'Service Unavailable', message);
    this.retryAfterSeconds = retryAfterSeconds;
  }
}
/** Wraps an unexpected failure; the HTTP layer replaces its message with a correlation id. */
export class InternalError extends AppError {
  constructor(message = 'internal error') {
    super(500, 'Internal Server Error', message);
  }
}

export function isAppError(err: unknown): err is AppError {
  return err instanceof AppError;
}

/**
 * What a device sent cannot be understood: malformed, longer than its protocol or the sizes the
 * connection negotiated allow, or out of step with what was asked (another request's answer).
 * The protocol drivers' parsers (src/mapping/drivers) raise only this for bad bytes; the
 * connection they came on is not trusted any more. Not an AppError: it never reaches HTTP as such.
 */
export class ProtocolError extends Error {
  constructor(
    readonly protocol: 'S7' | 'EtherNet/IP' | 'Modbus',
    message: string,
  ) {
    super(message);
    this.name = new.target.name;
  }
}
