// Checks the one OpenAPI document of the API (src/http/openapi.yaml):
// 1. it declares exactly the 88 operations of the contract;
// 2. every operation has a unique operationId, a `default` response, and every $ref resolves;
// 3. express-openapi-validator compiles it and validates real HTTP requests as intended, and the
//    validators the build compiles from it for the daemon answer every request alike.
import { expect } from 'chai';
import { existsSync, readFileSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import express from 'express';
import type { NextFunction, Request, Response } from 'express';
import * as OpenApiValidator from 'express-openapi-validator';
import multer from 'multer';
import { parse } from 'yaml';
import { loadRequestValidators } from '../src/http/compiled-validators.js';
import { createOperationIndex } from '../src/http/operation-index.js';
import { requestValidator } from '../src/http/request-validator.js';

// The 88 operations of the API contract, `METHOD /path`.
const CONTRACT_OPERATIONS: readonly string[] = [
  'GET /api/auth/ldap',
  'GET /api/auth/mfa',
  'GET /api/auth/idp',
  'POST /api/users',
  'GET /api/listUsers',
  'GET /api/users/usernames',
  'GET /api/users/ids',
  'POST /api/users/batch',
  'POST /api/users/batch/delete',
  'PUT /api/users/change-password',
  'GET /api/users/{id}',
  'PUT /api/users/{id}',
  'DELETE /api/users/{id}',
  'GET /api/users/{id}/tokens',
  'DELETE /api/users/{id}/tokens',
  'POST /api/users/{id}/certificates',
  'DELETE /api/users/{id}/certificates',
  'POST /api/users/{id}/roles',
  'DELETE /api/users/{id}/roles',
  'POST /api/roles',
  'GET /api/roles',
  'GET /api/roles/page',
  'GET /api/roles/names',
  'GET /api/roles/{id}',
  'PUT /api/roles/{id}',
  'DELETE /api/roles/{id}',
  'GET /api/roles/{id}/permissions',
  'POST /api/roles/{id}/permissions',
  'GET /api/roles/{id}/permissions/{pemId}',
  'PUT /api/roles/{id}/permissions/{pemId}',
  'DELETE /api/roles/{id}/permissions/{pemId}',
  'GET /api/permissions',
  'GET /api/permissions/page',
  'GET /api/permissions/ids',
  'POST /api/login',
  'POST /api/logout',
  'GET /api/session',
  'POST /api/mfa/enable',
  'POST /api/mfa/validate',
  'POST /api/mfa/login',
  'POST /api/mfa/disable',
  'POST /api/mfa/regenerate/backupcodes',
  'GET /api/mfa/isenrolled',
  'GET /api/idp/login',
  'GET /api/idp/redirect',
  'POST /api/client-registry/register',
  'GET /api/client-registry',
  'GET /api/client-registry/status',
  'POST /api/client-registry/open',
  'POST /api/client-registry/lock',
  'POST /api/client-registry/confirm',
  'DELETE /api/client-registry/runners/{id}',
  'GET /api/certificates',
  'POST /api/certificates',
  'DELETE /api/certificates',
  'GET /api/certificates/content',
  'POST /api/broker/auth/enhanced',
  'GET /api/policy/password',
  'GET /api/policy/username',
  'GET /api/maintenance/db',
  'GET /api/maintenance/db/backup',
  'POST /api/maintenance/db/backup',
  'POST /api/maintenance/db/restore',
  'GET /api/connections/schema',
  'GET /api/endpoints/schema',
  'GET /api/mappings/schema',
  'GET /api/servers/schema',
  'GET /api/connections',
  'GET /api/connections/{id}',
  'PUT /api/connections/{id}/operation',
  'GET /api/endpoints',
  'GET /api/endpoints/{id}',
  'GET /api/endpoints/{id}/topics',
  'GET /api/endpoints/{id}/state',
  'PUT /api/endpoints/{id}/operation',
  'GET /api/mappings',
  'GET /api/mappings/{id}',
  'PUT /api/mappings/{id}/operation',
  'GET /api/mappings/{id}/endpoint-topics',
  'GET /api/mappings/{id}/state',
  'GET /api/servers',
  'GET /api/servers/{id}',
  'PUT /api/servers/{id}/operation',
  'GET /api/servers/{id}/state',
  'GET /api/nodes',
  'GET /api/nodes/{id}/state',
  'GET /api/topics',
  'POST /api/rule-engine/transform',
];

/**
 * Operations gatewayd adds outside the contract (each documented on its page under docs/); the contract's
 * 88 stay exactly as they are.
 */
const CLUSTER_HOOKS: readonly string[] = [
  'POST /api/broker/hooks/rabbitmq/user',
  'POST /api/broker/hooks/rabbitmq/vhost',
  'POST /api/broker/hooks/rabbitmq/resource',
  'POST /api/broker/hooks/rabbitmq/topic',
  'POST /api/broker/hooks/vernemq',
  'POST /api/broker/hooks/emqx/authn',
  'POST /api/broker/hooks/emqx/authz',
];

/** What a site's edges call on the centrals: a join token, then their own credential, never a user's. */
const SITE_EDGE_OPERATIONS: readonly string[] = ['POST /api/site/join', 'GET /api/site/snapshot', 'GET /api/site/changes'];

const ADDED_OPERATIONS: readonly string[] = [
  // The gateway CA certificate as a PEM file (docs/web-ui.md).
  'GET /api/certificates/ca',
  // Protocol-mapping services (docs/mapping.md "Services managed live").
  'GET /api/services',
  'GET /api/services/{id}',
  'PUT /api/services/{id}',
  'DELETE /api/services/{id}',
  'POST /api/services/{id}/validate',
  // Sparkplug B edge nodes (docs/sparkplug.md).
  'GET /api/sparkplug/schema',
  'GET /api/sparkplug',
  'GET /api/sparkplug/{id}',
  'PUT /api/sparkplug/{id}/operation',
  // Bridges to upstream brokers (docs/bridges.md).
  'GET /api/bridges/schema',
  'GET /api/bridges',
  'GET /api/bridges/{id}',
  'PUT /api/bridges/{id}/operation',
  // The audit trail, the dashboard and the resource types for the web UI (docs/security.md "Audit trail", docs/web-ui.md).
  'GET /api/audit',
  'GET /api/audit/actions',
  'GET /api/dashboard',
  'GET /api/resource-types',
  // The broker's clients, sessions and retained messages (docs/mqtt-broker.md "Broker clients and sessions").
  'GET /api/broker/clients',
  'GET /api/broker/clients/{clientId}',
  'DELETE /api/broker/clients/{clientId}',
  'GET /api/broker/sessions',
  'DELETE /api/broker/sessions/{clientId}',
  'GET /api/broker/retained',
  'DELETE /api/broker/retained',
  // Probes and metrics (docs/operations.md "Health, metrics and faults").
  'GET /health',
  'GET /health/ready',
  'GET /metrics',
  // Cluster broker hooks (docs/scaling-out.md).
  ...CLUSTER_HOOKS,
  // One site, one set of users (docs/scaling-out.md, docs/api.md "The site protocol").
  'GET /api/site',
  'POST /api/site/join-tokens',
  'DELETE /api/site/edges/{id}',
  ...SITE_EDGE_OPERATIONS,
];

const PUBLIC_OPERATIONS: readonly string[] = [
  'POST /api/login',
  'POST /api/logout',
  'POST /api/mfa/login',
  'POST /api/client-registry/register',
  'GET /api/auth/idp',
  'GET /api/idp/login',
  'GET /api/idp/redirect',
  'POST /api/broker/auth/enhanced',
  'GET /health',
  'GET /health/ready',
  ...CLUSTER_HOOKS,
  ...SITE_EDGE_OPERATIONS,
];

type OpenApiValidatorOptions = Parameters<typeof OpenApiValidator.middleware>[0];

const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

interface Operation {
  method: string;
  path: string;
  op: JsonObject;
}

/**
 * src/http/openapi.yaml of the repository: looked for in the ancestors of this compiled file
 * (dist/test/ is two levels below the root, .build/<name>/test/ three), then in the working
 * directory (mocha runs from the root).
 */
function specPath(): string {
  const rel = join('src', 'http', 'openapi.yaml');
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(join(dir, rel))) return join(dir, rel);
    const parent = dirname(dir);
    if (parent === dir) break;
    dir = parent;
  }
  if (existsSync(join(process.cwd(), rel))) return join(process.cwd(), rel);
  throw new Error(`${rel} not found above ${fileURLToPath(import.meta.url)} nor in ${process.cwd()}`);
}

