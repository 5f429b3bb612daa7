// A QoS 1/2 publisher's acknowledgement (PUBACK, PUBREC) means its message is safe (MQTT 4.3.2/
// 4.3.3: it was handed over): every copy that must survive is either durable or already taken by
// the recipient that needed it (a persistent subscriber's PUBACK, a bridge upstream's PUBACK).
// aedes 2 writes a QoS 1 PUBACK *before* it publishes (lib/handlers/publish.js) and a QoS 2
// PUBREC once the copies are staged; neither waits for them to be safe.
//
// This holds the acknowledgement back without changing aedes: when a publish is authorized and
// will make copies (`writesFor`), its acknowledgement is expected (held-acks.ts keeps it when aedes
// writes it); the publish's copies carry its brokerCounter (the storage policy's tag), and once
// they are settled (`whenSettled`) the acknowledgement leaves, in order with the client's others.
// A publish that makes no copy is not held and costs no more than aedes alone; QoS 0 passes
// straight through. The publish path itself never waits.
import type { Aedes, Client } from 'aedes';
import { heldAcks, installOutboundPackets } from '../outbound-packets.js';

/** What the gate needs: whether a publish makes copies that must be safe, and when they are. */
export interface DurabilityBarrier {
  /** Whether publishing this message writes to the store (absent: assume it may). */
  writesFor?(packet: { topic: string; qos: number; retain?: boolean }): boolean;
  /** Resolves once every copy the publish `publishId` (aedes' brokerCounter) made is durable or taken. */
  whenSettled(publishId: number): Promise<void>;
  /** What a SUBACK / UNSUBACK of `clientId` waits for (its subscription changes on disk); undefined: nothing. */
  subscriptionsPending?(clientId: string): Promise<void> | undefined;
}

interface PublishingBroker {
  counter: number;
  publish(packet: object, client: Client | null, done?: (err?: Error | null) => void): void;
}

/**
 * Installs the gate on an aedes instance (after its creation, before clients connect). Wraps
 * aedes.authorizePublish and aedes.publish, so it composes with the hooks given as options.
 */
export function acknowledgeWhenDurable(aedes: Aedes, barrier: DurabilityBarrier): void {
  if (!installOutboundPackets()) throw new Error('mqtt-packet has an unexpected shape: acknowledgements cannot be held');
  const acks = heldAcks();
  /** Publishes of clients that passed authorization and make copies: their expected acknowledgement. */
  const expected = new WeakMap<object, ReturnType<typeof acks.expect>>();
  const authorize = aedes.authorizePublish;
  const broker = aedes as unknown as PublishingBroker;
  const publish = broker.publish;
  const writes = barrier.writesFor?.bind(barrier) ?? (() => true);
  if (barrier.subscriptionsPending) acks.gateSubscriptionAcks(aedes, barrier.subscriptionsPending.bind(barrier));

  aedes.authorizePublish = function (client, packet, callback) {
    if (packet.qos === 0 || !client) return authorize.call(this, client, packet, callback);
    authorize.call(this, client, packet, (error) => {
      // Before the callback: aedes writes a QoS 1 PUBACK right after it.
      if (!error && writes(packet)) expected.set(packet, acks.expect(client.conn, packet.messageId, packet.qos as 1 | 2));
      callback(error);
    });
  };

  broker.publish = function (this: PublishingBroker, packet, client, done) {
    const entry = client ? expected.get(packet) : undefined;
    if (!entry || !client) return publish.call(this, packet, client, done);
    expected.delete(packet);
    entry.published = true;
    const before = this.counter;
    let publishId: number | undefined;
    let returned = false;
    let completed = false;
    const release = () => {
      if (publishId === undefined) return acks.release(client.conn, entry);
      const free = () => acks.release(client.conn, entry);
      barrier.whenSettled(publishId).then(free, free);
    };
    publish.call(this, packet, client, (err) => {
      completed = true;
      if (returned) release();
      done?.(err);
    });
    // aedes numbers the publish (its brokerCounter) synchronously, before anything is staged.
    if (this.counter !== before) publishId = this.counter;
    returned = true;
    if (completed) release();
  };
}
