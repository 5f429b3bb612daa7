import { ConflictError, NotFoundError } from '../errors/errors.js';
import type { Logger } from '../log/index.js';
import type { Actor, GrantedPermission, GrantGuard } from '../permissions/grant-guard.js';
import type { PermissionEngine } from '../permissions/permission-engine.js';
import { permissionKey } from '../roles/role-service.js';
import type { IndexKey, Store } from '../store/index.js';
import { describeCertificate, splitPemCertificates, type TrustedCertificate } from './pem.js';

interface StoredCertificate {
  pem: string;
  addedAt: string;
}

const key = (id: string): IndexKey => ['trusted-cert', id];
const all = { start: ['trusted-cert'] as IndexKey, end: ['trusted-cert', '\uffff\uffff'] as IndexKey };

/**
 * Certificates the MQTTS listener accepts client certificates from, besides the gateway's own
 * CA (listed first, not removable). Ids are SHA-256 fingerprints. A change reloads TLS.
 */
export function createTrustedCertificateService(deps: {
  store: Store;
  caCertPem: () => string;
  log: Logger;
  onChange: () => void;
  guard: GrantGuard;
  engine: PermissionEngine;
}) {
  const { store, log, guard, engine } = deps;

  /**
   * A trusted CA vouches for CN = username of every user with grant type certificate, so who
   * adds one can sign in over MQTT as any of them: the MQTT permissions of all of them together.
   */
  function certificateLoginGrants(): GrantedPermission[] {
    const grants = new Map<string, GrantedPermission>();
    for (const { value: user } of store.users.getRange()) {
      if (!user.grantTypes.some((g) => g.method === 'certificate')) continue;
      for (const p of engine.grantsOf(user.id)) if (p.context === 'mqtt') grants.set(permissionKey(p), p);
    }
    return [...grants.values()];
  }
  const stored = (): [string, StoredCertificate][] =>
    [...store.kv.getRange(all)].map(({ key: k, value }) => [String(k[1]), value as StoredCertificate]);

  return {
    list(): TrustedCertificate[] {
      return [describeCertificate(deps.caCertPem(), false), ...stored().map(([, c]) => describeCertificate(c.pem, true))];
    },

    /**
     * Adds every certificate of the PEM text that is not trusted yet; 409 when none is new. The
     * actor must hold every MQTT permission of the users it could then sign in as (403, audited).
     */
    async add(text: string, actor?: Actor): Promise<TrustedCertificate[]> {
      const described = splitPemCertificates(text).map((pem) => ({ pem, info: describeCertificate(pem, true) }));
      if (!guard.unlimited(actor)) guard.assertHolds(actor, certificateLoginGrants(), 'trust a certificate');
      const caId = describeCertificate(deps.caCertPem(), false).id;
      const added = await store.transaction(() => {
        const fresh = new Map<string, (typeof described)[number]>();
        for (const d of described) {
          if (d.info.id !== caId && store.kv.get(key(d.info.id)) === undefined) fresh.set(d.info.id, d);
        }
        if (fresh.size === 0) throw new ConflictError('every certificate given is trusted already');
        const addedAt = new Date().toISOString();
        for (const [id, d] of fresh) store.kv.put(key(id), { pem: d.pem, addedAt } satisfies StoredCertificate);
        return [...fresh.values()].map((d) => d.info);
      });
      log.audit('trusted certificates added', { ids: added.map((c) => c.id), subjects: added.map((c) => c.issuedTo.commonName) });
      deps.onChange();
      return added;
    },

    async remove(id: string): Promise<void> {
      if (id === describeCertificate(deps.caCertPem(), false).id) {
        throw new ConflictError('the gateway CA certificate is not removable');
      }
      await store.transaction(() => {
        if (store.kv.get(key(id)) === undefined) throw new NotFoundError(`certificate ${id} not found`);
        store.kv.remove(key(id));
      });
      log.audit('trusted certificate removed', { id });
      deps.onChange();
    },

    content(id: string): string {
      const ca = deps.caCertPem();
      if (id === describeCertificate(ca, false).id) return ca;
      const c = store.kv.get(key(id)) as StoredCertificate | undefined;
      if (!c) throw new NotFoundError(`certificate ${id} not found`);
      return c.pem;
    },

    /** The gateway CA certificate (PEM), for devices that connect over MQTTS. */
    caPem(): string {
      return deps.caCertPem();
    },

    /** PEMs the TLS listener trusts for client certificates. */
    pems(): string[] {
      return [deps.caCertPem(), ...stored().map(([, c]) => c.pem)];
    },
  };
}
export type TrustedCertificateService = ReturnType<typeof createTrustedCertificateService>;
