import type { TrustedCertificateService } from '../../certs/trusted-certificates.js';
import { principalOf, type RouteModule } from '../create-http-app.js';
import { queryString } from './query.js';

export function certificateRoutes(deps: { trusted: TrustedCertificateService }): RouteModule {
  const { trusted } = deps;
  return (r) => {
    r.get('/api/certificates', (_req, res) => void res.json(trusted.list()));
    r.post('/api/certificates', async (req, res) => {
      res.status(201).json(await trusted.add(req.body as string, principalOf(res)));
    });
    r.delete('/api/certificates', async (req, res) => {
      await trusted.remove(queryString(req.query.id)!.toLowerCase());
      res.status(200).end();
    });
    // A file to save, not a JSON string: devices need it to trust the MQTTS server.
    r.get('/api/certificates/ca', (_req, res) => {
      res.setHeader('Content-Type', 'application/x-pem-file');
      res.setHeader('Content-Disposition', 'attachment; filename="gatewayd-ca.pem"');
      res.send(trusted.caPem());
    });
    r.get('/api/certificates/content', (req, res) => {
      res.json(trusted.content(queryString(req.query.id)!.toLowerCase()));
    });
  };
}
