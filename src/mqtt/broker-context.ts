// What the broker's modules share: its options, counters, the aedes instance once created, and
// the few decisions several hooks make the same way.
import type { Aedes } from 'aedes';
import type { GatewayConfig } from '../config/config-schema.js';
import type { Logger } from '../log/logger.js';
import { newCounters, newRefusalCounts, type BrokerCounters, type RefusalReason } from './broker-stats.js';
import type { BrokerOptions } from './broker-options.js';
import type { MqttAccess, MqttPrincipal } from './mqtt-access.js';
import type { SharedSubscriptions } from './mqtt5/shared-subscriptions.js';
import type { LmdbPersistence } from './persistence/index.js';

/**
 * Who a message comes from, for the audit of what it causes (a write to a field device): the MQTT
 * client that published it and the user it signed in as, or a part of the daemon that published
 * it on someone's behalf (a mapping, the OPC UA server for a session, a Sparkplug edge node for
 * its host), as that part said in its publish.
 */
export interface MessageOrigin {
  clientId?: string;
  userId?: string;
  username?: string;
  /** The part of the gateway that published it, in words ("mapping line.routes"). */
  via?: string;
  /** The client's network address (an MQTT client's, an OPC UA session's): the audit trail's source. */
  remote?: string;
}

export interface BrokerContext {
  readonly options: BrokerOptions;
  readonly cfg: GatewayConfig['mqtt'];
  /** The broker's logger (component mqtt). */
  readonly log: Logger;
  readonly access: MqttAccess;
  readonly counters: BrokerCounters;
  readonly refusalsByReason: Record<RefusalReason, number>;
  /** Set once start() created it. */
  aedes: Aedes | undefined;
  /** The LMDB persistence, when the broker has a store and mqtt.persistence.enabled. */
  persistence: LmdbPersistence | undefined;
  /** The shared subscription groups of the aedes instance, set with it. */
  shared: SharedSubscriptions | undefined;
  /** stop() was called: no new connection, upgrade or data-plane call is taken. */
  stopping: boolean;
  /**
   * The filters of the data plane's taps (one entry per tap): a client's QoS 1/2 publish that
   * matches one is held for its acknowledgement like a publish that writes (a bridge stores it).
   */
  readonly tapFilters: string[];
  /** Who published each of the daemon's own data-plane payloads, when its publish said so (data-plane.ts). */
  readonly origins: WeakMap<Buffer, MessageOrigin>;
}

export function createBrokerContext(options: BrokerOptions): BrokerContext {
  return {
    options,
    cfg: options.config,
    log: options.log.child({ component: 'mqtt' }),
    access: options.access,
    counters: newCounters(),
    refusalsByReason: newRefusalCounts(),
    aedes: undefined,
    persistence: undefined,
    shared: undefined,
    stopping: false,
    tapFilters: [],
    origins: new WeakMap(),
  };
}

/** The permission engine's answer; a failing engine answers no (and is logged). */
export function allows(ctx: BrokerContext, principal: MqttPrincipal, operation: 'read' | 'write', topic: string): boolean {
  try {
    return ctx.access.allows(principal, operation, topic) === true;
  } catch (err) {
    ctx.log.error('mqtt permission decision failed', { username: principal.username, operation, topic, error: (err as Error).message });
    return false;
  }
}

/** True while the broker's store (when it has one) cannot write. */
export function storeCannotWrite(ctx: BrokerContext): boolean {
  return ctx.options.store !== undefined && ctx.cfg.persistence.enabled && !ctx.options.store.writeHealth().writable;
}
