// The broker's counters, read by $SYS/broker/... (sys-topics.ts), /metrics and the web UI.
import type { BrokerStateStats } from './persistence/index.js';

/** The counters the broker's modules increment (part of BrokerStats). */
export interface BrokerCounters {
  connectsAccepted: number;
  connectsRefused: number;
  publishesRefused: number;
  subscriptionsRefused: number;
  forwardsRefused: number;
  rateLimitDisconnects: number;
  /** Times a client publishing faster than maxPublishesPerSecond had its socket paused. */
  rateLimitPauses: number;
  oversizeDisconnects: number;
  /** Messages not queued because a session's outgoing queue was full (maxQueuedMessages). */
  queueDrops: number;
  revocationDisconnects: number;
  /** PUBLISH packets accepted from clients, and messages delivered to clients. */
  messagesReceived: number;
  messagesSent: number;
}

export interface BrokerStats extends BrokerCounters {
  /** Clients with an established session. */
  clients: number;
  /** Authentications running now / waiting for a slot (maxConcurrentAuth). */
  authRunning: number;
  authWaiting: number;
  /** Bytes on the MQTT connections (TCP and TLS listeners, WebSocket upgrades), both ways. */
  bytesReceived: number;
  bytesSent: number;
  /** Refused CONNECTs by reason: bad_credentials, not_authorized, bad_client_id, unsupported_version, other. */
  connectsRefusedByReason: Record<RefusalReason, number>;
  uptimeSeconds: number;
  /** The broker state on disk (absent with aedes' in-memory persistence). */
  persistence?: BrokerStateStats;
}

export function newCounters(): BrokerCounters {
  return {
    connectsAccepted: 0,
    connectsRefused: 0,
    publishesRefused: 0,
    subscriptionsRefused: 0,
    forwardsRefused: 0,
    rateLimitDisconnects: 0,
    rateLimitPauses: 0,
    oversizeDisconnects: 0,
    queueDrops: 0,
    revocationDisconnects: 0,
    messagesReceived: 0,
    messagesSent: 0,
  };
}

export function newRefusalCounts(): Record<RefusalReason, number> {
  return { bad_credentials: 0, not_authorized: 0, bad_client_id: 0, unsupported_version: 0, other: 0 };
}

export type RefusalReason = 'bad_credentials' | 'not_authorized' | 'bad_client_id' | 'unsupported_version' | 'other';

/** The reason of a CONNACK return code (MQTT 3.1.1 numbering; MQTT 5 clients get the matching reason code). */
export function refusalReasonOf(returnCode: number): RefusalReason {
  switch (returnCode) {
    case 1:
      return 'unsupported_version';
    case 2:
      return 'bad_client_id';
    case 4:
      return 'bad_credentials';
    case 5:
      return 'not_authorized';
    default:
      return 'other';
  }
}
