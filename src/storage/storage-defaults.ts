import type { CommitTimings } from './commit-scheduler.js';
import type { WearBudgetSpec } from './wear-budget.js';

/**
 * The `storage` section's defaults (config/default.json holds the same; a test keeps them equal),
 * for parts built without the gateway's configuration (tests, benchmarks). Why these values:
 * docs/footprint.md "Flash".
 */
export const STORAGE_DEFAULTS: Readonly<CommitTimings> = Object.freeze({ holdMs: 200, commitIntervalMs: 500, backgroundCommitMs: 30_000 });

/**
 * The wear budget's defaults (storage.flash): an 8 GB TLC eMMC (1,000 cycles, write amplification
 * 3) that should last 10 years, and a burst allowance of 320 MB: a 10-minute outage at 100 msg/s
 * from a publisher with one message in flight (each message its own journal frame, 4 KiB, and
 * its compaction into LMDB later; docs/footprint.md "Flash").
 */
export const WEAR_DEFAULTS: Readonly<WearBudgetSpec> = Object.freeze({ capacityBytes: 8e9, ratedWriteCycles: 1000, writeAmplification: 3, lifeYears: 10, burstBytes: 320_000_000 });
