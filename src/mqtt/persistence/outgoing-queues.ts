// Outgoing QoS 1/2 messages of persistent sessions: offline queues and in-flight deliveries
// (messageId assigned, PUBREL), on disk only:
//
//   mqtt-outgoing   [session key, seq] → packet (aedes-packet shape, messageId once assigned)
//
// Memory holds per session a count and the next sequence number, so opening 10,000 sessions
// reads none of their messages. aedes finds a queued packet by brokerId + brokerCounter (to give
// it a messageId) and by messageId (PUBACK, PUBREC, PUBCOMP); the lookup table for that is built
// in memory when a session is first asked (one scan of its queue, at most maxQueuedMessages) and
// dropped when its client disconnects. No index on disk: half the B-tree pages touched per commit
// matters on flash. Writes go through the storage policy: a copy for a connected client is held
// and cancelled when the client acknowledges it within the hold (nothing written at all).
import { prefixRange } from '../../store/index.js';
import type { StoredPacket } from './aedes-modules.js';
import { REMOVED, type StagedTable, type WriteHow } from '../../storage/index.js';

/** What the queues read and keep on a session (sessions.ts's Session is one). */
export interface QueuedSession {
  readonly key: string;
  /** Entries held, and the next sequence number. */
  queued: number;
  nextSeq: number;
  /** Set on the first dropped message of a full queue, cleared when it has room again. */
  dropping: boolean;
  /** Where its queued packets are, while its client is connected. */
  queueIndex: QueueIndex | undefined;
}

/** Entries read from disk per step of a stream. */
const BATCH = 64;

/** Where a session's queued packets are, by the two keys aedes looks them up with. */
export class QueueIndex {
  readonly byCounter = new Map<string, number>();
  readonly byMessageId = new Map<number, number>();

  add(seq: number, packet: StoredPacket): void {
    const counter = counterKey(packet);
    if (counter !== undefined) this.byCounter.set(counter, seq);
    if (packet.messageId !== undefined) this.byMessageId.set(packet.messageId, seq);
  }

  /** Forgets `packet` at `seq` (a key that now points at another entry is kept). */
  delete(seq: number, packet: StoredPacket): void {
    const counter = counterKey(packet);
    if (counter !== undefined && this.byCounter.get(counter) === seq) this.byCounter.delete(counter);
    if (packet.messageId !== undefined && this.byMessageId.get(packet.messageId) === seq) this.byMessageId.delete(packet.messageId);
  }
}

function counterKey(packet: Partial<StoredPacket>): string | undefined {
  return packet.brokerId !== undefined && packet.brokerCounter !== undefined ? `${packet.brokerCounter}\u0000${packet.brokerId}` : undefined;
}

export class OutgoingQueues {
  constructor(
    private readonly records: StagedTable<StoredPacket>,
    private readonly maxQueued: number,
  ) {}

  /** Reads the count and last sequence number of a session's queue (keys only). */
  load(session: QueuedSession): void {
    const { start, end } = prefixRange(session.key);
    session.queued = this.records.db.getKeysCount({ start, end });
    for (const key of this.records.db.getKeys({ start: end, end: start, reverse: true, limit: 1 })) {
      session.nextSeq = ((key as [string, number])[1] ?? 0) + 1;
    }
  }

  /** Appends a packet; false (dropped) when the session holds maxQueued already (tail drop, as mosquitto). */
  enqueue(session: QueuedSession, packet: StoredPacket, how: WriteHow): boolean {
    if (session.queued >= this.maxQueued) return false;
    const seq = session.nextSeq++;
    session.queued++;
    // A new sequence number: never on disk, so its acknowledgement cancels it without a read.
    this.put(session.key, seq, packet, { ...how, fresh: true });
    session.queueIndex?.add(seq, packet);
    return true;
  }

