// Backup archives as hostile hands make them (issue 35 B), written byte by byte by our own tar
// writer (the tar library refuses to write most of them): the two entries a backup holds, then
// `../`, absolute and `C:..` names, a symlink then a file through it, hard links out, FIFOs and
// devices, setuid modes, duplicates, PAX and GNU long names up to 70,000 bytes, sizes in base-256
// beyond 8 GiB, many entries, deep directories, bad checksums, truncation, trailing garbage, and
// gzip members repeated into a bomb. Nothing fetched: every archive is generated.
import { createHash } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import fc from 'fast-check';

export interface TarEntry {
  name: string;
  /** '0' file, '1' hard link, '2' symlink, '3' char device, '4' block device, '5' directory, '6' FIFO, 'x' PAX, 'L' GNU long name, 'g' global PAX. */
  type: string;
  mode?: number;
  body?: Buffer;
  /** The size written in the header, when it must differ from the body's. */
  declaredSize?: number;
  linkname?: string;
  /** Breaks the header checksum. */
  badChecksum?: boolean;
}

function octal(n: number, width: number): string {
  return n.toString(8).padStart(width - 1, '0') + '\0';
}

/** One 512-byte ustar header; sizes beyond the 11 octal digits in base-256 (GNU). */
export function tarHeader(e: TarEntry, size: number): Buffer {
  const h = Buffer.alloc(512);
  const name = Buffer.from(e.name, 'utf8');
  name.copy(h, 0, 0, Math.min(100, name.length));
  h.write(octal(e.mode ?? 0o644, 8), 100, 'latin1');
  h.write(octal(0, 8), 108, 'latin1');
  h.write(octal(0, 8), 116, 'latin1');
  if (size < 0o77777777777) h.write(octal(size, 12), 124, 'latin1');
  else {
    h[124] = 0x80;
    let v = BigInt(size);
    for (let i = 135; i > 124; i--) {
      h[i] = Number(v & 0xffn);
      v >>= 8n;
    }
  }
  h.write(octal(1_700_000_000, 12), 136, 'latin1');
  h.write(e.type, 156, 'latin1');
  if (e.linkname) Buffer.from(e.linkname, 'utf8').copy(h, 157, 0, 100);
  h.write('ustar\0', 257, 'latin1');
  h.write('00', 263, 'latin1');
  h.fill(0x20, 148, 156);
  let sum = 0;
  for (const b of h) sum += b;
  if (e.badChecksum) sum += 1;
  h.write(octal(sum, 7) + ' ', 148, 'latin1');
  return h;
}

const pad = (n: number) => Buffer.alloc((512 - (n % 512)) % 512);

/** The tar bytes of these entries (PAX and GNU long-name records where names need them), with the end marker. */
export function tarOf(entries: TarEntry[], options: { endBlocks?: number } = {}): Buffer {
  const parts: Buffer[] = [];
  for (const e of entries) {
    const body = e.body ?? Buffer.alloc(0);
    parts.push(tarHeader(e, e.declaredSize ?? body.length), body, pad(body.length));
  }
  parts.push(Buffer.alloc(512 * (options.endBlocks ?? 2)));
  return Buffer.concat(parts);
}

/** A PAX extended header carrying `path` (any length) for the entry after it. */
export function paxPath(path: string): TarEntry {
  const record = (key: string, value: string) => {
    const text = ` ${key}=${value}\n`;
    let len = text.length + 1;
    while (`${len}${text}`.length > len) len = `${len}${text}`.length;
    return `${len}${text}`;
  };
  return { name: 'PaxHeader', type: 'x', body: Buffer.from(record('path', path), 'utf8') };
}

export interface Backup {
  manifest: Record<string, unknown>;
  store: Buffer;
}

/** A manifest that matches `store` (what gatewayd writes), for this schema version. */
export function manifestFor(store: Buffer, schemaVersion: number): Record<string, unknown> {
  return {
    format: 'gatewayd-backup',
    formatVersion: 1,
    id: 'fuzz_2024-01-01T00-00-00.000Z',
    gatewaydVersion: '0.1.0',
    storeSchemaVersion: schemaVersion,
    createdAt: '2024-01-01T00:00:00.000Z',
    files: { 'db/data.mdb': { size: store.length, sha256: createHash('sha256').update(store).digest('hex') } },
  };
}

const BAD_NAMES = ['../manifest.json', '/etc/gatewayd-fuzz', 'C:..\\x', 'C:/x', '\\\\host\\share\\x', 'db/../../x', 'db/./data.mdb', './manifest.json', 'db//data.mdb', 'db/data.mdb/', 'DB/DATA.MDB', 'manifest.json\u0000x', 'x'.repeat(100), 'db/sub/data.mdb', '', '.', '..'];

export type ArchiveInput = { kind: 'gz' | 'raw'; bytes: Buffer };

