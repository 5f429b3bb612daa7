import type { AuthService } from '../../auth/auth-service.js';
import type { PermissionEngine } from '../../permissions/permission-engine.js';
import type { UserService } from '../../users/user-service.js';
import { principalOf, type RouteModule } from '../create-http-app.js';

export function sessionRoutes(deps: { auth: AuthService; users: UserService; engine: PermissionEngine }): RouteModule {
  const { auth, users, engine } = deps;
  return (r) => {
    r.post('/api/login', async (req, res) => {
      res.json(await auth.login(req.body, req.ip));
    });
    r.post('/api/logout', async (req, res) => {
      await auth.logout(req.body.token);
      res.status(200).end();
    });
    r.get('/api/session', (_req, res) => {
      res.json(auth.session(principalOf(res)));
    });
    r.get('/api/permissions', (_req, res) => {
      res.json(engine.grantsOf(principalOf(res).userId));
    });
    r.put('/api/users/change-password', async (req, res) => {
      const p = principalOf(res);
      await users.changePassword(p.userId, req.body.password, req.body.newPassword, p.token?.fingerprint, req.ip);
      res.status(204).end();
    });
  };
}
