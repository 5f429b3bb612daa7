// An edge gateway of a site (docs/scaling-out.md "On an edge"): it decides from its replica of the
// site's records, keeps it up to date through its link to the centrals, and — cut off — goes on
// with what it last knew: for good (`offline: extend`, the default) or, with `denyAfter`, refusing
// the site's users once the link has been down that long (its break-glass administrator stays).
import type { Database } from 'lmdb';
import type { AccessEvents } from '../auth/access-events.js';
import type { GatewayConfig } from '../config/index.js';
import type { Part } from '../daemon.js';
import type { Logger } from '../log/index.js';
import type { IndexKey, Store } from '../store/index.js';
import { createEdgeLink } from './edge-link.js';
import { createEdgeWriter } from './edge-writer.js';
import type { SiteReplica } from './replica.js';
import { createSiteClient } from './site-client.js';
import type { siteFiles } from './site-files.js';

export type OfflineState = 'fresh' | 'stale' | 'denying';

export function createEdge(deps: {
  site: GatewayConfig['site'];
  joinToken: () => string;
  store: Store;
  replica: SiteReplica;
  docs: () => Database<Record<string, unknown>, IndexKey>;
  files: ReturnType<typeof siteFiles>;
  events: AccessEvents;
  log: Logger;
  now?: () => number;
}) {
  const { site, store, replica, events, log } = deps;
  const now = deps.now ?? Date.now;
  const client = createSiteClient({ urls: site.centrals, caFile: site.caFile });
  const link = createEdgeLink({ store, replica, client, files: deps.files, joinToken: deps.joinToken, name: site.name, longPollSeconds: site.longPollSeconds, log, now });
  const identity = createEdgeWriter({ store, replica, docs: deps.docs, centrals: site.centrals });
  let offline: OfflineState = 'fresh';
  let watch: NodeJS.Timeout | undefined;

  /** Seconds since a central last answered (undefined: never). */
  const ageSeconds = (): number | undefined => {
    const at = link.status().lastContactAt;
    return at ? Math.max(0, (now() - at) / 1000) : undefined;
  };

  function offlineState(): OfflineState {
    const age = ageSeconds();
    if (age === undefined) return 'fresh';
    if (site.offline === 'denyAfter' && age > site.denyAfterMinutes * 60) return 'denying';
    return age > site.staleAfterMinutes * 60 ? 'stale' : 'fresh';
  }

  function review(): void {
    const next = offlineState();
    if (next === offline) return;
    const before = offline;
    offline = next;
    if (next === 'fresh') {
      log.info('site link fresh again', { was: before });
      return;
    }
    log.audit(next === 'denying' ? 'identity.denying' : 'identity.stale', { ageSeconds: Math.round(ageSeconds() ?? 0), offline: site.offline });
    if (next === 'denying') {
      // Sessions of the site's users end; their next logins are refused (admits) until the link is back.
      for (const { key } of store.users.getRange()) if (replica.isSiteRecord('user', key)) events.emit({ userId: key, kind: 'revoked' });
    }
  }

  const part: Part = {
    name: 'site',
    async start() {
      // Nothing at the edge needs the centre at boot: a joined edge starts from its replica at
      // once; a new one tries to join for a while, then goes on in the background.
      await link.start(link.joined() && replica.state() ? 0 : site.startTimeoutSeconds * 1000);
      review();
      watch = setInterval(review, 5000);
      watch.unref();
    },
    async stop() {
      clearInterval(watch);
      await link.stop();
    },
  };

  return {
    identity,
    part,
    link,
    mfaKey: () => {
      const joined = link.joined();
      return joined?.mfaKeyHex ? Buffer.from(joined.mfaKeyHex, 'hex') : undefined;
    },
    /** Whether a user may sign in now: the site's users not while `denyAfter` has passed. */
    admits: (userId: string): boolean => offlineState() !== 'denying' || !replica.isSiteRecord('user', userId),
    status() {
      const s = link.status();
      const age = ageSeconds();
      return { phase: s.phase, offline: offlineState(), ...(age !== undefined ? { ageSeconds: Math.round(age) } : {}), ...(s.central ? { central: s.central } : {}), resyncs: s.resyncs, applied: s.applied, refusedAnswers: s.refusedAnswers, ...(s.lastError ? { lastError: s.lastError } : {}) };
    },
  };
}
export type Edge = ReturnType<typeof createEdge>;
