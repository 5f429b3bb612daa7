// Our own DER recordings and their mutations, for the certificate fuzz target: CSRs and
// certificates made by openssl at the start of a run (RSA, EC, Ed25519; names, SAN, key usages,
// basic constraints), each walked into its TLV elements, then changed the ways hostile encoders
// do: a length set to 0, 1, one off or its maximum, a length of length of 0x84 FF FF FF FF or
// 0x85+, the indefinite form (0x80), 10,000 nested SEQUENCEs, OIDs with huge arcs, truncation,
// elements spliced from other seeds, flipped bits. Nothing fetched, nothing third-party.
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface DerSeed {
  name: string;
  kind: 'csr' | 'cert';
  der: Buffer;
  /** Every element: where its header starts, where its content starts and ends. */
  elements: Array<{ start: number; contentStart: number; end: number; tag: number }>;
}

/** The TLV elements of valid DER (depth-first), for the structure-aware mutations. */
export function walkDer(der: Buffer): DerSeed['elements'] {
  const out: DerSeed['elements'] = [];
  const walk = (from: number, to: number, depth: number) => {
    let i = from;
    while (i < to && depth < 64) {
      const tag = der[i]!;
      const first = der[i + 1];
      if (first === undefined) return;
      let length = first;
      let header = 2;
      if (first & 0x80) {
        const n = first & 0x7f;
        if (n === 0 || n > 4) return;
        length = 0;
        for (let k = 0; k < n; k++) length = length * 256 + (der[i + 2 + k] ?? 0);
        header += n;
      }
      const end = i + header + length;
      if (end > to) return;
      out.push({ start: i, contentStart: i + header, end, tag });
      // Constructed, or a BIT/OCTET STRING that wraps DER (extension values, keys).
      if (tag & 0x20 || ((tag === 0x03 || tag === 0x04) && length > 2)) walk(i + header + (tag === 0x03 ? 1 : 0), end, depth + 1);
      i = end;
    }
  };
  walk(0, der.length, 0);
  return out;
}

