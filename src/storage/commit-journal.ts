// The commit journal (docs/footprint.md "Flash", docs/design.md §18): what must be durable before
// an acknowledgement leaves is appended here, in one frame per commit and one synced write, and
// reaches LMDB later in a compaction (a background commit of many). An LMDB commit writes whole
// pages (the changed leaf, its parents, the free list, the meta page) and syncs twice: 16 KiB at
// its write calls for one queued message, 63 KB in write_bytes on a kernel with large folios;
// a frame here is one 4 KiB block for a message, one sync.
//
// The file is written once in full when it is created (so a later frame never grows the file and
// its sync carries no metadata), then reused from its start after each compaction. A frame starts
// at a block boundary and never shares a block with an earlier frame: a torn write can only spoil
// the frame being written, never one already acknowledged. Frames carry the journal's epoch (a
// random number the store's marker names) and a generation (one per use of the file, counted up
// by compactions) and a CRC: replay reads frames from the start while they are whole, of that
// epoch and generation, and numbered in sequence; whatever follows (a torn frame, older frames of
// an earlier generation) ends it.
//
// Writes bypass the page cache where the file system allows it (O_DIRECT, from page-aligned
// memory): the kernel counts exactly the blocks written, and large page-cache folios never turn a
// 4 KiB write into megabytes (see footprint.md, "Two measures"). Elsewhere (tmpfs, no
// WebAssembly for aligned memory) the same blocks are written through the page cache. Either way
// the file is opened O_DSYNC: a frame is durable when its one write call returns (one trip to
// libuv's thread pool instead of a write and an fdatasync: half the CPU per commit, measured).
import { closeSync, constants, fstatSync, fsyncSync, openSync, readSync, renameSync, rmSync, write, writeSync } from 'node:fs';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';
import { Packr } from 'msgpackr';

export const JOURNAL_BLOCK = 4096;
/**
 * The journal's size on disk: 2,048 frames of one block. A compaction comes when it is 7/8 full
 * at the latest: every 18 s at 100 frames a second.
 */
export const JOURNAL_BYTES = 8 * 1024 * 1024;
export const JOURNAL_FILE = 'commit-journal';
const HEADER = 24;
const MAGIC = 0x314a_5747; // "GWJ1", little-endian
/** Bytes written per call while the file is created (a chunk of aligned memory, not more). */
const FILL_CHUNK = 64 * 1024;
const WASM_PAGE = 64 * 1024;

/** A database's options that change how its keys and values are stored. */
export interface JournalTableOptions {
  keyEncoding?: string;
  encoding?: string;
}

/** One write as the journal keeps it: a put (value) or a removal. */
export interface JournalRecord {
  table: string;
  options: JournalTableOptions;
  key: unknown;
  removed: boolean;
  value: unknown;
}

export interface JournalGeneration {
  epoch: number;
  generation: number;
  /** The records of every whole frame, in order. */
  records: JournalRecord[];
  frames: number;
}

export interface CommitJournal {
  readonly path: string;
  /** Whether writes bypass the page cache (O_DIRECT). */
  readonly direct: boolean;
  /** The frames of the generation written last, as far as they are whole (for replay at open). */
  readLast(): JournalGeneration | undefined;
  /** Starts a generation at the beginning of the file (after a compaction made the last one redundant). */
  begin(epoch: number, generation: number): void;
  readonly generation: number;
  /** Frames written in the current generation. */
  readonly frames: number;
  /** Bytes of the file not used by the current generation. */
  free(): number;
  /** The payload of a frame (for `fits` and `append`). */
  encode(records: JournalRecord[]): Uint8Array;
  /** Bytes a frame of this payload takes (whole blocks). */
  frameBytes(payload: Uint8Array): number;
  /** Appends one frame and syncs it; resolves with the bytes written. Rejects on an I/O error (nothing advanced). */
  append(payload: Uint8Array): Promise<number>;
  close(): void;
}

const packr = new Packr({ useRecords: false, moreTypes: true });

/** The part of WebAssembly used here (Node's types leave it out; --jitless leaves it undefined). */
interface WasmMemory {
  readonly buffer: ArrayBuffer;
  grow(pages: number): number;
}
const wasm = (globalThis as unknown as { WebAssembly?: { Memory: new (d: { initial: number; maximum: number }) => WasmMemory } }).WebAssembly;

