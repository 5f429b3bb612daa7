// Acknowledgements held back until what they acknowledge is safe (durable-acks.ts decides which).
// Only the PUBACK / PUBREC packets of one connection wait, in a queue of their own, and leave in
// the order aedes wrote them (MQTT-4.6.0-2: acknowledgements in the order the PUBLISH packets
// arrived); every other packet to that client flows on. So a client that publishes to a topic it
// is itself subscribed to (persistently) still receives its message, acknowledges it, and that
// acknowledgement is what releases the PUBACK of its own publish.

export interface WrittenAck {
  cmd: string;
  messageId?: number;
}

/** One expected acknowledgement: released once `ready` and aedes wrote it. */
export interface ExpectedAck {
  readonly messageId: number | undefined;
  readonly qos: 1 | 2;
  /** aedes published the message (for QoS 2 that comes before its PUBREC; a duplicate is never published). */
  published: boolean;
  ready: boolean;
  packet: WrittenAck | undefined;
  opts: object | undefined;
}

type Writer = (packet: WrittenAck, stream: object, opts: object | undefined) => void;

interface Queued {
  entry: ExpectedAck | undefined;
  packet: WrittenAck | undefined;
  opts: object | undefined;
}

/** The held acknowledgements of one connection, in the order they must leave. */
class AckQueue {
  readonly #items: Queued[] = [];

  constructor(
    private readonly stream: object,
    private readonly write: Writer,
  ) {}

  expect(messageId: number | undefined, qos: 1 | 2): ExpectedAck {
    const entry: ExpectedAck = { messageId, qos, published: false, ready: false, packet: undefined, opts: undefined };
    this.#items.push({ entry, packet: undefined, opts: undefined });
    return entry;
  }

  get holding(): boolean {
    return this.#items.length > 0;
  }

  /** aedes writes an acknowledgement: true when it is held (it then leaves in its turn). */
  take(packet: WrittenAck, opts: object | undefined): boolean {
    if (this.#items.length === 0) return false;
    const want = packet.cmd === 'puback' ? 1 : 2;
    const slot = this.#items.find((q) => q.entry !== undefined && q.packet === undefined && q.entry.qos === want && q.entry.messageId === packet.messageId);
    if (slot) {
      slot.packet = packet;
      slot.opts = opts;
      // A QoS 2 PUBREC for a message aedes did not publish again (a retransmission it already
      // stored): nothing new to wait for.
      if (slot.entry!.qos === 2 && !slot.entry!.published) slot.entry!.ready = true;
    } else {
      // Not one this queue expected (nothing to wait for), but it must not overtake the earlier ones.
      this.#items.push({ entry: undefined, packet, opts });
    }
    this.flush();
    return true;
  }

  flush(): void {
    const items = this.#items;
    while (items.length > 0) {
      const head = items[0]!;
      if (head.packet === undefined || (head.entry !== undefined && !head.entry.ready)) return;
      items.shift();
      this.write(head.packet, this.stream, head.opts);
    }
  }
}

/** The queues of every connection that has acknowledgements to hold (garbage-collected with it). */
export class HeldAcks {
  readonly #queues = new WeakMap<object, AckQueue>();
  #releasing = false;

  /** `write` sends a packet the way aedes would (through the outbound hooks). */
  constructor(private readonly write: Writer) {}

  /** An acknowledgement of `messageId` (QoS 1 or 2) on `stream` will have to wait. */
  expect(stream: object, messageId: number | undefined, qos: 1 | 2): ExpectedAck {
    let queue = this.#queues.get(stream);
    if (!queue) this.#queues.set(stream, (queue = new AckQueue(stream, (p, s, o) => this.#release(p, s, o))));
    return queue.expect(messageId, qos);
  }

  /** The acknowledgement may leave (once every earlier one of its connection has left). */
  release(stream: object, entry: ExpectedAck): void {
    entry.ready = true;
    this.#queues.get(stream)?.flush();
  }

  /**
   * Called for every packet written to a client: true when it is an acknowledgement that must
   * wait (it is kept and written later), false to write it now.
   */
  hold(packet: WrittenAck, stream: object, opts: object | undefined): boolean {
    if (this.#releasing || (packet.cmd !== 'puback' && packet.cmd !== 'pubrec')) return false;
    const queue = this.#queues.get(stream);
    return queue !== undefined && queue.holding && queue.take(packet, opts);
  }

  #release(packet: WrittenAck, stream: object, opts: object | undefined): void {
    const s = stream as { destroyed?: boolean; writable?: boolean };
    // The client is gone: it sends the PUBLISH again when it comes back (QoS 1/2 retry).
    if (s.destroyed === true || s.writable === false) return;
    this.#releasing = true;
    try {
      this.write(packet, stream, opts);
    } finally {
      this.#releasing = false;
    }
  }
}
