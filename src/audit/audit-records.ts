// What one audit event becomes in the store: who (the signed-in caller of the request, and the
// user the event is about), what (the event name as logged), how it ended, from where, and the
// event's other fields — redacted like a log line and bounded in size, so no secret and no
// oversized list ever reaches the trail.
import { redact } from '../log/index.js';
import type { IndexKey } from '../store/index.js';

export type AuditOutcome = 'success' | 'failure';

/** The signed-in caller whose request produced the event (REST), when there is one. */
export interface AuditActor {
  userId: string;
  username: string;
}

export interface AuditRecord {
  /** Epoch ms. */
  time: number;
  /** Order of events within one run of the daemon. */
  seq: number;
  /** Random id of the daemon run that wrote it: keys stay unique across restarts and restores. */
  run: string;
  action: string;
  outcome: AuditOutcome;
  actor?: AuditActor;
  /** The username the event is about (a login, a created user, the refused grantor...). */
  user?: string;
  /** The client's address. */
  source?: string;
  details: Record<string, unknown>;
}

/** Primary key: time order, then the run's order. */
export type AuditKey = [time: number, seq: number, run: string];

export const keyOf = (r: Pick<AuditRecord, 'time' | 'seq' | 'run'>): AuditKey => [r.time, r.seq, r.run];

/**
 * Failures are named so by the parts that log them ("login failed", "grant refused",
 * "mfa banned", "mqtt.connect.refused"); everything else is a success.
 */
export function outcomeOf(action: string): AuditOutcome {
  return /\b(failed|refused|banned)\b/.test(action) ? 'failure' : 'success';
}

const MAX_STRING = 256;
const MAX_ITEMS = 20;
const MAX_DEPTH = 4;
const MAX_DETAILS_BYTES = 4096;

function bound(value: unknown, depth: number): unknown {
  if (typeof value === 'string') return value.length > MAX_STRING ? `${value.slice(0, MAX_STRING)}…` : value;
  if (value === null || typeof value !== 'object') return typeof value === 'bigint' ? String(value) : value;
  if (depth >= MAX_DEPTH) return '…';
  if (Array.isArray(value)) {
    const items = value.slice(0, MAX_ITEMS).map((v) => bound(v, depth + 1));
    if (value.length > MAX_ITEMS) items.push(`… ${value.length - MAX_ITEMS} more`);
    return items;
  }
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) if (v !== undefined && typeof v !== 'function') out[k] = bound(v, depth + 1);
  return out;
}

/** Fields that become columns of the record rather than details. */
const SOURCE_FIELDS = ['source', 'remote'] as const;

export interface RecordInput {
  time: number;
  seq: number;
  run: string;
  action: string;
  fields: Record<string, unknown>;
  actor?: AuditActor;
  /** The request's client address, when the event came from a request. */
  requestSource?: string;
}

export function toRecord(input: RecordInput): AuditRecord {
  // The logger's own redaction: the same keys never reach a log line nor the trail.
  const fields = redact(input.fields) as Record<string, unknown>;
  const { username, ...rest } = fields;
  let source = input.requestSource;
  for (const key of SOURCE_FIELDS) {
    if (typeof rest[key] === 'string') {
      source ??= rest[key] as string;
      delete rest[key];
    }
  }
  let details = bound(rest, 0) as Record<string, unknown>;
  if (JSON.stringify(details).length > MAX_DETAILS_BYTES) details = { truncated: true, fields: Object.keys(details).slice(0, MAX_ITEMS) };
  const record: AuditRecord = { time: input.time, seq: input.seq, run: input.run, action: bound(input.action, MAX_DEPTH - 1) as string, outcome: outcomeOf(input.action), details };
  if (input.actor) record.actor = { userId: input.actor.userId, username: input.actor.username };
  if (typeof username === 'string' && username) record.user = bound(username, MAX_DEPTH - 1) as string;
  if (source) record.source = source;
  return record;
}

/** Usernames a record is found by: the caller's and the one it is about. */
export function namesOf(r: AuditRecord): string[] {
  const names = new Set<string>();
  if (r.actor) names.add(r.actor.username);
  if (r.user) names.add(r.user);
  return [...names];
}

export interface AuditFilter {
  user?: string;
  action?: string;
  outcome?: AuditOutcome;
}

/**
 * The secondary index a filter reads: one per combination of filters, each ordered by time, so
 * every query is one range of one index and a page costs the page (docs/design.md §6). The tag names
 * the combination; the values follow in a fixed order. An action decides its outcome, so a
 * filter with both reads the action's index (the caller checks that they agree).
 */
export function indexPrefix(filter: AuditFilter): IndexKey | undefined {
  let tag = '';
  const values: string[] = [];
  if (filter.user !== undefined) (tag += 'u'), values.push(filter.user);
  if (filter.action !== undefined) (tag += 'a'), values.push(filter.action);
  else if (filter.outcome !== undefined) (tag += 'o'), values.push(filter.outcome);
  return tag ? [tag, ...values] : undefined;
}

/** Every index entry of a record (at most 8: action, outcome, and three per name). */
export function indexKeysOf(r: AuditRecord): IndexKey[] {
  const key = keyOf(r);
  const filters: AuditFilter[] = [{ action: r.action }, { outcome: r.outcome }];
  for (const user of namesOf(r)) filters.push({ user }, { user, action: r.action }, { user, outcome: r.outcome });
  return filters.map((f) => [...indexPrefix(f)!, ...key]);
}
