import type { MqttPrincipal } from '../mqtt/index.js';
import type { HookService } from './hook-service.js';
import type { GrantAtLogin } from './cluster-sessions.js';

// EMQX 5 HTTP authentication and HTTP authorization. EMQX sends the JSON body the operator
// configured from its placeholders (docs/scaling-out.md gives the bodies gatewayd reads), and
// reads the answers documented in emqx/emqx-docs en_US/access-control/authn/http.md,
// authn/acl.md and authz/http.md: authn `{"result": "allow"|"deny"|"ignore", "is_superuser",
// "acl", "expire_at"}`, authz `{"result": "allow"|"deny"|"ignore"}`.

export interface EmqxAuthnRequest {
  clientid: string;
  username?: string;
  password?: string;
  peerhost?: string;
  /** `${cert_common_name}`: set when the client presented a certificate EMQX verified. */
  cert_common_name?: string;
}

export interface EmqxAuthzRequest {
  clientid: string;
  username?: string;
  action: 'publish' | 'subscribe';
  topic: string;
}

export interface EmqxAclRule {
  permission: 'allow' | 'deny';
  action: 'publish' | 'subscribe' | 'all';
  topic: string;
}

/**
 * The user's publish grants as EMQX ACL rules, so that EMQX needs no call per publish. Only
 * rules whose EMQX meaning equals gatewayd's: topic-name-against-filter matching is MQTT's on
 * both sides; a grant is left out (and decided by the authz hook) when it names a `$` topic or an
 * EMQX placeholder, or when, for a prefixed user, it could match a topic outside the prefix. Read
 * grants are left out: EMQX matches a subscription filter against a rule differently (`a/+`
 * would admit `a/#`). Rules that match nothing fall through to the authz hook.
 */
export function aclOf(grants: readonly GrantAtLogin[], publishPrefix: string): EmqxAclRule[] {
  const rules: EmqxAclRule[] = [];
  const parentDenied = new Set<string>();
  for (const { resource, operation } of grants) {
    if (operation === 'read' || resource.startsWith('$') || resource.includes('${')) continue;
    if (publishPrefix) {
      // Only grants that lie under the prefix: it has no wildcards and the grant starts with it.
      if (/[+#]/.test(publishPrefix) || !resource.startsWith(publishPrefix)) continue;
      const rest = resource.slice(publishPrefix.length);
      if (rest === '') continue;
      if (rest === '#' && publishPrefix.endsWith('/')) {
        // `p/#` matches `p` itself too, which lies outside the prefix `p/`.
        const parent = publishPrefix.slice(0, -1);
        if (!parentDenied.has(parent)) rules.push({ permission: 'deny', action: 'publish', topic: `eq ${parent}` });
        parentDenied.add(parent);
      }
    }
    rules.push({ permission: 'allow', action: 'publish', topic: resource });
  }
  // Deny rules first: EMQX takes the first rule that matches.
  return [...rules.filter((r) => r.permission === 'deny'), ...rules.filter((r) => r.permission === 'allow')];
}

export function createEmqxHooks(deps: { service: HookService }) {
  const { service } = deps;
  const empty = (v: string | undefined) => (v === undefined || v === '' || v === 'undefined' ? undefined : v);

  return {
    async authn(req: EmqxAuthnRequest): Promise<Record<string, unknown>> {
      const username = empty(req.username);
      const password = empty(req.password);
      const commonName = empty(req.cert_common_name);
      const decision = await service.login({
        via: 'emqx',
        clientId: req.clientid,
        ...(username !== undefined ? { username } : {}),
        ...(password !== undefined ? { password } : {}),
        ...(empty(req.peerhost) ? { clientAddress: req.peerhost! } : {}),
        ...(password === undefined && commonName ? { certificate: { commonName } } : {}),
      });
      if (!decision.allowed) return { result: 'deny' };
      const principal: MqttPrincipal = decision.principal;
      return {
        result: 'allow',
        is_superuser: false,
        acl: aclOf(service.mqttGrantsOf(principal.userId), principal.publishPrefix),
        ...(decision.expiresAt !== undefined ? { expire_at: Math.floor(decision.expiresAt / 1000) } : {}),
      };
    },

    authz(req: EmqxAuthzRequest): Record<string, unknown> {
      const principal = service.principal('emqx', req.clientid, empty(req.username));
      let ok = false;
      if (principal) ok = req.action === 'publish' ? service.publish(principal, req.topic, false).allowed : service.subscribe(principal, req.topic);
      return { result: ok ? 'allow' : 'deny' };
    },
  };
}
export type EmqxHooks = ReturnType<typeof createEmqxHooks>;
