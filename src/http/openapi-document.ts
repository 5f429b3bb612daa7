import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** The OpenAPI document as people edit it (YAML, in the source tree). */
export const openApiPath = fileURLToPath(new URL('../../../src/http/openapi.yaml', import.meta.url));
/** The same document as JSON, written by `npm run build` (scripts/build-openapi.ts) next to this module. */
export const openApiJsonPath = fileURLToPath(new URL('./openapi.json', import.meta.url));

/** The document's JSON text as the build wrote it (what GET /api/openapi.json serves). */
export function readOpenApiJson(): string {
  return readFileSync(openApiJsonPath, 'utf8');
}

/**
 * A fresh, private copy of the OpenAPI document (the build's JSON: no YAML parser at start-up).
 * Not cached: the HTTP app hands its copy to the validator, which keeps what it needs.
 */
export function loadOpenApiDocument(): Record<string, unknown> {
  return JSON.parse(readOpenApiJson()) as Record<string, unknown>;
}
