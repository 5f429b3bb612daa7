import type { Logger } from '../log/index.js';

/** Receives every audit event with the fields of the child loggers it went through (outer first). */
export type AuditSink = (event: string, fields: Record<string, unknown>) => void;

/**
 * A logger that writes everything as `log` does and also hands each audit event to `sink`: the
 * parts keep calling `log.audit(...)` and the trail gets every event, whichever child logger
 * logged it.
 */
export function tapAudit(log: Logger, sink: AuditSink, meta: Record<string, unknown> = {}): Logger {
  return {
    error: (msg, fields) => log.error(msg, fields),
    warn: (msg, fields) => log.warn(msg, fields),
    info: (msg, fields) => log.info(msg, fields),
    debug: (msg, fields) => log.debug(msg, fields),
    audit: (event, fields) => {
      log.audit(event, fields);
      sink(event, { ...meta, ...(fields ?? {}) });
    },
    lifecycle: (msg, fields) => log.lifecycle(msg, fields),
    child: (fields) => tapAudit(log.child(fields), sink, { ...meta, ...fields }),
    close: () => log.close(),
  };
}
