export { createLmdbPersistence, DATABASES, LmdbPersistence, persistenceLimits } from './lmdb-persistence.js';
export type { BrokerStateStats, SessionInfo, LmdbPersistenceDeps, LmdbPersistenceLimits, PersistenceBroker } from './lmdb-persistence.js';
export { acknowledgeWhenDurable } from './durable-acks.js';
export type { DurabilityBarrier } from './durable-acks.js';
