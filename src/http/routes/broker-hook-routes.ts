import express, { type RequestHandler } from 'express';
import { VERNEMQ_HOOKS, type BrokerHooks, type VerneHook } from '../../broker-hooks/index.js';
import { BadRequestError } from '../../errors/errors.js';
import type { RouteModule } from '../create-http-app.js';

/** RabbitMQ's auth backend posts form bodies; parsed before validation, flat keys (`variable_map.client_id`). */
export function brokerHookBodyParsers(bodyLimitBytes: number): { method: string; path: string; handler: RequestHandler }[] {
  return [{ method: 'POST', path: '/api/broker/hooks/rabbitmq', handler: express.urlencoded({ extended: false, limit: bodyLimitBytes, parameterLimit: 100 }) }];
}

/** Thin routes of the cluster hooks (src/broker-hooks): validated by the OpenAPI document, guarded before that. */
export function brokerHookRoutes(deps: { hooks: BrokerHooks }): RouteModule {
  const { hooks } = deps;
  const text = (answer: string) => (res: express.Response) => void res.type('text/plain').send(answer);
  return (r) => {
    r.post('/api/broker/hooks/rabbitmq/user', async (req, res) => text(await hooks.rabbitmq.user(req.body))(res));
    r.post('/api/broker/hooks/rabbitmq/vhost', (req, res) => text(hooks.rabbitmq.vhost(req.body))(res));
    r.post('/api/broker/hooks/rabbitmq/resource', (req, res) => text(hooks.rabbitmq.resource(req.body))(res));
    r.post('/api/broker/hooks/rabbitmq/topic', (req, res) => text(hooks.rabbitmq.topic(req.body))(res));
    r.post('/api/broker/hooks/vernemq', async (req, res) => {
      const hook = req.get('vernemq-hook') as VerneHook;
      if (!VERNEMQ_HOOKS.includes(hook)) throw new BadRequestError(`unsupported vernemq-hook: use one of ${VERNEMQ_HOOKS.join(', ')}`);
      const answer = await hooks.vernemq.handle(hook, req.body);
      if (answer.cacheSeconds) res.set('cache-control', `max-age=${answer.cacheSeconds}`);
      res.json(answer.body);
    });
    r.post('/api/broker/hooks/emqx/authn', async (req, res) => void res.json(await hooks.emqx.authn(req.body)));
    r.post('/api/broker/hooks/emqx/authz', (req, res) => void res.json(hooks.emqx.authz(req.body)));
  };
}
