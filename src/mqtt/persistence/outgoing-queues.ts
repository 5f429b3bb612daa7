// Outgoing QoS 1/2 messages of persistent sessions: offline queues and in-flight deliveries
// (messageId assigned, PUBREL). They live on disk only; memory holds per session a count and the
// next sequence number, so opening 10,000 sessions does not read their queued messages.
//
//   mqtt-outgoing       [session key, seq] → packet (aedes-packet shape, messageId once assigned)
//   mqtt-outgoing-refs  [session key, 'c', brokerId, brokerCounter] → seq   (outgoingUpdate)
//                       [session key, 'm', messageId] → seq                 (PUBACK/PUBREC/PUBCOMP)
import type { Key } from 'lmdb';
import { prefixRange } from '../../store/index.js';
import type { StoredPacket } from './aedes-modules.js';
import type { Session } from './sessions.js';
import { REMOVED, type WriteBehind } from './write-behind.js';

/** Entries read from disk per step of a stream or a wipe. */
const BATCH = 64;

type Ref = ['c', string, number] | ['m', number];

export class OutgoingQueues {
  constructor(
    private readonly records: WriteBehind<StoredPacket>,
    private readonly refs: WriteBehind<number>,
    private readonly maxQueued: number,
  ) {}

  /** Reads the count and last sequence number of a session's queue (keys only). */
  load(session: Session): void {
    const { start, end } = prefixRange(session.key);
    session.queued = this.records.db.getKeysCount({ start, end });
    for (const key of this.records.db.getKeys({ start: end, end: start, reverse: true, limit: 1 })) {
      session.nextSeq = ((key as [string, number])[1] ?? 0) + 1;
    }
  }

  /** Appends a packet; false (dropped) when the session holds maxQueued already (tail drop, as mosquitto). */
  enqueue(session: Session, packet: StoredPacket): boolean {
    if (session.queued >= this.maxQueued) return false;
    const seq = session.nextSeq++;
    session.queued++;
    this.putRecord(session.key, seq, packet);
    if (packet.brokerId !== undefined && packet.brokerCounter !== undefined) this.putRef(session.key, ['c', packet.brokerId, packet.brokerCounter], seq);
    return true;
  }

  /**
   * Records the messageId aedes assigned to a queued publish (found by brokerId + brokerCounter),
   * or replaces the entry of that messageId by a PUBREL. Throws 'no such packet' like aedes-persistence.
   */
  update(session: Session, packet: StoredPacket): void {
    const key = session.key;
    if (packet.brokerId !== undefined && packet.brokerCounter !== undefined) {
      const seq = this.ref(key, ['c', packet.brokerId, packet.brokerCounter]);
      const stored = seq === undefined ? undefined : this.record(key, seq);
      if (seq !== undefined && stored) {
        if (stored.messageId !== packet.messageId) {
          this.dropMessageIdRef(key, seq, stored);
          if (packet.messageId !== undefined) this.putRef(key, ['m', packet.messageId], seq);
        }
        this.putRecord(key, seq, { ...stored, messageId: packet.messageId });
        return;
      }
    }
    if (packet.messageId !== undefined) {
      const seq = this.ref(key, ['m', packet.messageId]);
      const stored = seq === undefined ? undefined : this.record(key, seq);
      // Another broker's packet (or none, for a PUBREL) with this id: the new state replaces it.
      if (seq !== undefined && stored && stored.brokerId !== packet.brokerId) {
        this.dropCounterRef(key, seq, stored);
        this.putRecord(key, seq, { ...packet });
        return;
      }
    }
    throw new Error('no such packet');
  }

  /** Removes the entry acknowledged by `packet` (by messageId, else by brokerId + brokerCounter) and returns it. */
  clear(session: Session, packet: Partial<StoredPacket> | undefined): StoredPacket | undefined {
    const key = session.key;
    let seq: number | undefined;
    if (packet?.messageId !== undefined) seq = this.ref(key, ['m', packet.messageId]);
    else if (packet?.brokerId !== undefined && packet.brokerCounter !== undefined) seq = this.ref(key, ['c', packet.brokerId, packet.brokerCounter]);
    if (seq === undefined) return undefined;
    const stored = this.record(key, seq);
    if (!stored) return undefined;
    this.records.remove(keyId([key, seq]), [key, seq]);
    this.dropMessageIdRef(key, seq, stored);
    this.dropCounterRef(key, seq, stored);
    session.queued--;
    if (session.queued < this.maxQueued) session.dropping = false;
    return stored;
  }

  /** The queue in order, read from disk a batch at a time as the stream is consumed. */
  *entries(sessionKey: string): Generator<StoredPacket> {
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
      // Writes not committed yet override what the disk says.
      for (const write of this.records.pendingWrites()) {
        const [owner, seq] = write.key as [string, number];
        if (owner === sessionKey && seq >= from && seq <= upper) batch.set(seq, write.value);
      }
      for (const seq of [...batch.keys()].sort((a, b) => a - b)) {
        const value = batch.get(seq)!;
        if (value !== REMOVED) yield value;
      }
      if (upper === Infinity) return;
      from = upper + 1;
    }
  }

  /** Removes every entry and reference of a session. */
  wipe(session: Session): void {
    const { start, end } = prefixRange(session.key);
    const id = (key: Key) => keyId(key as (string | number)[]);
    this.records.removeOwnedBy(session.key, start, end, id);
    this.refs.removeOwnedBy(session.key, start, end, id);
    session.queued = 0;
    session.dropping = false;
  }

  private record(sessionKey: string, seq: number): StoredPacket | undefined {
    return this.records.get(keyId([sessionKey, seq]), [sessionKey, seq]);
  }

  private putRecord(sessionKey: string, seq: number, packet: StoredPacket): void {
    this.records.put(keyId([sessionKey, seq]), [sessionKey, seq], packet);
  }

  private ref(sessionKey: string, ref: Ref): number | undefined {
    const key = [sessionKey, ...ref];
    return this.refs.get(keyId(key), key);
  }

  private putRef(sessionKey: string, ref: Ref, seq: number): void {
    const key = [sessionKey, ...ref];
    this.refs.put(keyId(key), key, seq);
  }

  /** Removes a reference if it still points at `seq` (ids are reused, counters are not). */
  private dropRef(sessionKey: string, ref: Ref, seq: number): void {
    const key = [sessionKey, ...ref];
    const id = keyId(key);
    if (this.refs.get(id, key) === seq) this.refs.remove(id, key);
  }

  private dropMessageIdRef(sessionKey: string, seq: number, stored: StoredPacket): void {
    if (stored.messageId !== undefined) this.dropRef(sessionKey, ['m', stored.messageId], seq);
  }

  private dropCounterRef(sessionKey: string, seq: number, stored: StoredPacket): void {
    if (stored.brokerId !== undefined && stored.brokerCounter !== undefined) this.dropRef(sessionKey, ['c', stored.brokerId, stored.brokerCounter], seq);
  }
}

/** A string naming a composite key: its parts joined by U+0000, which MQTT strings do not contain. */
export function keyId(key: readonly (string | number)[]): string {
  return key.join('\u0000');
}
