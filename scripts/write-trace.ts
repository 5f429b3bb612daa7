// What a process writes to files, seen at its system calls (strace): the bench-flash analysis
// (GATEWAYD_BENCH_FLASH_STRACE). /proc/<pid>/io write_bytes counts every page cache folio the
// process dirties in full, and on kernels whose ext4 caches files in large folios (6.16 and
// later) a 4 KiB write into a 2 MiB folio counts 2 MiB, while the device gets the 4 KiB block.
// Counted here instead: each write to a regular file rounded out to the 4 KiB blocks it touches
// (what the file system writes back, before its journal), and the syncs.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';

const BLOCK = 4096;
const CALLS = ['write', 'pwrite64', 'writev', 'pwritev', 'pwritev2', 'fsync', 'fdatasync', 'sync_file_range'];

export interface TracedWrites {
  /** Bytes the write calls wrote to regular files. */
  bytes: number;
  /** The same rounded out to whole 4 KiB blocks per call. */
  blockBytes: number;
  syncs: number;
  /** blockBytes per file name (the basename). */
  byFile: Map<string, number>;
}

export interface WriteTrace {
  /** What the traced process wrote between two times (Date.now() ms). */
  between(fromMs: number, toMs: number): TracedWrites;
  stop(): Promise<void>;
}

interface Call {
  atMs: number;
  name: string;
  path: string;
  offset: number | undefined;
  result: number;
}

/** Blocks a write of `length` bytes at `offset` touches (unknown offset: as if aligned). */
function blocksOf(offset: number | undefined, length: number): number {
  if (length <= 0) return 0;
  if (offset === undefined) return Math.ceil(length / BLOCK);
  return Math.ceil((offset + length) / BLOCK) - Math.floor(offset / BLOCK);
}

/** One strace line (-f -ttt -y -s 0) into its parts; an `<unfinished ...>` call is completed by its `resumed` line. */
function parse(text: string): Call[] {
  const calls: Call[] = [];
  const open = new Map<string, { atMs: number; name: string; head: string }>();
  for (const line of text.split('\n')) {
    const m = /^(\d+)\s+(\d+\.\d+) (.*)$/.exec(line);
    if (!m) continue;
    const [, tid, at, rest] = m as unknown as [string, string, string, string];
    let name: string;
    let head: string;
    let tail: string;
    let atMs = Number(at) * 1000;
    const resumed = /^<\.\.\. (\w+) resumed>(.*)$/.exec(rest);
    if (resumed) {
      const started = open.get(tid);
      open.delete(tid);
      if (!started) continue;
      ({ name, head, atMs } = started);
      tail = resumed[2]!;
    } else {
      const call = /^(\w+)\((.*)$/.exec(rest);
      if (!call || !CALLS.includes(call[1]!)) continue;
      name = call[1]!;
      if (call[2]!.endsWith('<unfinished ...>')) {
        open.set(tid, { atMs, name, head: call[2]! });
        continue;
      }
      head = call[2]!;
      tail = '';
    }
    const whole = head + tail;
    const path = /^\d+<([^>]*)>/.exec(whole)?.[1];
    // Regular files only: sockets, pipes, eventfds and devices are not the flash.
    if (!path || !path.startsWith('/') || path.startsWith('/dev/')) continue;
    const result = Number(/\)\s+=\s+(-?\d+)/.exec(whole)?.[1] ?? -1);
    const offset = name === 'write' || name === 'writev' ? undefined : Number(/,\s*(\d+)(?:,\s*\w+)?\)\s+=/.exec(whole)?.[1]);
    calls.push({ atMs, name, path, offset: Number.isFinite(offset) ? offset : undefined, result });
  }
  return calls;
}

/** Traces the writes and syncs of process `pid` (every thread) into `file` until stop(). Resolves once attached. */
export async function startWriteTrace(pid: number, file: string): Promise<WriteTrace> {
  const tracer: ChildProcess = spawn('strace', ['-f', '-qq', '-ttt', '-y', '-s', '0', '-e', `trace=${CALLS.join(',')}`, '-o', file, '-p', String(pid)], { stdio: ['ignore', 'ignore', 'pipe'] });
  let failure = '';
  tracer.stderr!.on('data', (d) => (failure += d));
  // strace attaches within moments; the windows start long after.
  await new Promise((r) => setTimeout(r, 1000));
  if (tracer.exitCode !== null) throw new Error(`strace: ${failure}`);
  let calls: Call[] | undefined;
  return {
    between(fromMs, toMs) {
      // Read again until the trace is stopped (then once).
      const all = calls ?? parse(readFileSync(file, 'utf8'));
      if (tracer.exitCode !== null) calls = all;
      const out: TracedWrites = { bytes: 0, blockBytes: 0, syncs: 0, byFile: new Map() };
      for (const c of all) {
        if (c.atMs < fromMs || c.atMs > toMs || c.result < 0) continue;
        if (c.name === 'fsync' || c.name === 'fdatasync' || c.name === 'sync_file_range') {
          out.syncs++;
          continue;
        }
        const blockBytes = blocksOf(c.offset, c.result) * BLOCK;
        out.bytes += c.result;
        out.blockBytes += blockBytes;
        const name = basename(c.path);
        out.byFile.set(name, (out.byFile.get(name) ?? 0) + blockBytes);
      }
      return out;
    },
    async stop() {
      if (tracer.exitCode !== null) return;
      const exited = new Promise((r) => tracer.once('exit', r));
      tracer.kill('SIGINT');
      await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
    },
  };
}
