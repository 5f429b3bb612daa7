// MQTT 5 flow control (§4.9) in both directions. Exists because aedes 2.0.0-beta.1 announces a
// Receive Maximum but enforces neither side of it (its docs: "advisory"):
//
// - Outbound (OutboundQuota): aedes sends a client more unacknowledged QoS 1/2 PUBLISH packets
//   than the client's Receive Maximum allows [MQTT-3.3.4-9]. The quota counts the PUBLISH
//   packets written (outbound-packets.ts) and frees one per PUBACK, PUBCOMP, or PUBREC with an
//   error code (inbound-packets.ts). Live deliveries beyond it wait in a queue of the connection
//   (FIFO, at most mqtt.maxQueuedMessages, then dropped and counted as queue drops); the
//   delivery is answered at once, so a slow client never holds aedes' delivery slots. A delivery
//   counts from the moment it is handed to aedes (by message: broker id and counter), and gives
//   its slot back if aedes does not write it after all. A waiting
//   message that expires meanwhile is discarded; the others go with the time they have left. The
//   replay of a persistent session's queue at reconnect is held too: aedes replays it one message
//   at a time and gives each a packet id first (persistence.outgoingUpdate), which waits here
//   until the quota has room. Messages of persistent sessions stay in their stored queue until
//   acknowledged, so one dropped from the waiting queue is sent at the next reconnect.
// - Inbound (InboundQuota): a client that has more QoS 1/2 PUBLISH packets unanswered than the
//   broker's Receive Maximum (mqtt.maxInflightMessages) is disconnected with 0x93 Receive
//   Maximum exceeded [MQTT-3.3.4-8], instead of aedes taking and storing every one of them.

import { isExpired, withRemainingExpiry } from './message-expiry.js';

/** A delivery as aedes hands it to a client's deliverQoS. */
export interface QueuedDelivery {
  cmd?: string;
  topic: string;
  qos: number;
  brokerId?: string | null;
  brokerCounter?: number;
  messageExpiry?: number;
  properties?: Record<string, unknown>;
}

export type DeliverFn = (packet: QueuedDelivery, done: (err?: unknown) => void) => void;

export interface OutboundQuotaHooks {
  /** aedes' own deliverQoS of the client. */
  deliver: DeliverFn;
  /** Has aedes finished the client's connect sequence (queue replay included)? */
  connected(): boolean;
  /** A waiting message expired: removed from the session's stored queue when it has one. */
  expired(packet: QueuedDelivery): void;
  /** The waiting queue was full: the message is not sent on this connection. */
  dropped(packet: QueuedDelivery): void;
  /** The replay waits for the client's acknowledgements: serve the client meanwhile; returns the end of that. */
  replayHeld(): () => void;
  now(): number;
}

const noop = (): void => {};

export class OutboundQuota {
  /** QoS 1/2 PUBLISH packets counted against the quota: written and not acknowledged, or handed to aedes to write. */
  private inflight = 0;
  /**
   * Deliveries handed to aedes and not written yet (by message: broker id and counter), already
   * counted in `inflight`: written, they stay counted; dropped by aedes (not forwarded), they free
   * their slot again.
   */
  private readonly reserved = new Map<string, number>();
  private readonly waiting: QueuedDelivery[] = [];
  private head = 0;
  private replayWaiter: (() => void) | undefined;
  private endReplayHold: (() => void) | undefined;

  constructor(
    /** The client's Receive Maximum. */
    readonly max: number,
    private readonly waitingLimit: number,
    private readonly hooks: OutboundQuotaHooks,
  ) {}

  /** Replaces the client's deliverQoS. */
  readonly deliver: DeliverFn = (packet, done) => {
    // aedes passes QoS 0 on to deliver0 (downgraded publishes): not counted.
    if (packet.qos === 0) return this.hooks.deliver(packet, done);
    if (this.head === this.waiting.length && this.hooks.connected() && this.hasRoom()) return this.send(packet, done);
    if (this.waiting.length - this.head >= this.waitingLimit) {
      this.hooks.dropped(packet);
    } else {
      this.waiting.push(packet);
    }
    setImmediate(done);
  };

  /** A QoS 1/2 PUBLISH was written to the client. */
  sent(packet: QueuedDelivery): void {
    if (this.unreserve(messageKey(packet))) return; // counted when it was handed to aedes
    this.inflight++; // the replay of a session's queue
  }

  /** The client acknowledged one (PUBACK, PUBCOMP, PUBREC >= 0x80). */
  acknowledged(): void {
    if (this.inflight > 0) this.inflight--;
    this.release();
  }

