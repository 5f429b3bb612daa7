// Public surface of the permission engine; import from here, not from the files.
// The naive patternMatches/patternCovers oracles stay internal (tests only): they are O(grants).
export {
  PermissionSet,
  operationFor,
  type AccessOperation,
  type PermissionContext,
  type PermissionGrant,
  type PermissionOperation,
} from './permission-set.js';
export {
  MAX_PATTERN_LEVELS,
  MAX_TOPIC_BYTES,
  isDollarLevel,
  splitLevels,
  stripQuery,
  validatePattern,
  validateTopicFilter,
  validateTopicName,
} from './topic-pattern.js';
