// What a site replicates (docs/scaling-out.md "One site, one set of users", docs/design.md §17):
// logical records, each a JSON document under (kind, id), never LMDB pages. A change is the new
// document of each record it touched (null: removed); a log row is one change with its gap-free
// revision and the site's digest after it.
import { createHash } from 'node:crypto';

/** users, roles and session tokens, as the store keeps them; the site's edges and join tokens. */
export type SiteKind = 'user' | 'role' | 'token' | 'edge' | 'join';
export const SITE_KINDS: readonly SiteKind[] = ['user', 'role', 'token', 'edge', 'join'];

export interface RecordChange {
  kind: SiteKind;
  id: string;
  /** The record after the change; null: removed. */
  doc: Record<string, unknown> | null;
}

export interface LogRow {
  rev: number;
  /** The site's digest once this row is applied. */
  digest: string;
  changes: RecordChange[];
}

/** Where the authority (or a central's replica) stands. */
export interface SiteHead {
  /** PostgreSQL's system identifier, timeline and database: a failover or a restore changes it. */
  epoch: string;
  rev: number;
  digest: string;
}

export interface SiteSnapshot extends SiteHead {
  siteId: string;
  records: { kind: SiteKind; id: string; doc: Record<string, unknown> }[];
}

/** JSON with object keys in sorted order and undefined members dropped: one text per document. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map((v) => (v === undefined ? 'null' : canonicalJson(v))).join(',')}]`;
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
}

/** The document as JSON carries it (what LMDB, PostgreSQL and the wire give back). */
export function plainDoc<T>(doc: T): T {
  return JSON.parse(canonicalJson(doc)) as T;
}

export function recordHash(kind: SiteKind, id: string, docText: string): string {
  return createHash('sha256').update(kind).update('\0').update(id).update('\0').update(docText).digest('hex');
}

const MOD = 1n << 256n;
export const ZERO_DIGEST = '0'.repeat(64);

/**
 * The site's digest is the sum of its records' hashes modulo 2^256: independent of order, so a
 * change moves it by its records' old and new hashes alone, and any two replicas holding the
 * same records hold the same digest.
 */
export function moveDigest(digest: string, removed: Iterable<string>, added: Iterable<string>): string {
  let d = BigInt(`0x${digest}`);
  for (const h of removed) d -= BigInt(`0x${h}`);
  for (const h of added) d += BigInt(`0x${h}`);
  d = ((d % MOD) + MOD) % MOD;
  return d.toString(16).padStart(64, '0');
}

/** The name a record is unique by at the authority (usernames, role names). */
export function uniqueNameOf(change: RecordChange): string | null {
  if (!change.doc) return null;
  if (change.kind === 'user') return String(change.doc.username);
  if (change.kind === 'role') return String(change.doc.name);
  return null;
}
