// A small in-memory MqttAccess for broker-level tests and the MQTT benchmark. Decisions use the
// REAL permission engine (PermissionSet); only the user directory is static. The real
// implementation (store + scrypt passwords + tokens) lives in src/auth.

import { createHash } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import { ForbiddenError, UnauthorizedError } from '../../src/errors/errors.js';
import type { AccessChange, MqttAccess, MqttCredentials, MqttPrincipal } from '../../src/mqtt/mqtt-access.js';
import { PermissionSet, type PermissionOperation } from '../../src/permissions/index.js';

export interface StaticPermission {
  resource: string;
  operation: PermissionOperation;
}

export interface StaticUser {
  username: string;
  password?: string;
  /** Session tokens accepted as password (method 'token', fingerprint = hex SHA-256). */
  tokens?: string[];
  publishPrefix?: string;
  permissions?: StaticPermission[];
  /** SHA-256 fingerprints (lowercase hex, no colons) of registered client certificates. */
  certificateFingerprints?: string[];
  /** Grant type certificate: a verified certificate with CN = username authenticates. */
  certificateByCommonName?: boolean;
  /** authenticate() rejects with ForbiddenError (CONNACK 5). */
  forbidden?: boolean;
  /** authenticate() rejects with an unexpected error (CONNACK 3). */
  broken?: boolean;
}

interface UserRecord {
  userId: string;
  user: StaticUser;
  set: PermissionSet;
}

export function tokenFingerprint(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

export class StaticMqttAccess implements MqttAccess {
  private readonly users = new Map<string, UserRecord>();
  private readonly byId = new Map<string, UserRecord>();
  private readonly listeners = new Set<(change: AccessChange) => void>();
  private nextId = 1;
  /** Simulated cost of a password check (real: scrypt), ms; 0 = none. */
  authDelayMs = 0;
  /** When set, authenticate() waits for this promise (to create races in tests). */
  authGate: Promise<void> | undefined;
  /** Called when an authentication starts (after the broker's concurrency limit). */
  onAuthenticate: (() => void) | undefined;
  authCalls = 0;
  authActive = 0;
  maxAuthActive = 0;
  readonly credentialsSeen: MqttCredentials[] = [];

  constructor(users: StaticUser[] = []) {
    for (const user of users) this.addUser(user);
  }

  addUser(user: StaticUser): string {
    const userId = `u${this.nextId++}-${user.username}`;
    const record: UserRecord = { userId, user, set: compile(user.permissions ?? []) };
    this.users.set(user.username, record);
    this.byId.set(userId, record);
    return userId;
  }

  userId(username: string): string {
    const record = this.users.get(username);
    if (!record) throw new Error(`no user ${username}`);
    return record.userId;
  }

  /** Replaces a user's permissions and reports it like the real engine does. */
  setPermissions(username: string, permissions: StaticPermission[]): void {
    const record = this.users.get(username)!;
    record.user.permissions = permissions;
    record.set = compile(permissions);
    this.emit({ userId: record.userId, kind: 'permissions' });
  }

  revoke(username: string, tokens?: string[]): void {
    const record = this.users.get(username)!;
    if (tokens) {
      record.user.tokens = (record.user.tokens ?? []).filter((t) => !tokens.includes(t));
      this.emit({ userId: record.userId, kind: 'revoked', tokenFingerprints: tokens.map(tokenFingerprint) });
    } else {
      this.emit({ userId: record.userId, kind: 'revoked' });
    }
  }

  deleteUser(username: string): void {
    const record = this.users.get(username)!;
    this.users.delete(username);
    this.byId.delete(record.userId);
    this.emit({ userId: record.userId, kind: 'deleted' });
  }

  emit(change: AccessChange): void {
    for (const listener of this.listeners) listener(change);
  }

  async authenticate(credentials: MqttCredentials): Promise<MqttPrincipal> {
    this.authCalls++;
    this.authActive++;
    this.maxAuthActive = Math.max(this.maxAuthActive, this.authActive);
    this.credentialsSeen.push(credentials);
    this.onAuthenticate?.();
    if (this.credentialsSeen.length > 2000) this.credentialsSeen.splice(0, 1000);
    try {
      if (this.authDelayMs > 0) await delay(this.authDelayMs);
      if (this.authGate) await this.authGate;
      return this.resolve(credentials);
    } finally {
      this.authActive--;
    }
  }

  private resolve(credentials: MqttCredentials): MqttPrincipal {
    const cert = credentials.certificate;
    if (cert) {
      for (const record of this.users.values()) {
        const u = record.user;
        if ((cert.fingerprint256 !== undefined && u.certificateFingerprints?.includes(cert.fingerprint256)) || (u.certificateByCommonName && u.username === cert.commonName)) {
          return this.principal(record, 'certificate');
        }
      }
    }
    if (credentials.username === undefined) throw new UnauthorizedError('bad username or password');
    const record = this.users.get(credentials.username);
    const secret = credentials.password?.toString('utf8');
    if (!record || secret === undefined) throw new UnauthorizedError('bad username or password');
    const u = record.user;
    if (u.broken) throw new Error('store unavailable');
    if (u.tokens?.includes(secret)) {
      if (u.forbidden) throw new ForbiddenError('not authorized');
      return { ...this.principal(record, 'token'), tokenFingerprint: tokenFingerprint(secret) };
    }
    if (u.password === undefined || u.password !== secret) throw new UnauthorizedError('bad username or password');
    if (u.forbidden) throw new ForbiddenError('not authorized');
    return this.principal(record, 'password');
  }

  private principal(record: UserRecord, method: MqttPrincipal['method']): MqttPrincipal {
    return { userId: record.userId, username: record.user.username, publishPrefix: record.user.publishPrefix ?? '', method };
  }

  allows(principal: MqttPrincipal, operation: 'read' | 'write', topic: string): boolean {
    const record = this.byId.get(principal.userId);
    return record !== undefined && record.set.allows('mqtt', operation, topic);
  }

  coversFilter(principal: MqttPrincipal, filter: string): boolean {
    const record = this.byId.get(principal.userId);
    return record !== undefined && record.set.coversFilter('mqtt', 'read', filter);
  }

  onChange(listener: (change: AccessChange) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}

function compile(permissions: StaticPermission[]): PermissionSet {
  return new PermissionSet(permissions.map((p) => ({ resource: p.resource, operation: p.operation, context: 'mqtt' as const })));
}
