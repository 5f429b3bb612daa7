import type { RegistryService } from '../../registry/registry-service.js';
import type { UserService } from '../../users/user-service.js';
import { principalOf, type RouteModule } from '../create-http-app.js';

const PENDING = { status: 'pending', message: 'registration pending: must be confirmed, try again later' };

/** Client self-registration (docs/design.md §9); register is public, the rest need a permission on the path. */
export function registryRoutes(deps: { registry: RegistryService; users: UserService }): RouteModule {
  const { registry, users } = deps;
  return (r) => {
    r.post('/api/client-registry/register', async (req, res) => {
      const outcome = await registry.register(req.body);
      if (outcome.status === 'pending') return void res.status(202).json(PENDING);
      res.status(201).json(outcome.certificate !== undefined ? { certificate: outcome.certificate } : {});
    });
    r.get('/api/client-registry', (_req, res) => void res.json(registry.list()));
    r.get('/api/client-registry/status', (_req, res) => void res.json(registry.status()));
    r.post('/api/client-registry/open', (req, res) => {
      const duration = (req.body as { duration?: number } | undefined)?.duration;
      registry.open(duration, principalOf(res).username);
      res.status(204).end();
    });
    r.post('/api/client-registry/lock', (_req, res) => {
      registry.lock(principalOf(res).username);
      res.status(204).end();
    });
    r.post('/api/client-registry/confirm', async (req, res) => {
      res.status(200).json(users.view(await registry.confirm(req.body, principalOf(res))));
    });
    r.delete('/api/client-registry/runners/:id', (req, res) => {
      registry.drop(req.params.id, principalOf(res).username);
      res.status(200).end();
    });
  };
}
