export { isStorageFailure, openStore, prefixRange, STORE_FILE } from './store.js';
export { DATA_FORMAT_VERSION, DataFormatError, FORMAT_KEY, FORMAT_WRITTEN_BY_KEY, OLDEST_DATA_FORMAT } from './data-format.js';
export type { Store, StoreDatabases, StoreWriteHealth, IndexKey, OpenStoreOptions } from './store.js';
export type * from './records.js';
