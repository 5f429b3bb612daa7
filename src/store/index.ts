export { isStorageFailure, openStore, prefixRange, STORE_SCHEMA_VERSION, STORE_FILE } from './store.js';
export type { Store, StoreDatabases, StoreWriteHealth, IndexKey, OpenStoreOptions } from './store.js';
export type * from './records.js';
