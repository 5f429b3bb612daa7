import { BadRequestError } from '../../errors/errors.js';
import { categoryOf, type AuditCategory, type AuditKey, type AuditOutcome, type AuditRecord, type AuditTrail } from '../../audit/index.js';
import type { RouteModule } from '../create-http-app.js';
import { queryInt, queryString } from './query.js';

/** A page's continuation: the key of its last record, opaque to clients. */
export function encodeCursor(key: AuditKey): string {
  return Buffer.from(JSON.stringify(key)).toString('base64url');
}

function decodeCursor(text: string): AuditKey {
  try {
    const key = JSON.parse(Buffer.from(text, 'base64url').toString('utf8')) as unknown;
    if (Array.isArray(key) && key.length === 3 && Number.isSafeInteger(key[0]) && Number.isSafeInteger(key[1]) && typeof key[2] === 'string') return key as AuditKey;
  } catch {
    // reported below
  }
  throw new BadRequestError('cursor is not one this API answered (use nextCursor of the previous page)');
}

function view(r: AuditRecord) {
  return {
    id: encodeCursor([r.time, r.seq, r.run]),
    time: new Date(r.time).toISOString(),
    action: r.action,
    category: categoryOf(r.action),
    outcome: r.outcome,
    ...(r.actor ? { actor: r.actor } : {}),
    ...(r.user !== undefined ? { user: r.user } : {}),
    ...(r.source !== undefined ? { source: r.source } : {}),
    details: r.details,
  };
}

/** GET /api/audit (gatewayd addition, docs/security.md "Audit trail"): the trail, newest first, a page at a time. */
export function auditRoutes(deps: { audit: AuditTrail }): RouteModule {
  return (r) => {
    r.get('/api/audit', (req, res) => {
      const q = req.query as Record<string, unknown>;
      const time = (name: string) => {
        const text = queryString(q[name]);
        return text === undefined ? undefined : Date.parse(text);
      };
      const from = time('from');
      const to = time('to');
      if (from !== undefined && to !== undefined && from > to) throw new BadRequestError('from is after to');
      const cursor = queryString(q.cursor);
      const page = deps.audit.query({
        ...(from !== undefined ? { from } : {}),
        ...(to !== undefined ? { to } : {}),
        ...(q.user !== undefined ? { user: queryString(q.user)! } : {}),
        ...(q.action !== undefined ? { action: queryString(q.action)! } : {}),
        ...(q.outcome !== undefined ? { outcome: queryString(q.outcome) as AuditOutcome } : {}),
        ...(q.category !== undefined ? { category: queryString(q.category) as AuditCategory } : {}),
        ...(q.endpoint !== undefined ? { endpoint: queryString(q.endpoint)! } : {}),
        limit: queryInt(q.limit, 50),
        ...(cursor !== undefined ? { after: decodeCursor(cursor) } : {}),
      });
      res.json({ items: page.records.map(view), ...(page.next ? { nextCursor: encodeCursor(page.next) } : {}) });
    });

    r.get('/api/audit/actions', (_req, res) => void res.json({ actions: deps.audit.actions() }));
  };
}
