export { loadConfig, ConfigError, CONFIG_EXIT_CODE, envShortcuts, defaultConfigPath } from './load-config.js';
export type { LoadConfigOptions } from './load-config.js';
export { configSchema } from './config-schema.js';
export type { GatewayConfig, PasswordPolicy } from './config-schema.js';
