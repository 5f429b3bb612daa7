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

/**
 * The storage is enabled only while a request is in flight. On Node 20 an enabled
 * AsyncLocalStorage runs an init hook for every async resource and promise of the whole process,
 * the broker's included: about 100 µs more per MQTT connect in `npm run bench -- mqtt-shipped`
 * (issue 20). Node 24's AsyncContextFrame has no hook; disable() is harmless there.
 */
export function createAuditContext(): AuditContext {
  const storage = new AsyncLocalStorage<RequestContext>();
  let inFlight = 0;
  return {
    current: () => (inFlight > 0 ? storage.getStore() : undefined),
    middleware: (req, res, next) => {
      const principal = res.locals.principal as AuditActor | undefined;
      const context: RequestContext = {};
      if (principal) context.actor = { userId: principal.userId, username: principal.username };
      if (req.ip) context.source = req.ip;
      inFlight++;
      let ended = false;
      const end = () => {
        if (ended) return;
        ended = true;
        // Routes answer once their service finished: an event recorded after the last answer went
        // out (none known) would have no caller.
        if (--inFlight === 0) storage.disable();
      };
      res.once('finish', end);
      res.once('close', end);
      storage.run(context, next);
    },
  };
}
