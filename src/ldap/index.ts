export { createLdapService, DirectoryUnavailableError, type DirectoryAnswer, type LdapService, type LdapServiceDeps } from './ldap-service.js';
export { fillFilter, normalizeDn, sameDn } from './dn.js';
