// Retained messages, on disk in `mqtt-retained` under binary keys that sort like their topics,
// so a pattern with a literal start ('plant/line1/+/state') is a range scan of that prefix and
// never reads the other topics. Memory holds only each topic's size, for the caps.
import { RETAINED_KEY_BYTES, boundedKey, retainedPrefixRange } from './keys.js';
import { hasWildcard, literalPrefix, topicMatches } from './topic-filter.js';
import { REMOVED, type StagedTable, type WriteHow } from '../../storage/index.js';

/** A retained PUBLISH as aedes hands it over (all its own fields are kept). */
export type RetainedPacket = Record<string, unknown> & { topic: string; payload?: Buffer | Uint8Array | string };

export interface RetainedLimits {
  maxRetainedMessages: number;
  maxRetainedBytes: number;
}

export type RetainedRefusal = 'count' | 'bytes';

/** Entries read from disk per step of a scan. */
const BATCH = 64;

/**
 * $SYS topics are the broker's own statistics, republished every few seconds: kept in memory
 * only, so they neither wear the flash nor count against the caps.
 */
const VOLATILE_PREFIX = '$SYS/';

export class RetainedMessages {
  /** topic → bytes counted against maxRetainedBytes (topic + payload). */
  private readonly sizes = new Map<string, number>();
  private totalBytes = 0;
  private readonly volatile = new Map<string, RetainedPacket>();
  /**
   * topic → when its message expires (aedes' `messageExpiry`, ms), for the retained messages
   * published with a Message Expiry Interval: aedes drops an expired one only when a subscriber
   * asks for it, the sweep (sweepExpired) removes the others so they stop counting against the caps.
   */
  private readonly expiries = new Map<string, number>();
  private expiryCursor: Iterator<[string, number]> | undefined;

  constructor(
    private readonly table: StagedTable<RetainedPacket>,
    private readonly limits: RetainedLimits,
  ) {
    for (const { value } of table.db.getRange()) {
      this.account(value.topic, retainedSize(value));
      this.noteExpiry(value);
    }
  }

  /** Removes up to `batch` retained messages whose expiry has passed; returns how many. */
  sweepExpired(now: number, batch: number): number {
    let removed = 0;
    for (let looked = 0; looked < batch && this.expiries.size > 0; looked++) {
      this.expiryCursor ??= this.expiries.entries();
      const next = this.expiryCursor.next();
      if (next.done) {
        this.expiryCursor = undefined;
        break;
      }
      const [topic, expiresAt] = next.value;
      if (expiresAt > now) continue;
      const size = this.sizes.get(topic);
      if (size !== undefined) this.delete(topic, size, { class: 'background' });
      else this.expiries.delete(topic);
      removed++;
    }
    return removed;
  }

  private noteExpiry(packet: RetainedPacket): void {
    const expiry = packet.messageExpiry;
    if (typeof expiry === 'number') this.expiries.set(packet.topic, expiry);
    else this.expiries.delete(packet.topic);
  }

  get count(): number {
    return this.sizes.size;
  }

  get bytes(): number {
    return this.totalBytes;
  }

  /**
   * Stores (or, with an empty payload, removes) the retained message of a topic. A new topic
   * beyond maxRetainedMessages or maxRetainedBytes is refused; an existing topic is always
   * updated unless the update grows the total beyond maxRetainedBytes, in which case its old
   * message is removed too (a subscriber gets no value rather than one known to be outdated).
   * `how`: the write's class (the storage policy) and who waits for it.
   */
  store(packet: RetainedPacket, how: WriteHow): RetainedRefusal | undefined {
    const record = retainedRecord(packet);
    const topic = record.topic;
    const empty = payloadBytes(record.payload) === 0;
    if (topic.startsWith(VOLATILE_PREFIX)) {
      if (empty) this.volatile.delete(topic);
      else this.volatile.set(topic, record);
      return undefined;
    }
    const old = this.sizes.get(topic);
    if (empty) {
      if (old !== undefined) this.delete(topic, old, how);
      return undefined;
    }
    const size = retainedSize(record);
    let refusal: RetainedRefusal | undefined;
    if (old === undefined) {
      if (this.sizes.size >= this.limits.maxRetainedMessages) refusal = 'count';
      else if (this.totalBytes + size > this.limits.maxRetainedBytes) refusal = 'bytes';
    } else if (size > old && this.totalBytes - old + size > this.limits.maxRetainedBytes) {
      refusal = 'bytes';
      this.delete(topic, old, how);
    }
    if (refusal) return refusal;
    if (old !== undefined) this.account(topic, -old);
    this.account(topic, size);
    this.noteExpiry(record);
    const id = boundedKey(topic, RETAINED_KEY_BYTES);
    this.table.put(id, Buffer.from(id), record, how);
    return undefined;
  }

