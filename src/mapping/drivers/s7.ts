// Siemens S7 connections (S7comm over ISO-on-TCP; s7-session.ts speaks the protocol):
// configuration {host, port, rack, slot, timeoutMs}, endpoint addresses {area, dbNumber,
// offset, bit, type, length} (s7-schemas.ts).
//
// Reads are polled together: the endpoints poll in rounds (readsTogether, poll-groups.ts), and
// every read asked for in the same turn of the event loop, or while a batch is out, goes into
// the next batch. A batch merges the byte ranges of one area that lie close together and leaves the
// packing into requests to the session (as few as the PDU allows). When a merged range is
// refused (one item beyond the end of its DB takes its neighbours with it), its items are read
// again one by one in the same batch, and those the CPU refuses alone stay apart from then on:
// each endpoint gets its own value or the CPU's own reason. Writes go out at once, each its own
// job; a value that does not fit its type is refused before anything is sent.
//
// nodes7 was the client planned and is not used (docs/mapping.md "Protocol mapping", Siemens
// S7): it packs more than 20 items per request and throws from its socket handler (a process
// crash) when a CPU answers fewer, keeps no CPU reason per item, reports writes that timed out
// as good, does not reassemble TPKT frames split by TCP, and reconnects on timers of its own.
import { s7AddressText, s7ByteLength, type S7Address, type S7Configuration } from './s7-schemas.js';
import type { EndpointDef } from '../service-files.js';
import { AREA_CODES, maxReadLength, type S7ItemResult, type S7Range } from './s7-protocol.js';
import { openS7Session, type S7Session } from './s7-session.js';
import { decodeS7, encodeS7 } from './s7-values.js';
import { DeviceError, RefusedWriteError, type ConnectionDriver } from './types.js';

/** Byte ranges of one area at most this far apart are read as one (fewer items than the gap costs). */
const MERGE_GAP = 8;

interface PendingRead {
  address: S7Address;
  range: S7Range;
  resolve: (value: unknown) => void;
  reject: (err: Error) => void;
}

const rangeOf = (a: S7Address): S7Range => ({ area: AREA_CODES[a.area], db: a.dbNumber ?? 0, start: a.offset, length: s7ByteLength(a) });
const rangeKey = (r: S7Range) => `${r.area}/${r.db}/${r.start}/${r.length}`;

/** One read as the CPU answered it: the value, or the endpoint's error naming the address. */
function settle(p: PendingRead, result: S7ItemResult, offset = 0): void {
  if (!result.ok) return p.reject(new DeviceError(`${s7AddressText(p.address)}: ${result.reason}`));
  try {
    p.resolve(decodeS7(p.address, result.data.subarray(offset, offset + p.range.length)));
  } catch (err) {
    p.reject(err instanceof DeviceError ? new DeviceError(`${s7AddressText(p.address)}: ${err.message}`) : (err as Error));
  }
}

/** Groups reads into merged ranges: same area and DB, at most MERGE_GAP apart, within `maxLength`; `apart` never merge. */
function mergeReads(reads: PendingRead[], maxLength: number, apart: Set<string>): Array<{ range: S7Range; members: PendingRead[] }> {
  const sorted = [...reads].sort((x, y) => x.range.area - y.range.area || x.range.db - y.range.db || x.range.start - y.range.start);
  const groups: Array<{ range: S7Range; members: PendingRead[] }> = [];
  let open: { range: S7Range; members: PendingRead[] } | undefined;
  for (const read of sorted) {
    const r = read.range;
    const alone = apart.has(rangeKey(r));
    if (open && !alone && open.range.area === r.area && open.range.db === r.db && r.start <= open.range.start + open.range.length + MERGE_GAP) {
      const end = Math.max(open.range.start + open.range.length, r.start + r.length);
      if (end - open.range.start <= maxLength) {
        open.range.length = end - open.range.start;
        open.members.push(read);
        continue;
      }
    }
    open = { range: { ...r }, members: [read] };
    groups.push(open);
    if (alone) open = undefined;
  }
  return groups;
}

export function createS7Driver(cfg: S7Configuration): ConnectionDriver {
  let session: S7Session | undefined;
  let lostListener: (reason: string) => void = () => {};
  /** Ranges the CPU refused alone: read apart so they do not take their neighbours with them (per session). */
  let apart = new Set<string>();
  let queued: PendingRead[] = [];
  let batchOut = false;
  let flushScheduled = false;

  const scheduleFlush = () => {
    if (flushScheduled || batchOut) return;
    flushScheduled = true;
    setImmediate(() => {
      flushScheduled = false;
      void flush();
    });
  };

  async function flush(): Promise<void> {
    const batch = queued;
    queued = [];
    const s = session;
    if (!batch.length) return;
    if (!s) {
      for (const p of batch) p.reject(new Error('not connected'));
      return;
    }
    batchOut = true;
    try {
      await readBatch(s, batch);
    } catch (err) {
      for (const p of batch) p.reject(err as Error);
    } finally {
      batchOut = false;
      if (queued.length) scheduleFlush();
    }
  }

  async function readBatch(s: S7Session, batch: PendingRead[]): Promise<void> {
    const groups = mergeReads(batch, maxReadLength(s.pduLength), apart);
    const results = await s.read(groups.map((g) => g.range));
    const retry: PendingRead[] = [];
    groups.forEach((g, i) => {
      const result = results[i]!;
      if (!result.ok && g.members.length > 1) return void retry.push(...g.members);
      for (const p of g.members) settle(p, result, p.range.start - g.range.start);
    });
    if (!retry.length) return;
    const alone = await s.read(retry.map((p) => p.range));
    const refused = retry.filter((_p, i) => !alone[i]!.ok);
    // Keep apart those refused alone; when all read fine alone, the CPU refused the merge itself: keep them all apart.
    for (const p of refused.length ? refused : retry) apart.add(rangeKey(p.range));
    retry.forEach((p, i) => settle(p, alone[i]!));
  }

  return {
    readsTogether: true,
    async connect() {
      const s = await openS7Session(cfg);
      s.onClosed((reason) => {
        if (session !== s) return;
        session = undefined;
        lostListener(reason);
      });
      session = s;
      apart = new Set();
    },
    async disconnect() {
      const s = session;
      session = undefined;
      s?.close();
    },
    onLost(listener) {
      lostListener = listener;
    },
    read(ep: EndpointDef) {
      const address = ep.address as S7Address;
      return new Promise((resolve, reject) => {
        if (!session) return reject(new Error('not connected'));
        queued.push({ address, range: rangeOf(address), resolve, reject });
        scheduleFlush();
      });
    },
    async write(ep: EndpointDef, value: unknown) {
      const address = ep.address as S7Address;
      let data: Buffer;
      try {
        data = encodeS7(address, value);
      } catch (err) {
        throw new RefusedWriteError(`${s7AddressText(address)}: ${(err as Error).message}`);
      }
      const s = session;
      if (!s) throw new Error('not connected');
      const range = rangeOf(address);
      if (address.type === 'BOOL') range.bit = address.bit ?? 0;
      const [result] = await s.write([{ range, data }]);
      if (!result!.ok) throw new DeviceError(`${s7AddressText(address)}: the PLC refused the write: ${result!.reason}`);
    },
  };
}
