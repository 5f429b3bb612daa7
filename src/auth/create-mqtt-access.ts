import { ForbiddenError, UnauthorizedError } from '../errors/errors.js';
import type { Logger } from '../log/index.js';
import type { MqttAccess, MqttCredentials, MqttPrincipal } from '../mqtt/mqtt-access.js';
import type { PermissionEngine } from '../permissions/permission-engine.js';
import type { UserRecord } from '../store/index.js';
import type { UserService } from '../users/user-service.js';
import type { AccessEvents } from './access-events.js';
import type { AuthService } from './auth-service.js';

/** The port with what a cluster's hooks need besides the embedded broker's calls (src/broker-hooks). */
export interface ClusterMqttAccess extends MqttAccess {
  /**
   * The principal of a session a cluster admitted through a hook, found again by username for
   * its later publish and subscribe checks; undefined when the user is gone or may not use MQTT.
   */
  principalOf(username: string, method?: MqttPrincipal['method'], tokenFingerprint?: string): MqttPrincipal | undefined;
}

/**
 * The broker's port onto identity: the same users, tokens and permission engine as the REST
 * API. A session token as MQTT password costs one hash lookup, not a scrypt derivation.
 */
export function createMqttAccess(deps: {
  users: UserService;
  auth: AuthService;
  engine: PermissionEngine;
  events: AccessEvents;
  log: Logger;
  /** Called after a failed password connect of a username no identity source knows. */
  onUnknownUser?: (credentials: MqttCredentials) => Promise<void>;
  /** Whether the user may sign in now (a site's edge cut off past `denyAfter`, src/site). */
  admits?: (userId: string) => boolean;
}): ClusterMqttAccess {
  const { users, auth, engine, events } = deps;

  const principalOf = (user: UserRecord, method: MqttPrincipal['method'], tokenFingerprint?: string): MqttPrincipal => {
    if (deps.admits && !deps.admits(user.id)) throw new UnauthorizedError('bad username or password');
    // A user without any MQTT permission has no business on the broker. Asked of the compiled,
    // cached set: the grant list would be read and copied from every role at each connect.
    if (engine.setOf(user.id).mqttGrants === 0) {
      throw new ForbiddenError('not authorized to use MQTT');
    }
    return {
      userId: user.id,
      username: user.username,
      publishPrefix: user.mqttPublishPrefix ?? '',
      method,
      ...(tokenFingerprint ? { tokenFingerprint } : {}),
    };
  };

  return {
    async authenticate(credentials) {
      const { username, certificate } = credentials;
      const password = credentials.password?.toString('utf8');
      if (certificate) {
        const byFingerprint = certificate.fingerprint256 ? users.findByCertificate(certificate.fingerprint256) : undefined;
        const byName = byFingerprint ? undefined : users.findByUsername(certificate.commonName);
        const user = byFingerprint ?? (byName?.grantTypes.some((g) => g.method === 'certificate') ? byName : undefined);
        if (user && (username === undefined || username === user.username)) return principalOf(user, 'certificate');
        if (!username || password === undefined) throw new UnauthorizedError('certificate is not registered to a user');
      }
      if (!username || password === undefined) throw new UnauthorizedError('credentials required');
      try {
        const { user, method, tokenFingerprint } = await auth.authenticateSecret(username, password, credentials.via ?? 'mqtt', credentials.remoteAddress);
        return principalOf(user, method, tokenFingerprint);
      } catch (err) {
        // Still unknown after every identity source (local, LDAP) was asked: the client
        // registry, while open, records the device as a pending request.
        if (err instanceof UnauthorizedError && deps.onUnknownUser && !users.findByUsername(username)) {
          await deps.onUnknownUser(credentials);
        }
        throw err;
      }
    },
    authenticateAtOnce(credentials) {
      const { username, password } = credentials;
      // Certificates (and missing credentials) take authenticate()'s path.
      if (credentials.certificate || !username || password === undefined) return undefined;
      const known = auth.authenticateSecretAtOnce(username, password.toString('utf8'), credentials.remoteAddress);
      return known && principalOf(known.user, known.method, known.tokenFingerprint);
    },
    principalOf(username, method = 'password', tokenFingerprint) {
      // The decoded record cached for password checks: asked on a cluster's publish path.
      const user = users.findByUsernameForAuth(username) as UserRecord | undefined;
      if (!user) return undefined;
      try {
        return principalOf(user, method, tokenFingerprint);
      } catch {
        return undefined; // no MQTT permission (left)
      }
    },
    allows: (principal, operation, topic) => engine.allows(principal.userId, 'mqtt', operation, topic),
    coversFilter: (principal, filter) => engine.coversFilter(principal.userId, 'mqtt', 'read', filter),
    onChange: (listener) => events.on(listener),
  };
}
