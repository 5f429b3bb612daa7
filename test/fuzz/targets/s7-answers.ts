// Fuzz target: what an S7 CPU answers, through the TPKT/COTP stream reassembly (FrameReader, fed
// the stream cut at random points) and the S7 parsers (parseAnswer, then parseReadAnswer,
// parseWriteAnswer or parseSetupAnswer for what was asked). Cases: a valid answer from our
// encoders (test/fuzz/wire/s7-wire.ts: Read Var items of any length or refused, Write Var
// return codes, setup answers; a PDU in one COTP unit or several), then 0 to 3 mutations
// (test/fuzz/support/mutators.ts), and raw bytes. Oracles: only ProtocolError escapes; a
// valid answer decodes to exactly its items; the reader holds at most a frame and a PDU of the
// negotiated length.
import fc from 'fast-check';
import { ProtocolError } from '../../../src/errors/errors.js';
import { FrameReader, parseAnswer, parseReadAnswer, parseSetupAnswer, parseWriteAnswer, type S7ItemResult } from '../../../src/mapping/drivers/s7-protocol.js';
import { CaseReader, CaseWriter } from '../support/fuzz-case.js';
import { OracleError, onlyTyped, type FuzzTarget } from '../support/fuzz-target.js';
import { withCorpus } from '../support/corpus.js';
import { applyMutations, chunksAt, mutationsArbitrary, splitPointsArbitrary } from '../support/mutators.js';
import { readAnswer, refusedJob, setupAnswer, s7Fields, writeAnswer, type ReadItem } from '../wire/s7-wire.js';

const REF = 7;
const KINDS = ['read', 'write', 'setup'] as const;
type Kind = (typeof KINDS)[number];

interface S7Case {
  kind: Kind;
  pduLimit: number;
  /** read: the items; write: their return codes; setup: [granted PDU, jobs]. */
  items: ReadItem[];
  codes: number[];
  granted: [number, number];
  /** COTP data units the PDU is sent in. */
  units: number;
  splits: number[];
  stream: Uint8Array;
}

/** The answer the case's items make, as a CPU sends it. */
function validAnswer(c: Pick<S7Case, 'kind' | 'items' | 'codes' | 'granted' | 'units'>): Buffer {
  if (c.kind === 'read') return readAnswer(REF, c.items, c.units);
  if (c.kind === 'write') return writeAnswer(REF, c.codes);
  return setupAnswer(REF, c.granted[0], c.granted[1]);
}

function toCase(c: S7Case): Uint8Array {
  const w = new CaseWriter().u8(KINDS.indexOf(c.kind)).u16(c.pduLimit).u8(c.units).u16(c.granted[0]).u16(c.granted[1]);
  w.u8(c.kind === 'write' ? c.codes.length : c.items.length);
  if (c.kind === 'write') for (const code of c.codes) w.u8(code);
  else for (const item of c.items) w.bytes('data' in item ? item.data : Buffer.alloc(0));
  w.u8(c.splits.length);
  for (const s of c.splits) w.u16(s);
  return w.rest(c.stream);
}

function fromCase(bytes: Uint8Array): S7Case {
  const r = new CaseReader(bytes);
  const kind = KINDS[r.u8() % 3]!;
  const pduLimit = Math.min(960, Math.max(64, r.u16()));
  const units = Math.max(1, r.u8() % 4);
  const granted: [number, number] = [r.u16(), r.u16()];
  const n = Math.max(1, r.u8() % 21);
  const items: ReadItem[] = [];
  const codes: number[] = [];
  for (let i = 0; i < n; i++) {
    if (kind === 'write') codes.push(r.u8());
    else {
      const data = r.bytes();
      items.push(data.length ? { data } : { code: 0x0a });
    }
  }
  const splits = Array.from({ length: r.u8() % 9 }, () => r.u16());
  return { kind, pduLimit, units, granted, items, codes, splits, stream: r.rest() };
}

const item: fc.Arbitrary<ReadItem> = fc.oneof(
  { weight: 6, arbitrary: fc.uint8Array({ minLength: 1, maxLength: 24 }).map((d) => ({ data: Buffer.from(d) })) },
  { weight: 1, arbitrary: fc.constantFrom(0x05, 0x0a, 0x03).map((code) => ({ code })) },
);
const shape = fc.record({
  kind: fc.constantFrom(...KINDS),
  pduLimit: fc.constantFrom(240, 480, 960),
  items: fc.array(item, { minLength: 1, maxLength: 20 }),
  codes: fc.array(fc.constantFrom(0xff, 0xff, 0xff, 0x05, 0x0a), { minLength: 1, maxLength: 20 }),
  granted: fc.tuple(fc.constantFrom(240, 480, 960, 64, 63, 0, 0xffff), fc.constantFrom(1, 2, 8, 0, 0xffff)),
  units: fc.integer({ min: 1, max: 3 }),
});
/** Valid answers of every kind: what splices and concatenations take. */
const anyAnswer = shape.map((c) => validAnswer(c) as Uint8Array);
const structured = fc
  .record({
    shape,
    mutations: fc.oneof({ weight: 1, arbitrary: fc.constant([]) }, { weight: 6, arbitrary: mutationsArbitrary(fc.oneof(anyAnswer, fc.constant(refusedJob(REF, 0x85, 0x00) as Uint8Array))) }),
    splits: splitPointsArbitrary,
  })
  .map(({ shape: c, mutations, splits }) => {
    const valid = validAnswer(c);
    return toCase({ ...c, splits, stream: applyMutations(valid, s7Fields(valid), mutations) });
  });