/** Makes the seeds with openssl (about a second). */
export async function makeDerSeeds(): Promise<DerSeed[]> {
  const dir = await mkdtemp(join(tmpdir(), 'gatewayd-fuzz-der-'));
  const f = (n: string) => join(dir, n);
  const ssl = (...args: string[]) => run('openssl', args, { cwd: dir });
  const seeds: DerSeed[] = [];
  try {
    await writeFile(
      f('ext.cnf'),
      '[req]\ndistinguished_name=dn\n[dn]\n[ext]\nsubjectAltName=DNS:press-7.plant.local,IP:10.0.0.7,IP:fe80::1\nkeyUsage=critical,digitalSignature,keyEncipherment,keyCertSign\nextendedKeyUsage=serverAuth,clientAuth,1.3.6.1.4.1.99999.1\nbasicConstraints=critical,CA:TRUE,pathlen:2\nsubjectKeyIdentifier=hash\n',
    );
    const keys = [
      ['rsa', ['-newkey', 'rsa:2048']],
      ['ec', ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1']],
      ['ed25519', ['-newkey', 'ed25519']],
    ] as const;
    for (const [name, keyArgs] of keys) {
      const subj = `/C=DE/ST=Bayern/O=Acme Plant/OU=Line 3/OU=Cell 7/CN=press-${name}/emailAddress=ops@plant.local`;
      await ssl('req', ...keyArgs, '-nodes', '-keyout', f(`${name}.key`), '-out', f(`${name}.csr`), '-outform', 'DER', '-subj', subj, '-config', f('ext.cnf'));
      await ssl('req', '-x509', '-key', f(`${name}.key`), '-out', f(`${name}.crt`), '-outform', 'DER', '-days', '30', '-subj', subj, '-config', f('ext.cnf'), '-extensions', 'ext');
      for (const kind of ['csr', 'cert'] as const) {
        const der = await readFile(f(`${name}.${kind === 'csr' ? 'csr' : 'crt'}`));
        seeds.push({ name: `${kind}-${name}`, kind, der, elements: walkDer(der) });
      }
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  return seeds;
}

export type DerMutation =
  | { kind: 'length'; element: number; to: 'zero' | 'one' | 'minus-one' | 'plus-one' | 'max' | 'huge-long-form' | 'indefinite' | 'long-5' | 'non-minimal' }
  | { kind: 'truncate'; at: number }
  | { kind: 'flip'; at: number; bit: number }
  | { kind: 'set-byte'; at: number; value: number }
  | { kind: 'splice'; element: number; other: number; otherElement: number }
  | { kind: 'duplicate'; element: number; times: number }
  | { kind: 'nest'; element: number; depth: number }
  | { kind: 'huge-oid'; element: number; arcBytes: number }
  | { kind: 'tag'; element: number; value: number };

function encodeLength(n: number): Buffer {
  if (n < 0x80) return Buffer.from([n]);
  const bytes: number[] = [];
  for (let v = n; v > 0; v = Math.floor(v / 256)) bytes.unshift(v & 0xff);
  return Buffer.from([0x80 | bytes.length, ...bytes]);
}

/** Applies the mutations in order; element mutations address the seed's own elements (the first one only: offsets move). */
export function mutateDer(seed: DerSeed, mutations: readonly DerMutation[], seeds: readonly DerSeed[]): Buffer {
  let der: Buffer = Buffer.from(seed.der);
  let elementsValid = true;
  for (const m of mutations) {
    const at = (n: number) => (der.length ? n % der.length : 0);
    const el = 'element' in m && seed.elements.length ? seed.elements[m.element % seed.elements.length]! : undefined;
    const structural = m.kind !== 'truncate' && m.kind !== 'flip' && m.kind !== 'set-byte';
    if (structural && (!elementsValid || !el)) continue;
    switch (m.kind) {
      case 'length': {
        const length = el!.end - el!.contentStart;
        const header: Record<typeof m.to, Buffer> = {
          zero: encodeLength(0),
          one: encodeLength(1),
          'minus-one': encodeLength(Math.max(0, length - 1)),
          'plus-one': encodeLength(length + 1),
          max: Buffer.from([0x84, 0xff, 0xff, 0xff, 0xff]),
          'huge-long-form': Buffer.from([0x84, 0x7f, 0xff, 0xff, 0xff]),
          indefinite: Buffer.from([0x80]),
          'long-5': Buffer.from([0x85, 0x00, 0x00, 0x00, 0x00, length & 0xff]),
          'non-minimal': Buffer.from([0x82, (length >> 8) & 0xff, length & 0xff]),
        };
        der = Buffer.concat([der.subarray(0, el!.start + 1), header[m.to], der.subarray(el!.contentStart)]);
        if (m.to === 'indefinite') der = Buffer.concat([der, Buffer.from([0, 0])]);
        break;
      }
      case 'truncate':
        der = der.subarray(0, at(m.at));
        break;
      case 'flip':
        if (der.length) der[at(m.at)] = der[at(m.at)]! ^ (1 << (m.bit & 7));
        break;
      case 'set-byte':
        if (der.length) der[at(m.at)] = m.value & 0xff;
        break;
      case 'splice': {
        const other = seeds[m.other % seeds.length]!;
        const oe = other.elements[m.otherElement % other.elements.length];
        if (!oe) break;
        der = Buffer.concat([der.subarray(0, el!.start), other.der.subarray(oe.start, oe.end), der.subarray(el!.end)]);
        break;
      }
      case 'duplicate': {
        const copy = der.subarray(el!.start, el!.end);
        der = Buffer.concat([der.subarray(0, el!.end), ...Array.from({ length: 1 + (m.times % 200) }, () => copy), der.subarray(el!.end)]);
        break;
      }
      case 'nest': {
        // depth SEQUENCEs around one element, each with a definite length (up to 10,000 deep).
        // Headers from the inside out, then one copy (a concat per level would copy 10,000 times).
        const inner = der.subarray(el!.start, el!.end);
        const headers: Buffer[] = [];
        let length = inner.length;
        for (let d = 0; d < 1 + (m.depth % 10_000); d++) {
          const header = Buffer.concat([Buffer.from([0x30]), encodeLength(length)]);
          headers.push(header);
          length += header.length;
        }
        der = Buffer.concat([der.subarray(0, el!.start), ...headers.reverse(), inner, der.subarray(el!.end)]);
        break;
      }
      case 'huge-oid': {
        // An OID whose second arc takes arcBytes base-128 digits (2^(7 × arcBytes)).
        const arc = Buffer.concat([Buffer.alloc(Math.max(1, m.arcBytes % 4096), 0xff), Buffer.from([0x7f])]);
        const content = Buffer.concat([Buffer.from([0x2a]), arc]);
        der = Buffer.concat([der.subarray(0, el!.start), Buffer.from([0x06]), encodeLength(content.length), content, der.subarray(el!.end)]);
        break;
      }
      case 'tag':
        der[el!.start] = m.value & 0xff;
        break;
    }
    if (structural) elementsValid = false;
  }
  return der;
}
