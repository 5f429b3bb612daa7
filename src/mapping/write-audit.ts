// Control actions audited (IEC 62443-3-3 SR 2.8, docs/security.md "Audit trail"): every value a
// write endpoint is asked to write to its device is one audit event — who asked (the MQTT client
// and its user, or the part of the gateway acting for them: a mapping, the OPC UA server for a
// session, a Sparkplug edge node for its host), which endpoint, the value and the result (written,
// or why not: the device's refusal, a filter, a connection that is down). All ways of writing meet
// in the endpoint's <topic>/set (endpoint-resource.ts), so every driver gets this without a line
// of its own. The trail's rate limit (audit.maxEventsPerSecond) keeps a write storm off the flash.
import type { Logger } from '../log/index.js';
import type { MessageOrigin } from '../mqtt/index.js';
import type { EndpointDef } from './service-files.js';

/** The last write of an endpoint as GET /api/endpoints shows it. */
export interface LastWrite {
  ok: boolean;
  /** The value written (after filter and transform), or the value asked for when it got no further. */
  value?: unknown;
  error?: string;
  /** When the value arrived on <topic>/set (epoch ms). */
  at: number;
  /** The gatewayd user it was written for. */
  by?: string;
  clientId?: string;
  via?: string;
}

export const WRITTEN = 'endpoint written';
export const WRITE_FAILED = 'endpoint write failed';

/** The last write of an endpoint in the audit trail (its newest event), for the view after a restart. */
export type LastWriteLookup = (endpointId: string) => LastWrite | undefined;

/** An audit trail record as far as a write's event needs it (src/audit's AuditRecord). */
export interface AuditedWrite {
  time: number;
  action: string;
  actor?: { username: string };
  details: Record<string, unknown>;
}

/** What auditWrite logged, read back: the endpoint's last write as its view shows it (undefined: not a write's event). */
export function lastWriteOfEvent(e: AuditedWrite): LastWrite | undefined {
  if (e.action !== WRITTEN && e.action !== WRITE_FAILED) return undefined;
  const d = e.details;
  const text = (v: unknown) => (typeof v === 'string' ? v : undefined);
  const last: LastWrite = { ok: e.action === WRITTEN, at: e.time };
  if (d.value !== undefined) last.value = d.value;
  const by = e.actor?.username ?? text(d.by);
  for (const [key, value] of [['error', text(d.error)], ['by', by], ['clientId', text(d.clientId)], ['via', text(d.via)]] as const) if (value !== undefined) last[key] = value;
  return last;
}

/** Logs the audit event of one write and answers what the endpoint keeps as its last write. */
export function auditWrite(log: Logger, def: EndpointDef, origin: MessageOrigin, result: { ok: boolean; value?: unknown; error?: string; timestamp: number }): LastWrite {
  const last: LastWrite = { ok: result.ok, at: result.timestamp };
  if (result.value !== undefined) last.value = result.value;
  if (result.error !== undefined) last.error = result.error;
  if (origin.username !== undefined) last.by = origin.username;
  if (origin.clientId !== undefined) last.clientId = origin.clientId;
  if (origin.via !== undefined) last.via = origin.via;
  log.audit(result.ok ? WRITTEN : WRITE_FAILED, {
    endpoint: def.id,
    topic: `${def.topic}/set`,
    ...(result.value !== undefined ? { value: result.value } : {}),
    ...(result.error !== undefined ? { error: result.error } : {}),
    ...(origin.username !== undefined && origin.userId !== undefined ? { actor: { userId: origin.userId, username: origin.username } } : origin.username !== undefined ? { by: origin.username } : {}),
    ...(origin.clientId !== undefined ? { clientId: origin.clientId } : {}),
    ...(origin.via !== undefined ? { via: origin.via } : {}),
    // The writer's address: the trail's source column, as a request's address is (audit-records.ts).
    ...(origin.remote !== undefined ? { source: origin.remote } : {}),
  });
  return last;
}
