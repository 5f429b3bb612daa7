// The broker's view of identity and permissions. The broker never reads the store: it asks
// this port, which the auth part implements with the same permission engine as the REST API.

export interface MqttPrincipal {
  userId: string;
  username: string;
  /** Prepended to every topic the user publishes, before the check and delivery ('' for none). */
  publishPrefix: string;
  method: 'password' | 'token' | 'certificate';
  /** Fingerprint of the session token used as password, when method is 'token'. */
  tokenFingerprint?: string;
}

export interface MqttCredentials {
  clientId: string;
  username?: string;
  password?: Buffer;
  /**
   * The verified TLS client certificate, when the client presented one. A cluster broker that
   * verified it itself may pass only its common name (src/broker-hooks).
   */
  certificate?: { fingerprint256?: string; commonName: string };
  /** The client's address (per-address login limit, logs). */
  remoteAddress?: string;
  /** Who asked, for audit lines: the embedded broker ('mqtt', the default) or a cluster's hook. */
  via?: 'mqtt' | 'rabbitmq' | 'vernemq' | 'emqx';
}

/** What changed for a user; the broker drops cached decisions or disconnects. */
export interface AccessChange {
  userId: string;
  /**
   * permissions: re-check cached decisions and subscriptions.
   * revoked: the listed tokens (or, without tokenFingerprints, every credential) no longer
   * authenticate; sessions that used them are disconnected.
   * deleted: the user is gone; disconnect all of its sessions.
   */
  kind: 'permissions' | 'revoked' | 'deleted';
  /** deleted: the username it had (the record is gone; a cluster's management API knows users by name). */
  username?: string;
  tokenFingerprints?: string[];
  /**
   * revoked with tokenFingerprints: sessions that signed in with the password end too (the
   * user changed its password, or enrolled in MFA so that a password alone no longer does).
   */
  passwordSessions?: boolean;
  /**
   * permissions: whether the change took a grant away (false: it only added). Set by a site's
   * replica (src/site/change-events.ts), which sees each change's before and after; absent: not
   * known (a cluster's sessions this gateway did not admit are then dropped to be safe).
   */
  lost?: boolean;
}

export interface MqttAccess {
  /**
   * Resolves the principal, or rejects with UnauthorizedError ("bad username or password")
   * or ForbiddenError ("not authorized") from src/errors.
   */
  authenticate(credentials: MqttCredentials): Promise<MqttPrincipal>;
  /**
   * authenticate()'s answer when it needs no waiting (a session token, a password verified
   * moments ago: a device reconnecting), synchronously; undefined: ask authenticate(). Throws
   * as authenticate() rejects. Optional: without it every connect waits for authenticate().
   */
  authenticateAtOnce?(credentials: MqttCredentials): MqttPrincipal | undefined;
  /** Publish (write) or receive (read) on a concrete, already prefixed topic. */
  allows(principal: MqttPrincipal, operation: 'read' | 'write', topic: string): boolean;
  /** Subscribe: one read permission must cover the whole filter. */
  coversFilter(principal: MqttPrincipal, filter: string): boolean;
  /** Returns an unsubscribe function. */
  onChange(listener: (change: AccessChange) => void): () => void;
}
