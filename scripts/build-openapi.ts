// `npm run build`, after tsc: converts src/http/openapi.yaml into dist/src/http/openapi.json, so
// that what reads the document uses JSON.parse instead of loading a YAML parser, and compiles
// every JSON schema the daemon validates with into standalone code (scripts/standalone-validators.ts):
// the API's requests (from the document), the configuration, service files. The daemon then compiles no schema
// at start (docs/footprint.md). The YAML file stays the one that people edit.
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Ajv } from 'ajv';
import AjvDraft04 from 'ajv-draft-04';
import addFormats from 'ajv-formats';
import { parse } from 'yaml';
import { configSchema } from '../src/config/config-schema.js';
import { CONFIG_VALIDATOR_FILE } from '../src/config/load-config.js';
import { REQUEST_VALIDATORS_FILE } from '../src/http/compiled-validators.js';
import { createOpenApiAjv } from '../src/http/openapi-ajv.js';
import { openApiJsonPath, openApiPath } from '../src/http/openapi-document.js';
import { COMPONENTS_ID, requestValidationPlan } from '../src/http/openapi-operations.js';
import { SERVICE_VALIDATOR_OPTIONS, SERVICE_VALIDATORS_FILE, serviceFileSchemas } from '../src/mapping/service-file-validators.js';
import { writeStandaloneValidators } from './standalone-validators.js';

const besideModule = (moduleUrl: string, file: string) => fileURLToPath(new URL(file, moduleUrl));

const doc = parse(readFileSync(openApiPath, 'utf8'));
// The document's version is gatewayd's (docs/design.md §16); the YAML names it too, for its readers (a test keeps them equal).
doc.info.version = (JSON.parse(readFileSync(fileURLToPath(new URL('../../package.json', import.meta.url)), 'utf8')) as { version: string }).version;
writeFileSync(openApiJsonPath, JSON.stringify(doc));
console.log(`openapi: ${openApiJsonPath}`);

const plan = requestValidationPlan(doc);
const requestFile = besideModule(new URL('../src/http/compiled-validators.js', import.meta.url).href, REQUEST_VALIDATORS_FILE);
const requestAjv = createOpenApiAjv(AjvDraft04 as never, addFormats as never, 'request', { standaloneSource: true });
const requestBytes = writeStandaloneValidators(requestFile, requestAjv, plan.schemas, { shared: { key: COMPONENTS_ID, schema: plan.components }, extra: { plan: plan.operations } });
console.log(`openapi: ${plan.operations.length} operations' request validators, ${Math.round(requestBytes / 1024)} KiB: ${requestFile}`);

const configFile = besideModule(new URL('../src/config/load-config.js', import.meta.url).href, CONFIG_VALIDATOR_FILE);
writeStandaloneValidators(configFile, new Ajv({ allErrors: false, strict: true, code: { source: true } }), { validateConfig: configSchema as never });
console.log(`config: validator ${configFile}`);

const servicesFile = besideModule(new URL('../src/mapping/service-file-validators.js', import.meta.url).href, SERVICE_VALIDATORS_FILE);
writeStandaloneValidators(servicesFile, new Ajv({ ...SERVICE_VALIDATOR_OPTIONS, code: { source: true } }), serviceFileSchemas() as never);
console.log(`services: validators ${servicesFile}`);
