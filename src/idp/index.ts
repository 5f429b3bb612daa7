export { createIdpService, IDP_REDIRECT_PATH, IDP_LOGIN_PATH, PENDING_LOGIN_TTL_MS, MAX_PENDING_LOGINS, claimValue, groupsOf, roleGroupIds, isLoopbackHttp } from './idp-service.js';
export type { IdpService, IdpServiceDeps, IdpRequestContext, LoginStart } from './idp-service.js';
export { createPendingLogins } from './pending-logins.js';
export type { PendingLogin, PendingLogins } from './pending-logins.js';
