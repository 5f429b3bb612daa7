// The validators of the OpenAPI document's schemas. Requests: the standalone code that
// `npm run build` wrote next to this module (scripts/build-openapi.ts) — loaded, never compiled,
// at start (docs/footprint.md). Responses (tests only): compiled from the document on first use.
import { createRequire } from 'node:module';
import { createOpenApiAjv } from './openapi-ajv.js';
import { COMPONENTS_ID, responseValidationPlan, type OperationPlan, type ResponsePlan } from './openapi-operations.js';

/** What a compiled Ajv validator is to its callers: a check, and the reasons of its last failure. */
export interface SchemaCheck {
  (data: unknown): boolean;
  errors?: ValidationFailure[] | null;
}

/** The fields of an Ajv error the HTTP layer reports. */
export interface ValidationFailure {
  keyword: string;
  instancePath: string;
  message?: string;
  params: Record<string, unknown>;
}

export interface RequestValidators {
  operations: OperationPlan[];
  check(name: string): SchemaCheck;
}

const requireHere = createRequire(import.meta.url);
/** Written by the build: `plan` and one export per validator name. */
export const REQUEST_VALIDATORS_FILE = './openapi-validators.cjs';

/** The build's request validators. */
export function loadRequestValidators(): RequestValidators {
  let compiled: Record<string, unknown>;
  try {
    compiled = requireHere(REQUEST_VALIDATORS_FILE) as Record<string, unknown>;
  } catch (err) {
    throw new Error(`the request validators are missing (${(err as Error).message}): run npm run build`);
  }
  return {
    operations: compiled.plan as OperationPlan[],
    check(name) {
      const check = compiled[name];
      if (typeof check !== 'function') throw new Error(`no request validator ${name}: run npm run build`);
      return check as SchemaCheck;
    },
  };
}

export interface ResponseValidators {
  plan(operation: string): ResponsePlan | undefined;
  check(name: string): SchemaCheck;
}

/** The document's response validators, each compiled when first asked for (tests validate every answer). */
export function compileResponseValidators(doc: unknown): ResponseValidators {
  const { operations, schemas, components } = responseValidationPlan(doc);
  const Ajv = requireHere('ajv-draft-04') as { default: never };
  const addFormats = requireHere('ajv-formats') as { default: never };
  const ajv = createOpenApiAjv(Ajv.default, addFormats.default, 'response');
  ajv.addSchema(components, COMPONENTS_ID);
  const compiled = new Map<string, SchemaCheck>();
  return {
    plan: (operation) => operations.get(operation),
    check(name) {
      let check = compiled.get(name);
      if (!check) {
        ajv.addSchema(schemas[name], name);
        check = ajv.getSchema(name) as SchemaCheck;
        compiled.set(name, check);
      }
      return check;
    },
  };
}
