// The aedes instance: its options, our hooks (handlers/), and the broker state it keeps (the
// LMDB persistence of persistence/ with a store, else aedes' in-memory one with bounded queues).
import { Aedes, type AedesOptions } from 'aedes';
import type { GatewayConfig } from '../config/config-schema.js';
import type { BrokerContext } from './broker-context.js';
import type { AuthenticateHook } from './handlers/authenticate.js';
import type { AuthorizeForwardHook } from './handlers/authorize-forward.js';
import type { AuthorizePublishHook } from './handlers/authorize-publish.js';
import type { AuthorizeSubscribeHook } from './handlers/authorize-subscribe.js';
import type { PreConnectHook } from './handlers/pre-connect.js';
import { guardAedesState } from './aedes-guards.js';
import { boundOutgoingQueues } from './limits.js';
import { installRetainedFirst } from './retained-first-hooks.js';
import { acknowledgeWhenDurable, createLmdbPersistence, persistenceLimits } from './persistence/index.js';
import { topicMatches } from './persistence/topic-filter.js';
import { stateOf } from './client-state.js';
import { holdReplayToQuota } from './mqtt5/flow-control.js';
import { SharedSubscriptions } from './mqtt5/shared-subscriptions.js';
import { publishWillsWithoutWillDelay } from './mqtt5/will-messages.js';
import { installOutboundPackets } from './outbound-packets.js';

export interface AedesHooks {
  preConnect: PreConnectHook;
  authenticate: AuthenticateHook;
  authorizePublish: AuthorizePublishHook;
  authorizeSubscribe: AuthorizeSubscribeHook;
  authorizeForward: AuthorizeForwardHook;
}

/** Aedes options shared by the gatewayd broker and the bare broker of the benchmark. */
export function aedesBaseOptions(config: GatewayConfig['mqtt']): AedesOptions {
  return {
    connectTimeout: config.connectTimeoutMs,
    // Only applies to MQTT 3.1 (3.1.1 has no limit in Aedes); the general check is in preConnect.
    maxClientsIdLength: config.maxClientIdLength,
    // Parsed packets a client may pipeline before its CONNACK. Memory stays bounded anyway: Aedes
    // stops reading the socket while the CONNECT is being handled.
    queueLimit: config.maxQueuedMessages,
    // A subscriber whose socket stays full this long is disconnected, so one frozen consumer
    // cannot hold every delivery slot (Aedes `concurrency`) for long.
    drainTimeout: config.drainTimeoutMs,
    // Announced to MQTT 5 clients in the CONNACK.
    topicAliasMaximum: config.topicAliasMaximum,
    maximumPacketSize: config.maxPacketSizeBytes,
    receiveMaximum: config.maxInflightMessages,
    sessionExpiryIntervalLimit: config.persistence.sessionExpirySeconds,
    // keepaliveLimit stays 0: Aedes would answer CONNACK 6, which MQTT 3.1.1 does not define.
  };
}

/** Creates aedes with the hooks and the broker state; sets ctx.aedes and ctx.persistence. */
export async function createAedes(ctx: BrokerContext, hooks: AedesHooks): Promise<Aedes> {
  const { store } = ctx.options;
  const persistence = store && ctx.cfg.persistence.enabled ? createLmdbPersistence({ store, policy: ctx.options.storage, limits: persistenceLimits(ctx.cfg), log: ctx.log, markResends: true }) : undefined;
  ctx.persistence = persistence;
  const aedes = await Aedes.createBroker({
    ...aedesBaseOptions(ctx.cfg),
    ...(persistence ? { persistence } : {}),
    preConnect: hooks.preConnect,
    authenticate: hooks.authenticate,
    authorizePublish: hooks.authorizePublish,
    authorizeSubscribe: hooks.authorizeSubscribe,
    authorizeForward: hooks.authorizeForward,
  });
  guardAedesState(aedes);
  ctx.aedes = aedes;
  // sessionPresent, MQTT 5 topic aliases, maximum packet size and flow control (outbound-packets.ts).
  if (!installOutboundPackets()) ctx.log.warn('mqtt-packet has an unexpected shape: sessionPresent is 0 for a returning session without subscriptions; MQTT 5 clients get no topic aliases, and their maximum packet size and receive maximum are not respected');
  installMqtt5(ctx, aedes);
  installRetainedFirst(aedes);
  if (persistence && store) {
    // A QoS 1/2 publisher gets its PUBACK/PUBREC once every copy of its message is safe: on disk,
    // or taken by the recipient that needed it. A publish a bridge taps is held too: the bridge's
    // queue copy carries the publish's tag like the persistence's copies.
    acknowledgeWhenDurable(aedes, {
      whenSettled: (publishId) => persistence.whenSettled(publishId),
      subscriptionsPending: (clientId) => persistence.subscriptionsPending(clientId),
      writesFor: (packet) => persistence.writesFor(packet) || ctx.tapFilters.some((filter) => topicMatches(filter, packet.topic)),
    });
    // A restore swapped the store: the broker state is the backup's.
    store.onReopen(() => persistence.reload());
  } else {
    // The LMDB persistence bounds its queues itself (mqtt.maxQueuedMessages); aedes' in-memory one does not.
    const bound = boundOutgoingQueues((aedes as unknown as { persistence: unknown }).persistence, ctx.cfg.maxQueuedMessages, () => {
      ctx.counters.queueDrops++;
    });
    if (!bound) ctx.log.warn('aedes persistence has an unexpected shape: outgoing queues are not bounded');
  }
  return aedes;
}

/** The MQTT 5 features that live on the aedes instance (mqtt5/; per connection: handlers/pre-connect.ts). */
function installMqtt5(ctx: BrokerContext, aedes: Aedes): void {
  publishWillsWithoutWillDelay(aedes);
  const shared = new SharedSubscriptions(aedes);
  shared.install();
  ctx.shared = shared;
  const persistence = (aedes as unknown as { persistence: Parameters<typeof holdReplayToQuota>[0] }).persistence;
  holdReplayToQuota(
    persistence,
    (client) => stateOf(client as never)?.mqtt5?.quota,
    (client) => (client as { connected?: boolean }).connected === true,
  );
}
