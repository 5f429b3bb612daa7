import type { Dashboard } from '../../metrics/dashboard.js';
import { schemaOfType } from '../../mapping/index.js';
import type { RouteModule } from '../create-http-app.js';
import { queryInt } from './query.js';

/**
 * Calls the web UI needed beside the areas' own (gatewayd additions, docs/web-ui.md):
 * GET /api/dashboard (the last hour of figures) and GET /api/resource-types (a form per
 * resource type, built from its JSON Schema).
 */
export function uiSupportRoutes(deps: { dashboard: Dashboard }): RouteModule {
  return (r) => {
    r.get('/api/dashboard', (req, res) => {
      const since = (req.query as Record<string, unknown>).since;
      res.setHeader('Cache-Control', 'no-store');
      res.json(deps.dashboard.view(since === undefined ? undefined : queryInt(since, 0)));
    });
    // Read at each call: a part that registers a type (bridges, Sparkplug) is listed with it.
    r.get('/api/resource-types', (_req, res) => void res.json(Object.entries(schemaOfType).map(([type, schema]) => ({ type, schema }))));
  };
}
