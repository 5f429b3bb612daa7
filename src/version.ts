import { readFileSync } from 'node:fs';

let version: string | undefined;
/** gatewayd's version, from its package.json (dist/src/version.js → ../../package.json). */
export function gatewaydVersion(): string {
  if (version === undefined) {
    try {
      version = String((JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version?: unknown }).version ?? 'unknown');
    } catch {
      version = 'unknown';
    }
  }
  return version;
}
