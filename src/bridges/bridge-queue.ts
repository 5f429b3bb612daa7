// The store-and-forward queue of one bridge (docs/design.md §14, §15): every message an out rule takes
// is staged in the `bridge-queue` database (key [bridgeId, seq], value queue-record.ts) through
// the storage policy, and leaves the queue once the upstream broker acknowledged it (QoS 1/2) or
// it was written to the socket (QoS 0). Order is the order of arrival, per bridge.
//
// - While the upstream link is up a queued message is held: upstream's PUBACK within the hold
//   cancels it and nothing is written. While the link is down (or the hold passed) it is written
//   in the next group commit; the policy keeps a bridge's messages in order on disk.
// - A local QoS 1/2 publisher's acknowledgement waits for the queue's copy to be safe (the write
//   carries the publish's tag), not for the disk: upstream's PUBACK is as good.
// - Bounded by maxMessages, maxBytes and maxAgeSeconds; beyond a bound the oldest messages go
//   first (sent ones too: a late acknowledgement is then ignored), counted by reason.
// - Memory stays small whatever the backlog: unsent messages are kept in memory only while the
//   sender keeps up (WINDOW_*); the rest is read back from disk in slices as it is sent.
// - After a lost connection everything sent but not acknowledged is sent again, in order,
//   before anything newer (duplicates upstream are possible, losses are not).
import type { Store } from '../store/index.js';
import { REMOVED, type StagedTable, type StagedWrite, type StoragePolicy, type WriteTag } from '../storage/index.js';
import { decodeMessage, encodeMessage, enqueuedAtOf, queuedFrom, type MessageToQueue, type QueuedMessage } from './queue-record.js';

export type DropReason = 'maxMessages' | 'maxBytes' | 'maxAge' | 'notAuthorized' | 'expired' | 'rejectedUpstream' | 'storeFailure';
export const DROP_REASONS: readonly DropReason[] = ['maxMessages', 'maxBytes', 'maxAge', 'notAuthorized', 'expired', 'rejectedUpstream', 'storeFailure'];

export interface QueueLimits {
  maxMessages: number;
  maxBytes: number;
  maxAgeSeconds: number;
}

export interface QueueFigures {
  messages: number;
  bytes: number;
  /** Age of the oldest queued message (0 when empty). */
  oldestAgeSeconds: number;
  dropped: Record<DropReason, number>;
}

export type QueueStore = Pick<Store, 'isOpen' | 'writeHealth'>;

/** Where a queue keeps its messages: its table of the storage policy, the store's health, the policy's flush. */
export interface QueueStorage {
  table: StagedTable<Buffer>;
  store: QueueStore;
  policy: Pick<StoragePolicy, 'flush'>;
}

/** Unsent messages kept in memory (beyond: read back from disk). */
const WINDOW_MESSAGES = 1000;
const WINDOW_BYTES = 1 << 20;
/** Messages read from disk at once while draining a backlog. */
const READ_AHEAD = 256;
const MAX_SEQ = Number.MAX_SAFE_INTEGER;

interface Sent {
  size: number;
  at: number;
}

export class BridgeQueue {
  /** The next message to send for the first time. */
  private cursor = 0;
  /** The seq of the next message queued. */
  private tail = 0;
  /** Sent, not acknowledged yet, in send order (ascending). */
  private readonly sent = new Map<number, Sent>();
  /** Sent before a connection was lost: to send again first, ascending. */
  private redo: number[] = [];
  private readonly redoMeta = new Map<number, Sent>();
  private count = 0;
  private bytes = 0;
  /** Unsent messages in memory, as queued (no decoding when sent): cursor, cursor+1, ... (contiguous). */
  private readonly window = new Map<number, QueuedMessage>();
  private windowBytes = 0;
  /** Read ahead from disk. */
  private readonly readAhead = new Map<number, Buffer>();
  /** Whether upstream is connected: queued messages are then held for its acknowledgement. */
  private linkUp = false;
  private readonly wakers = new Set<() => void>();
  readonly dropped: Record<DropReason, number> = Object.fromEntries(DROP_REASONS.map((r) => [r, 0])) as Record<DropReason, number>;
  /** Messages given by next() a second time (after a lost connection). */
  resent = 0;
  /** Called for every drop (the running bridge logs episodes). */
  onDrop: (reason: DropReason, count: number) => void = () => {};

