// aedes 2.0.0-beta.1 numbers each message when it is published (brokerCounter) and, to send a
// client only one copy per message, drops a delivery whose number is not above the last one it
// delivered to that client (lib/client.js dedupe). Messages do not reach the clients in the
// order they were numbered: QoS 1/2 messages wait for the offline queues (enqueueOffline) and
// retained ones for the store, while a QoS 0 message published a moment later goes out at once.
// A client that also gets that QoS 0 message then loses the QoS 1 or retained one (aedes issue
// #994): every QoS 1 reading followed by another endpoint's QoS 0 reading, every write
// acknowledgement in a stream of readings.
//
// Only a copy of the message delivered last is a repeat (the copies of one message for
// overlapping subscriptions come in one pass of aedes' emitter, and mqtt5/overlapping-
// subscriptions.ts merges them before they get here): before aedes' own delivery functions see
// an older message, the client's record goes back just below it, so aedes' check lets it pass.
import type { DeliverFn, QueuedDelivery } from './mqtt5/flow-control.js';

/** The parts of an aedes client this touches. */
export interface NumberedDeliveries {
  deliver0: DeliverFn;
  deliverQoS: DeliverFn;
  /** aedes' record: broker id → the number of the message it delivered last to this client. */
  duplicates: Record<string, number>;
}

/** Right before aedes' own delivery function of `client` sees `packet`: lets an older message pass its check. */
export function letPass(client: Pick<NumberedDeliveries, 'duplicates'>, packet: QueuedDelivery): void {
  const id = packet.brokerId;
  const counter = packet.brokerCounter;
  if (!id || counter === undefined) return;
  const last = client.duplicates[id];
  if (last !== undefined && last > counter) client.duplicates[id] = counter - 1;
}

/**
 * Wraps aedes' own delivery functions of the client (before any other wrapper): an MQTT 5
 * client's, under its flow control. An MQTT 3.1.1 client's order is kept by the merge of
 * overlapping subscriptions, which wraps them anyway (one wrapper less per client).
 */
export function deliverOutOfOrder(client: NumberedDeliveries): void {
  const { deliver0, deliverQoS } = client;
  client.deliver0 = (packet, done) => {
    letPass(client, packet);
    deliver0(packet, done);
  };
  client.deliverQoS = (packet, done) => {
    letPass(client, packet);
    deliverQoS(packet, done);
  };
}
