export { createAuditTrail } from './audit-trail.js';
export type { AuditStats, AuditTrail, AuditTrailDeps } from './audit-trail.js';
export { AUDIT_CATEGORIES, categoryOf } from './audit-records.js';
export type { AuditActor, AuditCategory, AuditKey, AuditOutcome, AuditRecord } from './audit-records.js';
export type { AuditPage, AuditQuery } from './audit-store.js';
