// What an MQTT 5 connection's features (mqtt5-connection.ts) offer the rest of the broker, as the
// per-client state (client-state.ts) holds them.
import type { InboundPacket, OutboundPacket, OutboundResult } from '../packet-types.js';
import type { OutboundQuota } from './flow-control.js';

export interface Mqtt5Features {
  /** The client's Receive Maximum on outbound QoS 1/2 (undefined: it set none). */
  readonly quota: OutboundQuota | undefined;
  /** Every packet the client sent, before aedes handles it. */
  inbound(packet: InboundPacket): void;
  /** Every packet aedes writes to the client: written as returned, as these bytes, or dropped (null). */
  outbound(packet: OutboundPacket): OutboundResult;
  /** The connection closed. */
  closed(): void;
}
