// Liveness and readiness for watchdogs, Docker's HEALTHCHECK and orchestrators. Anonymous and
// minimal: a probe learns whether the gateway can do its work, never why in detail (no paths,
// sizes or names). Liveness also says which release answers (docs/design.md §16), so a fleet's
// monitoring sees that an upgrade landed without credentials.
import { statfs } from 'node:fs/promises';
import { Router } from 'express';
import type { Store } from '../store/index.js';

export type ReadinessCheckName = 'store' | 'broker' | 'disk' | 'maintenance' | 'site';

export interface Readiness {
  ready: boolean;
  checks: Partial<Record<ReadinessCheckName, 'ok' | 'failing'>>;
}

export interface HealthDeps {
  store: Store;
  /** True when the broker is off by configuration or listening. */
  brokerReady: () => boolean;
  /** A backup or restore holds the maintenance lock. */
  maintenanceRunning: () => boolean;
  dataDir: string;
  minFreeDiskBytes: number;
  /** The gatewayd version GET /health names. */
  version: string;
  /**
   * A gateway of a site: ready once its replica holds the site (a central that never reached it
   * would refuse every user); /health shows the link (src/site).
   */
  site?: { ready(): boolean; status(): { role: 'central' | 'edge'; state: string; revision?: number; ageSeconds?: number } };
}

export interface Health {
  /** Bytes available to gatewayd on the data directory's filesystem (undefined: unknown). */
  freeDiskBytes(): Promise<number | undefined>;
  readiness(): Promise<Readiness>;
  /** GET /health (the process answers) and GET /health/ready (200 or 503). */
  routes(): Router;
}

export function createHealth(deps: HealthDeps): Health {
  async function freeDiskBytes(): Promise<number | undefined> {
    try {
      const s = await statfs(deps.dataDir);
      return s.bavail * s.bsize;
    } catch {
      return undefined;
    }
  }

  async function readiness(): Promise<Readiness> {
    const free = await freeDiskBytes();
    const flags: Partial<Record<ReadinessCheckName, boolean>> = {
      store: deps.store.isOpen() && deps.store.writeHealth().writable,
      broker: deps.brokerReady(),
      disk: free === undefined || free >= deps.minFreeDiskBytes,
      maintenance: !deps.maintenanceRunning(),
      ...(deps.site ? { site: deps.site.ready() } : {}),
    };
    const checks = Object.fromEntries(Object.entries(flags).map(([k, ok]) => [k, ok ? 'ok' : 'failing'])) as Readiness['checks'];
    return { ready: Object.values(flags).every(Boolean), checks };
  }

  return {
    freeDiskBytes,
    readiness,
    routes() {
      const router = Router({ caseSensitive: true, strict: true });
      router.get('/health', (_req, res) => {
        res.setHeader('Cache-Control', 'no-store');
        if (!deps.site) return void res.json({ status: 'ok', version: deps.version });
        // The link at a glance (no names, no addresses): what a watchdog of a site wants to see.
        const s = deps.site.status();
        res.json({ status: 'ok', version: deps.version, site: { role: s.role, state: s.state, ...(s.revision !== undefined ? { revision: s.revision } : {}), ...(s.ageSeconds !== undefined ? { ageSeconds: s.ageSeconds } : {}) } });
      });
      router.get('/health/ready', async (_req, res) => {
        const r = await readiness();
        res.setHeader('Cache-Control', 'no-store');
        res.status(r.ready ? 200 : 503).json({ status: r.ready ? 'ready' : 'not ready', checks: r.checks });
      });
      return router;
    },
  };
}
