// The store-and-forward queue of one bridge (docs/design.md §14): every message an out rule takes is
// written to the `bridge-queue` database of the gateway's LMDB environment (key [bridgeId, seq],
// value queue-record.ts) before it is sent upstream, and is removed only once the upstream
// broker acknowledged it (QoS 1/2) or it was written to the socket (QoS 0). Order is the order
// of arrival, per bridge.
//
// - Writes are not a transaction each: lmdb-js commits every write issued in one event turn as
//   one transaction, and `whenStored` callbacks run once that commit is flushed to disk (a local
//   publisher's PUBACK waits for them).
// - Bounded by maxMessages, maxBytes and maxAgeSeconds; beyond a bound the oldest messages go
//   first (sent ones too: a late acknowledgement is then ignored), counted by reason.
// - Memory stays small whatever the backlog: unsent messages are kept in memory only while the
//   sender keeps up (WINDOW_*); the rest is read back from disk in slices as it is sent.
// - After a lost connection everything sent but not acknowledged is sent again, in order,
//   before anything newer (duplicates upstream are possible, losses are not).
import type { Database, Key } from 'lmdb';
import type { Store } from '../store/index.js';
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

export type QueueStore = Pick<Store, 'flushed' | 'isOpen' | 'writeHealth' | 'noteWriteFailure'>;

/** Unsent messages kept in memory (beyond: read back from disk). */
const WINDOW_MESSAGES = 1000;
const WINDOW_BYTES = 1 << 20;
/** Messages read from disk at once while draining a backlog. */
const READ_AHEAD = 256;
/**
 * How long the removal of acknowledged messages may wait for company. lmdb-js writes each event
 * turn's writes as a batch, and every batch that finds its writer thread idle costs the event
 * loop a new start of it (hundreds of µs): a backlog draining at thousands of acknowledgements a
 * second would pay that for every turn. A removal goes out with the next put of its queue (the
 * same batch) or after this delay; a crash in between sends those messages again (at least once).
 */
const REMOVE_DELAY_MS = 20;
const MAX_SEQ = Number.MAX_SAFE_INTEGER;

interface Sent {
  size: number;
  at: number;
}

interface Batch {
  commit: Promise<unknown>;
  seqs: number[];
  stored: (() => void)[];
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
  /** Written, not committed yet: reads of LMDB do not see them. */
  private readonly pending = new Map<number, Buffer>();
  /** Unsent messages in memory, as queued (no decoding when sent): cursor, cursor+1, ... (contiguous). */
  private readonly window = new Map<number, QueuedMessage>();
  private windowBytes = 0;
  /** Read ahead from disk. */
  private readonly readAhead = new Map<number, Buffer>();
  private batch: Batch | undefined;
  /** The commit of the last write issued (settled() waits for it). */
  private lastWrite: Promise<unknown> | undefined;
  /** The key of every write, reused: lmdb-js encodes it before put/remove return. */
  private readonly key: [string, number];
  /** Acknowledged or dropped messages whose removal waits (REMOVE_DELAY_MS). */
  private heldRemoves: number[] = [];
  private removeTimer: NodeJS.Timeout | undefined;
  private readonly wakers = new Set<() => void>();
  readonly dropped: Record<DropReason, number> = Object.fromEntries(DROP_REASONS.map((r) => [r, 0])) as Record<DropReason, number>;
  /** Messages given by next() a second time (after a lost connection). */
  resent = 0;
  /** Called for every drop (the running bridge logs episodes). */
  onDrop: (reason: DropReason, count: number) => void = () => {};

  constructor(
    private db: Database<Buffer, Key>,
    private readonly store: QueueStore,
    readonly id: string,
    public limits: QueueLimits,
    private readonly now: () => number = Date.now,
  ) {
    this.key = [id, 0];
    this.reload();
  }

