export { createStoragePolicy, type StoragePolicy, type StoragePolicyDeps, type StoragePolicyStats } from './storage-policy.js';
export { REMOVED, StagedTable, type RemoveHow, type StagedWrite, type WriteClass, type WriteHow } from './staged-table.js';
export type { CommitFigures, CommitTimings } from './commit-scheduler.js';
export type { WriteTag } from './write-ledger.js';
export { STORAGE_DEFAULTS } from './storage-defaults.js';
export { createFlashWear, projectedYears, readProcessWriteBytes, WRITE_AMPLIFICATION, type FlashProjection, type FlashSpec, type FlashWear } from './flash-wear.js';