/** Hostile archives around a real-looking backup (the store: random bytes; its manifest matching or not). */
export function archiveArb(schemaVersion: number): fc.Arbitrary<ArchiveInput> {
  const store = fc.uint8Array({ minLength: 0, maxLength: 2048 }).map((b) => Buffer.from(b));
  const manifestChange = fc.constantFrom('none', 'none', 'none', 'wrong-sha', 'wrong-size', 'schema', 'format', 'extra-file', 'not-json', 'huge', 'array', 'proto');
  const entryArb = (backup: { store: Buffer; manifest: Buffer }): fc.Arbitrary<TarEntry[]> =>
    fc.oneof(
      { weight: 6, arbitrary: fc.constant<TarEntry[]>([{ name: 'manifest.json', type: '0', body: backup.manifest }]) },
      { weight: 6, arbitrary: fc.constant<TarEntry[]>([{ name: 'db/data.mdb', type: '0', body: backup.store }]) },
      { weight: 1, arbitrary: fc.constant<TarEntry[]>([{ name: 'db/', type: '5', mode: 0o755 }]) },
      { weight: 2, arbitrary: fc.record({ name: fc.constantFrom(...BAD_NAMES), type: fc.constantFrom('0', '5') }).map((e) => [{ ...e, body: Buffer.from('x') }]) },
      {
        weight: 2,
        arbitrary: fc.record({ link: fc.constantFrom('/etc/passwd', '../../outside', 'db', '/tmp'), kind: fc.constantFrom('1', '2') }).map(({ link, kind }) => [
          { name: 'db', type: kind, linkname: link },
          { name: 'db/data.mdb', type: '0', body: backup.store },
        ]),
      },
      { weight: 1, arbitrary: fc.constantFrom('3', '4', '6', '7', 'S', 'V', 'Z').map((type) => [{ name: 'db/data.mdb', type }]) },
      { weight: 1, arbitrary: fc.constant<TarEntry[]>([{ name: 'db/data.mdb', type: '0', mode: 0o4755, body: backup.store }]) },
      { weight: 1, arbitrary: fc.nat(70_000).map((n) => [paxPath(`db/${'a'.repeat(n)}`), { name: 'db/data.mdb', type: '0', body: backup.store }]) },
      { weight: 1, arbitrary: fc.nat(70_000).map((n) => [{ name: '././@LongLink', type: 'L', body: Buffer.from(`${'d/'.repeat(n >> 1)}x\0`) }, { name: 'x', type: '0' }]) },
      { weight: 1, arbitrary: fc.constantFrom(0, 1, 511, 513, 0o77777777777, 8 * 1024 ** 3 + 1, 2 ** 53 - 1).map((declaredSize) => [{ name: 'db/data.mdb', type: '0', body: backup.store, declaredSize }]) },
      { weight: 1, arbitrary: fc.nat(3000).map((n) => Array.from({ length: 1 + n }, (_, i) => ({ name: `db/${'d/'.repeat(i % 50)}${i}`, type: i % 2 ? '5' : '0' }))) },
      { weight: 1, arbitrary: fc.constant<TarEntry[]>([{ name: 'manifest.json', type: '0', body: backup.manifest, badChecksum: true }]) },
    );
  return fc
    .record({ store, change: manifestChange })
    .chain(({ store, change }) => {
      let manifest: unknown = manifestFor(store, schemaVersion);
      const m = manifest as Record<string, any>;
      if (change === 'wrong-sha') m.files['db/data.mdb'].sha256 = '0'.repeat(64);
      if (change === 'wrong-size') m.files['db/data.mdb'].size = store.length + 1;
      if (change === 'schema') m.storeSchemaVersion = schemaVersion + 1;
      if (change === 'format') m.formatVersion = 2;
      if (change === 'extra-file') m.files['../x'] = { size: 1, sha256: '0'.repeat(64) };
      if (change === 'array') manifest = [m];
      let text = JSON.stringify(manifest);
      if (change === 'not-json') text = text.slice(0, -3);
      if (change === 'huge') text = JSON.stringify({ ...m, pad: 'x'.repeat(70_000) });
      if (change === 'proto') text = text.replace('{', '{"__proto__":{"polluted":1},"constructor":{"prototype":{"polluted":1}},');
      const backup = { store, manifest: Buffer.from(text) };
      return fc.record({
        entries: fc.array(entryArb(backup), { minLength: 1, maxLength: 5 }).map((lists) => lists.flat()),
        endBlocks: fc.constantFrom(2, 2, 2, 0, 1, 3),
        damage: fc.constantFrom('none', 'none', 'none', 'none', 'truncate', 'garbage', 'flip', 'no-gzip', 'gzip-garbage', 'two-members'),
        at: fc.nat(1_000_000),
      });
    })
    .map(({ entries, endBlocks, damage, at }) => {
      let tar = tarOf(entries, { endBlocks });
      if (damage === 'flip' && tar.length) tar[at % tar.length] ^= 0x40;
      if (damage === 'no-gzip') return { kind: 'raw' as const, bytes: tar };
      let gz: Buffer = gzipSync(tar, { level: 1 });
      if (damage === 'truncate') gz = gz.subarray(0, at % gz.length);
      if (damage === 'garbage') gz = Buffer.concat([gz, Buffer.from('trailing garbage')]);
      if (damage === 'gzip-garbage') gz = Buffer.concat([gz.subarray(0, 10), Buffer.from('not deflate at all')]);
      if (damage === 'two-members') gz = Buffer.concat([gz, gzipSync(Buffer.alloc(1024))]);
      return { kind: 'gz' as const, bytes: gz };
    });
}

/**
 * A gzip bomb of a backup: a valid tar header for db/data.mdb of `gib` GiB, then that many GiB
 * of zeros as repeated 1 MiB gzip members (gunzip reads concatenated members): about 1 KiB of
 * archive per MiB, generated at once.
 */
export function gzipBomb(gib: number, manifest?: Buffer): Buffer {
  const size = gib * 1024 ** 3;
  const head = Buffer.concat([manifest ? Buffer.concat([tarHeader({ name: 'manifest.json', type: '0' }, manifest.length), manifest, pad(manifest.length)]) : Buffer.alloc(0), tarHeader({ name: 'db/data.mdb', type: '0' }, size)]);
  const zeros = gzipSync(Buffer.alloc(1024 * 1024), { level: 9 });
  const members = Array.from({ length: gib * 1024 }, () => zeros);
  return Buffer.concat([gzipSync(head), ...members, gzipSync(Buffer.alloc(1024))]);
}
