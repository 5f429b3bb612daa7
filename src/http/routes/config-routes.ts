import type { GatewayConfig } from '../../config/index.js';
import type { RouteModule } from '../create-http-app.js';

/** The switches and policies an operator configured; nothing secret. */
export function configRoutes(deps: { config: GatewayConfig }): RouteModule {
  const { config } = deps;
  return (r) => {
    r.get('/api/auth/ldap', (_req, res) => void res.json({ enabled: config.ldap.enabled, mode: config.ldap.mode }));
    r.get('/api/auth/mfa', (_req, res) => void res.json({ enabled: config.mfa.enabled }));
    r.get('/api/auth/idp', (_req, res) => void res.json({ enabled: config.idp.enabled }));
    r.get('/api/policy/password', (_req, res) => void res.json(config.policy.password));
    r.get('/api/policy/username', (_req, res) => void res.json(config.policy.username));
  };
}