  /** Before aedes gives a replayed message its packet id: resolves once the quota has room for it. */
  replaySlot(): Promise<void> {
    if (this.hasRoom()) return Promise.resolve();
    return new Promise<void>((resolve) => {
      this.replayWaiter = () => {
        this.replayWaiter = undefined;
        this.endReplayHold?.();
        this.endReplayHold = undefined;
        resolve();
      };
      // aedes' connect sequence waits here: the client must still be read (its acknowledgements free the quota).
      this.endReplayHold ??= this.hooks.replayHeld();
    });
  }

  /** aedes finished the connect sequence: the replay is over, waiting live deliveries may go. */
  connectedNow(): void {
    this.release();
  }

  /** The connection closed: a replay waiting for room goes on (and fails to write), nothing stays held. */
  closed(): void {
    this.waiting.length = 0;
    this.head = 0;
    this.replayWaiter?.();
  }

  /** Messages waiting for quota (stats, tests). */
  get queued(): number {
    return this.waiting.length - this.head;
  }

  get unacknowledged(): number {
    return this.inflight;
  }

  private hasRoom(): boolean {
    return this.inflight < this.max;
  }

  private send(packet: QueuedDelivery, done: (err?: unknown) => void): void {
    const key = messageKey(packet);
    this.inflight++;
    this.reserved.set(key, (this.reserved.get(key) ?? 0) + 1);
    this.hooks.deliver(packet, (err) => {
      // Not written (aedes did not forward it): its slot is free again.
      if (this.unreserve(key)) {
        this.inflight--;
        this.release();
      }
      done(err);
    });
  }

  private unreserve(key: string): boolean {
    const n = this.reserved.get(key);
    if (n === undefined) return false;
    if (n > 1) this.reserved.set(key, n - 1);
    else this.reserved.delete(key);
    return true;
  }

  private release(): void {
    if (this.replayWaiter !== undefined) {
      if (this.hasRoom()) this.replayWaiter();
      return; // the replay (older messages) goes first
    }
    if (!this.hooks.connected()) return;
    while (this.head < this.waiting.length && this.hasRoom()) {
      const packet = this.waiting[this.head]!;
      this.waiting[this.head++] = undefined as never;
      const now = this.hooks.now();
      if (isExpired(packet, now)) {
        this.hooks.expired(packet);
        continue;
      }
      this.send(withRemainingExpiry(packet, now), noop);
    }
    if (this.head === this.waiting.length) {
      this.waiting.length = 0;
      this.head = 0;
    } else if (this.head > 1024 && this.head * 2 > this.waiting.length) {
      this.waiting.splice(0, this.head);
      this.head = 0;
    }
  }
}

/** A message as aedes tracks it: its broker id and counter (kept by every copy of a delivery). */
function messageKey(packet: QueuedDelivery): string {
  return `${packet.brokerCounter ?? ''}\u0000${packet.brokerId ?? ''}`;
}

/** The inbound side: QoS 1/2 PUBLISH packets of the client not answered yet. */
export class InboundQuota {
  private readonly unanswered = new Set<number>();

  constructor(
    /** The broker's Receive Maximum, announced in the CONNACK. */
    readonly max: number,
    private readonly exceeded: () => void,
  ) {}

  /** A PUBLISH from the client. */
  received(qos: number, messageId: number | undefined): void {
    if (qos === 0 || messageId === undefined) return;
    this.unanswered.add(messageId);
    if (this.unanswered.size > this.max) this.exceeded();
  }

  /** A PUBACK or PUBCOMP to the client, or a PUBREC with an error code (ends the exchange). */
  answered(messageId: number | undefined): void {
    if (messageId !== undefined) this.unanswered.delete(messageId);
  }
}

interface ReplayPersistence {
  outgoingUpdate(client: unknown, packet: { cmd?: string }): Promise<unknown>;
}

/**
 * Holds the replay of a session's queue to the client's quota: aedes replays it one message at a
 * time during the connect sequence, giving each its packet id first (persistence.outgoingUpdate,
 * also called for live deliveries once the client is connected, which are not held here).
 */
export function holdReplayToQuota(persistence: ReplayPersistence, quotaOf: (client: unknown) => OutboundQuota | undefined, connected: (client: unknown) => boolean): void {
  const update = persistence.outgoingUpdate.bind(persistence);
  persistence.outgoingUpdate = (client, packet) => {
    const quota = packet.cmd === 'publish' && !connected(client) ? quotaOf(client) : undefined;
    if (quota === undefined) return update(client, packet);
    return quota.replaySlot().then(() => update(client, packet));
  };
}
