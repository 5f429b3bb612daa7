// Fuzz target: the certificate parsers of src/certs (issue 35 B) — the trusted-certificate
// upload (splitPemCertificates, describeCertificate: PEM, Base64, Node's X509Certificate and the
// gateway's own DER walk over forge's ASN.1 decoder) and self-registration's CSRs
// (parseAndVerifyCsr, csrSubject). Inputs: openssl-made CSRs and certificates mutated as
// wire/der-corpus.ts does, and PEM texts built of such blocks (other labels, private keys, 101
// blocks, a missing END, Base64 damage). Oracles: only BadRequestError (400) escapes; a
// certificate accepted is one Node's X509Certificate reads, with the fingerprint of its DER; a
// CSR accepted is one `openssl req -verify` verifies (checked after the time box, for every
// distinct accepted CSR); ≤ 50 ms of CPU per input ≤ 64 KiB; buffers ≤ 16 × input + 64 KiB.
import { execFile } from 'node:child_process';
import { createHash, X509Certificate } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import fc from 'fast-check';
import { csrSubject, describeCertificate, splitPemCertificates } from '../../../src/certs/index.js';
import { parseAndVerifyCsr } from '../../../src/certs/csr.js';
import { derToPem } from '../../../src/certs/pem.js';
import { BadRequestError } from '../../../src/errors/errors.js';
import { makeDerSeeds, mutateDer, type DerMutation, type DerSeed } from '../wire/der-corpus.js';
import { FuzzFinding, typedTarget, type TypedTarget } from '../support/typed-target.js';

const run = promisify(execFile);

type Mode = 'cert' | 'csr-der' | 'csr-pem' | 'pem-text';
const MODES: Mode[] = ['cert', 'csr-der', 'csr-pem', 'pem-text'];

export interface CertsInput {
  mode: Mode;
  bytes: Buffer;
}

export interface CertsState {
  seeds: DerSeed[];
  /** A sample of the accepted CSRs over the whole run (at most SAMPLE), checked with openssl after it. */
  acceptedCsrs: Map<string, Buffer>;
  /** Accepted CSRs seen (the sample's denominator). */
  acceptedSeen: number;
  /** Certificates Node reads but the gateway refuses (a difference, logged, not a failure). */
  refusedButReadable: number;
}

function derMutationArb(): fc.Arbitrary<DerMutation> {
  const at = fc.nat(100_000);
  const element = fc.nat(200);
  return fc.oneof(
    { weight: 4, arbitrary: fc.record({ kind: fc.constant('length' as const), element, to: fc.constantFrom('zero', 'one', 'minus-one', 'plus-one', 'max', 'huge-long-form', 'indefinite', 'long-5', 'non-minimal') as fc.Arbitrary<'zero'> }) },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant('truncate' as const), at }) },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant('flip' as const), at, bit: fc.nat(7) }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('set-byte' as const), at, value: fc.constantFrom(0, 1, 0x7f, 0x80, 0x81, 0x84, 0xff, 0x30, 0x31, 0x05, 0x06, 0x1f) }) },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant('splice' as const), element, other: fc.nat(20), otherElement: fc.nat(200) }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('duplicate' as const), element, times: fc.nat(200) }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('nest' as const), element, depth: fc.oneof(fc.nat(300), fc.constant(9_999)) }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('huge-oid' as const), element, arcBytes: fc.oneof(fc.nat(16), fc.constant(4_000)) }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('tag' as const), element, value: fc.nat(255) }) },
  );
}

