export { createStoragePolicy, type StoragePolicy, type StoragePolicyDeps, type StoragePolicyStats } from './storage-policy.js';
export { REMOVED, StagedTable, type RemoveHow, type StagedWrite, type WriteClass, type WriteHow } from './staged-table.js';
export type { CommitFigures, CommitTimings } from './commit-scheduler.js';
export { budgetBytesPerSecond, createWearBudget, REFILLED_SHARE, type WearBudget, type WearBudgetMode, type WearBudgetSpec, type WearBudgetState } from './wear-budget.js';
export { JOURNAL_BYTES, JOURNAL_FILE } from './commit-journal.js';
export type { WriteTag } from './write-ledger.js';
export { STORAGE_DEFAULTS, WEAR_DEFAULTS } from './storage-defaults.js';
export { createFlashWear, projectedYears, readProcessWriteBytes, WRITE_AMPLIFICATION, type FlashAssumption, type FlashProjection, type FlashSpec, type FlashStatus, type FlashWear } from './flash-wear.js';
export { replayCommitJournalIn } from './journal-replay.js';
