// One site, one set of users (docs/scaling-out.md, docs/design.md §17): PostgreSQL is the
// site's authority for identity records, every gateway keeps a full replica in its LMDB and
// decides from it. A gateway without a `site` role is not touched by any of this.
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import type { AccessEvents } from '../auth/access-events.js';
import { ConfigError, type GatewayConfig } from '../config/index.js';
import type { Part } from '../daemon.js';
import type { Logger } from '../log/index.js';
import type { Store } from '../store/index.js';
import { ADMIN_ROLE_NAME } from '../auth/bootstrap-admin.js';
import { ADMIN_ROLE_ID_KEY } from '../permissions/grant-guard.js';
import { createCentral } from './central.js';
import type { SiteIdentityWriter } from './central-writer.js';
import { createEdge } from './edge.js';
import { createSiteReplica } from './replica.js';
import type { SiteFeed } from './site-feed.js';
import { siteFiles } from './site-files.js';

export { BREAK_GLASS_NAME } from './central-writer.js';
export { EDGE_HEADER } from './site-feed.js';
export { SIGNATURE_HEADER } from './signing.js';
export type { SiteFeed } from './site-feed.js';

/** What /health, /metrics, the status page and the UI show of the site. */
export interface SiteStatus {
  role: 'central' | 'edge';
  siteId?: string;
  epoch?: string;
  revision?: number;
  digest?: string;
  /** central: following PostgreSQL; edge: following a central. */
  state: string;
  /** Seconds since the authority (central) or a central (edge) last answered. */
  ageSeconds?: number;
  central?: Record<string, unknown>;
  edge?: Record<string, unknown>;
}

export interface Site {
  role: 'central' | 'edge';
  identity: SiteIdentityWriter;
  part: Part;
  /** Centrals: what they serve the edges. */
  feed?: SiteFeed;
  /** The site's MFA key once known (seals TOTP secrets on every gateway of the site). */
  mfaKey(): Buffer | undefined;
  /** Whether a user may sign in now (edges with `offline: denyAfter`). */
  admits(userId: string): boolean;
  /** The replica holds the site (a gateway that has not reached it yet refuses the site's users). */
  ready(): boolean;
  status(): SiteStatus;
  /** The digest recomputed from every record the replica holds (an audit of the running one). */
  recomputeDigest(): string;
}

/**
 * The access events the users, roles and tokens services raise, on a gateway of a site: their
 * 'permissions' events stay out, because the replica raises its own for every change it applies
 * (this gateway's too), and those say whether a grant was lost — a gain must not close a
 * cluster's sessions that another central admitted. Their other events pass (a second
 * 'revoked' or 'deleted' for one change closes nothing more).
 */
export function siteDomainEvents(events: AccessEvents): AccessEvents {
  return {
    emit: (change) => {
      if (change.kind !== 'permissions') events.emit(change);
    },
    on: (listener) => events.on(listener),
  };
}

function secretFrom(value: string, file: string, key: string): string {
  if (!file) return value;
  try {
    return readFileSync(file, 'utf8').trim();
  } catch (err) {
    throw new ConfigError(key, `cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
  }
}

export function createSite(deps: { config: GatewayConfig; store: Store; events: AccessEvents; log: Logger; localMfaKey: () => Buffer }): Site | undefined {
  const { config, store, events } = deps;
  const site = { ...config.site, name: config.site.name || hostname() };
  if (site.role === 'none') return undefined;
  const log = deps.log.child({ part: 'site' });
  const replica = createSiteReplica({ store, events, keepLog: site.role === 'central' ? Math.min(site.logRetention, 10_000) : 0 });
  const files = siteFiles(config.dataDir);
  // The site's `admin` role is the root of delegation here too (docs/design.md §13), whatever
  // this gateway's own was before it joined.
  replica.onApplied(() => {
    const id = store.roleNames.get(ADMIN_ROLE_NAME);
    if (id && replica.isSiteRecord('role', id) && store.meta.get(ADMIN_ROLE_ID_KEY) !== id) store.meta.put(ADMIN_ROLE_ID_KEY, id).catch((err: unknown) => store.noteWriteFailure(err));
  });
  const base = () => {
    const s = replica.state();
    return s ? { siteId: s.siteId, epoch: s.epoch, revision: s.rev, digest: s.digest } : {};
  };
  const ready = () => replica.state() !== undefined;

  if (site.role === 'central') {
    const central = createCentral({
      site,
      pgPassword: secretFrom(site.postgres.password, site.postgres.passwordFile, 'site.postgres.passwordFile'),
      store,
      replica,
      docs: replica.docsTable,
      files,
      localMfaKey: deps.localMfaKey,
      log,
    });
    return {
      role: 'central',
      identity: central.identity,
      part: central.part,
      feed: central.feed,
      mfaKey: central.mfaKey,
      admits: () => true,
      ready,
      recomputeDigest: () => replica.recomputeDigest(),
      status() {
        const c = central.status();
        return {
          role: 'central',
          ...base(),
          state: c.following ? 'following' : 'offline',
          ...(c.lastContactAt ? { ageSeconds: Math.max(0, Math.round((Date.now() - c.lastContactAt) / 1000)) } : {}),
          central: c,
        };
      },
    };
  }
  const edge = createEdge({
    site,
    joinToken: () => secretFrom(site.joinToken, site.joinTokenFile, 'site.joinTokenFile'),
    store,
    replica,
    docs: replica.docsTable,
    files,
    events,
    log,
  });
  return {
    role: 'edge',
    identity: edge.identity,
    part: edge.part,
    mfaKey: edge.mfaKey,
    admits: edge.admits,
    ready,
    recomputeDigest: () => replica.recomputeDigest(),
    status() {
      const e = edge.status();
      return { role: 'edge', ...base(), state: e.phase, ...(e.ageSeconds !== undefined ? { ageSeconds: e.ageSeconds } : {}), edge: e };
    },
  };
}
