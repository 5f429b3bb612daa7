import { X509Certificate } from 'node:crypto';
import type { HookService } from './hook-service.js';

// VerneMQ's webhooks plugin (vmq_webhooks): one POST per hook with the hook's name in the
// `vernemq-hook` header and a JSON body, answered `{"result": "ok"}`, `{"result": "next"}` or
// `{"result": {"error": ...}}`. Payloads and answers as documented in vernemq/vmq-docs
// plugindevelopment/webhookplugins.md (and vmq_webhooks_plugin.erl for the `client_cert` and
// `listener_*` fields newer versions add).

export const VERNEMQ_HOOKS = ['auth_on_register', 'auth_on_register_m5', 'auth_on_publish', 'auth_on_publish_m5', 'auth_on_subscribe', 'auth_on_subscribe_m5'] as const;
export type VerneHook = (typeof VERNEMQ_HOOKS)[number];

export interface VerneRequest {
  client_id: string;
  mountpoint?: string;
  username?: string | null;
  password?: string | null;
  peer_addr?: string | null;
  /** The client certificate (base64 DER), sent with `forward_connection_opts` on a TLS listener. */
  client_cert?: string | null;
  topic?: string;
  topics?: { topic: string; qos: number }[];
  qos?: number;
}

export interface VerneAnswer {
  body: Record<string, unknown>;
  /** Seconds VerneMQ may cache this (granted) answer: the `cache-control: max-age` header. */
  cacheSeconds?: number;
}

const NOT_ALLOWED: VerneAnswer = { body: { result: { error: 'not_allowed' } } };
/** SUBACK codes of a refused subscription as the hooks take them: 0x80 (MQTT 3.1.1), 0x87 not authorized (MQTT 5). */
const REFUSED_QOS = { v3: 128, v5: 135 } as const;

/** CN and SHA-256 fingerprint (lowercase hex) of a base64 DER certificate; undefined if it does not parse. */
function certificateOf(base64Der: string): { commonName: string; fingerprint256: string } | undefined {
  try {
    const cert = new X509Certificate(Buffer.from(base64Der, 'base64'));
    const commonName = /(?:^|\n)CN=([^\n]*)/.exec(cert.subject)?.[1];
    return commonName ? { commonName, fingerprint256: cert.fingerprint256.replaceAll(':', '').toLowerCase() } : undefined;
  } catch {
    return undefined;
  }
}

export function createVerneHooks(deps: { service: HookService; cacheSeconds: () => number }) {
  const { service } = deps;
  const granted = (body: Record<string, unknown>): VerneAnswer => {
    const seconds = deps.cacheSeconds();
    return seconds > 0 ? { body, cacheSeconds: seconds } : { body };
  };

  async function register(req: VerneRequest): Promise<VerneAnswer> {
    const username = req.username ?? undefined;
    const password = req.password ?? undefined;
    // A certificate login (use_identity_as_username: the CN is the username): only with the
    // certificate itself in the payload, so a password-less CONNECT on a plain listener is none.
    const certificate = password === undefined && req.client_cert ? certificateOf(req.client_cert) : undefined;
    if (certificate && username !== undefined && username !== certificate.commonName) return NOT_ALLOWED;
    const decision = await service.login({
      via: 'vernemq',
      clientId: req.client_id,
      ...(username !== undefined ? { username } : {}),
      ...(password !== undefined ? { password } : {}),
      ...(req.peer_addr ? { clientAddress: req.peer_addr } : {}),
      ...(certificate ? { certificate } : {}),
    });
    // Not cached: a cached login would outlive a password change or a deleted user.
    return decision.allowed ? { body: { result: 'ok' } } : NOT_ALLOWED;
  }

  return {
    async handle(hook: VerneHook, req: VerneRequest): Promise<VerneAnswer> {
      // Other mountpoints are other namespaces: not gatewayd's to decide.
      if (req.mountpoint) return { body: { result: 'next' } };
      if (hook === 'auth_on_register' || hook === 'auth_on_register_m5') return register(req);
      const principal = service.principal('vernemq', req.client_id, req.username ?? undefined);
      if (hook === 'auth_on_publish' || hook === 'auth_on_publish_m5') {
        const decision = principal && req.topic !== undefined ? service.publish(principal, req.topic, true) : { allowed: false as const };
        if (!decision.allowed) return NOT_ALLOWED;
        // The publish prefix: VerneMQ delivers on the topic the hook answers, as the embedded broker does.
        return granted(decision.topic === req.topic ? { result: 'ok' } : { result: 'ok', modifiers: { topic: decision.topic } });
      }
      const refusedQos = hook === 'auth_on_subscribe_m5' ? REFUSED_QOS.v5 : REFUSED_QOS.v3;
      const topics = (req.topics ?? []).map(({ topic, qos }) => ({ topic, qos: principal && service.subscribe(principal, topic) ? qos : refusedQos }));
      const body = hook === 'auth_on_subscribe_m5' ? { result: 'ok', modifiers: { topics } } : { result: 'ok', topics };
      // Cached only when every filter was granted: VerneMQ caches the whole answer.
      return topics.every((t) => t.qos !== refusedQos) ? granted(body) : { body };
    },
  };
}
export type VerneHooks = ReturnType<typeof createVerneHooks>;
