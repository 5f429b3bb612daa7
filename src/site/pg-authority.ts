// The site's authority on PostgreSQL (docs/design.md §17): the records, a gap-free log of
// changes and the head (revision, digest). Every change is one transaction under an advisory
// lock, so revisions commit in their order (sequences commit out of order); NOTIFY after it is
// a doorbell only, followers poll behind it. Centrals are the only clients; edges never reach
// PostgreSQL.
import { generateKeyPairSync, randomBytes, randomUUID } from 'node:crypto';
import { AppError, ConflictError } from '../errors/errors.js';
import type { Logger } from '../log/index.js';
import { oneAtATime } from './one-at-a-time.js';
import { AuthorityUnavailableError, createPrimaryConnector, type PgSettings, type PrimaryConnection } from './pg-connection.js';
import { NOTIFY_CHANNEL, SCHEMA_SQL, SITE_LOCK_KEY } from './pg-schema.js';
import { append, head, rowsSince, snapshot } from './pg-statements.js';
import { ZERO_DIGEST, type LogRow, type RecordChange, type SiteHead, type SiteSnapshot } from './site-records.js';

/** What every central of a site shares, kept in PostgreSQL (created by the first central). */
export interface SiteSecrets {
  siteId: string;
  /** Ed25519 private key (PKCS#8 PEM): signs snapshots and changes for the edges. */
  signingKeyPem: string;
  /** The AES-256 key that seals the site's TOTP secrets (hex). */
  mfaKeyHex: string;
}

export interface WriteSession {
  epoch: string;
  head(): Promise<SiteHead>;
  rowsSince(rev: number, limit: number): Promise<LogRow[] | 'gap'>;
  snapshot(): Promise<SiteSnapshot>;
  /** Writes a change as the next revision; answers its log row. Names taken: 409. */
  append(changes: RecordChange[], head: SiteHead): Promise<LogRow>;
}

const SESSION_SETTINGS = [
  // A central that hangs inside a change (SIGSTOP) must not hold the site's lock for good.
  'SET idle_in_transaction_session_timeout = 5000',
  'SET lock_timeout = 8000',
];

/** SQLSTATE classes that mean "this connection or server cannot serve now", not a bad request. */
function unavailable(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  if (typeof code !== 'string') return true; // connection ended, client timeout, refused
  return /^(08|53|57|58)/.test(code) || code === '25006' /* read-only: a demoted primary */ || code === '55P03' /* lock timeout */;
}

async function withConnectionSettings(conn: PrimaryConnection): Promise<PrimaryConnection> {
  for (const sql of SESSION_SETTINGS) await conn.client.query(sql);
  return conn;
}

