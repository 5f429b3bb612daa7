// The shapes of packets as the broker's packet hooks see them (inbound-packets.ts, outbound-packets.ts)
// and as the per-connection features handle them (mqtt5/): a leaf, so that per-client state can
// name what its features take without importing the hooks.

/** A packet as aedes' parser hands it to its handlers. */
export interface InboundPacket {
  cmd: string;
  qos?: number;
  messageId?: number;
  reasonCode?: number;
  subscriptions?: Array<{ topic: string }>;
  unsubscriptions?: string[];
  /** MQTT 5 properties as mqtt-packet reads them (a property given twice becomes an array). */
  properties?: Record<string, unknown>;
}

/** A packet as aedes hands it to mqtt-packet. */
export interface OutboundPacket {
  cmd: string;
  [field: string]: unknown;
}

/** What an MQTT 5 connection does with a packet: write it (maybe changed), write these bytes, or drop it (null). */
export type OutboundResult = OutboundPacket | Buffer | null;
