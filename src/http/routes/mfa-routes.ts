import type { MfaService } from '../../mfa/index.js';
import { principalOf, type RouteModule } from '../create-http-app.js';

/** POST /api/mfa/* and GET /api/mfa/isenrolled (mfa/login is public, the others need a credential). */
export function mfaRoutes(deps: { mfa: MfaService }): RouteModule {
  const { mfa } = deps;
  return (r) => {
    r.post('/api/mfa/enable', async (_req, res) => {
      res.json(await mfa.enable(principalOf(res).userId));
    });
    r.post('/api/mfa/validate', async (req, res) => {
      const principal = principalOf(res);
      // The token that completes the enrollment stays; every other one ends.
      res.json(await mfa.validate(principal.userId, req.body.otp, principal.token?.fingerprint));
    });
    r.post('/api/mfa/login', async (req, res) => {
      res.json(await mfa.login(req.body));
    });
    r.post('/api/mfa/disable', async (req, res) => {
      await mfa.disable(principalOf(res).userId, req.body ?? {});
      res.status(200).end();
    });
    r.post('/api/mfa/regenerate/backupcodes', async (req, res) => {
      res.json(await mfa.regenerateBackupCodes(principalOf(res).userId, req.body ?? {}));
    });
    r.get('/api/mfa/isenrolled', (_req, res) => {
      res.json(mfa.isEnrolled(principalOf(res).userId));
    });
  };
}
