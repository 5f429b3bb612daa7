export { readDataFormat, type FoundDataFormat } from './read-format.js';
export { migrateStore, type MigrationReport } from './migrate-store.js';
export { MIGRATIONS, stepsFrom, type MigrationStep } from './migrations.js';
