export { createLogger, createSilentLogger, redact } from './logger.js';
export type { Logger, LoggerOptions } from './logger.js';
