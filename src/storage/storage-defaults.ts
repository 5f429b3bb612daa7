import type { CommitTimings } from './commit-scheduler.js';

/**
 * The `storage` section's defaults (config/default.json holds the same; a test keeps them equal),
 * for parts built without the gateway's configuration (tests, benchmarks). Why these values:
 * docs/footprint.md "Flash".
 */
export const STORAGE_DEFAULTS: Readonly<CommitTimings> = Object.freeze({ holdMs: 200, commitIntervalMs: 500, backgroundCommitMs: 30_000 });
