// Table-driven authorization over EVERY operation of src/http/openapi.yaml (docs/design.md §3, §4):
// - permission operations: no credential 401; a user without permissions 403; a user holding
//   exactly {http, <concrete path>, read for GET / write otherwise} passes (any status but
//   401/403); a user holding only the opposite operation 403;
// - authenticated-only operations: no credential 401; a user without permissions passes;
// - public operations: no credential is not refused with 401.
// Requests carry a minimal body and query that satisfy the document (generated from its
// schemas), so request validation does not answer before authorization does.
// Then: malformed, unknown, expired and revoked credentials, HTTP Basic, and wildcards.
import { expect } from 'chai';
import { randomBytes, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';

import { authenticatedOperations, publicOperations } from '../src/http/access-classes.js';
import { openApiPath } from '../src/http/create-http-app.js';
import { ADMIN_PASSWORD, GOOD_PASSWORD, startGateway, type ApiResponse, type TestGateway } from './support/harness.js';

type Json = any;
type Perm = { resource: string; operation: 'read' | 'write' | 'readWrite'; context: 'mqtt' | 'http' };

const doc: Json = parse(readFileSync(openApiPath, 'utf8'));
const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options'] as const;

function deref(node: Json): Json {
  let n = node;
  for (let i = 0; n && typeof n === 'object' && typeof n.$ref === 'string' && i < 20; i++) {
    n = n.$ref
      .replace(/^#\//, '')
      .split('/')
      .reduce((o: Json, k: string) => o?.[k.replace(/~1/g, '/').replace(/~0/g, '~')], doc);
  }
  return n;
}

/** A minimal value that satisfies a (valid, simple) JSON schema of the document. */
function sample(schemaRef: Json, depth = 0): Json {
  const s = deref(schemaRef) ?? {};
  if (depth > 8) return undefined;
  if (s.enum) return s.enum[0];
  if (s.default !== undefined) return s.default;
  if (s.allOf) return Object.assign({}, ...s.allOf.map((x: Json) => sample(x, depth + 1)));
  if (s.oneOf || (s.anyOf && !s.type)) return sample((s.oneOf ?? s.anyOf)[0], depth + 1);
  switch (s.type) {
    case 'object': {
      const out: Record<string, Json> = {};
      const required = new Set<string>([...(s.required ?? []), ...((s.anyOf?.[0]?.required as string[]) ?? [])]);
      for (const key of required) out[key] = sample(s.properties?.[key] ?? {}, depth + 1);
      return out;
    }
    case 'array':
      return Array.from({ length: s.minItems ?? 0 }, () => sample(s.items ?? {}, depth + 1));
    case 'string': {
      if (s.format === 'date-time') return new Date().toISOString();
      if (s.format === 'binary') return 'x';
      const min = s.minLength ?? 0;
      const max = s.maxLength ?? 64;
      return 'sample-value-xyz'.padEnd(min, 'x').slice(0, Math.max(min, Math.min(max, 16)));
    }
    case 'integer':
    case 'number':
      return s.minimum !== undefined ? s.minimum + (s.exclusiveMinimum ? 1 : 0) : 1;
    case 'boolean':
      return false;
    default:
      return {}; // any JSON value
  }
}

interface Operation {
  key: string; // "METHOD /api/path/{id}", the form access-classes uses
  method: string;
  path: string; // concrete: path params substituted
  query: string;
  body?: unknown;
  multipart?: boolean;
}

function operations(): Operation[] {
  const out: Operation[] = [];
  for (const [route, item] of Object.entries<Json>(doc.paths)) {
    for (const m of METHODS) {
      const op = item[m];
      if (!op) continue;
      const method = m.toUpperCase();
      const params = [...(item.parameters ?? []), ...(op.parameters ?? [])].map(deref);
      const path = route.replace(/\{[^}]+\}/g, () => randomUUID());
      const query = params
        .filter((p: Json) => p.in === 'query' && p.required)
        .map((p: Json) => `${encodeURIComponent(p.name)}=${encodeURIComponent(String(sample(p.schema)))}`)
        .join('&');
      const entry: Operation = { key: `${method} ${route}`, method, path, query };
      const content = deref(op.requestBody)?.content ?? {};
      if (content['application/json']) entry.body = sample(content['application/json'].schema);
      else if (content['multipart/form-data']) entry.multipart = true;
      out.push(entry);
    }
  }
  return out;
}

const OPS = operations();
/** Called by a cluster's nodes, guarded by brokerHooks (allowFrom, secret), not by a user credential. */
const CLUSTER_HOOKS = ['rabbitmq/user', 'rabbitmq/vhost', 'rabbitmq/resource', 'rabbitmq/topic', 'vernemq', 'emqx/authn', 'emqx/authz'].map((h) => `POST /api/broker/hooks/${h}`);
/** Called by a site's edges with a join token, then their own credential (src/site/site-feed.ts), not a user's. */
const SITE_EDGE_OPERATIONS = ['POST /api/site/join', 'GET /api/site/snapshot', 'GET /api/site/changes'];
const target = (op: Operation) => (op.query ? `${op.path}?${op.query}` : op.path);
const isPublic = (op: Operation) => publicOperations.has(op.key);
const isAuthenticatedOnly = (op: Operation) => authenticatedOperations.has(op.key);

// Handlers of these authenticated-only operations check a second factor themselves (an OTP
// or backup code), so a bogus one may answer 401 from the handler, not from authentication.
const CHECKS_OWN_SECRET = new Set(['POST /api/mfa/validate', 'POST /api/mfa/disable', 'POST /api/mfa/regenerate/backupcodes', 'POST /api/mfa/login']);
/** The 401 that authentication (not a handler) answers: one of its fixed messages. */
const isCredentialRefusal = (res: ApiResponse) =>
  res.status === 401 && /authentication required|token is unknown or expired|Authorization scheme|Basic credentials|invalid username or password/.test(String(res.body?.message));

describe('authorization matrix', function () {
  let gw: TestGateway;
  let admin: string;
  let nobody: { id: string; username: string; token: string };

  before(async () => {
    gw = await startGateway();
    admin = await gw.login();
    nobody = await gw.userWith([], 'nobody-at-all');
  });
  after(async () => {
    await gw?.stop();
  });

  async function call(op: Operation, token?: string, body = op.body): Promise<ApiResponse> {
    if (op.multipart) {
      const form = new FormData();
      form.append('file', new Blob([randomBytes(16)], { type: 'application/gzip' }), 'backup.tar.gz');
      return gw.api(op.method, target(op), { ...(token ? { token } : {}), raw: form });
    }
    return gw.api(op.method, target(op), { ...(token ? { token } : {}), ...(body !== undefined ? { body } : {}) });
  }
  const show = (op: Operation, res: ApiResponse) => `${op.key} -> ${res.status} ${JSON.stringify(res.body).slice(0, 200)}`;

  it('covers every operation of the document, and the access classes are those of docs/design.md §3', () => {
    expect(OPS.length).to.be.at.least(88); // the contract's 88 and the additions (openapi-document.test.ts checks the exact set)
    const keys = new Set(OPS.map((o) => o.key));
    const declaredPublic = OPS.filter((o) => Array.isArray(deref(doc.paths[o.key.split(' ')[1]!])[o.method.toLowerCase()].security)).map((o) => o.key);
    expect([...publicOperations].filter((k) => k !== 'GET /api/openapi.json').sort()).to.deep.equal(declaredPublic.sort());
    expect([...publicOperations].sort()).to.deep.equal(
      [
        'POST /api/login',
        'POST /api/logout',
        'POST /api/mfa/login',
        'POST /api/client-registry/register',
        'GET /api/auth/idp',
        'GET /api/idp/login',
        'GET /api/idp/redirect',
        'POST /api/broker/auth/enhanced',
        'GET /api/openapi.json',
        'GET /health',
        'GET /health/ready',
        ...CLUSTER_HOOKS,
        ...SITE_EDGE_OPERATIONS,
      ].sort(),
    );
    expect([...authenticatedOperations].sort()).to.deep.equal(
      [
        'GET /api/session',
        'GET /api/permissions',
        'PUT /api/users/change-password',
        'POST /api/mfa/enable',
        'POST /api/mfa/validate',
        'POST /api/mfa/disable',
        'POST /api/mfa/regenerate/backupcodes',
        'GET /api/mfa/isenrolled',
        'GET /api/auth/ldap',
        'GET /api/auth/mfa',
        'GET /api/policy/password',
        'GET /api/policy/username',
      ].sort(),
    );
    for (const k of authenticatedOperations) expect(keys.has(k), k).to.equal(true);
  });

  describe('operations that need a permission', () => {
    for (const op of OPS.filter((o) => !isPublic(o) && !isAuthenticatedOnly(o))) {
      it(`${op.key}`, async () => {
        const needed = op.method === 'GET' || op.method === 'HEAD' ? 'read' : 'write';
        const opposite = needed === 'read' ? 'write' : 'read';

        const anonymous = await call(op);
        expect(anonymous.status, show(op, anonymous)).to.equal(401);
        expect(anonymous.body).to.include({ statusCode: 401, error: 'Unauthorized' });

        const denied = await call(op, nobody.token);
        expect(denied.status, show(op, denied)).to.equal(403);
        expect(denied.body).to.include({ statusCode: 403, error: 'Forbidden' });

        const wrongWay = await gw.userWith([{ context: 'http', resource: op.path, operation: opposite }]);
        const wrong = await call(op, wrongWay.token);
        expect(wrong.status, show(op, wrong)).to.equal(403);

        const mqttOnly = await gw.userWith([{ context: 'mqtt', resource: op.path, operation: 'readWrite' }]);
        const wrongContext = await call(op, mqttOnly.token);
        expect(wrongContext.status, show(op, wrongContext)).to.equal(403);

        // mqtt # too: a sample body may grant an MQTT permission, which only a holder may grant.
        const holder = await gw.userWith([{ context: 'http', resource: op.path, operation: needed }, { context: 'mqtt', resource: '#', operation: 'readWrite' }]);
        const allowed = await call(op, holder.token);
        expect(allowed.status, show(op, allowed)).to.not.be.oneOf([401, 403]);
      });
    }
  });

  describe('operations that need only a valid credential', () => {
    for (const op of OPS.filter(isAuthenticatedOnly)) {
      it(`${op.key}`, async () => {
        const anonymous = await call(op);
        expect(anonymous.status, show(op, anonymous)).to.equal(401);
        expect(anonymous.body).to.include({ statusCode: 401, error: 'Unauthorized' });

        // A fresh user per operation: change-password changes its password.
        const user = await gw.userWith([]);
        const body = op.key === 'PUT /api/users/change-password' ? { password: GOOD_PASSWORD, newPassword: GOOD_PASSWORD } : op.body;
        const res = await call(op, user.token, body);
        expect(res.status, show(op, res)).to.not.equal(403);
        if (CHECKS_OWN_SECRET.has(op.key)) expect(isCredentialRefusal(res), show(op, res)).to.equal(false);
        else expect(res.status, show(op, res)).to.not.equal(401);
      });
    }
  });

  describe('public operations', () => {
    for (const op of OPS.filter(isPublic)) {
      it(`${op.key}`, async () => {
        // Login checks the credential in its body: give it a real one.
        const body = op.key === 'POST /api/login' ? { username: 'admin', password: ADMIN_PASSWORD } : op.body;
        const res = await call(op, undefined, body);
        if (CHECKS_OWN_SECRET.has(op.key)) expect(isCredentialRefusal(res), show(op, res)).to.equal(false);
        else expect(res.status, show(op, res)).to.not.equal(401);
        // A cluster hook needs no user credential; its caller guard refuses everyone while the
        // hooks are off (the default here; test/broker-hooks.test.ts covers them on).
        if (CLUSTER_HOOKS.includes(op.key)) expect(res.body?.message, show(op, res)).to.match(/broker hooks are disabled/);
        else expect(res.status, show(op, res)).to.not.equal(403);
      });
    }
    it('GET /api/openapi.json', async () => {
      const res = await gw.api('GET', '/api/openapi.json');
      expect(res.status).to.equal(200);
      expect(res.body.openapi).to.match(/^3\./);
    });
  });

  describe('credentials', () => {
    const guarded = '/api/users/ids';

    it('answers 401 without a credential', async () => {
      const res = await gw.api('GET', guarded);
      expect(res.status).to.equal(401);
      expect(res.body).to.include({ statusCode: 401, error: 'Unauthorized' });
      expect(res.body.message).to.be.a('string').and.not.include('at ');
    });

    it('checks the credential before the request is validated (no credential and a bad request: 401, not 400)', async () => {
      // docs/design.md §3: a missing credential answers 401. Validating first would describe the
      // request schema to anonymous callers and parse their uploads before authentication.
      const cases: [string, string, unknown?][] = [
        ['POST', '/api/users', {}],
        ['POST', '/api/roles', { name: 'x', isShared: 'no' }],
        ['GET', '/api/roles/page'],
        ['GET', '/api/listUsers?rowsPerPage=1000'],
      ];
      for (const [method, path, body] of cases) {
        const res = await gw.api(method, path, body !== undefined ? { body } : {});
        expect(res.status, `${method} ${path} -> ${JSON.stringify(res.body)}`).to.equal(401);
      }
    });

    it('answers 401 for malformed Authorization headers', async () => {
      const token = await gw.login();
      const headers = [
        'Bearer',
        'Bearer ',
        `Bearer${token}`,
        `Token ${token}`,
        token,
        'Bearer not-a-token',
        `Bearer ${token}x`,
        'Basic',
        'Basic !!!',
        `Basic ${Buffer.from('admin').toString('base64')}`,
        `Basic ${Buffer.from(':' + ADMIN_PASSWORD).toString('base64')}`,
        `Digest username="admin"`,
      ];
      for (const authorization of headers) {
        const res = await gw.api('GET', guarded, { headers: { authorization } });
        expect(res.status, authorization).to.equal(401);
        expect(res.body.error).to.equal('Unauthorized');
        expect(JSON.stringify(res.body)).to.not.include(token);
      }
    });

    it('answers 401 for unknown, expired and revoked tokens', async () => {
      const unknown = randomBytes(32).toString('base64url');
      expect((await gw.api('GET', guarded, { token: unknown })).status).to.equal(401);

      const adminId = gw.services.users.findByUsername('admin')!.id;
      const { token: expired, record } = await gw.services.tokens.issue(adminId, { lifetimeHours: -1 });
      const res = await gw.api('GET', guarded, { token: expired });
      expect(res.status).to.equal(401);
      expect(res.body.message).to.include('expired');
      // An expired token is not listed among the user's tokens.
      const tokens = (await gw.api('GET', `/api/users/${adminId}/tokens`, { token: admin })).body as { fingerprint: string }[];
      expect(tokens.length).to.be.greaterThan(0);
      expect(tokens.map((t) => t.fingerprint)).to.not.include(record.fingerprint);

      const live = await gw.login();
      expect((await gw.api('GET', guarded, { token: live })).status).to.equal(200);
      expect((await gw.api('POST', '/api/logout', { body: { token: live } })).status).to.equal(200);
      expect((await gw.api('GET', guarded, { token: live })).status).to.equal(401);
      // Logging out an unknown token is idempotent.
      expect((await gw.api('POST', '/api/logout', { body: { token: live } })).status).to.equal(200);
    });

    it('accepts the token scheme case-insensitively', async () => {
      const token = await gw.login();
      expect((await gw.api('GET', guarded, { headers: { authorization: `bearer ${token}` } })).status).to.equal(200);
      expect((await gw.api('GET', guarded, { headers: { authorization: `BEARER ${token}` } })).status).to.equal(200);
    });

    it('accepts HTTP Basic; a wrong password is 401, a user without the permission 403', async () => {
      const basic = (u: string, p: string) => ({ authorization: `Basic ${Buffer.from(`${u}:${p}`).toString('base64')}` });
      const ok = await gw.api('GET', guarded, { headers: basic('admin', ADMIN_PASSWORD) });
      expect(ok.status).to.equal(200);
      expect(ok.body).to.be.an('array').that.is.not.empty;
      const created = await gw.api('POST', '/api/roles', { headers: basic('admin', ADMIN_PASSWORD), body: { name: `basic-${randomUUID()}`, isShared: true } });
      expect(created.status).to.equal(201);
      expect((await gw.api('GET', guarded, { headers: basic('admin', 'Wr0ng-Password') })).status).to.equal(401);
      expect((await gw.api('GET', guarded, { headers: basic('nobody-here', 'Wr0ng-Password') })).status).to.equal(401);
      expect((await gw.api('GET', guarded, { headers: basic(nobody.username, GOOD_PASSWORD) })).status).to.equal(403);
      const session = await gw.api('GET', '/api/session', { headers: basic(nobody.username, GOOD_PASSWORD) });
      expect(session.status).to.equal(200);
      expect(session.body.username).to.equal(nobody.username);
      // A password containing ':' works (split at the first colon).
      const colon = await gw.api('POST', '/api/users', { token: admin, body: { username: 'colon-user', password: 'Pa:ss-w0rd', identityProvider: 'local', initialPermissions: [{ resource: guarded, operation: 'read', context: 'http' }] } });
      expect(colon.status).to.equal(201);
      expect((await gw.api('GET', guarded, { headers: basic('colon-user', 'Pa:ss-w0rd') })).status).to.equal(200);
    });
  });

  describe('wildcards in http resources', () => {
    const grant = (resource: string, operation: Perm['operation'] = 'read'): Perm[] => [{ context: 'http', resource, operation }];

    it('/api/users/+ allows GET /api/users/x but not /api/users/x/tokens', async () => {
      const u = await gw.userWith(grant('/api/users/+'));
      const id = randomUUID();
      expect((await gw.api('GET', `/api/users/${id}`, { token: u.token })).status).to.equal(404);
      expect((await gw.api('GET', `/api/users/${u.id}`, { token: u.token })).status).to.equal(200);
      expect((await gw.api('GET', `/api/users/${id}/tokens`, { token: u.token })).status).to.equal(403);
      expect((await gw.api('GET', `/api/users/${u.id}/tokens`, { token: u.token })).status).to.equal(403);
      // `+` is one whole level: /api/users/ids is one level below /api/users as well.
      expect((await gw.api('GET', '/api/users/ids', { token: u.token })).status).to.equal(200);
      // Read only: no write.
      expect((await gw.api('PUT', `/api/users/${u.id}`, { token: u.token, body: { mqttPublishPrefix: 'p' } })).status).to.equal(403);
      expect((await gw.api('DELETE', `/api/users/${u.id}`, { token: u.token })).status).to.equal(403);
    });

    it('/api/users/# allows /api/users/x, /api/users/x/tokens and /api/users itself', async () => {
      const u = await gw.userWith(grant('/api/users/#', 'readWrite'));
      const id = randomUUID();
      expect((await gw.api('GET', `/api/users/${id}`, { token: u.token })).status).to.equal(404);
      expect((await gw.api('GET', `/api/users/${u.id}/tokens`, { token: u.token })).status).to.equal(200);
      expect((await gw.api('GET', `/api/users/${id}/tokens`, { token: u.token })).status).to.equal(404);
      const created = await gw.api('POST', '/api/users', { token: u.token, body: { username: `by-hash-${randomUUID()}`, identityProvider: 'local' } });
      expect(created.status).to.equal(201);
      // Not a sibling path.
      expect((await gw.api('GET', '/api/listUsers', { token: u.token })).status).to.equal(403);
      expect((await gw.api('GET', '/api/roles', { token: u.token })).status).to.equal(403);
    });

    it('a trailing slash is checked as the path it is routed to (/api/roles/+/+ does not open /api/roles/x/)', async () => {
      // Express serves /api/roles/x/ with the handler of /api/roles/x: the check must not see
      // an extra empty level that `+` would match.
      const role = await gw.api('POST', '/api/roles', { token: admin, body: { name: `slash-${randomUUID()}`, isShared: true } });
      const sub = await gw.userWith(grant('/api/roles/+/+', 'readWrite'));
      expect((await gw.api('GET', `/api/roles/${role.body.id}/permissions`, { token: sub.token })).status).to.equal(200);
      expect((await gw.api('GET', `/api/roles/${role.body.id}/`, { token: sub.token })).status).to.equal(403);
      expect((await gw.api('GET', '/api/roles/names/', { token: sub.token })).status).to.equal(403);
      expect((await gw.api('DELETE', `/api/roles/${role.body.id}/`, { token: sub.token })).status).to.equal(403);
      expect((await gw.api('GET', `/api/roles/${role.body.id}`, { token: admin })).status).to.equal(200);
      const users = await gw.userWith(grant('/api/users/+/+'));
      expect((await gw.api('GET', '/api/users/ids/', { token: users.token })).status).to.equal(403);
      expect((await gw.api('GET', `/api/users/${users.id}/`, { token: users.token })).status).to.equal(403);
      // The exact grant opens both spellings, as both reach the same handler.
      const exact = await gw.userWith(grant('/api/roles/names'));
      expect((await gw.api('GET', '/api/roles/names/', { token: exact.token })).status).to.equal(200);
      expect((await gw.api('GET', '/api/roles/names', { token: exact.token })).status).to.equal(200);
    });

    it('+ in the middle, # at the top, the query string and the context', async () => {
      const mid = await gw.userWith(grant('/api/+/names'));
      expect((await gw.api('GET', '/api/roles/names', { token: mid.token })).status).to.equal(200);
      expect((await gw.api('GET', '/api/roles', { token: mid.token })).status).to.equal(403);
      expect((await gw.api('GET', '/api/roles/names/extra', { token: mid.token })).status).to.not.be.oneOf([200]);

      const reader = await gw.userWith(grant('/api/#'));
      expect((await gw.api('GET', '/api/roles', { token: reader.token })).status).to.equal(200);
      expect((await gw.api('GET', '/api/listUsers?rowsPerPage=5', { token: reader.token })).status).to.equal(200);
      expect((await gw.api('POST', '/api/roles', { token: reader.token, body: { name: `r-${randomUUID()}`, isShared: true } })).status).to.equal(403);

      // The permission names the path; the query string is not part of it.
      const exact = await gw.userWith(grant('/api/listUsers'));
      expect((await gw.api('GET', '/api/listUsers?rowsPerPage=5&pageNumber=1', { token: exact.token })).status).to.equal(200);
      expect((await gw.api('GET', '/api/listUsers', { token: exact.token })).status).to.equal(200);

      // An mqtt permission never grants an http request, nor the other way round.
      const mqtt = await gw.userWith([{ context: 'mqtt', resource: '#', operation: 'readWrite' }]);
      expect((await gw.api('GET', '/api/roles', { token: mqtt.token })).status).to.equal(403);

      // `#` alone covers every path.
      const all = await gw.userWith(grant('#'));
      expect((await gw.api('GET', '/api/roles', { token: all.token })).status).to.equal(200);
    });
  });
});
