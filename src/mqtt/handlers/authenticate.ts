// aedes `authenticate` hook: connection admission. Answers the refusals preConnect noted, admits
// anonymous clients when allowed, and asks the permission engine (access.authenticate) for the
// others, at most mqtt.maxConcurrentAuth at once (FIFO, none dropped), each bounded by
// connectTimeoutMs.
//
// - Anonymous (no username and no verified client certificate): refused with CONNACK 4 unless
//   mqtt.allowAnonymous. An admitted anonymous client has NO permissions at all; the access port
//   is never asked about it.
// - A client id live or persistent for ANOTHER user is refused with CONNACK 2, so one user cannot
//   kick another user's device off or take over its session (session-registry.ts).
// - Credentials revoked while the authentication ran: refused (revocation-log.ts).
// - MQTT 5: refusals carry the MQTT 3.1.1 return code, which aedes 2 turns into the reason code
//   (4 → 0x86, 5 → 0x87).
import type tls from 'node:tls';
import type { Client } from 'aedes';
import type { BrokerContext } from '../broker-context.js';
import { stateOf } from '../client-state.js';
import { connackError, refusalFor, type ConnackError } from '../connack-errors.js';
import { recordRefusal } from '../connect-refusals.js';
import type { ConcurrencyLimiter } from '../limits.js';
import { peerCertificate } from '../listeners.js';
import type { MqttCredentials, MqttPrincipal } from '../mqtt-access.js';
import type { RevocationLog } from '../revocation-log.js';
import type { SessionRegistry } from '../session-registry.js';

type Done = (error: ConnackError | null, success: boolean | null) => void;

export type AuthenticateHook = (client: Client, username: Readonly<string | undefined>, password: Readonly<Buffer | undefined>, done: Done) => void;

export interface AuthenticateDeps {
  limiter: ConcurrencyLimiter;
  revocations: RevocationLog;
  sessions: SessionRegistry;
}

/**
 * Deadlines of the authentications running: one timer for all of them, sweeping twice per
 * timeout, instead of a timer set and cleared per connect (a connect storm's cost). The timer
 * stops at a sweep that finds nothing running, not when the last one finishes: between two
 * connects of a storm nothing runs for a moment, and re-arming it each time cost as much.
 */
class Deadlines {
  private readonly running = new Map<object, { at: number; expire: () => void }>();
  private sweep: NodeJS.Timeout | undefined;

  constructor(private readonly timeoutMs: number) {}

  add(key: object, expire: () => void): void {
    this.running.set(key, { at: Date.now() + this.timeoutMs, expire });
    if (this.sweep === undefined) {
      this.sweep = setInterval(() => this.expire(), Math.max(10, Math.floor(this.timeoutMs / 2)));
      this.sweep.unref();
    }
  }

  delete(key: object): void {
    this.running.delete(key);
  }

  private expire(): void {
    if (this.running.size === 0) {
      clearInterval(this.sweep);
      this.sweep = undefined;
      return;
    }
    const now = Date.now();
    for (const { at, expire } of [...this.running.values()]) if (at <= now) expire();
  }
}

export function createAuthenticate(ctx: BrokerContext, { limiter, revocations, sessions }: AuthenticateDeps): AuthenticateHook {
  const cfg = ctx.cfg;
  const deadlines = new Deadlines(cfg.connectTimeoutMs);

  /**
   * The CONNACK of an authentication that ended (`err`, or the principal): a refusal with its
   * return code, or the client admitted, unless its credentials were revoked since `since`
   * (revocations.seq when it began) or its client id belongs to another user.
   */
  function conclude(client: Client, name: string | undefined, since: number, err: unknown, principal: MqttPrincipal | undefined, done: Done): void {
    const st = stateOf(client)!;
    if (err !== null || !principal) {
      const { returnCode, reason, fault } = refusalFor(err);
      if (fault) ctx.log.error('mqtt authentication error', { clientId: client.id, username: name, error: err instanceof Error ? err.message : String(err) });
      recordRefusal(ctx, st, { clientId: client.id, username: name, returnCode, reason });
      return done(connackError(returnCode, reason), null);
    }
    const revoked = revocations.revokedSince(since, principal);
    if (revoked !== false) {
      const code = revoked === null ? 3 : 4;
      recordRefusal(ctx, st, { clientId: client.id, username: principal.username, returnCode: code, reason: 'credentials revoked during authentication' });
      return done(connackError(code, 'credentials revoked'), null);
    }
    if (!sessions.ownerAllows(client, principal.userId)) {
      recordRefusal(ctx, st, { clientId: client.id, username: principal.username, returnCode: 2, reason: 'client id is in use by another user' });
      return done(connackError(2, 'client id is in use by another user'), null);
    }
    st.principal = principal;
    sessions.admitUser(client, principal);
    ctx.counters.connectsAccepted++;
    done(null, true);
  }

  return (client, username, password, done) => {
    const st = stateOf(client);
    if (!st) return done(connackError(3, 'unknown connection'), null);
    if (st.refuseCode !== 0) {
      recordRefusal(ctx, st, { clientId: client.id, username, returnCode: st.refuseCode, reason: st.refuseReason });
      return done(connackError(st.refuseCode as 2, st.refuseReason), null);
    }
    const certificate = st.transport === 'tls' ? peerCertificate(client.conn as tls.TLSSocket) : undefined;
    if (username === undefined && certificate === undefined) {
      if (!cfg.allowAnonymous) {
        recordRefusal(ctx, st, { clientId: client.id, username: undefined, returnCode: 4, reason: 'anonymous connections are not allowed' });
        return done(connackError(4, 'anonymous connections are not allowed'), null);
      }
      if (!sessions.ownerAllows(client, '')) {
        recordRefusal(ctx, st, { clientId: client.id, username: undefined, returnCode: 2, reason: 'client id is in use by another user' });
        return done(connackError(2, 'client id is in use by another user'), null);
      }
      st.anonymous = true;
      sessions.recordSession(client, '');
      ctx.counters.connectsAccepted++;
      return done(null, true);
    }

    const credentials: MqttCredentials = { clientId: client.id };
    if (username !== undefined) credentials.username = username;
    if (password !== undefined) credentials.password = password;
    if (certificate !== undefined) credentials.certificate = certificate;
    if (st.remote) credentials.remoteAddress = st.remote;

    // A session token or a password verified moments ago (a device reconnecting) is answered
    // at once: nothing to wait for, so no slot of the limiter and no deadline.
    let known: MqttPrincipal | undefined;
    try {
      known = ctx.access.authenticateAtOnce?.(credentials);
    } catch (err) {
      return conclude(client, username ?? certificate?.commonName, revocations.seq, err ?? new Error('authentication failed'), undefined, done);
    }
    if (known) return conclude(client, username, revocations.seq, null, known, done);

    limiter.schedule((release) => {
      if (client.closed) {
        release(); // gave up while waiting for a slot
        return;
      }
      const since = revocations.seq;
      let settled = false;
      const finish = (err: unknown, principal?: MqttPrincipal) => {
        if (settled) return;
        settled = true;
        deadlines.delete(client);
        release();
        if (client.closed) return;
        conclude(client, username ?? certificate?.commonName, since, err, principal, done);
      };
      deadlines.add(client, () => finish(new Error('authentication timed out')));
      try {
        ctx.access.authenticate(credentials).then(
          (principal) => finish(null, principal),
          (err: unknown) => finish(err ?? new Error('authentication failed')),
        );
      } catch (err) {
        finish(err ?? new Error('authentication failed'));
      }
    });
  };
}
