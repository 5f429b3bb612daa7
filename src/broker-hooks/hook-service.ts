import { isAppError } from '../errors/errors.js';
import type { Logger } from '../log/index.js';
import type { MqttCredentials, MqttPrincipal } from '../mqtt/index.js';
import { isSysTopic } from '../mqtt/topic-rules.js';
import type { ClusterMqttAccess } from '../auth/create-mqtt-access.js';
import type { PermissionRecord } from '../store/index.js';
import type { ClusterKind, ClusterSessions, GrantAtLogin } from './cluster-sessions.js';

/** A login as a cluster's hook reports it. */
export interface HookLogin {
  via: ClusterKind;
  clientId: string;
  username?: string;
  password?: string;
  /** The MQTT client's address from the hook's payload (never the cluster node's). */
  clientAddress?: string;
  /** A client certificate the broker verified (its common name; the fingerprint when the broker passes the certificate). */
  certificate?: { commonName: string; fingerprint256?: string };
}

export type LoginDecision =
  | { allowed: true; principal: MqttPrincipal; /** epoch ms: the session token's expiry, for token logins */ expiresAt?: number }
  | { allowed: false };

export type PublishDecision = { allowed: true; topic: string } | { allowed: false };

/**
 * The decisions behind every cluster hook: the same calls the embedded broker makes on its
 * MqttAccess port (authenticate, allows, coversFilter), with the same topic rules around them.
 * The hooks only translate requests and answers (rabbitmq-hooks.ts, vernemq-hooks.ts,
 * emqx-hooks.ts).
 */
export function createHookService(deps: {
  access: ClusterMqttAccess;
  sessions: ClusterSessions;
  /** The user's effective permissions (for the login snapshot and EMQX's ACL). */
  grantsOf: (userId: string) => PermissionRecord[];
  /** Expiry (ISO) of a live session token, for token logins. */
  tokenExpiresAt: (secret: string) => string | undefined;
  certificateLogins: () => boolean;
  log: Logger;
}) {
  const { access, sessions, log } = deps;

  const mqttGrantsOf = (userId: string): GrantAtLogin[] =>
    deps.grantsOf(userId).flatMap((g) => (g.context === 'mqtt' ? [{ resource: g.resource, operation: g.operation }] : []));

  function refused(req: HookLogin, reason: string): LoginDecision {
    log.audit('mqtt.connect.refused', {
      via: req.via,
      clientId: req.clientId,
      username: req.username ?? req.certificate?.commonName,
      reason,
      ...(req.clientAddress ? { remote: req.clientAddress } : {}),
    });
    return { allowed: false };
  }

  return {
    mqttGrantsOf,

    /**
     * A CONNECT as the broker saw it. Refusals of every kind answer the same (the protocol's own
     * signal); the audit line says why. Other failures (the store) are thrown: the route answers
     * 500 and the broker refuses the client.
     */
    async login(req: HookLogin): Promise<LoginDecision> {
      const credentials: MqttCredentials = { clientId: req.clientId, via: req.via };
      if (req.username) credentials.username = req.username;
      if (req.password !== undefined) credentials.password = Buffer.from(req.password, 'utf8');
      if (req.clientAddress) credentials.remoteAddress = req.clientAddress;
      if (req.certificate && req.password === undefined) {
        if (!deps.certificateLogins()) return refused(req, 'certificate logins through the broker hooks are off');
        credentials.certificate = req.certificate;
      }
      if (credentials.username === undefined && credentials.certificate === undefined) return refused(req, 'anonymous connections are not allowed');
      let principal: MqttPrincipal;
      try {
        principal = await access.authenticate(credentials);
      } catch (err) {
        if (!isAppError(err) || ![401, 403, 429].includes(err.status)) throw err;
        return refused(req, err.status === 401 ? 'bad username or password' : err.status === 403 ? 'not authorized' : 'too many failed logins');
      }
      sessions.remember(
        {
          kind: req.via,
          clientId: req.clientId,
          userId: principal.userId,
          username: principal.username,
          method: principal.method,
          ...(principal.tokenFingerprint ? { tokenFingerprint: principal.tokenFingerprint } : {}),
        },
        mqttGrantsOf(principal.userId),
      );
      const tokenExpiry = principal.method === 'token' && req.password !== undefined ? deps.tokenExpiresAt(req.password) : undefined;
      return { allowed: true, principal, ...(tokenExpiry ? { expiresAt: Date.parse(tokenExpiry) } : {}) };
    },

    /**
     * The principal of a later hook call of an admitted session: found again by username (a
     * cluster does not send credentials twice). Undefined when its credentials were revoked, the
     * user is gone (or was replaced by another of the same name), or it may no longer use MQTT.
     */
    principal(via: ClusterKind, clientId: string | undefined, username: string | undefined): MqttPrincipal | undefined {
      if (!username) return undefined;
      const session = clientId !== undefined ? sessions.get(via, clientId) : undefined;
      if (session && (session.revoked || session.username !== username)) return undefined;
      const principal = access.principalOf(username, session?.method, session?.tokenFingerprint);
      if (!principal || (session && session.userId !== principal.userId)) return undefined;
      return principal;
    },

    /**
     * Publish: `$SYS` is refused, the user's publish prefix applies, then write on the topic.
     * `rewrites`: the broker delivers on the topic the hook answers (VerneMQ), so the prefix is
     * prepended as the embedded broker does. Otherwise (RabbitMQ, EMQX) a prefixed user must
     * publish under its prefix itself: another topic would be delivered where the prefix was
     * meant to keep it out of.
     */
    publish(principal: MqttPrincipal, raw: string, rewrites: boolean): PublishDecision {
      const prefix = principal.publishPrefix;
      if (isSysTopic(raw)) return { allowed: false };
      let topic = raw;
      if (prefix) {
        if (rewrites) topic = prefix + raw;
        else if (!raw.startsWith(prefix)) return { allowed: false };
      }
      if (isSysTopic(topic)) return { allowed: false };
      return access.allows(principal, 'write', topic) ? { allowed: true, topic } : { allowed: false };
    },

    /** Subscribe: one read permission covers the whole filter. */
    subscribe: (principal: MqttPrincipal, filter: string): boolean => access.coversFilter(principal, filter),

    /** Receive on a concrete topic (a broker that asks per delivery). */
    receive: (principal: MqttPrincipal, topic: string): boolean => access.allows(principal, 'read', topic),
  };
}
export type HookService = ReturnType<typeof createHookService>;