export function createPgAuthority(deps: { settings: PgSettings; log: Logger; logRetention: number }) {
  const { settings, log } = deps;
  const connector = createPrimaryConnector(settings, 'gatewayd');
  let writer: PrimaryConnection | undefined;
  /** One change at a time from this process (the site's lock orders the centrals). */
  const serialized = oneAtATime();

  async function writerConnection(): Promise<PrimaryConnection> {
    if (writer && !writer.broken) return writer;
    writer = undefined;
    writer = await withConnectionSettings(await connector.connect());
    log.info('site authority: connected to the PostgreSQL primary', { host: `${writer.host.host}:${writer.host.port}` });
    return writer;
  }

  let secrets: SiteSecrets | undefined;

  /** Runs body in one transaction holding the site's lock; one at a time per process. */
  function withWriteLock<T>(body: (session: WriteSession) => Promise<T>): Promise<T> {
    return serialized(async () => {
      const conn = await writerConnection();
      const q = conn.client;
      try {
        // One round trip: the transaction, the site's lock, and where the site stands under it.
        const opened = (await q.query(`BEGIN; SELECT pg_advisory_xact_lock(${SITE_LOCK_KEY}); SELECT rev, digest FROM gatewayd_head WHERE id = 1`)) as unknown as { rows: { rev: string; digest: string }[] }[];
        const at = opened[2]!.rows[0];
        // Nobody else writes while the lock is held: the head stays what it was until this session appends.
        let current: SiteHead = { epoch: conn.epoch, rev: at ? Number(at.rev) : 0, digest: at?.digest ?? ZERO_DIGEST };
        const session: WriteSession = {
          epoch: conn.epoch,
          head: async () => current,
          rowsSince: (rev, limit) => rowsSince(q, rev, limit),
          snapshot: () => snapshot(q, conn.epoch, secrets!.siteId),
          append: async (changes, h) => {
            const row = await append(q, changes, h, deps.logRetention);
            current = { epoch: conn.epoch, rev: row.rev, digest: row.digest };
            return row;
          },
        };
        const result = await body(session);
        await q.query('COMMIT');
        return result;
      } catch (err) {
        // The services' own refusals (and the replica's) end the transaction, not the connection.
        const decided = err instanceof AppError || (err instanceof Error && err.name === 'ReplicaRefusal');
        if (!decided && (conn.broken || unavailable(err))) {
          await conn.close();
          if (writer === conn) writer = undefined;
          log.warn('site authority: a change could not be written', { error: (err as Error).message });
          throw new AuthorityUnavailableError('the site\'s authority (PostgreSQL) cannot be written now; try again shortly');
        }
        await q.query('ROLLBACK').catch(() => undefined);
        if ((err as { code?: unknown }).code === '23505') throw new ConflictError('the name is already taken at the site');
        throw err;
      }
    });
  }

  return {
    /**
     * Creates the tables and the site's secrets when missing (the first central of a site), and
     * answers the secrets. `initialMfaKey`: the key this gateway sealed its TOTP secrets with,
     * which a new site adopts.
     */
    async prepare(initialMfaKey: Buffer): Promise<SiteSecrets> {
      const conn = await writerConnection();
      const q = conn.client;
      try {
        await q.query('BEGIN');
        await q.query('SELECT pg_advisory_xact_lock($1)', [SITE_LOCK_KEY]);
        await q.query(SCHEMA_SQL);
        const { privateKey } = generateKeyPairSync('ed25519');
        const fresh: Record<string, string> = {
          siteId: randomUUID(),
          signingKeyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
          mfaKeyHex: (initialMfaKey.length === 32 ? initialMfaKey : randomBytes(32)).toString('hex'),
        };
        for (const [key, value] of Object.entries(fresh)) await q.query('INSERT INTO gatewayd_site (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING', [key, value]);
        const r = await q.query<{ key: string; value: string }>('SELECT key, value FROM gatewayd_site');
        await q.query('COMMIT');
        const kv = Object.fromEntries(r.rows.map((x) => [x.key, x.value]));
        secrets = { siteId: kv.siteId!, signingKeyPem: kv.signingKeyPem!, mfaKeyHex: kv.mfaKeyHex! };
        return secrets;
      } catch (err) {
        await conn.close();
        writer = undefined;
        if (unavailable(err)) throw new AuthorityUnavailableError(`the site's authority cannot be prepared: ${(err as Error).message}`);
        throw err;
      }
    },
    withWriteLock,

    /** A reader of its own for a central's follower: head, rows, snapshots, and the doorbell. */
    async openFollower(onDoorbell: () => void): Promise<{ conn: PrimaryConnection; head(): Promise<SiteHead>; rowsSince(rev: number, limit: number): Promise<LogRow[] | 'gap'>; snapshot(): Promise<SiteSnapshot> }> {
      const conn = await withConnectionSettings(await connector.connect());
      conn.client.on('notification', () => onDoorbell());
      await conn.client.query(`LISTEN ${NOTIFY_CHANNEL}`);
      const c = conn.client;
      return {
        conn,
        head: () => head(c, conn.epoch),
        rowsSince: (rev, limit) => rowsSince(c, rev, limit),
        async snapshot() {
          await c.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
          try {
            const s = await snapshot(c, conn.epoch, secrets!.siteId);
            await c.query('COMMIT');
            return s;
          } catch (err) {
            await c.query('ROLLBACK').catch(() => undefined);
            throw err;
          }
        },
      };
    },
    secrets: () => secrets,
    async close(): Promise<void> {
      await serialized(async () => undefined);
      await writer?.close();
      writer = undefined;
    },
  };
}
export type PgAuthority = ReturnType<typeof createPgAuthority>;
