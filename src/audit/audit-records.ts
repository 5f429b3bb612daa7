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

/** An `actor` field of an event not made by a request (a write over MQTT): {userId, username}. */
function actorField(value: unknown): AuditActor | undefined {
  const a = value as Partial<AuditActor> | null | undefined;
  return a && typeof a === 'object' && typeof a.userId === 'string' && typeof a.username === 'string' ? { userId: a.userId, username: a.username } : undefined;
}

export function toRecord(input: RecordInput): AuditRecord {
  // The logger's own redaction: the same keys never reach a log line nor the trail.
  const fields = redact(input.fields) as Record<string, unknown>;
  const { username, actor: actorValue, ...rest } = fields;
  const actor = input.actor ?? actorField(actorValue);
  if (actorValue !== undefined && !actorField(actorValue)) rest.actor = actorValue;
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
  if (actor) record.actor = { userId: bound(actor.userId, MAX_DEPTH - 1) as string, username: bound(actor.username, MAX_DEPTH - 1) as string };
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

/**
 * What an event is about, for the Audit page and GET /api/audit?category=: control actions
 * (writes to field devices), sign-ins, accounts and rights, MQTT sessions and bridges, services,
 * maintenance; everything else is "other".
 */
export const AUDIT_CATEGORIES = ['control', 'sign-in', 'accounts', 'mqtt', 'services', 'maintenance', 'other'] as const;
export type AuditCategory = (typeof AUDIT_CATEGORIES)[number];

const CATEGORY_RULES: [RegExp, AuditCategory][] = [
  [/^endpoint (written|write failed)$/, 'control'],
  [/^(login|logout|mfa|ldap login|idp login|password|tokens revoked)\b/, 'sign-in'],
  [/^(users?|roles?|grant|registration|registry|trusted certificates?)\b/, 'accounts'],
  [/^(mqtt|bridge)\b/, 'mqtt'],
  [/^services?\b/, 'services'],
  [/^(database|audit)\b/, 'maintenance'],
];

export function categoryOf(action: string): AuditCategory {
  return CATEGORY_RULES.find(([re]) => re.test(action))?.[1] ?? 'other';
}

/** The endpoint a control action wrote (or tried to). */
export const endpointOf = (r: AuditRecord): string | undefined => (typeof r.details.endpoint === 'string' ? r.details.endpoint : undefined);

export interface AuditFilter {
  user?: string;
  action?: string;
  outcome?: AuditOutcome;
  category?: AuditCategory;
  endpoint?: string;
}

/** Does the record pass every filter? (A query reads one index and checks the rest on each record.) */
export function matches(r: AuditRecord, f: AuditFilter): boolean {
  return (
    (f.user === undefined || namesOf(r).includes(f.user)) &&
    (f.action === undefined || r.action === f.action) &&
    (f.outcome === undefined || r.outcome === f.outcome) &&
    (f.category === undefined || categoryOf(r.action) === f.category) &&
    (f.endpoint === undefined || endpointOf(r) === f.endpoint)
  );
}

/**
 * The secondary index a filter reads, each ordered by time, so that a query is one range of one
 * index (docs/design.md §6): user with action or outcome, action, endpoint, user, category,
 * outcome — the first the filter allows. The tag names the index; the values follow in a fixed
 * order. The other filters are checked on the records read (matches); an action decides its
 * outcome and its category, so a filter with both reads the action's index (the caller checks
 * that they agree).
 */
export function indexPrefix(filter: AuditFilter): IndexKey | undefined {
  const { user, action, outcome, category, endpoint } = filter;
  if (user !== undefined && action !== undefined) return ['ua', user, action];
  if (action !== undefined) return ['a', action];
  if (endpoint !== undefined) return ['e', endpoint];
  if (user !== undefined && outcome !== undefined) return ['uo', user, outcome];
  if (user !== undefined) return ['u', user];
  if (category !== undefined) return ['c', category];
  if (outcome !== undefined) return ['o', outcome];
  return undefined;
}

/** Does the index of `prefix` answer the whole filter (no filter left to check on the records)? */
export function indexAnswers(prefix: IndexKey | undefined, f: AuditFilter): boolean {
  const tag = prefix?.[0];
  // An action implies its outcome and category.
  const byAction = tag === 'a' || tag === 'ua';
  return (
    (f.user === undefined || tag === 'u' || tag === 'ua' || tag === 'uo') &&
    (f.action === undefined || byAction) &&
    (f.outcome === undefined || byAction || tag === 'uo' || tag === 'o') &&
    (f.category === undefined || byAction || tag === 'c') &&
    (f.endpoint === undefined || tag === 'e')
  );
}

/** Every index entry of a record (at most 10: action, outcome, category, endpoint, and three per name). */
export function indexKeysOf(r: AuditRecord): IndexKey[] {
  const key = keyOf(r);
  const prefixes: IndexKey[] = [['a', r.action], ['o', r.outcome], ['c', categoryOf(r.action)]];
  const endpoint = endpointOf(r);
  if (endpoint !== undefined) prefixes.push(['e', endpoint]);
  for (const user of namesOf(r)) prefixes.push(['u', user], ['ua', user, r.action], ['uo', user, r.outcome]);
  return prefixes.map((p) => [...p, ...key]);
}
