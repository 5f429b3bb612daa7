// A central gateway of a site (docs/scaling-out.md): it writes the site's identity changes to
// PostgreSQL, follows PostgreSQL into its replica, and serves the edges. All centrals are active
// and alike; PostgreSQL's own HA picks the primary they write to.
import type { Database } from 'lmdb';
import type { GatewayConfig } from '../config/index.js';
import type { Part } from '../daemon.js';
import type { Logger } from '../log/index.js';
import type { IndexKey, Store } from '../store/index.js';
import { createCentralSync } from './central-sync.js';
import { createCentralWriter } from './central-writer.js';
import { dropLocalIdentity } from './edge-join.js';
import { createPgAuthority, type SiteSecrets } from './pg-authority.js';
import { AuthorityUnavailableError, parsePgHost, type PgSettings } from './pg-connection.js';
import type { SiteReplica } from './replica.js';
import { createSiteFeed } from './site-feed.js';
import type { siteFiles } from './site-files.js';
import type { RecordChange } from './site-records.js';
import { createSiteSigner, type SiteSigner } from './signing.js';

export function pgSettingsOf(site: GatewayConfig['site'], password: string): PgSettings {
  return {
    hosts: site.postgres.hosts.map(parsePgHost),
    database: site.postgres.database,
    user: site.postgres.user,
    password,
    connectTimeoutMs: site.postgres.connectTimeoutMs,
    queryTimeoutMs: site.postgres.queryTimeoutMs,
    caFile: site.postgres.caFile,
  };
}

export function createCentral(deps: {
  site: GatewayConfig['site'];
  pgPassword: string;
  store: Store;
  replica: SiteReplica;
  docs: () => Database<Record<string, unknown>, IndexKey>;
  files: ReturnType<typeof siteFiles>;
  /** The key this gateway sealed TOTP secrets with so far (a new site adopts it). */
  localMfaKey: () => Buffer;
  log: Logger;
}) {
  const { site, store, replica, files, log } = deps;
  const authority = createPgAuthority({ settings: pgSettingsOf(site, deps.pgPassword), log, logRetention: site.logRetention });
  const sync = createCentralSync({ authority, replica, log, pollIntervalMs: site.pollIntervalMs });
  const identity = createCentralWriter({ store, replica, authority, sync, docs: deps.docs });
  let secrets: SiteSecrets | undefined = files.central();
  let signer: SiteSigner | undefined = secrets ? createSiteSigner(secrets.signingKeyPem) : undefined;
  const feed = createSiteFeed({ replica, identity, signer: () => signer, mfaKeyHex: () => secrets?.mfaKeyHex, log });

  /** This gateway's identity records as changes (the first central of an empty site brings them). */
  function localRecords(): RecordChange[] {
    const out: RecordChange[] = [];
    for (const { key, value } of store.users.getRange()) out.push({ kind: 'user', id: key, doc: value as unknown as Record<string, unknown> });
    for (const { key, value } of store.roles.getRange()) out.push({ kind: 'role', id: key, doc: value as unknown as Record<string, unknown> });
    for (const { key, value } of store.tokens.getRange()) out.push({ kind: 'token', id: key, doc: value as unknown as Record<string, unknown> });
    return out;
  }

  /** Reaches the site once: its keys, and the replica up to date (or the site seeded). */
  async function reach(): Promise<void> {
    const s = await authority.prepare(deps.localMfaKey());
    if (!secrets || secrets.signingKeyPem !== s.signingKeyPem || secrets.mfaKeyHex !== s.mfaKeyHex || secrets.siteId !== s.siteId) files.saveCentral(s);
    secrets = s;
    signer = createSiteSigner(s.signingKeyPem);
    await sync.exclusive(async () => {
      let seed: { row: Awaited<ReturnType<import('./pg-authority.js').WriteSession['append']>>; epoch: string } | undefined;
      await authority.withWriteLock(async (session) => {
        const head = await session.head();
        if (head.rev > 0 && !replica.state()) {
          // A site that has users already: they replace this gateway's own.
          const dropped = await dropLocalIdentity(store, replica, false);
          if (dropped) log.warn('this gateway\'s own users, roles and tokens were replaced by the site\'s', { records: dropped });
        }
        const local = head.rev === 0 && !replica.state() ? localRecords() : [];
        if (local.length === 0) return sync.catchUp(session);
        // An empty site and a gateway that has users: they become the site's.
        await replica.init({ epoch: session.epoch, rev: 0, digest: head.digest, siteId: s.siteId });
        seed = { row: await session.append(local, head), epoch: session.epoch };
      });
      if (seed) {
        await replica.applyRow(seed.row, seed.epoch, { emitEvents: false });
        log.info('the site was empty: this gateway\'s users, roles and tokens are now the site\'s', { records: seed.row.changes.length });
      }
    });
  }

  const part: Part = {
    name: 'site',
    async start() {
      const deadline = Date.now() + site.startTimeoutSeconds * 1000;
      // A central that has a replica starts at once (logins go on from it) and reaches the site
      // in the background; a new one must reach it first, or it would refuse everyone.
      for (let attempt = 0; ; attempt++) {
        try {
          await reach();
          break;
        } catch (err) {
          if (!(err instanceof AuthorityUnavailableError)) throw err;
          if (replica.state() && secrets) {
            log.warn('the site\'s PostgreSQL is not reachable: starting from the replica', { error: err.message });
            break;
          }
          if (Date.now() > deadline) throw new Error(`the site's PostgreSQL was not reachable within ${site.startTimeoutSeconds} s and this central has no replica yet: ${err.message}`);
          if (attempt === 0) log.warn('waiting for the site\'s PostgreSQL', { error: err.message });
          await new Promise((r) => setTimeout(r, 1000));
        }
      }
      sync.start();
    },
    async stop() {
      await sync.stop();
      await authority.close();
    },
  };

  return {
    identity,
    feed,
    part,
    mfaKey: () => (secrets ? Buffer.from(secrets.mfaKeyHex, 'hex') : undefined),
    status() {
      const s = sync.status();
      return { following: s.following, lastContactAt: s.lastContactAt, resyncs: s.resyncs, applied: s.applied, ...(s.lastError ? { lastError: s.lastError } : {}), edges: feed.edges() };
    },
  };
}
export type Central = ReturnType<typeof createCentral>;
