import { Router } from 'express';
import type { Principal } from '../auth/auth-service.js';
import { ForbiddenError } from '../errors/errors.js';
import type { PermissionEngine } from '../permissions/permission-engine.js';
import type { Metrics } from './metrics.js';

/** GET /metrics: a read permission on the path /metrics (http), unless metrics.anonymous. */
export function metricsRoute(deps: {
  metrics: Metrics;
  anonymous: boolean;
  authenticate: (authorization: string | undefined, source?: string) => Promise<Principal>;
  engine: PermissionEngine;
}): Router {
  const router = Router({ caseSensitive: true, strict: true });
  router.get('/metrics', async (req, res) => {
    if (!deps.anonymous) {
      const principal = await deps.authenticate(req.get('authorization'), req.ip);
      if (!deps.engine.allows(principal.userId, 'http', 'read', '/metrics')) throw new ForbiddenError('no read permission on /metrics');
    }
    const { contentType, body } = await deps.metrics.render();
    res.setHeader('Cache-Control', 'no-store');
    res.type(contentType).send(body);
  });
  return router;
}