  private readonly table: StagedTable<Buffer>;
  private readonly store: QueueStore;

  constructor(
    private readonly storage: QueueStorage,
    readonly id: string,
    public limits: QueueLimits,
    private readonly now: () => number = Date.now,
  ) {
    this.table = storage.table;
    this.store = storage.store;
    this.reload();
  }

  /**
   * Reads the queue's state from the store (at start, and after a restore swapped the store: the
   * storage policy dropped what was staged for the old one).
   */
  reload(): void {
    this.sent.clear();
    this.redo = [];
    this.redoMeta.clear();
    this.window.clear();
    this.windowBytes = 0;
    this.readAhead.clear();
    this.count = 0;
    this.bytes = 0;
    let first: number | undefined;
    let last = -1;
    if (this.store.isOpen()) {
      // The disk merged with what is staged: a bridge removed and added back before its queue's
      // removal is committed must not find the removed messages (nor miss staged ones).
      for (const { key, value } of this.table.range({ start: [this.id, 0], end: [this.id, MAX_SEQ] })) {
        const seq = (key as [string, number])[1];
        first ??= seq;
        last = seq;
        this.count++;
        this.bytes += value.length;
      }
    }
    this.cursor = first ?? last + 1;
    this.tail = last + 1;
    this.wake();
  }

  figures(): QueueFigures {
    const at = this.count > 0 ? this.oldestAt() : undefined;
    return {
      messages: this.count,
      bytes: this.bytes,
      oldestAgeSeconds: at === undefined ? 0 : Math.max(0, (this.now() - at) / 1000),
      dropped: { ...this.dropped },
    };
  }

  get size(): number {
    return this.count;
  }

  /** Messages sent and not acknowledged yet. */
  get inFlight(): number {
    return this.sent.size;
  }

  /** Messages waiting to be sent (again). */
  get waiting(): number {
    return this.redo.length + (this.tail - this.cursor);
  }

  /**
   * Queues a message. `tag`: the local publish it comes from (its publisher's acknowledgement waits
   * until this copy is safe: upstream took it, or it is on disk). When it cannot be stored it is
   * counted as dropped (storeFailure).
   */
  enqueue(message: MessageToQueue, tag?: WriteTag): void {
    if (!this.store.isOpen() || !this.store.writeHealth().writable) {
      this.countDrop('storeFailure', 1);
      return;
    }
    const seq = this.tail++;
    const enqueuedAt = this.now();
    const buf = encodeMessage(message, enqueuedAt);
    this.count++;
    this.bytes += buf.length;
    if (seq === this.cursor + this.window.size && this.window.size < WINDOW_MESSAGES && this.windowBytes + buf.length <= WINDOW_BYTES) {
      this.window.set(seq, queuedFrom(message, buf, seq, enqueuedAt));
      this.windowBytes += buf.length;
    }
    // A new sequence number (fresh): upstream's PUBACK cancels it without reading the database.
    this.table.put(this.writeId(seq), [this.id, seq], buf, { class: this.linkUp ? 'held' : 'prompt', owner: this.id, tag, fresh: true });
    this.enforceLimits();
    this.wake();
  }

