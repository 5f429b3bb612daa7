// Connections to the site's PostgreSQL, always to the primary. gatewayd takes the hosts of the
// cluster (Patroni, pg_auto_failover, a managed service) and, like libpq's
// target_session_attrs=read-write, checks each new connection itself: neither Node driver does
// it reliably (brianc/node-postgres#1470, porsager/postgres#815). PostgreSQL's own HA decides
// which host is the primary; gatewayd adds none of its own.
import type { Client } from 'pg';
import { readFileSync } from 'node:fs';
import { ServiceUnavailableError } from '../errors/errors.js';

export interface PgHost {
  host: string;
  port: number;
}

export interface PgSettings {
  hosts: PgHost[];
  database: string;
  user: string;
  password: string;
  connectTimeoutMs: number;
  /** Client side: a hung server (a box that stopped answering) fails the query after this. */
  queryTimeoutMs: number;
  /** PEM CA file for TLS to PostgreSQL; empty: no TLS. */
  caFile: string;
}

export interface PrimaryConnection {
  client: Client;
  host: PgHost;
  /** System identifier, timeline and database of the primary: a failover or a restore changes it. */
  epoch: string;
  /** Set once the connection failed or ended: open another. */
  broken: boolean;
  close(): Promise<void>;
}

/** "host:port" → PgHost (IPv6 in brackets: "[::1]:5432"). */
export function parsePgHost(text: string): PgHost {
  const m = /^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/.exec(text.trim());
  if (!m) throw new Error(`"${text}" is not host:port`);
  return { host: m[1] ?? m[2]!, port: Number(m[3]) };
}

/** Unavailable for a while: 503 with Retry-After (docs/scaling-out.md, the failure matrix). */
export class AuthorityUnavailableError extends ServiceUnavailableError {
  constructor(message: string, retryAfterSeconds = 5) {
    super(message, retryAfterSeconds);
  }
}

let pgModule: Promise<typeof import('pg')> | undefined;
/** Loaded on a central only, when it first connects. */
const loadPg = () => (pgModule ??= import('pg'));

async function connectOne(settings: PgSettings, host: PgHost, applicationName: string): Promise<PrimaryConnection | 'standby'> {
  const { default: pg } = await loadPg();
  const client = new pg.Client({
    host: host.host,
    port: host.port,
    database: settings.database,
    user: settings.user,
    password: settings.password,
    connectionTimeoutMillis: settings.connectTimeoutMs,
    query_timeout: settings.queryTimeoutMs,
    keepAlive: true,
    application_name: applicationName,
    ...(settings.caFile ? { ssl: { ca: readFileSync(settings.caFile, 'utf8') } } : {}),
  });
  const conn: PrimaryConnection = {
    client,
    host,
    epoch: '',
    broken: false,
    close: async () => {
      conn.broken = true;
      await client.end().catch(() => undefined);
    },
  };
  // A connection that fails between queries emits 'error': it is marked and replaced.
  client.on('error', () => void (conn.broken = true));
  client.on('end', () => void (conn.broken = true));
  try {
    await client.connect();
    const role = await client.query<{ recovery: boolean; ro: string }>("SELECT pg_is_in_recovery() AS recovery, current_setting('transaction_read_only') AS ro");
    if (role.rows[0]!.recovery || role.rows[0]!.ro === 'on') {
      await conn.close();
      return 'standby';
    }
    const ids = await client.query<{ sysid: string; tli: string; dboid: string }>(
      `SELECT (SELECT system_identifier FROM pg_control_system())::text AS sysid,
              substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) AS tli,
              (SELECT oid FROM pg_database WHERE datname = current_database())::text AS dboid`,
    );
    const r = ids.rows[0]!;
    conn.epoch = `${r.sysid}.${r.tli}.${r.dboid}`;
    return conn;
  } catch (err) {
    await conn.close();
    throw err;
  }
}

/**
 * Opens a connection to the primary: the host that answered last first, then the others in
 * order. Throws AuthorityUnavailableError naming what each host said when none is a primary.
 */
export function createPrimaryConnector(settings: PgSettings, applicationName: string) {
  let preferred = 0;
  return {
    async connect(): Promise<PrimaryConnection> {
      const reasons: string[] = [];
      for (let i = 0; i < settings.hosts.length; i++) {
        const index = (preferred + i) % settings.hosts.length;
        const host = settings.hosts[index]!;
        try {
          const conn = await connectOne(settings, host, applicationName);
          if (conn === 'standby') {
            reasons.push(`${host.host}:${host.port} is a standby`);
            continue;
          }
          preferred = index;
          return conn;
        } catch (err) {
          // Never the password: pg's messages name the host, the user and the cause only.
          reasons.push(`${host.host}:${host.port}: ${(err as Error).message}`);
        }
      }
      throw new AuthorityUnavailableError(`no PostgreSQL primary reachable (${reasons.join('; ')})`);
    },
  };
}
export type PrimaryConnector = ReturnType<typeof createPrimaryConnector>;
