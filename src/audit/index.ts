export { createAuditTrail } from './audit-trail.js';
export type { AuditStats, AuditTrail, AuditTrailDeps } from './audit-trail.js';
export type { AuditActor, AuditKey, AuditOutcome, AuditRecord } from './audit-records.js';
export type { AuditPage, AuditQuery } from './audit-store.js';
