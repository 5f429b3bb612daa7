// The statements of the site's authority (src/site/pg-authority.ts), each on the connection it
// is given: where the site stands, its log after a revision, a snapshot, and the next revision.
import type { Client } from 'pg';
import { NOTIFY_CHANNEL } from './pg-schema.js';
import { canonicalJson, moveDigest, recordHash, uniqueNameOf, ZERO_DIGEST, type LogRow, type RecordChange, type SiteHead, type SiteKind, type SiteSnapshot } from './site-records.js';

function rowsOf(raw: { rev: string; digest: string; changes: string }[]): LogRow[] {
  return raw.map((r) => ({ rev: Number(r.rev), digest: r.digest, changes: JSON.parse(r.changes) as RecordChange[] }));
}

export async function head(client: Client, epoch: string): Promise<SiteHead> {
  const r = await client.query<{ rev: string; digest: string }>('SELECT rev, digest FROM gatewayd_head WHERE id = 1');
  const row = r.rows[0];
  return { epoch, rev: row ? Number(row.rev) : 0, digest: row?.digest ?? ZERO_DIGEST };
}

export async function rowsSince(client: Client, rev: number, limit: number): Promise<LogRow[] | 'gap'> {
  const r = await client.query<{ rev: string; digest: string; changes: string }>('SELECT rev, digest, changes FROM gatewayd_log WHERE rev > $1 ORDER BY rev LIMIT $2', [rev, limit]);
  const rows = rowsOf(r.rows);
  if (rows.length && rows[0]!.rev !== rev + 1) return 'gap';
  return rows;
}

export async function snapshot(client: Client, epoch: string, siteId: string): Promise<SiteSnapshot> {
  const h = await head(client, epoch);
  const r = await client.query<{ kind: SiteKind; id: string; doc: string }>('SELECT kind, id, doc FROM gatewayd_record ORDER BY kind, id');
  return { ...h, siteId, records: r.rows.map((x) => ({ kind: x.kind, id: x.id, doc: JSON.parse(x.doc) as Record<string, unknown> })) };
}

/** The next revision in two round trips: the changed records out (their hashes back), then everything else in one statement. */
export async function append(q: Client, changes: RecordChange[], h: SiteHead, logRetention: number): Promise<LogRow> {
  const old = await q.query<{ hash: string }>(
    'DELETE FROM gatewayd_record r USING unnest($1::text[], $2::text[]) AS c(kind, id) WHERE r.kind = c.kind AND r.id = c.id RETURNING r.hash',
    [changes.map((c) => c.kind), changes.map((c) => c.id)],
  );
  const rev = h.rev + 1;
  const kept = changes.filter((c) => c.doc);
  const texts = kept.map((c) => canonicalJson(c.doc));
  const hashes = kept.map((c, i) => recordHash(c.kind, c.id, texts[i]!));
  const digest = moveDigest(h.digest, old.rows.map((r) => r.hash), hashes);
  await q.query(
    `WITH ins AS (
       INSERT INTO gatewayd_record (kind, id, name, doc, hash, rev)
       SELECT kind, id, name, doc, hash, $6 FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[]) AS c(kind, id, name, doc, hash)
     ), lg AS (
       INSERT INTO gatewayd_log (rev, digest, changes) VALUES ($6, $7, $8)
     ), hd AS (
       UPDATE gatewayd_head SET rev = $6, digest = $7 WHERE id = 1
     )
     SELECT pg_notify('${NOTIFY_CHANNEL}', $6::text)`,
    [kept.map((c) => c.kind), kept.map((c) => c.id), kept.map((c) => uniqueNameOf(c)), texts, hashes, rev, digest, JSON.stringify(changes)],
  );
  if (rev % 100 === 0) await q.query('DELETE FROM gatewayd_log WHERE rev <= $1', [rev - logRetention]);
  return { rev, digest, changes };
}