const SPEC_PATH = specPath();

/**
 * Work-around for express-openapi-validator 5.6.x (open upstream issue
 * cdimascio/express-openapi-validator#1115): query parameters whose *name* contains brackets
 * (`username[eq]` on GET /api/listUsers, `name[eq]` on GET /api/roles) are meant to be kept
 * literally, but the validator looks the operation up in `req.query._openapi`, which nothing
 * sets, so it re-parses `username[eq]=a` with qs into `username: {eq: 'a'}` and answers
 * 400 "Unknown query parameter 'username'". Mounted BEFORE the validator, this middleware pins
 * req.query (Express 5 re-parses it on every read) and gives it a non-enumerable `_openapi`
 * getter returning `req.openapi` (set by the validator's metadata step before the query is
 * processed), so the literal names are recognised. Non-enumerable: never seen as a parameter.
 * The application must mount the same middleware in front of the validator.
 */
function literalBracketQueryNames(req: Request, _res: Response, next: NextFunction): void {
  const query = req.query as Record<string, unknown>;
  Object.defineProperty(query, '_openapi', {
    get: () => (req as Request & { openapi?: unknown }).openapi,
    enumerable: false,
    configurable: true,
  });
  Object.defineProperty(req, 'query', { value: query, writable: true, enumerable: true, configurable: true });
  next();
}

function isObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function operations(doc: JsonObject): Operation[] {
  const out: Operation[] = [];
  const paths = doc['paths'];
  if (!isObject(paths)) return out;
  for (const [path, item] of Object.entries(paths)) {
    if (!isObject(item)) continue;
    for (const method of HTTP_METHODS) {
      const op = item[method];
      if (isObject(op)) out.push({ method: method.toUpperCase(), path, op });
    }
  }
  return out;
}

/** Resolves a local JSON pointer ref (`#/a/b`) in doc; undefined when it does not resolve. */
function resolveRef(doc: JsonObject, ref: string): Json | undefined {
  if (!ref.startsWith('#/')) return undefined;
  let node: Json | undefined = doc;
  for (const raw of ref.slice(2).split('/')) {
    const key = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
    if (!isObject(node) || !Object.prototype.hasOwnProperty.call(node, key)) return undefined;
    node = node[key];
  }
  return node;
}

function collectRefs(node: Json, at: string, out: Array<{ at: string; ref: string }>): void {
  if (Array.isArray(node)) {
    node.forEach((v, i) => collectRefs(v, `${at}/${i}`, out));
  } else if (isObject(node)) {
    for (const [k, v] of Object.entries(node)) {
      if (k === '$ref' && typeof v === 'string') out.push({ at, ref: v });
      else collectRefs(v, `${at}/${k}`, out);
    }
  }
}

const doc: JsonObject = (() => {
  const parsed: unknown = parse(readFileSync(SPEC_PATH, 'utf8'));
  if (!isObject(parsed)) throw new Error(`${SPEC_PATH} does not hold a YAML mapping`);
  return parsed;
})();

