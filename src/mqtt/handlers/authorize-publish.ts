// aedes `authorizePublish` hook: may this client publish this message?
//
// - Nobody vouches for a will left by a client of another (dead) broker instance (client null),
//   nor for anonymous or revoked clients.
// - The publish rate limit (mqtt.maxPublishesPerSecond, a token bucket per connection): over it,
//   a publish waits for a token, and every publish after it waits behind it (their order is
//   kept); aedes reads the client's socket on only once the packets it read are handled, so the
//   client is slowed at its TCP window. Over it for rateLimitGraceSeconds: disconnected.
// - $SYS is reserved; the topic gets the user's publishPrefix before the write check, and the
//   packet is rewritten so that delivery, retained messages and wills use the prefixed topic.
// - A retained message the store cannot write now is refused rather than acknowledged and lost.
// - MQTT 3.1.1: aedes closes the connection on a refusal; MQTT 5: a forbidden QoS 1/2 publish
//   gets PUBACK/PUBREC 0x87 and the client stays.
import type { Client } from 'aedes';
import { allows, storeCannotWrite, type BrokerContext } from '../broker-context.js';
import { isSysTopic } from '../topic-rules.js';
import { stateOf, type ClientState } from '../client-state.js';

export type AuthorizePublishHook = (client: Client | null, packet: { topic: string; retain?: boolean }, callback: (error?: Error | null) => void) => void;

export function createAuthorizePublish(ctx: BrokerContext): AuthorizePublishHook {
  const { cfg, counters, log } = ctx;

  const publishRefused = (client: Client, st: ClientState, topic: string, reason: string): void => {
    counters.publishesRefused++;
    log.info('mqtt publish refused, disconnecting', { clientId: client.id, username: st.principal?.username, topic, reason });
  };

  /**
   * Lets `go` run once the client's allowance has a token for it and for every publish queued
   * before it. Not aedes' pause()/resume(): a packet of the batch being handled that finishes while
   * paused is not counted down (aedes' nextBatch returns early), and one resume() counts down one:
   * with two or more, aedes never read that client's socket again.
   */
  const waitForToken = (client: Client, st: ClientState, go: () => void): void => {
    const queue = (st.waiting ??= []);
    queue.push(go);
    if (queue.length > 1) return;
    counters.rateLimitPauses++;
    const release = () => {
      const now = Date.now();
      // A client that closed meanwhile: aedes refuses what it still has to handle.
      while (queue.length > 0 && (client.closed || st.bucket.take(now))) queue.shift()!();
      if (queue.length > 0) setTimeout(release, Math.max(1, st.bucket.msUntilToken())).unref();
      else if (st.waiting === queue) st.waiting = undefined;
    };
    setTimeout(release, Math.max(1, st.bucket.msUntilToken())).unref();
  };

  return (client, packet, callback) => {
    const st = stateOf(client);
    // client null: a will left by a client of another (dead) broker instance; nobody vouches for it.
    if (!client || !st || st.revoked || st.principal === null) {
      if (client && st && !client.closed) publishRefused(client, st, packet.topic, st.revoked ? 'revoked' : 'anonymous');
      return callback(new Error('publish not authorized'));
    }
    if (st.rateDropped) return callback(new Error('publish rate limit exceeded'));
    // The will is published while the client closes: not subject to the rate limit.
    if (!client.closed) {
      const now = Date.now();
      if (st.waiting !== undefined || !st.bucket.take(now)) {
        st.overLimitSince ??= now;
        if (now - st.overLimitSince >= cfg.rateLimitGraceSeconds * 1000) {
          st.rateDropped = true;
          counters.rateLimitDisconnects++;
          log.warn('mqtt publish rate limit exceeded, disconnecting', {
            clientId: client.id,
            username: st.principal.username,
            limitPerSecond: cfg.maxPublishesPerSecond,
            overForSeconds: Math.round((now - st.overLimitSince) / 1000),
          });
          // MQTT 3.1.1: aedes closes the connection on this error. MQTT 5: aedes would only answer
          // 0x87 and keep the client, so it is told why (DISCONNECT 0x96 message rate too high) and closed.
          callback(new Error('publish rate limit exceeded'));
          if ((client as { version?: number }).version === 5 && !client.closed) {
            (client as unknown as { disconnect(opts: { reasonCode: number }, done: () => void): void }).disconnect({ reasonCode: 0x96 }, () => {});
          }
          return;
        }
        // Slowed down, not dropped: this publish waits for its token, behind those waiting already.
        const principal = st.principal;
        return waitForToken(client, st, () => {
          // Revoked or dropped while it waited: refused as one arriving now would be.
          if (st.revoked) return callback(new Error('publish not authorized'));
          if (st.rateDropped) return callback(new Error('publish rate limit exceeded'));
          decide(client, st, principal, packet, callback);
        });
      } else if (st.overLimitSince !== undefined && st.bucket.level(now) >= 0.5) {
        st.overLimitSince = undefined; // calm again: half its burst has refilled
      }
    }
    decide(client, st, st.principal, packet, callback);
  };

  /** Within its allowance: the topic, the permission and the store decide. */
  function decide(client: Client, st: ClientState, principal: NonNullable<ClientState['principal']>, packet: { topic: string; retain?: boolean }, callback: (error?: Error | null) => void): void {
    const raw = packet.topic;
    const prefix = principal.publishPrefix;
    const topic = prefix ? prefix + raw : raw;
    if (isSysTopic(raw) || isSysTopic(topic)) {
      publishRefused(client, st, topic, '$SYS is reserved');
      return callback(new Error('$SYS topics are reserved'));
    }
    let ok = st.writeCache.lookup(topic);
    if (ok === undefined) {
      ok = allows(ctx, principal, 'write', topic);
      st.writeCache.store(topic, ok);
    }
    if (!ok) {
      publishRefused(client, st, topic, 'no write permission');
      return callback(new Error('publish not authorized'));
    }
    // A retained message is state the store must keep: while it cannot write (disk full,
    // read-only, see docs/operations.md "Health, metrics and faults"), refuse it as the protocol
    // allows (MQTT 5: a PUBACK/PUBREC with a reason code, 3.1.1: the connection closes) rather
    // than acknowledge and lose it.
    if (packet.retain && storeCannotWrite(ctx)) {
      publishRefused(client, st, topic, 'the store cannot write');
      return callback(new Error('retained messages cannot be stored now: the store cannot write'));
    }
    if (prefix) packet.topic = topic; // delivery, retained store and QoS 2 dedup use the prefixed topic
    counters.messagesReceived++;
    callback(null);
  }
}
