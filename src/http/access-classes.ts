// Which credential each operation needs (docs/design.md §3). Keys are "METHOD openApiRoute".
// Every operation not listed needs a permission on its request path: read for GET/HEAD,
// write for POST/PUT/PATCH/DELETE.

export const publicOperations = new Set([
  'POST /api/login',
  'POST /api/logout',
  'POST /api/mfa/login',
  'POST /api/client-registry/register',
  'GET /api/auth/idp',
  'GET /api/idp/login',
  'GET /api/idp/redirect',
  'POST /api/broker/auth/enhanced',
  // Cluster broker hooks: no credential of a user; the caller guard admits only the cluster.
  'POST /api/broker/hooks/rabbitmq/user',
  'POST /api/broker/hooks/rabbitmq/vhost',
  'POST /api/broker/hooks/rabbitmq/resource',
  'POST /api/broker/hooks/rabbitmq/topic',
  'POST /api/broker/hooks/vernemq',
  'POST /api/broker/hooks/emqx/authn',
  'POST /api/broker/hooks/emqx/authz',
  'GET /api/openapi.json',
  // A site's edges: a join token, then the edge's own credential (src/site/site-feed.ts).
  'POST /api/site/join',
  'GET /api/site/snapshot',
  'GET /api/site/changes',
  // Probes (outside /api; answered before authentication).
  'GET /health',
  'GET /health/ready',
]);

export const authenticatedOperations = new Set([
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
]);

/** What a token limited to MFA enrollment (enforceMFAEnrollment) may still call. */
export const enrollmentOperations = new Set([
  'GET /api/session',
  'POST /api/logout',
  'POST /api/mfa/enable',
  'POST /api/mfa/validate',
  'GET /api/mfa/isenrolled',
  'GET /api/auth/mfa',
  'GET /api/policy/password',
]);

export type AccessClass = 'public' | 'authenticated' | 'permission';

export function accessClassOf(operationKey: string): AccessClass {
  if (publicOperations.has(operationKey)) return 'public';
  if (authenticatedOperations.has(operationKey)) return 'authenticated';
  return 'permission';
}