/** Only what the connection allows counts as valid: the encoders' answer, a frame within the PDU length, a PDU the CPU may grant. */
function isValid(c: S7Case): boolean {
  const expected = validAnswer(c);
  return Buffer.from(c.stream).equals(expected) && expected.length <= 7 + c.pduLimit && (c.kind !== 'setup' || c.granted[0] >= 64) && (c.kind !== 'read' || c.items.every((i) => !('data' in i) || i.data.length * 8 <= 0xffff));
}

function sameResults(got: S7ItemResult[], items: ReadItem[]): boolean {
  return got.length === items.length && got.every((g, i) => {
    const it = items[i]!;
    return 'data' in it ? g.ok && g.data.equals(it.data) : !g.ok;
  });
}

/** A recorded answer (a TPKT frame from snap7) as a case: its items, codes or grant read from it. */
export function caseFromRecording(frame: Buffer): Uint8Array | undefined {
  let pdu: Buffer | undefined;
  try {
    new FrameReader((p) => (pdu = p), () => undefined, 960).push(frame);
    if (!pdu) return undefined;
    const a = parseAnswer(pdu);
    const base = { pduLimit: 960, units: 1, splits: [], stream: frame, items: [] as ReadItem[], codes: [] as number[], granted: [0, 0] as [number, number] };
    if (a.params[0] === 0xf0) {
      const g = parseSetupAnswer(a);
      return toCase({ ...base, kind: 'setup', granted: [g.pduLength, g.jobs] });
    }
    if (a.params[0] === 0x05) return toCase({ ...base, kind: 'write', codes: [...a.data.subarray(0, a.params[1])] });
    if (a.params[0] !== 0x04) return undefined;
    const items: ReadItem[] = [];
    for (let at = 0, i = 0; i < a.params[1]! && at + 4 <= a.data.length; i++) {
      const code = a.data[at]!;
      const count = a.data.readUInt16BE(at + 2);
      const bytes = [0x03, 0x04, 0x05].includes(a.data[at + 1]!) ? Math.ceil(count / 8) : count;
      items.push(code === 0xff ? { data: Buffer.from(a.data.subarray(at + 4, at + 4 + bytes)) } : { code });
      at += 4 + (code === 0xff ? bytes + (bytes % 2) : 0);
    }
    return toCase({ ...base, kind: 'read', items });
  } catch {
    return undefined;
  }
}

export const target: FuzzTarget = {
  name: 's7-answers',
  description: 'S7 answers (TPKT/COTP reassembly at random split points, then Read Var, Write Var, setup communication): valid answers from our encoders with 0-3 mutations, and raw bytes',
  valid: (bytes) => isValid(fromCase(bytes)),
  cases: withCorpus('s7-answers', fc.oneof({ weight: 8, arbitrary: structured }, { weight: 1, arbitrary: fc.uint8Array({ maxLength: 2048 }) })),
  run(bytes) {
    const c = fromCase(bytes);
    const valid = isValid(c);
    const ranges = c.items.map((it, i) => ({ area: 0x84, db: 1, start: i * 32, length: 'data' in it ? it.data.length : 2 }));
    const decoded: unknown[] = [];
    const reader = new FrameReader(
      (pdu) => {
        const answer = parseAnswer(pdu);
        decoded.push(c.kind === 'read' ? parseReadAnswer(answer, ranges) : c.kind === 'write' ? parseWriteAnswer(answer, c.codes.length) : parseSetupAnswer(answer));
      },
      () => undefined,
      c.pduLimit,
    );
    const bound = 2 * (7 + c.pduLimit);
    const outcome = onlyTyped([ProtocolError], () => {
      for (const chunk of chunksAt(Buffer.from(c.stream), c.splits)) {
        reader.push(chunk);
        if (reader.held > bound) throw new OracleError('memory', `the reader holds ${reader.held} bytes, more than a frame and a PDU (${bound})`);
      }
    });
    if (!valid) return;
    if ('refused' in outcome) throw new OracleError('wrong', `a valid ${c.kind} answer was refused: ${outcome.refused.message}`);
    if (decoded.length !== 1) throw new OracleError('wrong', `a valid ${c.kind} answer gave ${decoded.length} PDUs`);
    const got = decoded[0];
    if (c.kind === 'read' && !sameResults(got as S7ItemResult[], c.items)) throw new OracleError('wrong', 'a valid Read Var answer decoded to other items');
    if (c.kind === 'write' && !(got as Array<{ ok: boolean }>).every((r, i) => r.ok === (c.codes[i] === 0xff))) throw new OracleError('wrong', 'a valid Write Var answer decoded to other results');
    if (c.kind === 'setup') {
      const g = got as { pduLength: number; jobs: number };
      if (g.pduLength !== c.granted[0] || g.jobs !== Math.max(1, c.granted[1])) throw new OracleError('wrong', `a valid setup answer decoded to PDU ${g.pduLength}, ${g.jobs} jobs`);
    }
  },
};
