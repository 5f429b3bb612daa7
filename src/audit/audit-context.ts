// Who made the request an audit event happens in. Services log events with the fields of what
// they did (the user created, the role changed), rarely with the caller: the HTTP layer puts the
// authenticated caller and the client's address into an AsyncLocalStorage just before the route
// runs, and the trail reads it when an event is recorded, whatever part logs it.
import { AsyncLocalStorage } from 'node:async_hooks';
import type { RequestHandler } from 'express';
import type { AuditActor } from './audit-records.js';

export interface RequestContext {
  actor?: AuditActor;
  source?: string;
}

export interface AuditContext {
  current(): RequestContext | undefined;
  /** Express middleware, mounted right before the routes (after authentication and validation). */
  middleware: RequestHandler;
}

export function createAuditContext(): AuditContext {
  const storage = new AsyncLocalStorage<RequestContext>();
  return {
    current: () => storage.getStore(),
    middleware: (req, res, next) => {
      const principal = res.locals.principal as AuditActor | undefined;
      const context: RequestContext = {};
      if (principal) context.actor = { userId: principal.userId, username: principal.username };
      if (req.ip) context.source = req.ip;
      storage.run(context, next);
    },
  };
}
