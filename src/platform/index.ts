import { readPlatformFacts } from './platform-facts.js';
import { judgePlatform, PLATFORM_EXIT_CODE } from './platform-requirements.js';

export { compareVersions, GLIBC_FLOOR, judgePlatform, NODE_FLOOR, PLATFORM_EXIT_CODE, TESTED_NODE_MAJORS } from './platform-requirements.js';
export type { NativeBinary, PlatformFacts, PlatformVerdict } from './platform-requirements.js';
export { findLmdbBinary, findSerialportBinary, readPlatformFacts, runningGlibc } from './platform-facts.js';
export { nodeCommand } from './node-command.js';

/**
 * The entry's first step, before any native module is loaded: on a machine gatewayd cannot run
 * on, one line on stderr saying what is missing and what to do, and exit 78 (systemd does not
 * restart on it), instead of a stack trace from deep inside a native module. Warnings (a Node
 * line past its end of life) are a line each, and the daemon starts.
 */
export function refuseUnsupportedPlatform(): void {
  const verdict = judgePlatform(readPlatformFacts());
  for (const warning of verdict.warnings) process.stderr.write(`gatewayd: warning: ${warning}\n`);
  if (verdict.refusal) {
    process.stderr.write(`gatewayd: ${verdict.refusal}\n`);
    process.exit(PLATFORM_EXIT_CODE);
  }
}