  /**
   * Records the messageId aedes assigned to a queued publish (found by brokerId + brokerCounter),
   * or replaces the entry of that messageId by a PUBREL; 'added' when a PUBREL had no entry to
   * replace and was queued as one of its own (see the end). Throws 'no such packet' like
   * aedes-persistence for anything else.
   */
  update(session: QueuedSession, packet: StoredPacket, how: WriteHow): 'added' | undefined {
    const index = this.index(session);
    const counter = counterKey(packet);
    const bySeq = counter === undefined ? undefined : index.byCounter.get(counter);
    const stored = bySeq === undefined ? undefined : this.get(session.key, bySeq);
    if (bySeq !== undefined && stored) {
      const updated = { ...stored, messageId: packet.messageId };
      index.delete(bySeq, stored);
      index.add(bySeq, updated);
      this.put(session.key, bySeq, updated, how);
      return undefined;
    }
    const byId = packet.messageId === undefined ? undefined : index.byMessageId.get(packet.messageId);
    const replaced = byId === undefined ? undefined : this.get(session.key, byId);
    // Another broker's packet (or none, for a PUBREL) with this id: the new state replaces it.
    if (byId !== undefined && replaced && replaced.brokerId !== packet.brokerId) {
      const next = { ...packet };
      index.delete(byId, replaced);
      index.add(byId, next);
      this.put(session.key, byId, next, how);
      return undefined;
    }
    // A QoS 2 delivery aedes sent without queueing it (a retained message for a new subscription
    // of a persistent session): its PUBREC still needs the PUBREL step, kept like any other until
    // the PUBCOMP. Refused, aedes ended the connection of a client that did nothing wrong.
    if (packet.cmd === 'pubrel' && packet.messageId !== undefined && byId === undefined) {
      return this.enqueue(session, packet, how) ? 'added' : undefined;
    }
    throw new Error('no such packet');
  }

  /** Removes the entry acknowledged by `packet` (by messageId, else by brokerId + brokerCounter) and returns it. */
  clear(session: QueuedSession, packet: Partial<StoredPacket>): StoredPacket | undefined {
    const index = this.index(session);
    const counter = counterKey(packet);
    const seq = packet.messageId !== undefined ? index.byMessageId.get(packet.messageId) : counter !== undefined ? index.byCounter.get(counter) : undefined;
    if (seq === undefined) return undefined;
    const stored = this.get(session.key, seq);
    if (!stored) return undefined;
    index.delete(seq, stored);
    // Its recipient has it: a copy that never reached the disk is cancelled, nothing is written.
    this.records.remove(recordId(session.key, seq), [session.key, seq], { class: 'prompt', owner: session.key, delivered: true });
    session.queued--;
    if (session.queued < this.maxQueued) session.dropping = false;
    return stored;
  }

  /** The queue in order, read from disk a batch at a time as the stream is consumed. */
  *entries(sessionKey: string): Generator<StoredPacket> {
    for (const [, packet] of this.scan(sessionKey)) yield packet;
  }

  /** Removes every entry of a session. */
  wipe(session: QueuedSession): void {
    const { start, end } = prefixRange(session.key);
    this.records.removeOwnedBy(session.key, start, end, (key) => recordId(...(key as [string, number])), { class: 'background', delivered: true });
    session.queued = 0;
    session.dropping = false;
    session.queueIndex = undefined;
  }

  /** The session's lookup table, built from one scan of its queue when missing. */
  private index(session: QueuedSession): QueueIndex {
    if (session.queueIndex) return session.queueIndex;
    const index = new QueueIndex();
    for (const [seq, packet] of this.scan(session.key)) index.add(seq, packet);
    session.queueIndex = index;
    return index;
  }

  /** [seq, packet] in order: the disk a batch at a time, writes not committed yet overriding it. */
  private *scan(sessionKey: string): Generator<[number, StoredPacket]> {
    let from = 0;
    const { end } = prefixRange(sessionKey);
    for (;;) {
      const batch = new Map<number, StoredPacket | typeof REMOVED>();
      let last = -1;
      for (const { key, value } of this.records.db.getRange({ start: [sessionKey, from], end, limit: BATCH })) {
        last = (key as [string, number])[1];
        batch.set(last, value);
      }
      const upper = batch.size === BATCH ? last : Infinity;
      for (const write of this.records.stagedOf(sessionKey)) {
        const seq = (write.key as [string, number])[1];
        if (seq >= from && seq <= upper) batch.set(seq, write.value);
      }
      for (const seq of [...batch.keys()].sort((a, b) => a - b)) {
        const value = batch.get(seq)!;
        if (value !== REMOVED) yield [seq, value];
      }
      if (upper === Infinity) return;
      from = upper + 1;
    }
  }

  private get(sessionKey: string, seq: number): StoredPacket | undefined {
    return this.records.get(recordId(sessionKey, seq), [sessionKey, seq]);
  }

  private put(sessionKey: string, seq: number, packet: StoredPacket, how: WriteHow): void {
    this.records.put(recordId(sessionKey, seq), [sessionKey, seq], packet, { ...how, owner: sessionKey });
  }
}

function recordId(sessionKey: string, seq: number): string {
  return `${sessionKey}\u0000${seq}`;
}

/** A string naming a composite key: its parts joined by U+0000, which MQTT strings do not contain. */
export function keyId(key: readonly (string | number)[]): string {
  return key.join('\u0000');
}
