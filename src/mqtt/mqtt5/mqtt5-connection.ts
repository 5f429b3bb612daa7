// The MQTT 5 features of one connection, set up when its CONNECT arrives (handlers/pre-connect.ts)
// from what the client announced: its Receive Maximum (flow-control.ts), Maximum Packet Size
// (below), Topic Alias Maximum (topic-aliases.ts); and for every MQTT 5 client the inbound Receive
// Maximum and the early server DISCONNECT (server-disconnect.ts). Packets pass through inbound() before
// aedes handles them (inbound-packets.ts) and through outbound() when aedes writes them
// (outbound-packets.ts).
//
// Maximum Packet Size: exists because aedes 2.0.0-beta.1 records the client's maximum but writes
// larger packets anyway ("advisory"). A PUBLISH larger than the client accepts is not sent, and
// the broker behaves as if it had been [MQTT-3.1.2-25]: a QoS 1/2 one leaves the session's stored
// queue. Only clients that announce a maximum pay for the size check (one serialization, which
// is then what is written).
import type { Client } from 'aedes';
import { serveWhileConnecting } from '../inbound-packets.js';
import { serializeMqtt5 } from '../outbound-packets.js';
import type { InboundPacket, OutboundPacket, OutboundResult } from '../packet-types.js';
import { InboundQuota, OutboundQuota, type DeliverFn, type QueuedDelivery } from './flow-control.js';
import type { Mqtt5Features } from './mqtt5-features.js';
import { disconnectFromConnack, disconnectWith } from './server-disconnect.js';
import { OutboundTopicAliases } from './topic-aliases.js';

/** The CONNECT properties read here. */
export interface ConnectProperties {
  receiveMaximum?: number;
  maximumPacketSize?: number;
  topicAliasMaximum?: number;
}

export interface Mqtt5Options {
  /** The broker's Receive Maximum (announced in the CONNACK). */
  receiveMaximum: number;
  /** Upper bound of the outbound topic aliases of one connection. */
  topicAliasMaximum: number;
  /** Deliveries one connection may hold back for its Receive Maximum. */
  maxQueuedMessages: number;
  /** A held delivery was dropped (queue full). */
  onQueueDrop(): void;
  /** A PUBLISH too large for the client was not sent. */
  onTooLarge(bytes: number, limit: number): void;
}

const RECEIVE_MAXIMUM_DEFAULT = 65535;

interface AedesClient {
  clean: boolean;
  connected: boolean;
  closed: boolean;
  deliver0: DeliverFn;
  deliverQoS: DeliverFn;
  broker: { persistence: { outgoingClearMessageId(client: unknown, packet: unknown): Promise<unknown> } };
  once(event: 'connected', listener: () => void): unknown;
}

interface PublishOut extends OutboundPacket {
  qos?: number;
  messageId?: number;
}

export class Mqtt5Connection implements Mqtt5Features {
  readonly quota: OutboundQuota | undefined;
  private readonly inboundQuota: InboundQuota;
  private readonly aliases: OutboundTopicAliases | undefined;
  private readonly maxPacketSize: number | undefined;

  constructor(
    client: Client,
    properties: ConnectProperties,
    private readonly options: Mqtt5Options,
  ) {
    const c = client as unknown as AedesClient;
    this.client = c;
    disconnectFromConnack(client);
    this.inboundQuota = new InboundQuota(options.receiveMaximum, () => disconnectWith(client, 0x93));
    const receiveMaximum = properties.receiveMaximum ?? RECEIVE_MAXIMUM_DEFAULT;
    let deliverQoS = c.deliverQoS;
    if (receiveMaximum > 0 && receiveMaximum < RECEIVE_MAXIMUM_DEFAULT) {
      const quota = new OutboundQuota(receiveMaximum, options.maxQueuedMessages, {
        deliver: deliverQoS,
        connected: () => c.connected,
        expired: (packet) => this.forgetQueued(packet),
        dropped: () => options.onQueueDrop(),
        replayHeld: () => serveWhileConnecting(client as never),
        now: Date.now,
      });
      this.quota = quota;
      deliverQoS = quota.deliver;
      c.once('connected', () => quota.connectedNow());
    }
    c.deliverQoS = deliverQoS;
    const aliasMaximum = Math.min(properties.topicAliasMaximum ?? 0, options.topicAliasMaximum);
    if (aliasMaximum > 0) this.aliases = new OutboundTopicAliases(aliasMaximum);
    this.maxPacketSize = properties.maximumPacketSize;
  }

  private readonly client: AedesClient;

  /** A packet from the client, before aedes handles it. */
  inbound(packet: InboundPacket): void {
    switch (packet.cmd) {
      case 'publish':
        this.inboundQuota.received(packet.qos ?? 0, packet.messageId);
        break;
      case 'puback':
      case 'pubcomp':
        this.quota?.acknowledged();
        break;
      case 'pubrec':
        if ((packet.reasonCode ?? 0) >= 0x80) this.quota?.acknowledged();
        break;
    }
  }

  /** A packet aedes writes to the client. */
  outbound(packet: OutboundPacket): OutboundResult {
    switch (packet.cmd) {
      case 'publish':
        return this.publish(packet as PublishOut);
      case 'puback':
      case 'pubcomp':
        this.inboundQuota.answered(packet.messageId as number | undefined);
        return packet;
      case 'pubrec':
        if (((packet.reasonCode as number | undefined) ?? 0) >= 0x80) this.inboundQuota.answered(packet.messageId as number | undefined);
        return packet;
      case 'connack':
        completeCapabilities(packet);
        return packet;
      default:
        return packet;
    }
  }

  closed(): void {
    this.quota?.closed();
  }

  private publish(packet: PublishOut): OutboundResult {
    let out = packet;
    let commit: (() => void) | undefined;
    if (this.aliases !== undefined) ({ packet: out, commit } = this.aliases.apply(packet));
    let bytes: Buffer | undefined;
    if (this.maxPacketSize !== undefined) {
      bytes = serializeMqtt5(out);
      if (bytes.length > this.maxPacketSize) {
        this.options.onTooLarge(bytes.length, this.maxPacketSize);
        if ((packet.qos ?? 0) > 0) this.forgetQueued(packet);
        return null;
      }
    }
    commit?.();
    if ((packet.qos ?? 0) > 0) this.quota?.sent(packet as unknown as QueuedDelivery);
    return bytes ?? out;
  }

  /** Behaves as if a QoS 1/2 message had been delivered: out of a persistent session's stored queue. */
  private forgetQueued(packet: QueuedDelivery | PublishOut): void {
    const c = this.client;
    if (!c.clean) c.broker.persistence.outgoingClearMessageId(c, packet).catch(() => undefined);
  }
}

/**
 * aedes 2.0.0-beta.1 announces shared subscriptions as unavailable in every CONNACK; gatewayd has
 * them (shared-subscriptions.ts), and an absent property means available.
 */
function completeCapabilities(packet: OutboundPacket): void {
  const properties = packet.properties as Record<string, unknown> | undefined;
  if (properties && properties.sharedSubscriptionAvailable === false) delete properties.sharedSubscriptionAvailable;
}