/** PEM text around mutated blocks: labels, counts, Base64 damage, text between. */
function pemTextArb(seeds: () => DerSeed[]): fc.Arbitrary<Buffer> {
  const block = fc.record({
    seed: fc.nat(20),
    mutations: fc.array(derMutationArb(), { maxLength: 2 }),
    label: fc.constantFrom('CERTIFICATE', 'CERTIFICATE', 'CERTIFICATE', 'PRIVATE KEY', 'EC PRIVATE KEY', 'CERTIFICATE REQUEST', 'X509 CRL', 'CERTIFICATE '),
    damage: fc.constantFrom('none', 'none', 'none', 'no-end', 'bad-base64', 'padding', 'crlf', 'spaces', 'empty'),
    repeat: fc.oneof({ weight: 30, arbitrary: fc.constant(1) }, { weight: 1, arbitrary: fc.constant(101) }),
  });
  return fc.record({ blocks: fc.array(block, { minLength: 1, maxLength: 3 }), between: fc.constantFrom('', '\n', 'Subject: x\n', '\u0000', '-----BEGIN ', '😀\n') }).map(({ blocks, between }) => {
    const parts: string[] = [];
    for (const b of blocks) {
      const list = seeds();
      const seed = list[b.seed % list.length]!;
      let pem = derToPem(mutateDer(seed, b.mutations, list), b.label);
      if (b.damage === 'no-end') pem = pem.replace(/-----END [^-]+-----\n?$/, '');
      if (b.damage === 'bad-base64') pem = pem.replace(/\n([A-Za-z0-9+/]{10})/, '\n$1*');
      if (b.damage === 'padding') pem = pem.replace(/\n-----END/, '===\n-----END');
      if (b.damage === 'crlf') pem = pem.replaceAll('\n', '\r\n');
      if (b.damage === 'spaces') pem = pem.replace(/\n/g, ' \t\n ');
      if (b.damage === 'empty') pem = `-----BEGIN ${b.label}-----\n-----END ${b.label}-----\n`;
      for (let i = 0; i < b.repeat; i++) parts.push(pem, between);
    }
    return Buffer.from(parts.join(''), 'utf8');
  });
}

export function certsInputArb(seeds: () => DerSeed[]): fc.Arbitrary<CertsInput> {
  const mutated = (kind: 'csr' | 'cert') =>
    fc.record({ seed: fc.nat(20), mutations: fc.array(derMutationArb(), { minLength: 1, maxLength: 3 }) }).map(({ seed, mutations }) => {
      const list = seeds().filter((s) => s.kind === kind);
      return mutateDer(list[seed % list.length]!, mutations, seeds());
    });
  return fc.oneof(
    { weight: 3, arbitrary: mutated('cert').map((bytes) => ({ mode: 'cert' as const, bytes })) },
    { weight: 3, arbitrary: mutated('csr').map((bytes) => ({ mode: 'csr-der' as const, bytes })) },
    { weight: 1, arbitrary: mutated('csr').map((bytes) => ({ mode: 'csr-pem' as const, bytes: Buffer.from(derToPem(bytes, 'CERTIFICATE REQUEST')) })) },
    { weight: 2, arbitrary: pemTextArb(seeds).map((bytes) => ({ mode: 'pem-text' as const, bytes })) },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 4096 }).map((b) => ({ mode: 'csr-der' as const, bytes: Buffer.from(b) })) },
  );
}

/** Runs `parse`; a BadRequestError is a refusal, anything else thrown is a finding. */
function refusedOrAccepted<T>(what: string, parse: () => T): T | undefined {
  try {
    return parse();
  } catch (err) {
    if (err instanceof BadRequestError) return undefined;
    const e = err as Error;
    throw new FuzzFinding(`${what} threw ${e?.constructor?.name ?? typeof err} instead of a 400: ${String(e?.message ?? err).slice(0, 300)}`);
  }
}

function checkCertificates(state: CertsState, text: string): void {
  const accepted = refusedOrAccepted('splitPemCertificates', () => splitPemCertificates(text));
  for (const pem of accepted ?? []) {
    const record = refusedOrAccepted('describeCertificate', () => describeCertificate(pem, true));
    if (!record) throw new FuzzFinding('a certificate splitPemCertificates accepted was refused by describeCertificate');
    const der = Buffer.from(pem.replace(/-----[^-]+-----|\s/g, ''), 'base64');
    try {
      new X509Certificate(der);
    } catch {
      throw new FuzzFinding('a certificate the gateway accepted is one Node cannot read');
    }
    if (record.id !== createHash('sha256').update(der).digest('hex')) throw new FuzzFinding('the id of an accepted certificate is not the SHA-256 of its DER');
  }
}

