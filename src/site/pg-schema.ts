// The site's tables in PostgreSQL (docs/scaling-out.md "How a change travels"). Documents are stored as
// canonical JSON text, not jsonb: the hash of a record is the hash of exactly that text, on every
// replica. Created by the first central under the site's lock; idempotent.

/** pg_advisory_xact_lock key of every change of the site ("gwsite" in ASCII). */
export const SITE_LOCK_KEY = 113762735060069;

/** The doorbell of a new revision (its payload: the revision). */
export const NOTIFY_CHANNEL = 'gatewayd_site';

export const SCHEMA_SQL = `
CREATE TABLE IF NOT EXISTS gatewayd_site (key text PRIMARY KEY, value text NOT NULL);
CREATE TABLE IF NOT EXISTS gatewayd_head (id int PRIMARY KEY CHECK (id = 1), rev bigint NOT NULL, digest text NOT NULL);
INSERT INTO gatewayd_head (id, rev, digest) VALUES (1, 0, repeat('0', 64)) ON CONFLICT (id) DO NOTHING;
CREATE TABLE IF NOT EXISTS gatewayd_record (
  kind text NOT NULL,
  id text NOT NULL,
  name text,
  doc text NOT NULL,
  hash text NOT NULL,
  rev bigint NOT NULL,
  PRIMARY KEY (kind, id)
);
CREATE UNIQUE INDEX IF NOT EXISTS gatewayd_record_name ON gatewayd_record (kind, name) WHERE name IS NOT NULL;
CREATE TABLE IF NOT EXISTS gatewayd_log (rev bigint PRIMARY KEY, digest text NOT NULL, changes text NOT NULL, at timestamptz NOT NULL DEFAULT now());
`;
