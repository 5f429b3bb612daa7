import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** The OpenAPI document as people edit it (YAML, in the source tree). */
export const openApiPath = fileURLToPath(new URL('../../../src/http/openapi.yaml', import.meta.url));
/** The same document as JSON, written by `npm run build` (scripts/build-openapi.ts) next to this module. */
export const openApiJsonPath = fileURLToPath(new URL('./openapi.json', import.meta.url));

let cachedSpec: Record<string, unknown> | undefined;
/** The OpenAPI document, parsed once (the build's JSON copy: no YAML parser at start-up). */
export function loadOpenApiDocument(): Record<string, unknown> {
  cachedSpec ??= JSON.parse(readFileSync(openApiJsonPath, 'utf8')) as Record<string, unknown>;
  return cachedSpec;
}
