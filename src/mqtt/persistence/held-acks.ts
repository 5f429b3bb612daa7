// Acknowledgements held back until what they acknowledge is safe (durable-acks.ts decides which).
// Only acknowledgements of one connection wait, in a queue of their own, and leave in the order
// aedes wrote them (MQTT-4.6.0-2: acknowledgements in the order the PUBLISH packets arrived): a
// PUBACK / PUBREC until the copies of its publish are safe, a SUBACK / UNSUBACK of a persistent
// session until its subscription change is on disk (the subscription itself is live at once:
// MQTT-3.8.4 lets matching PUBLISH packets precede the SUBACK). Every other packet to that client
// flows on. So a client that publishes to a topic it is itself subscribed to (persistently) still
// receives its message, acknowledges it, and that acknowledgement is what releases the PUBACK of
// its own publish.

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

/** For a SUBACK / UNSUBACK: what its client's subscription changes wait for, if anything. */
export type SubscriptionGate = (clientId: string) => Promise<void> | undefined;

/** What a connection stream carries (aedes sets `conn.client`). */
interface ClientStream {
  client?: { id?: string; broker?: object };
}

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

  /** A SUBACK / UNSUBACK that leaves, in its turn, once `entry` is ready. */
  takeGated(packet: WrittenAck, opts: object | undefined): ExpectedAck {
    const entry: ExpectedAck = { messageId: packet.messageId, qos: 1, published: true, ready: false, packet, opts };
    this.#items.push({ entry, packet, opts });
    return entry;
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
  /** Per aedes instance (the client's `broker`): its persistence's subscription gate. */
  readonly #subscriptionGates = new WeakMap<object, SubscriptionGate>();
  #releasing = false;

  /** `write` sends a packet the way aedes would (through the outbound hooks). */
  constructor(private readonly write: Writer) {}

  /** An acknowledgement of `messageId` (QoS 1 or 2) on `stream` will have to wait. */
  expect(stream: object, messageId: number | undefined, qos: 1 | 2): ExpectedAck {
    return this.#queue(stream).expect(messageId, qos);
  }

  /** The SUBACKs / UNSUBACKs of `broker`'s clients wait for what `gate` answers. */
  gateSubscriptionAcks(broker: object, gate: SubscriptionGate): void {
    this.#subscriptionGates.set(broker, gate);
  }

  #queue(stream: object): AckQueue {
    let queue = this.#queues.get(stream);
    if (!queue) this.#queues.set(stream, (queue = new AckQueue(stream, (p, s, o) => this.#release(p, s, o))));
    return queue;
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
    if (this.#releasing) return false;
    const cmd = packet.cmd;
    if (cmd === 'puback' || cmd === 'pubrec') {
      const queue = this.#queues.get(stream);
      return queue !== undefined && queue.holding && queue.take(packet, opts);
    }
    if (cmd !== 'suback' && cmd !== 'unsuback') return false;
    const client = (stream as ClientStream).client;
    const gate = client?.broker === undefined ? undefined : this.#subscriptionGates.get(client.broker);
    const wait = gate === undefined || client?.id === undefined ? undefined : gate(client.id);
    if (wait === undefined) return false;
    const entry = this.#queue(stream).takeGated(packet, opts);
    const release = () => this.release(stream, entry);
    wait.then(release, release);
    return true;
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