describe('OpenAPI document (src/http/openapi.yaml)', () => {
  describe('structure', () => {
    it('is OpenAPI 3.0.3 with servers [{url: /}]', () => {
      expect(doc['openapi']).to.equal('3.0.3');
      expect(doc['servers']).to.deep.equal([{ url: '/' }]);
    });

    it("names gatewayd's version (package.json) as its own, in the file and in what the build serves", () => {
      const version = (JSON.parse(readFileSync(join(dirname(SPEC_PATH), '../../package.json'), 'utf8')) as { version: string }).version;
      expect((doc['info'] as JsonObject)['version']).to.equal(version);
      const built = JSON.parse(readFileSync(join(dirname(fileURLToPath(import.meta.url)), '../src/http/openapi.json'), 'utf8')) as { info: { version: string } };
      expect(built.info.version).to.equal(version);
    });

    it('declares exactly the 88 operations of the contract and the documented additions', () => {
      expect(CONTRACT_OPERATIONS).to.have.lengthOf(88);
      const declared = operations(doc).map((o) => `${o.method} ${o.path}`);
      const missing = CONTRACT_OPERATIONS.filter((c) => !declared.includes(c));
      const extra = declared.filter((d) => !CONTRACT_OPERATIONS.includes(d) && !ADDED_OPERATIONS.includes(d));
      expect(missing, 'operations of the contract not declared').to.deep.equal([]);
      expect(extra, 'operations declared but neither in the contract nor among the additions').to.deep.equal([]);
      expect(declared).to.have.lengthOf(88 + ADDED_OPERATIONS.length);
    });

    it('gives every operation a unique camelCase operationId, one tag and a default response', () => {
      const seen = new Map<string, string>();
      for (const { method, path, op } of operations(doc)) {
        const where = `${method} ${path}`;
        const id = op['operationId'];
        expect(id, `${where} operationId`).to.be.a('string');
        expect(id as string, `${where} operationId`).to.match(/^[a-z][a-zA-Z0-9]*$/);
        expect(seen.has(id as string), `${where}: operationId ${String(id)} also used by ${seen.get(id as string)}`).to.equal(false);
        seen.set(id as string, where);
        expect(op['tags'], `${where} tags`).to.be.an('array').with.lengthOf(1);
        const responses = op['responses'];
        expect(isObject(responses), `${where} responses`).to.equal(true);
        expect((responses as JsonObject)['default'], `${where} default response`).to.deep.equal({
          $ref: '#/components/responses/Error',
        });
        const success = Object.keys(responses as JsonObject).filter((c) => /^[23]\d\d$/.test(c));
        expect(success, `${where} success response`).to.not.be.empty;
      }
      expect(seen.size).to.equal(88 + ADDED_OPERATIONS.length);
    });

    it('marks exactly the public operations with security: []', () => {
      expect(doc['security']).to.deep.equal([{ bearerAuth: [] }, { basicAuth: [] }]);
      for (const { method, path, op } of operations(doc)) {
        const where = `${method} ${path}`;
        if (PUBLIC_OPERATIONS.includes(where)) expect(op['security'], where).to.deep.equal([]);
        else expect(op['security'], where).to.equal(undefined);
      }
    });

    it('resolves every $ref', () => {
      const refs: Array<{ at: string; ref: string }> = [];
      collectRefs(doc, '#', refs);
      expect(refs.length).to.be.greaterThan(100);
      const broken = refs.filter((r) => resolveRef(doc, r.ref) === undefined).map((r) => `${r.at}: ${r.ref}`);
      expect(broken, 'unresolved $refs').to.deep.equal([]);
    });

    it('closes every object of every request body (additionalProperties: false)', () => {
      // The MQTT 5 properties of the broker hook are open, and so are the parts of a service
      // document: the service-file rules validate them, answering every problem with its path.
      const serviceParts = ['metadata', 'parameters', 'resources'];
      const open = new Set([
        'POST /api/broker/auth/enhanced: body.properties',
        ...['PUT /api/services/{id}', 'POST /api/services/{id}/validate'].flatMap((op) => serviceParts.map((p) => `${op}: body.${p}`)),
        // The cluster hooks take the brokers' own payloads, which grow between broker versions
        // (VerneMQ's listener_* fields, MQTT 5 subscription options): a closed body would refuse
        // every login after a broker upgrade.
        ...CLUSTER_HOOKS.map((op) => `${op}: body`),
        'POST /api/broker/hooks/vernemq: body.topics[]',
      ]);
      const problems: string[] = [];
      const walk = (schema: Json | undefined, at: string, where: string, seen: Set<string>): void => {
        if (!isObject(schema)) return;
        const ref = schema['$ref'];
        if (typeof ref === 'string') {
          if (seen.has(ref)) return;
          walk(resolveRef(doc, ref), at, where, new Set([...seen, ref]));
          return;
        }
        const props = schema['properties'];
        if (schema['type'] === 'object' || isObject(props)) {
          const isMultipart = at === 'multipart';
          if (schema['additionalProperties'] !== false && !isMultipart && !open.has(`${where}: ${at}`)) problems.push(`${where}: ${at}`);
          if (isObject(props)) for (const [k, v] of Object.entries(props)) walk(v, `${at}.${k}`, where, seen);
        }
        if (schema['items'] !== undefined) walk(schema['items'], `${at}[]`, where, seen);
        for (const key of ['allOf', 'anyOf', 'oneOf']) {
          const list = schema[key];
          if (Array.isArray(list)) list.forEach((v) => walk(v, at, where, seen));
        }
      };
      for (const { method, path, op } of operations(doc)) {
        const body = op['requestBody'];
        if (body === undefined) continue;
        const resolved = isObject(body) && typeof body['$ref'] === 'string' ? resolveRef(doc, body['$ref']) : body;
        const content = isObject(resolved) ? resolved['content'] : undefined;
        if (!isObject(content)) continue;
        for (const [mediaType, media] of Object.entries(content)) {
          if (!isObject(media)) continue;
          walk(media['schema'], mediaType === 'multipart/form-data' ? 'multipart' : 'body', `${method} ${path}`, new Set());
        }
      }
      expect(problems, 'request-body objects without additionalProperties: false').to.deep.equal([]);
    });

    it('declares the Error schema and response', () => {
      const error = resolveRef(doc, '#/components/schemas/Error') as JsonObject;
      expect(error['required']).to.deep.equal(['statusCode', 'error', 'message']);
      expect(Object.keys(error['properties'] as JsonObject)).to.have.members([
        'statusCode',
        'error',
        'message',
        'correlationId',
        'errors',
      ]);
      expect(resolveRef(doc, '#/components/responses/Error/content/application~1json/schema')).to.deep.equal({
        $ref: '#/components/schemas/Error',
      });
    });
  });

  // The same requests through express-openapi-validator (the reference the daemon used until
  // issue 32, which also checks the document against the OpenAPI 3.0 meta-schema) and through
  // the validators the build compiles for the daemon (src/http/request-validator.ts): both must
  // answer each request alike.
  const validators: { name: string; mount(app: express.Express): void }[] = [
    {
      name: 'express-openapi-validator (reference)',
      mount(app) {
        app.use(express.json({ strict: false, limit: '2mb' }));
        app.use(literalBracketQueryNames);
        let middleware: ReturnType<typeof OpenApiValidator.middleware>;
        try {
          middleware = OpenApiValidator.middleware({
            apiSpec: structuredClone(doc) as unknown as OpenApiValidatorOptions['apiSpec'],
            validateRequests: true,
            validateResponses: false,
            validateSecurity: false,
          });
        } catch (err) {
          throw new Error(`express-openapi-validator rejected ${SPEC_PATH}: ${(err as Error).message}`);
        }
        app.use(middleware);
      },
    },
    {
      name: "the build's compiled validators (the daemon's)",
      mount(app) {
        const compiled = loadRequestValidators();
        app.use(express.json({ strict: false, limit: '2mb' }));
        // As the daemon receives a restore upload (maintenance-routes.ts): the file is taken
        // before validation, and the field marked present.
        const upload = multer({ storage: multer.memoryStorage() }).single('file');
        app.use('/api/maintenance/db/restore', (req, res, next) =>
          upload(req, res, (err?: unknown) => {
            if (!err && req.file) (req.body as Record<string, unknown>).file = '';
            next(err);
          }),
        );
        app.use(requestValidator({ operations: createOperationIndex(compiled.operations), validators: compiled }));
      },
    },
  ];

  for (const validator of validators) describe(`with ${validator.name}`, () => {
    let server: Server;
    let base: string;
    // Errors the validator passed on that are not request-validation failures (a bad document).
    const unexpected: unknown[] = [];

    before(async () => {
      const app = express();
      // strict: false, because POST /api/certificates takes a bare JSON string.
      validator.mount(app);
      // Catch-all: answers what the validator hands on to the application.
      app.use((req: Request, res: Response) => {
        res.status(200).json({ ok: true, query: req.query, body: req.body as unknown });
      });
      app.use((err: unknown, _req: Request, res: Response, _next: NextFunction) => {
        const e = err as { status?: number; message?: string; errors?: unknown };
        const status = typeof e.status === 'number' ? e.status : 500;
        if (status >= 500) unexpected.push(err);
        res.status(status).json({ statusCode: status, error: 'error', message: e.message ?? String(err), errors: e.errors });
      });
      server = await new Promise<Server>((resolve, reject) => {
        const s = app.listen(0, '127.0.0.1', (error?: Error) => (error ? reject(error) : resolve(s)));
      });
      base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

      // The document is loaded asynchronously; a bad document fails the first request.
      const res = await fetch(`${base}/api/session`);
      if (res.status !== 200) {
        const body = await res.text();
        const cause = unexpected.map((e) => (e instanceof Error ? e.stack ?? e.message : JSON.stringify(e))).join('\n');
        throw new Error(`${validator.name} could not use ${SPEC_PATH}: ${res.status} ${body}\n${cause}`);
      }
    });

    after(async () => {
      if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
    });

    afterEach(() => {
      const errs = unexpected.splice(0);
      expect(
        errs.map((e) => (e instanceof Error ? e.message : JSON.stringify(e))),
        'validator failures with status >= 500 (document problems)',
      ).to.deep.equal([]);
    });

    async function send(method: string, path: string, body?: unknown): Promise<{ status: number; body: string }> {
      const init: RequestInit = { method };
      if (body !== undefined) {
        init.body = JSON.stringify(body);
        init.headers = { 'content-type': 'application/json' };
      }
      const res = await fetch(base + path, init);
      return { status: res.status, body: await res.text() };
    }

    async function expectStatus(method: string, path: string, body: unknown, status: number): Promise<void> {
      const res = await send(method, path, body);
      expect(res.status, `${method} ${path} ${JSON.stringify(body)} -> ${res.body}`).to.equal(status);
    }

    it('compiles the request schema of every operation (no 5xx for any declared operation)', async () => {
      for (const { method, path } of operations(doc)) {
        const url = path.replace(/\{[^}]+\}/g, 'x');
        const res = await send(method, url);
        expect(res.status, `${method} ${url} -> ${res.body}`).to.be.oneOf([200, 400, 415]);
      }
    });

    it('login: a valid body passes; a 4-character password, unknown fields and a lifetime of 0 are 400', async () => {
      await expectStatus('POST', '/api/login', { username: 'admin', password: 'secret1' }, 200);
      await expectStatus('POST', '/api/login', { username: 'admin', password: 'secret1', expireTimeInHours: 1.5, label: 'ci' }, 200);
      await expectStatus('POST', '/api/login', { username: 'admin', password: 'abcd' }, 400);
      await expectStatus('POST', '/api/login', { username: 'admin' }, 400);
      await expectStatus('POST', '/api/login', { username: 'admin', password: 'secret1', extra: 1 }, 400);
      await expectStatus('POST', '/api/login', { username: 'admin', password: 'secret1', expireTimeInHours: 0 }, 400);
    });

    it('users: unknown fields, short usernames and bad enums are 400; a full create body passes', async () => {
      await expectStatus('POST', '/api/users', { username: 'alice', identityProvider: 'local', isAdmin: true }, 400);
      await expectStatus('POST', '/api/users', { username: 'al', identityProvider: 'local' }, 400);
      await expectStatus('POST', '/api/users', { username: 'alice', identityProvider: 'saml' }, 400);
      await expectStatus('POST', '/api/users', { username: 'alice' }, 400);
      await expectStatus(
        'POST',
        '/api/users',
        {
          username: 'alice',
          password: 'secret1',
          identityProvider: 'local',
          autoGenerated: false,
          mqttPublishPrefix: 'plant1/',
          grantTypes: [{ method: 'password', isRequired: true }, { method: 'certificate' }],
          certificates: [{ fingerprint: 'ab:cd' }],
          initialPermissions: [{ resource: 'a/+/c', operation: 'readWrite', context: 'mqtt' }],
          roles: ['r1'],
          enforceMFAEnrollment: true,
        },
        200,
      );
      await expectStatus('POST', '/api/users', { username: 'alice', identityProvider: 'local', initialPermissions: [{ id: 'p', resource: 'a', operation: 'read', context: 'mqtt' }] }, 400);
      await expectStatus('POST', '/api/users/batch', [], 400);
      await expectStatus('POST', '/api/users/batch', [{ username: 'bob', identityProvider: 'ldap' }], 200);
      await expectStatus('POST', '/api/users/batch/delete', ['u1', 'u2'], 200);
      await expectStatus('PUT', '/api/users/u1', { disableMfa: true, permissions: [] }, 200);
      await expectStatus('PUT', '/api/users/u1', { newPassword: 'secret2' }, 400);
    });

    it('routes static paths before /{id} (change-password, roles/page, endpoints/schema)', async () => {
      await expectStatus('PUT', '/api/users/change-password', { password: 'secret1', newPassword: 'secret2' }, 200);
      await expectStatus('PUT', '/api/users/change-password', { password: 'secret1', newPassword: 'abc' }, 400);
      await expectStatus('GET', '/api/roles/names', undefined, 200);
      await expectStatus('GET', '/api/endpoints/schema', undefined, 200);
    });

    it('listUsers: rowsPerPage 1..100, repeated username[eq] passes, unknown parameters are 400', async () => {
      await expectStatus('GET', '/api/listUsers', undefined, 200);
      await expectStatus('GET', '/api/listUsers?rowsPerPage=100&pageNumber=1&excludeAutoGenerated=true', undefined, 200);
      await expectStatus('GET', '/api/listUsers?rowsPerPage=101', undefined, 400);
      await expectStatus('GET', '/api/listUsers?pageNumber=0', undefined, 400);
      await expectStatus('GET', '/api/listUsers?excludeAutoGenerated=maybe', undefined, 400);
      await expectStatus('GET', '/api/listUsers?username[eq]=a&username[eq]=bb', undefined, 200);
      await expectStatus('GET', '/api/listUsers?username%5Beq%5D=a&username%5Beq%5D=bb&rowsPerPage=5', undefined, 200);
      await expectStatus('GET', '/api/listUsers?username[eq]=alice', undefined, 200);
      await expectStatus('GET', '/api/listUsers?colour=red', undefined, 400);

      // What the application receives: the literal names, arrays for exploded parameters, coerced scalars.
      const seen = async (path: string): Promise<unknown> => {
        const res = await fetch(base + path);
        expect(res.status).to.equal(200);
        return ((await res.json()) as { query: unknown }).query;
      };
      expect(await seen('/api/listUsers?username[eq]=a&username[eq]=bb&rowsPerPage=5&excludeAutoGenerated=false')).to.deep.equal({
        'username[eq]': ['a', 'bb'],
        rowsPerPage: 5,
        excludeAutoGenerated: false,
      });
      expect(await seen('/api/listUsers?username[eq]=alice')).to.deep.equal({ 'username[eq]': ['alice'] });
      expect(await seen('/api/roles?name[eq]=admin')).to.deep.equal({ 'name[eq]': 'admin' });
      expect(await seen('/api/roles/page?rowsPerPage=10&pageNumber=1&names=x')).to.deep.equal({
        rowsPerPage: 10,
        pageNumber: 1,
        names: ['x'],
      });
    });

    it('roles/page and permissions/page: rowsPerPage (1..50) and pageNumber are required', async () => {
      await expectStatus('GET', '/api/roles/page?pageNumber=1', undefined, 400);
      await expectStatus('GET', '/api/roles/page?rowsPerPage=51&pageNumber=1', undefined, 400);
      await expectStatus('GET', '/api/roles/page?rowsPerPage=0&pageNumber=1', undefined, 400);
      await expectStatus('GET', '/api/roles/page?rowsPerPage=10', undefined, 400);
      await expectStatus('GET', '/api/roles/page?rowsPerPage=50&pageNumber=2&names=a&names=b&isShared=false&autoGenerated=true', undefined, 200);
      await expectStatus('GET', '/api/permissions/page?rowsPerPage=51&pageNumber=1', undefined, 400);
      await expectStatus('GET', '/api/permissions/page?rowsPerPage=5&pageNumber=1&ids=a&ids=b', undefined, 200);
      await expectStatus('GET', '/api/roles?name[eq]=admin', undefined, 200);
    });

    it('roles and permissions: request bodies follow the contract', async () => {
      await expectStatus('POST', '/api/roles', { name: 'op', isShared: true, permissions: [{ resource: '/api/#', operation: 'read', context: 'http' }] }, 200);
      await expectStatus('POST', '/api/roles', { name: 'op' }, 400);
      await expectStatus('POST', '/api/roles', { name: '', isShared: true }, 400);
      await expectStatus('PUT', '/api/roles/r1', { isShared: true }, 400);
      await expectStatus('PUT', '/api/roles/r1', { name: 'op', idpGroupIds: 'g1,g2', ldapGroupDn: 'cn=ops,dc=example' }, 200);
      await expectStatus('POST', '/api/roles/r1/permissions', { resource: 'x', operation: 'read', context: 'amqp' }, 400);
      await expectStatus('POST', '/api/roles/r1/permissions', { resource: '', operation: 'read', context: 'mqtt' }, 400);
      await expectStatus('PUT', '/api/roles/r1/permissions/p1', { operation: 'write' }, 200);
      await expectStatus('PUT', '/api/roles/r1/permissions/p1', { resource: 'x' }, 400);
      await expectStatus('DELETE', '/api/users/u1/roles', { roleId: 'r1' }, 200);
      await expectStatus('DELETE', '/api/users/u1/roles', {}, 400);
      await expectStatus('DELETE', '/api/users/u1/certificates', { fingerprint: 'ab' }, 200);
    });

    it('registry, certificates, maintenance and broker bodies', async () => {
      await expectStatus('POST', '/api/client-registry/register', { username: 'dev1', password: 'secret1', context: 'line 3' }, 200);
      await expectStatus('POST', '/api/client-registry/register', { username: 'dev1', csr: 'LS0t', context: 'line 3' }, 200);
      await expectStatus('POST', '/api/client-registry/register', { username: 'dev1', context: 'line 3' }, 400);
      await expectStatus('POST', '/api/client-registry/register', { username: 'dev1', password: 'secret1' }, 400);
      await expectStatus('POST', '/api/client-registry/open', { duration: 0 }, 400);
      await expectStatus('POST', '/api/client-registry/open', { duration: 60000 }, 200);
      await expectStatus('POST', '/api/client-registry/open', undefined, 200);
      await expectStatus('DELETE', '/api/client-registry/runners/dev1?id=dev1', undefined, 200);
      await expectStatus('POST', '/api/certificates', '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n', 200);
      await expectStatus('POST', '/api/certificates', '', 400);
      await expectStatus('POST', '/api/certificates', { pem: 'x' }, 400);
      await expectStatus('DELETE', '/api/certificates', undefined, 400);
      await expectStatus('DELETE', '/api/certificates?id=abc', undefined, 200);
      await expectStatus('POST', '/api/broker/auth/enhanced', { client_id: 'c1', properties: { p_authentication_method: 'SCRAM-SHA-1', other: 1 } }, 200);

      const form = new FormData();
      form.append('file', new Blob([new Uint8Array([0x1f, 0x8b, 0x08, 0x00])], { type: 'application/gzip' }), 'backup.tar.gz');
      const ok = await fetch(`${base}/api/maintenance/db/restore`, { method: 'POST', body: form });
      expect(ok.status, await ok.text()).to.equal(200);
      const empty = new FormData();
      empty.append('other', 'x');
      const missing = await fetch(`${base}/api/maintenance/db/restore`, { method: 'POST', body: empty });
      expect(missing.status, await missing.text()).to.equal(400);
    });

    it('Area B: operation enums, and the transform input may be any JSON value including null', async () => {
      await expectStatus('PUT', '/api/connections/x/operation', { operation: 'explode' }, 400);
      await expectStatus('PUT', '/api/connections/x/operation', { operation: 'connect' }, 200);
      await expectStatus('PUT', '/api/connections/x/operation', { operation: 'enable' }, 400);
      await expectStatus('PUT', '/api/endpoints/x/operation', { operation: 'disable' }, 200);
      await expectStatus('PUT', '/api/mappings/x/operation', { operation: 'connect' }, 400);
      await expectStatus('PUT', '/api/servers/x/operation', { operation: 'enable', force: true }, 400);
      await expectStatus('POST', '/api/rule-engine/transform', { input: null, transformation: '$' }, 200);
      for (const input of [{ a: 1 }, [1, 2], 'text', 42, true]) {
        await expectStatus('POST', '/api/rule-engine/transform', { input, transformation: '$' }, 200);
      }
      await expectStatus('POST', '/api/rule-engine/transform', { transformation: '$' }, 400);
      await expectStatus('POST', '/api/rule-engine/transform', { input: 1, transformation: '' }, 400);
    });
  });

  describe('the compiled validators answer bad requests as express-openapi-validator did', () => {
    const servers: Server[] = [];
    const bases: string[] = [];

    before(async () => {
      for (const validator of validators) {
        const app = express();
        validator.mount(app);
        app.use((_req: Request, res: Response) => void res.status(200).json({ ok: true }));
        app.use((err: unknown, _req: Request, res: Response, _next: NextFunction) => {
          const e = err as { status?: number; message?: string; errors?: { path: string; message: string }[] };
          res.status(e.status ?? 500).json({ message: e.message, errors: e.errors?.map((x) => ({ path: x.path, message: x.message })) });
        });
        const server = await new Promise<Server>((resolve, reject) => {
          const s = app.listen(0, '127.0.0.1', (error?: Error) => (error ? reject(error) : resolve(s)));
        });
        servers.push(server);
        bases.push(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
      }
    });

    after(async () => {
      for (const server of servers) await new Promise<void>((resolve) => server.close(() => resolve()));
    });

    const cases: { method: string; path: string; body?: string; type?: string }[] = [
      { method: 'POST', path: '/api/login', body: '{"username":"admin"}' },
      { method: 'POST', path: '/api/login', body: '{"username":"admin","password":"abcd"}' },
      { method: 'POST', path: '/api/login', body: '{"username":"admin","password":"secret1","extra":1}' },
      { method: 'POST', path: '/api/login', body: '{"username":"admin","password":"secret1","expireTimeInHours":0}' },
      { method: 'POST', path: '/api/login', body: '{"username":"admin","password":"secret1"}', type: 'text/xml' },
      { method: 'POST', path: '/api/users', body: '{"username":"alice","identityProvider":"saml"}' },
      { method: 'POST', path: '/api/users', body: '{"username":"al","identityProvider":"local"}' },
      { method: 'POST', path: '/api/users/batch', body: '[]' },
      { method: 'POST', path: '/api/roles', body: '{"name":"","isShared":true}' },
      { method: 'PUT', path: '/api/connections/x/operation', body: '{"operation":"explode"}' },
      { method: 'GET', path: '/api/listUsers?rowsPerPage=101' },
      { method: 'GET', path: '/api/listUsers?excludeAutoGenerated=maybe' },
      { method: 'GET', path: '/api/listUsers?colour=red' },
      { method: 'GET', path: '/api/listUsers?rowsPerPage=' },
      { method: 'GET', path: '/api/roles/page?rowsPerPage=10' },
      { method: 'GET', path: '/api/audit?since=2026-01-01T00:00:00Z' },
      { method: 'GET', path: '/api/audit?since=yesterday' },
      { method: 'DELETE', path: '/api/certificates' },
      { method: 'PATCH', path: '/api/users/u1', body: '{}' },
      { method: 'POST', path: '/api/rule-engine/transform', body: '{"transformation":"$"}' },
      { method: 'POST', path: '/api/client-registry/register', body: '{"username":"dev1","context":"line 3"}' },
    ];

    it('the same status, message and errors for each of these requests', async () => {
      for (const c of cases) {
        const answers = [];
        for (const base of bases) {
          const headers: Record<string, string> = c.body !== undefined ? { 'content-type': c.type ?? 'application/json' } : {};
          const res = await fetch(base + c.path, { method: c.method, headers, body: c.body });
          answers.push({ status: res.status, body: (await res.json()) as unknown });
        }
        expect(answers[0]!.status, `${c.method} ${c.path} ${c.body ?? ''}`).to.be.oneOf([400, 405, 415]);
        expect(answers[1], `${c.method} ${c.path} ${c.body ?? ''}`).to.deep.equal(answers[0]);
      }
    });

    it('names a missing media type (express-openapi-validator said "unsupported media type undefined")', async () => {
      const res = await fetch(`${bases[1]}/api/login`, { method: 'POST' });
      expect(res.status).to.equal(415);
      expect(((await res.json()) as { message: string }).message).to.equal('media type not specified');
    });
  });
});