  /** Retained messages matching any of `patterns`, each once. */
  *matching(patterns: readonly string[]): Generator<RetainedPacket> {
    const seen = new Set<string>();
    for (const pattern of patterns) {
      for (const packet of this.matchingOne(pattern)) {
        if (seen.has(packet.topic)) continue;
        seen.add(packet.topic);
        yield packet;
      }
    }
  }

  private *matchingOne(pattern: string): Generator<RetainedPacket> {
    if (!hasWildcard(pattern)) {
      const packet = this.get(pattern);
      if (packet) yield packet;
      return;
    }
    const range = retainedPrefixRange(literalPrefix(pattern));
    let start: Buffer = range.start;
    for (;;) {
      // A batch is read before anything is yielded: no LMDB cursor stays open while the consumer waits.
      const batch: RetainedPacket[] = [];
      let read = 0;
      let last: Buffer | undefined;
      for (const { key, value } of this.table.db.getRange({ start, end: range.end, limit: BATCH })) {
        read++;
        last = Buffer.from(key as Uint8Array); // lmdb-js may reuse the key buffer
        // A write not committed yet wins: it is yielded below from the pending writes.
        if (this.table.staged(last.toString()) === undefined && topicMatches(pattern, value.topic)) batch.push(value);
      }
      yield* batch;
      if (read < BATCH || !last) break;
      start = Buffer.concat([last, Buffer.of(0)]); // the smallest key after `last`
    }
    for (const write of this.table.stagedWrites()) {
      if (write.value !== REMOVED && topicMatches(pattern, write.value.topic)) yield write.value;
    }
    for (const packet of this.volatile.values()) if (topicMatches(pattern, packet.topic)) yield packet;
  }

  private get(topic: string): RetainedPacket | undefined {
    if (topic.startsWith(VOLATILE_PREFIX)) return this.volatile.get(topic);
    const id = boundedKey(topic, RETAINED_KEY_BYTES);
    return this.table.get(id, Buffer.from(id));
  }

  private delete(topic: string, size: number, how: WriteHow): void {
    this.account(topic, -size);
    this.expiries.delete(topic);
    const id = boundedKey(topic, RETAINED_KEY_BYTES);
    this.table.remove(id, Buffer.from(id), how);
  }

  private account(topic: string, delta: number): void {
    this.totalBytes += delta;
    if (delta > 0) this.sizes.set(topic, delta);
    else this.sizes.delete(topic);
  }
}

/**
 * What is kept of a retained PUBLISH: its topic, payload, QoS, MQTT 5 properties and expiry.
 * aedes' routing fields (brokerId, brokerCounter, dup, messageId) are not: aedes gives a retained
 * message it delivers a new number. About a third of a record for a
 * 200-byte payload, written at every background commit of a changing topic (docs/footprint.md "Flash").
 */
function retainedRecord(packet: RetainedPacket): RetainedPacket {
  // `cmd` and an `id` the publisher's packet has stay: the aedes-persistence contract returns a
  // stored packet as it was given.
  const record: RetainedPacket = { cmd: 'publish', topic: packet.topic, payload: packet.payload, qos: packet.qos ?? 0, retain: true };
  if (packet.id !== undefined) record.id = packet.id;
  if (packet.properties !== undefined) record.properties = packet.properties;
  if (packet.messageExpiry !== undefined) record.messageExpiry = packet.messageExpiry;
  return record;
}

function payloadBytes(payload: RetainedPacket['payload']): number {
  if (payload === undefined || payload === null) return 0;
  return typeof payload === 'string' ? Buffer.byteLength(payload) : payload.length;
}

function retainedSize(packet: RetainedPacket): number {
  return Buffer.byteLength(packet.topic) + payloadBytes(packet.payload);
}
