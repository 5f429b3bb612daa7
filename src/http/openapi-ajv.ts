// The one Ajv setup for the OpenAPI document's schemas (OpenAPI 3.0: JSON Schema draft 04 with
// `nullable`), shared by the build, which compiles the request validators into standalone code
// (scripts/build-openapi.ts), and the tests' response validation. The Ajv modules are passed
// in: the daemon itself never loads them for the API.
import type { AnySchema, Options } from 'ajv';
import { KNOWN_FORMATS } from './openapi-operations.js';

interface AjvLike {
  addSchema(schema: AnySchema, key: string): unknown;
  addKeyword(definition: object): unknown;
  getSchema(key: string): ((data: unknown) => boolean) | undefined;
}
type AjvClass = new (options: Options) => AjvLike;
type AddFormats = (ajv: never, options: { mode: 'fast'; formats: string[] }) => unknown;

/**
 * Requests: query, header and path values arrive as text and are coerced to the declared types,
 * defaults are filled in, the first failing rule is reported. Responses: nothing is coerced
 * or filled in, and a writeOnly property (a password) must not be present.
 */
export function createOpenApiAjv(Ajv: AjvClass, addFormats: AddFormats, kind: 'request' | 'response', options: { standaloneSource?: boolean } = {}): AjvLike {
  const ajv = new Ajv({
    strict: false,
    strictNumbers: true,
    strictTuples: true,
    allowUnionTypes: false,
    validateSchema: false,
    coerceTypes: kind === 'request',
    useDefaults: kind === 'request',
    removeAdditional: false,
    allErrors: false,
    validateFormats: true,
    ...(options.standaloneSource ? { code: { source: true } } : {}),
  });
  // ajv-formats' "fast" checks (binary and password only name a kind of string).
  addFormats(ajv as never, { mode: 'fast', formats: KNOWN_FORMATS });
  if (kind === 'response') {
    ajv.addKeyword({
      keyword: 'writeOnly',
      schemaType: 'boolean',
      errors: true,
      validate: function writeOnly(schema: boolean, data: unknown) {
        if (!schema || data == null) return true;
        (writeOnly as unknown as { errors: object[] }).errors = [{ keyword: 'writeOnly', message: 'is write-only', params: {} }];
        return false;
      },
    });
  }
  return ajv;
}