  /** The next message to send (again) in order, marked as sent; undefined when there is none. */
  next(): QueuedMessage | undefined {
    while (this.redo.length) {
      const seq = this.redo.shift()!;
      const meta = this.redoMeta.get(seq)!;
      this.redoMeta.delete(seq);
      const buf = this.read(seq);
      if (!buf) continue; // gone (cannot happen while the store is open)
      this.sent.set(seq, meta);
      this.resent++;
      return decodeMessage(seq, buf);
    }
    while (this.cursor < this.tail) {
      const seq = this.cursor;
      const m = this.window.get(seq) ?? this.decoded(seq);
      this.forgetUnsent(seq);
      this.cursor++;
      // A gap: acknowledged out of order before a restart.
      if (!m) continue;
      this.sent.set(seq, { size: m.size, at: m.enqueuedAt });
      return m;
    }
    return undefined;
  }

  /** The upstream broker took it (or, QoS 0, it was written): it leaves the queue. */
  acknowledged(seq: number): boolean {
    const meta = this.sent.get(seq);
    if (!meta) return false; // dropped meanwhile, or acknowledged twice
    this.sent.delete(seq);
    this.remove(seq, meta.size);
    return true;
  }

  /** A message next() gave that will not be sent after all (refused): it leaves the queue. */
  drop(seq: number, reason: DropReason): void {
    const meta = this.sent.get(seq);
    if (!meta) return;
    this.sent.delete(seq);
    this.remove(seq, meta.size);
    this.countDrop(reason, 1);
  }

  /** The connection was lost: what was sent and not acknowledged is sent again, first. */
  connectionLost(): void {
    if (this.sent.size === 0) return;
    for (const [seq, meta] of this.sent) this.redoMeta.set(seq, meta);
    this.redo = [...this.sent.keys(), ...this.redo].sort((a, b) => a - b);
    this.sent.clear();
    this.wake();
  }

  /** Drops the messages older than maxAgeSeconds (called periodically and at each enqueue). */
  enforceAge(): void {
    if (this.limits.maxAgeSeconds <= 0) return;
    const limit = this.now() - this.limits.maxAgeSeconds * 1000;
    let n = 0;
    while (this.count > 0 && this.oldestAt()! < limit) {
      this.dropOldest();
      n++;
    }
    if (n) this.countDrop('maxAge', n);
  }

  /** Calls `wake` whenever there may be something to send (one call per change; re-register after). */
  onReady(wake: () => void): () => void {
    this.wakers.add(wake);
    return () => this.wakers.delete(wake);
  }

  /** Upstream connected or lost: while it is away, held messages are written in the next commit. */
  setLinkUp(up: boolean): void {
    this.linkUp = up;
    if (!up) this.table.promote(this.id);
  }

  /** Removes every message (the bridge left the service files). */
  clear(): void {
    if (this.store.isOpen()) {
      this.table.removeOwnedBy(this.id, [this.id, 0], [this.id, MAX_SEQ], (key) => this.writeId((key as [string, number])[1]), { class: 'prompt', delivered: true });
    }
    this.sent.clear();
    this.redo = [];
    this.redoMeta.clear();
    this.window.clear();
    this.windowBytes = 0;
    this.readAhead.clear();
    this.count = 0;
    this.bytes = 0;
    this.cursor = this.tail;
  }

  /** Resolves once every write staged so far (held ones too) is on disk. */
  async settled(): Promise<void> {
    await this.storage.policy.flush();
  }

  /** A staged write of this queue was lost to a failed commit: the message is gone (storeFailure). */
  lost(write: StagedWrite<Buffer>): void {
    if (write.value === REMOVED) return; // a removal: the message comes back after a restart (at least once)
    const seq = (write.key as [string, number])[1]!;
    const size = write.value.length;
    if (this.sent.delete(seq) || this.redoMeta.delete(seq)) {
      this.redo = this.redo.filter((s) => s !== seq);
    } else if (seq >= this.cursor && seq < this.tail) {
      // Unsent: next() finds no record and skips it.
      this.forgetUnsent(seq);
    } else return;
    this.count--;
    this.bytes -= size;
    this.countDrop('storeFailure', 1);
  }

