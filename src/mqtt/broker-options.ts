// What createBroker() takes.
import type { GatewayConfig } from '../config/config-schema.js';
import type { Logger } from '../log/logger.js';
import type { Store } from '../store/index.js';
import type { StoragePolicy } from '../storage/index.js';
import type { MqttAccess } from './mqtt-access.js';

export interface BrokerOptions {
  config: GatewayConfig['mqtt'];
  /** Bind address of the TCP and TLS listeners. */
  host: string;
  log: Logger;
  access: MqttAccess;
  /** Server key/cert PEM; ca() = trusted CA PEMs for client certificates, read per TLS context. */
  tls: { key: string; cert: string; ca: () => string[] };
  /**
   * The gateway's store: with mqtt.persistence.enabled the broker keeps retained messages,
   * persistent sessions, queues and wills in it (src/mqtt/persistence). Without a store (the
   * benchmark's bare comparisons), aedes' in-memory persistence.
   */
  store?: Store;
  /** The gateway's storage policy, shared by every writer of the store (absent: the persistence makes its own). */
  storage?: StoragePolicy;
  /** gatewayd's version, published in $SYS/broker/version. */
  version?: string;
  /** Topics of other parts published with the broker's own under $SYS/broker/ (bridges). */
  sysTopics?: () => Iterable<[name: string, value: string | number]>;
}

export interface EnhancedAuthInfo {
  result: string;
  modifiers: { max_message_size: string; max_inflight_messages: string; retry_interval: string };
}
