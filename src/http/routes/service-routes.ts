import express, { type Request, type RequestHandler } from 'express';
import { ConflictError, NotFoundError } from '../../errors/errors.js';
import { serviceJsonToText, serviceTextToJson, ServiceFileError, type MappingService, type ServiceCatalog } from '../../mapping/index.js';
import type { RouteModule } from '../create-http-app.js';

/** Media types a service file is sent and answered as (besides application/json). */
const YAML_TYPES = ['application/yaml', 'application/x-yaml', 'text/yaml'];

/**
 * Parses YAML request bodies (PUT /api/services/{id}, POST …/validate) into a string before
 * request validation, which checks them against the OpenAPI document like JSON bodies.
 */
export function serviceBodyParsers(bodyLimitBytes: number): { method: string; path: string; handler: RequestHandler }[] {
  const text = express.text({ type: YAML_TYPES, limit: bodyLimitBytes });
  return [
    { method: 'PUT', path: '/api/services', handler: text },
    { method: 'POST', path: '/api/services', handler: text },
  ];
}

/**
 * Protocol-mapping services (gatewayd addition, docs/design.md §13): the files of mapping.servicesDir
 * through the API. Writes are validated as a whole, written atomically and applied before the
 * answer. With mapping.enabled false the list is empty and every change is refused (409).
 */
export function serviceRoutes(deps: { mapping: MappingService }): RouteModule {
  const { mapping } = deps;
  const catalog = (): ServiceCatalog => {
    const c = mapping.services();
    if (!c) throw new ConflictError('protocol mapping is not running (mapping.enabled is false)');
    return c;
  };
  /** The body as the text of a service file: YAML as sent, JSON written as YAML. */
  const bodyText = (req: Request): string => (typeof req.body === 'string' ? req.body : serviceJsonToText(req.body));
  const idOf = (req: Request) => String(req.params.id);

  return (r) => {
    r.get('/api/services', (_req, res) => void res.json(mapping.services()?.list() ?? []));

    r.get('/api/services/:id', (req, res) => {
      const c = mapping.services();
      if (!c) throw new NotFoundError('Service not found');
      const { text, summary } = c.read(idOf(req));
      res.setHeader('X-Service-State', summary.state);
      if (req.accepts(['application/json', ...YAML_TYPES]) !== 'application/json') return void res.type('application/yaml').send(text);
      let document: unknown;
      try {
        document = serviceTextToJson(text);
      } catch (err) {
        if (err instanceof ServiceFileError) throw new ConflictError(`the file of service ${summary.id} is not valid YAML (${err.path}: ${err.message}); ask for application/yaml`);
        throw err;
      }
      res.json(document ?? {});
    });

    r.put('/api/services/:id', async (req, res) => {
      const id = idOf(req);
      const { created, summary, changes } = await catalog().put(id, bodyText(req));
      res.status(created ? 201 : 200).json({ id, service: summary, changes });
    });

    r.post('/api/services/:id/validate', (req, res) => void res.json(catalog().validate(idOf(req), bodyText(req))));

    r.delete('/api/services/:id', async (req, res) => {
      const id = idOf(req);
      const c = mapping.services();
      if (!c) throw new NotFoundError('Service not found');
      res.json({ id, changes: await c.remove(id) });
    });
  };
}