/** CSRs openssl checks after a run: about 2 s of openssl, within the runner's minute after the cases. */
const SAMPLE = 200;

/**
 * Keeps a uniform sample of the distinct accepted CSRs over the whole run (reservoir sampling,
 * its choice drawn from the CSR's hash: the same run keeps the same sample), not the first 200
 * (a long run's later inputs were never checked).
 */
function sampleAccepted(state: CertsState, der: Buffer): void {
  const hash = createHash('sha256').update(der).digest();
  const id = hash.toString('hex');
  if (state.acceptedCsrs.has(id)) return;
  state.acceptedSeen++;
  if (state.acceptedCsrs.size < SAMPLE) {
    state.acceptedCsrs.set(id, Buffer.from(der));
    return;
  }
  const slot = hash.readUInt32BE(0) % state.acceptedSeen;
  if (slot >= SAMPLE) return;
  const evicted = [...state.acceptedCsrs.keys()][slot]!;
  state.acceptedCsrs.delete(evicted);
  state.acceptedCsrs.set(id, Buffer.from(der));
}

export const certsTarget: TypedTarget<CertsInput, CertsState> = {
  name: 'certs',
  description: 'only BadRequestError escapes; an accepted certificate is readable by node:crypto X509Certificate with id = SHA-256 of its DER; an accepted CSR verifies with `openssl req -verify`; ≤ 50 ms of CPU per input ≤ 64 KiB; buffers ≤ 16 × input + 64 KiB',
  arbitrary: (state) => certsInputArb(() => state.seeds),
  encode: (input) => Buffer.concat([Buffer.from([MODES.indexOf(input.mode)]), input.bytes]),
  decode: (bytes) => ({ mode: MODES[bytes[0]! % MODES.length]!, bytes: bytes.subarray(1) }),
  async setup() {
    return { seeds: await makeDerSeeds(), acceptedCsrs: new Map(), acceptedSeen: 0, refusedButReadable: 0 };
  },
  async teardown() {},
  async execute(state, input) {
    switch (input.mode) {
      case 'cert': {
        checkCertificates(state, derToPem(input.bytes, 'CERTIFICATE'));
        let readable = false;
        try {
          new X509Certificate(input.bytes);
          readable = true;
        } catch {
          // refused by both
        }
        if (readable && !refusedOrAccepted('splitPemCertificates', () => splitPemCertificates(derToPem(input.bytes, 'CERTIFICATE')))) state.refusedButReadable++;
        break;
      }
      case 'csr-der': {
        const csr = refusedOrAccepted('parseAndVerifyCsr', () => parseAndVerifyCsr(input.bytes));
        if (csr) sampleAccepted(state, input.bytes);
        break;
      }
      case 'csr-pem':
        refusedOrAccepted('csrSubject', () => csrSubject(input.bytes.toString('utf8')));
        break;
      case 'pem-text':
        checkCertificates(state, input.bytes.toString('utf8'));
        break;
    }
  },
  /** Every distinct CSR the gateway accepted must verify with openssl too. */
  async afterRun(state) {
    const dir = await mkdtemp(join(tmpdir(), 'gatewayd-fuzz-csr-'));
    try {
      for (const [id, der] of state.acceptedCsrs) {
        await writeFile(join(dir, 'csr.der'), der);
        try {
          await run('openssl', ['req', '-inform', 'DER', '-in', join(dir, 'csr.der'), '-verify', '-noout']);
        } catch (err) {
          throw new FuzzFinding(`the gateway accepted a CSR openssl does not verify (${id}): ${String((err as { stderr?: string }).stderr ?? err).slice(0, 300)}`, { cause: { input: Buffer.concat([Buffer.from([1]), der]) } });
        }
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    return [`${state.acceptedCsrs.size} distinct accepted CSRs (of ${state.acceptedSeen}) verified by openssl; ${state.refusedButReadable} certificates node:crypto reads were refused by the gateway's stricter walk`];
  },
};

/** The runner's form of it (test/fuzz/support/typed-target.ts). */
export const target = typedTarget(certsTarget);