  private enforceLimits(): void {
    const { maxMessages, maxBytes } = this.limits;
    let byCount = 0;
    let byBytes = 0;
    while (this.count > 0 && (this.count > maxMessages || this.bytes > maxBytes)) {
      if (this.count > maxMessages) byCount++;
      else byBytes++;
      this.dropOldest();
    }
    if (byCount) this.countDrop('maxMessages', byCount);
    if (byBytes) this.countDrop('maxBytes', byBytes);
    this.enforceAge();
  }

  /** The oldest message still queued: sent, to send again, or the first unsent. */
  private oldestSeq(): { seq: number; where: 'sent' | 'redo' | 'unsent' } | undefined {
    let best: { seq: number; where: 'sent' | 'redo' | 'unsent' } | undefined;
    const sentFirst = this.sent.keys().next();
    if (!sentFirst.done) best = { seq: sentFirst.value, where: 'sent' };
    if (this.redo.length && (!best || this.redo[0]! < best.seq)) best = { seq: this.redo[0]!, where: 'redo' };
    if (this.cursor < this.tail && (!best || this.cursor < best.seq)) best = { seq: this.cursor, where: 'unsent' };
    return best;
  }

  private oldestAt(): number | undefined {
    const o = this.oldestSeq();
    if (!o) return undefined;
    if (o.where === 'sent') return this.sent.get(o.seq)!.at;
    if (o.where === 'redo') return this.redoMeta.get(o.seq)!.at;
    const w = this.window.get(o.seq);
    if (w) return w.enqueuedAt;
    const buf = this.read(o.seq);
    return buf ? enqueuedAtOf(buf) : undefined;
  }

  private dropOldest(): void {
    const o = this.oldestSeq();
    if (!o) return;
    let size: number;
    if (o.where === 'sent') {
      size = this.sent.get(o.seq)!.size;
      this.sent.delete(o.seq);
    } else if (o.where === 'redo') {
      size = this.redoMeta.get(o.seq)!.size;
      this.redoMeta.delete(o.seq);
      this.redo.shift();
    } else {
      size = this.window.get(o.seq)?.size ?? this.read(o.seq)?.length ?? 0;
      this.forgetUnsent(o.seq);
      this.cursor++;
    }
    this.remove(o.seq, size);
  }

  private forgetUnsent(seq: number): void {
    const w = this.window.get(seq);
    if (w) {
      this.window.delete(seq);
      this.windowBytes -= w.size;
    }
    this.readAhead.delete(seq);
  }

  private decoded(seq: number): QueuedMessage | undefined {
    const buf = this.read(seq);
    return buf && decodeMessage(seq, buf);
  }

  /** The record of a message not in the window: staged and not committed yet, or on disk. */
  private read(seq: number): Buffer | undefined {
    const staged = this.table.staged(this.writeId(seq));
    if (staged) return staged.value === REMOVED ? undefined : staged.value;
    const hit = this.readAhead.get(seq);
    if (hit || !this.store.isOpen()) return hit;
    // A backlog on disk: read a slice ahead (one cursor instead of one lookup per message).
    this.readAhead.clear();
    for (const { key, value } of this.table.db.getRange({ start: [this.id, seq], end: [this.id, MAX_SEQ], limit: READ_AHEAD })) {
      this.readAhead.set((key as [string, number])[1], value);
    }
    return this.readAhead.get(seq);
  }

  /** The message left the queue (acknowledged upstream, or dropped): a copy never written is cancelled. */
  private remove(seq: number, size: number): void {
    this.count--;
    this.bytes -= size;
    if (!this.store.isOpen()) return;
    this.table.remove(this.writeId(seq), [this.id, seq], { class: 'prompt', owner: this.id, delivered: true });
  }

  /** The write's id in the shared table: unique over every bridge's queue. */
  private writeId(seq: number): string {
    return `${this.id}\u0000${seq}`;
  }

  private countDrop(reason: DropReason, n: number): void {
    this.dropped[reason] += n;
    this.onDrop(reason, n);
  }

  private wake(): void {
    if (this.wakers.size === 0) return;
    for (const w of [...this.wakers]) w();
  }
}