/** Page-aligned memory for O_DIRECT (a WebAssembly memory is page-aligned). */
class AlignedBuffer {
  readonly #memory: WasmMemory;
  #view: Buffer;
  constructor(bytes: number, maxBytes: number) {
    this.#memory = new wasm!.Memory({ initial: Math.ceil(bytes / WASM_PAGE), maximum: Math.ceil(maxBytes / WASM_PAGE) + 1 });
    this.#view = Buffer.from(this.#memory.buffer);
  }
  /** A view of at least `bytes` (grows the memory; earlier views are then stale). */
  take(bytes: number): Buffer {
    if (bytes > this.#view.length) {
      this.#memory.grow(Math.ceil((bytes - this.#view.length) / WASM_PAGE));
      this.#view = Buffer.from(this.#memory.buffer);
    }
    return this.#view;
  }
}

function alignedBuffer(bytes: number, maxBytes: number): AlignedBuffer | undefined {
  try {
    return wasm ? new AlignedBuffer(bytes, maxBytes) : undefined;
  } catch {
    return undefined;
  }
}

const roundUp = (n: number) => Math.ceil(n / JOURNAL_BLOCK) * JOURNAL_BLOCK;

function fsyncDir(dir: string): void {
  const fd = openSync(dir, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Writes `size` bytes of zeros to a new file in place of `path` (through a temp name, synced). */
function createFile(path: string, dir: string, size: number, memory: AlignedBuffer | undefined): void {
  const tmp = `${path}.tmp`;
  rmSync(tmp, { force: true });
  let fd = openSync(tmp, constants.O_RDWR | constants.O_CREAT | constants.O_TRUNC, 0o600);
  try {
    // Aligned chunks where O_DIRECT works: the page cache then holds nothing of the file. Through the
    // page cache, one block per call: pages cached in large folios would make every later 4 KiB
    // write count (and on some kernels write back) the whole folio.
    let chunk: Buffer = Buffer.alloc(JOURNAL_BLOCK);
    if (memory) {
      const direct = tryOpenDirect(tmp);
      if (direct !== undefined) {
        closeSync(fd);
        fd = direct;
        chunk = memory.take(FILL_CHUNK).subarray(0, FILL_CHUNK).fill(0);
      }
    }
    for (let at = 0; at < size; at += chunk.length) writeSync(fd, chunk, 0, Math.min(chunk.length, size - at), at);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, path);
  fsyncDir(dir);
}

/** The file opened for direct I/O, or undefined where the file system refuses it (tmpfs). */
function tryOpenDirect(path: string, flags = 0): number | undefined {
  const flag = (constants as { O_DIRECT?: number }).O_DIRECT;
  if (flag === undefined) return undefined;
  try {
    return openSync(path, constants.O_RDWR | flag | flags);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EINVAL') return undefined;
    throw error;
  }
}

/**
 * Opens the journal in `dir` (creating it, written in full, when it is missing or of another
 * size; `readLast` of a file of another size still reads it first: call it before `begin`).
 * Throws when the file cannot be created (a read-only or full file system).
 */
export function openCommitJournal(options: { dir: string; sizeBytes?: number }): CommitJournal {
  const size = options.sizeBytes ?? JOURNAL_BYTES;
  const path = join(options.dir, JOURNAL_FILE);
  const memory = alignedBuffer(JOURNAL_BLOCK, Math.max(size, FILL_CHUNK));
  let existing: number | undefined;
  try {
    existing = openSync(path, constants.O_RDWR);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  // A file of another size is read as it is (replay) and written anew at the first begin().
  let fd = existing ?? -1;
  let recreate = existing === undefined || fstatSync(existing).size !== size;
  let direct = false;
  let generation = 0;
  let epoch = 0;
  let frames = 0;
  let position = 0;

  let writable = false;
  /** Once, at the first begin(): the file made anew if needed, opened for synced (and where possible direct) writes. */
  function openForWrites(): void {
    if (writable) return;
    writable = true;
    if (recreate) createFile(path, options.dir, size, memory);
    recreate = false;
    if (fd >= 0) closeSync(fd);
    const d = memory ? tryOpenDirect(path, constants.O_DSYNC) : undefined;
    direct = d !== undefined;
    fd = d ?? openSync(path, constants.O_RDWR | constants.O_DSYNC);
  }

  function read(buf: Buffer, at: number): number {
    let got = 0;
    while (got < buf.length) {
      const n = readSync(fd, buf, got, buf.length - got, at + got);
      if (n === 0) break;
      got += n;
    }
    return got;
  }

  return {
    path,
    get direct() {
      return direct;
    },
    get generation() {
      return generation;
    },
    get frames() {
      return frames;
    },
    readLast() {
      if (fd < 0) return undefined;
      // Reads through the page cache (a start, not the message path). With O_DIRECT on, a cached
      // page is dropped by the next direct write to it.
      const fileSize = fstatSync(fd).size;
      const head = Buffer.alloc(HEADER);
      const records: JournalRecord[] = [];
      let first: { epoch: number; generation: number } | undefined;
      let seq = 0;
      for (let at = 0; at + HEADER <= fileSize; ) {
        if (read(head, at) < HEADER || head.readUInt32LE(0) !== MAGIC) break;
        const e = head.readUInt32LE(4);
        const g = head.readUInt32LE(8);
        const length = head.readUInt32LE(16);
        if (head.readUInt32LE(12) !== seq || (first && (e !== first.epoch || g !== first.generation)) || at + HEADER + length > fileSize) break;
        const payload = Buffer.alloc(length);
        if (read(payload, at + HEADER) < length) break;
        if (crc32(payload, crc32(head.subarray(4, 20))) !== head.readUInt32LE(20)) break;
        let decoded: unknown;
        try {
          decoded = packr.unpack(payload);
        } catch {
          break;
        }
        first ??= { epoch: e, generation: g };
        records.push(...fromPayload(decoded));
        seq++;
        at += roundUp(HEADER + length);
      }
      return first ? { ...first, records, frames: seq } : undefined;
    },
    begin(e, g) {
      openForWrites();
      epoch = e >>> 0;
      generation = g >>> 0;
      frames = 0;
      position = 0;
    },
    free: () => size - position,
    encode: (records) => packr.pack(toPayload(records)),
    frameBytes: (payload) => roundUp(HEADER + payload.length),
    append(payload) {
      const bytes = roundUp(HEADER + payload.length);
      if (position + bytes > size) return Promise.reject(new Error('the commit journal is full'));
      const buf = memory && direct ? memory.take(bytes) : Buffer.alloc(bytes);
      buf.writeUInt32LE(MAGIC, 0);
      buf.writeUInt32LE(epoch, 4);
      buf.writeUInt32LE(generation, 8);
      buf.writeUInt32LE(frames, 12);
      buf.writeUInt32LE(payload.length, 16);
      buf.set(payload, HEADER);
      buf.writeUInt32LE(crc32(payload, crc32(buf.subarray(4, 20))), 20);
      // The rest of the last block: zeros, so the file never shows stale bytes after a frame.
      buf.fill(0, HEADER + payload.length, bytes);
      const at = position;
      return new Promise<number>((resolve, reject) => {
        // O_DSYNC: on disk when the call returns.
        write(fd, buf, 0, bytes, at, (error, written) => {
          if (error) return reject(error);
          if (written !== bytes) return reject(new Error(`short write to the commit journal: ${written} of ${bytes} bytes`));
          position = at + bytes;
          frames++;
          resolve(bytes);
        });
      });
    },
    close() {
      if (fd >= 0) closeSync(fd);
      fd = -1;
    },
  };
}

/** Tables named once per frame: [[name, keyEncoding, encoding]...], then [tableIndex, key, removed, value] per record. */
function toPayload(records: JournalRecord[]): unknown {
  const tables: [string, string | null, string | null][] = [];
  const index = new Map<string, number>();
  const rows = records.map((r) => {
    let t = index.get(r.table);
    if (t === undefined) {
      t = tables.length;
      index.set(r.table, t);
      tables.push([r.table, r.options.keyEncoding ?? null, r.options.encoding ?? null]);
    }
    return r.removed ? [t, r.key, 1] : [t, r.key, 0, r.value];
  });
  return [tables, rows];
}

function fromPayload(decoded: unknown): JournalRecord[] {
  const [tables, rows] = decoded as [[string, string | null, string | null][], [number, unknown, number, unknown?][]];
  return rows.map(([t, key, removed, value]) => {
    const [table, keyEncoding, encoding] = tables[t]!;
    const options: JournalTableOptions = {};
    if (keyEncoding !== null) options.keyEncoding = keyEncoding;
    if (encoding !== null) options.encoding = encoding;
    return { table, options, key, removed: removed === 1, value };
  });
}
