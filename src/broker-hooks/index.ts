// gatewayd as the permission engine of a cluster broker (RabbitMQ, VerneMQ, EMQX; docs/scaling-out.md,
// docs/design.md §14): hooks that answer each broker in its own format from the same
// MqttAccess port the embedded broker uses, a guard that lets only the cluster call them, and
// revocation pushes through each cluster's management API.
import type { RequestHandler } from 'express';
import type { ClusterMqttAccess } from '../auth/create-mqtt-access.js';
import type { GatewayConfig } from '../config/index.js';
import { TooManyRequestsError } from '../errors/errors.js';
import type { Logger } from '../log/index.js';
import { ConcurrencyLimiter } from '../mqtt/limits.js';
import type { PermissionRecord } from '../store/index.js';
import { createCallerGuard } from './caller-guard.js';
import { createClusterSessions, type GrantAtLogin } from './cluster-sessions.js';
import { createEmqxHooks } from './emqx-hooks.js';
import { createHookService } from './hook-service.js';
import { managementClients, type ManagementClient } from './management-clients.js';
import { createRabbitHooks } from './rabbitmq-hooks.js';
import { createRevocation } from './revocation.js';
import { createVerneHooks } from './vernemq-hooks.js';

export { SECRET_HEADER } from './caller-guard.js';
export { VERNEMQ_HOOKS, type VerneHook, type VerneRequest } from './vernemq-hooks.js';
export type { RabbitResourceRequest, RabbitTopicRequest, RabbitUserRequest, RabbitVhostRequest } from './rabbitmq-hooks.js';
export type { EmqxAuthnRequest, EmqxAuthzRequest } from './emqx-hooks.js';
export type { ClusterKind } from './cluster-sessions.js';

export function createBrokerHooks(deps: {
  config: GatewayConfig['brokerHooks'];
  access: ClusterMqttAccess;
  grantsOf: (userId: string) => PermissionRecord[];
  /** Does the user's current permission set still cover this grant (filter subsumption)? */
  covers: (userId: string, grant: GrantAtLogin) => boolean;
  usernameOf: (userId: string) => string | undefined;
  tokenExpiresAt: (secret: string) => string | undefined;
  log: Logger;
  /** Tests replace the management API clients. */
  clients?: ManagementClient[];
}) {
  const { config, log } = deps;
  const sessions = createClusterSessions();
  const service = createHookService({
    access: deps.access,
    sessions,
    grantsOf: deps.grantsOf,
    tokenExpiresAt: deps.tokenExpiresAt,
    certificateLogins: () => config.certificateLogins,
    log,
  });
  const revocation = createRevocation({
    clients: deps.clients ?? managementClients(config),
    sessions,
    stillCovers: deps.covers,
    mqttGrantsOf: service.mqttGrantsOf,
    usernameOf: deps.usernameOf,
    retryMaxMs: () => config.revocationRetryMaxSeconds * 1000,
    log,
  });

  // Password checks of hook logins (each may cost a scrypt) run a few at a time, so the REST
  // API's own logins and the embedded broker keep their share; a longer queue is refused.
  const logins = new ConcurrencyLimiter(config.maxConcurrentLogins);
  function limited<T>(login: () => Promise<T>): Promise<T> {
    if (logins.waiting >= config.maxQueuedLogins) return Promise.reject(new TooManyRequestsError('too many broker hook logins waiting', 1));
    return new Promise<T>((resolve, reject) => logins.schedule((release) => void login().then(resolve, reject).finally(release)));
  }

  const rabbitmq = createRabbitHooks({ service, vhost: () => config.rabbitmq.vhost });
  const vernemq = createVerneHooks({ service, cacheSeconds: () => config.decisionCacheSeconds });
  const emqx = createEmqxHooks({ service });
  let unsubscribe: (() => void) | undefined;

  return {
    guard: createCallerGuard({ config, log }) satisfies RequestHandler,
    rabbitmq: { ...rabbitmq, user: (req: Parameters<typeof rabbitmq.user>[0]) => limited(() => rabbitmq.user(req)) },
    vernemq: {
      handle: (hook: Parameters<typeof vernemq.handle>[0], req: Parameters<typeof vernemq.handle>[1]) =>
        hook === 'auth_on_register' || hook === 'auth_on_register_m5' ? limited(() => vernemq.handle(hook, req)) : vernemq.handle(hook, req),
    },
    emqx: { ...emqx, authn: (req: Parameters<typeof emqx.authn>[0]) => limited(() => emqx.authn(req)) },
    part: {
      name: 'broker-hooks',
      start: async () => {
        if (!config.enabled) return;
        revocation.start();
        unsubscribe = deps.access.onChange((change) => {
          try {
            revocation.onChange(change);
          } catch (err) {
            log.error('broker revocation failed', { userId: change.userId, kind: change.kind, error: (err as Error).message });
          }
        });
      },
      stop: async () => {
        unsubscribe?.();
        revocation.stop();
      },
    },
    stats: () => ({ sessions: sessions.size(), revocationsPending: revocation.pending(), ...revocation.counts() }),
  };
}
export type BrokerHooks = ReturnType<typeof createBrokerHooks>;