  /** Reads the queue's state from the store (at start, and after a restore swapped the store). */
  reload(db: Database<Buffer, Key> = this.db): void {
    this.db = db;
    // Removals not written belong to the queue as it was (a restore: their keys may be other messages now).
    this.dropHeldRemoves();
    this.sent.clear();
    this.redo = [];
    this.redoMeta.clear();
    this.pending.clear();
    this.window.clear();
    this.windowBytes = 0;
    this.readAhead.clear();
    this.batch = undefined;
    this.count = 0;
    this.bytes = 0;
    let first: number | undefined;
    let last = -1;
    if (this.store.isOpen()) {
      for (const { key, value } of this.db.getRange({ start: [this.id, 0], end: [this.id, MAX_SEQ] })) {
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
   * Queues a message; `stored` is called once it is on disk (or, when it cannot be stored, at
   * once: it is then counted as dropped, storeFailure).
   */
  enqueue(message: MessageToQueue, stored?: () => void): void {
    if (!this.store.isOpen() || !this.store.writeHealth().writable) {
      this.countDrop('storeFailure', 1);
      stored?.();
      return;
    }
    const seq = this.tail++;
    const enqueuedAt = this.now();
    const buf = encodeMessage(message, enqueuedAt);
    this.pending.set(seq, buf);
    this.count++;
    this.bytes += buf.length;
    if (seq === this.cursor + this.window.size && this.window.size < WINDOW_MESSAGES && this.windowBytes + buf.length <= WINDOW_BYTES) {
      this.window.set(seq, queuedFrom(message, buf, seq, enqueuedAt));
      this.windowBytes += buf.length;
    }
    this.key[1] = seq;
    this.track(this.db.put(this.key, buf), seq, stored);
    if (this.heldRemoves.length) this.writeRemoves();
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

  /** Removes every message (the bridge left the service files). */
  clear(): void {
    this.dropHeldRemoves(); // every key is removed below
    if (this.store.isOpen()) {
      // Committed ones and those still in the current commit batch (a remove issued after a put goes after it).
      const seqs = new Set<number>(this.pending.keys());
      for (const key of this.db.getKeys({ start: [this.id, 0], end: [this.id, MAX_SEQ] })) seqs.add((key as [string, number])[1]);
      for (const seq of seqs) {
        this.lastWrite = this.db.remove([this.id, seq]);
        this.lastWrite.catch((err: unknown) => this.store.noteWriteFailure(err));
      }
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

  /** Resolves once every write issued so far is on disk. */
  async settled(): Promise<void> {
    this.writeRemoves();
    await this.lastWrite?.catch(() => undefined);
    await this.store.flushed();
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

  /** The record of a message not in the window: written and not committed yet, or on disk. */
  private read(seq: number): Buffer | undefined {
    const hit = this.pending.get(seq) ?? this.readAhead.get(seq);
    if (hit || !this.store.isOpen()) return hit;
    // A backlog on disk: read a slice ahead (one cursor instead of one lookup per message).
    this.readAhead.clear();
    for (const { key, value } of this.db.getRange({ start: [this.id, seq], end: [this.id, MAX_SEQ], limit: READ_AHEAD })) {
      this.readAhead.set((key as [string, number])[1], value);
    }
    return this.readAhead.get(seq);
  }

  private remove(seq: number, size: number): void {
    this.count--;
    this.bytes -= size;
    this.heldRemoves.push(seq);
    if (this.removeTimer) return;
    this.removeTimer = setTimeout(() => this.writeRemoves(), REMOVE_DELAY_MS);
    this.removeTimer.unref();
  }

  /** Writes the held removals (each after its message's put, which was issued when it was queued). */
  writeRemoves(): void {
    if (this.removeTimer) clearTimeout(this.removeTimer);
    this.removeTimer = undefined;
    const seqs = this.heldRemoves;
    this.heldRemoves = [];
    if (!this.store.isOpen()) return;
    for (const seq of seqs) {
      this.key[1] = seq;
      const write = this.db.remove(this.key);
      // lmdb-js answers the writes of one commit with one promise: one handler for all of them.
      if (write === this.lastWrite) continue;
      this.lastWrite = write;
      write.catch((err: unknown) => this.store.noteWriteFailure(err));
    }
  }

  private dropHeldRemoves(): void {
    if (this.removeTimer) clearTimeout(this.removeTimer);
    this.removeTimer = undefined;
    this.heldRemoves = [];
  }

  /** lmdb-js answers every write of one commit with the same promise: one callback per batch. */
  private track(commit: Promise<unknown>, seq: number, stored?: () => void): void {
    this.lastWrite = commit;
    let b = this.batch;
    if (!b || b.commit !== commit) {
      const batch: Batch = { commit, seqs: [], stored: [] };
      b = this.batch = batch;
      commit
        .then(
          () => {
            for (const s of batch.seqs) this.pending.delete(s);
            return this.store.flushed();
          },
          (err: unknown) => {
            // Not stored: the queue is what the disk holds (the messages of the batch are lost,
            // and counted; whatever was sent is sent again).
            this.store.noteWriteFailure(err);
            const lost = batch.seqs.length;
            if (this.batch === batch) this.batch = undefined;
            this.reload();
            this.countDrop('storeFailure', lost);
          },
        )
        // The flush itself failed (the store closing): the writes are what the next start finds.
        .catch((err: unknown) => this.store.noteWriteFailure(err))
        .finally(() => {
          if (this.batch === batch) this.batch = undefined;
          for (const done of batch.stored) done();
        });
    }
    b.seqs.push(seq);
    if (stored) b.stored.push(stored);
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
