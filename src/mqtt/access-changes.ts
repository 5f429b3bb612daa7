// Live access changes (access.onChange), applied to the user's live clients:
// - 'permissions': their decision caches are dropped and they leave the forwarding fast path
//   (per-message read checks until they reconnect). Subscriptions are kept, so a removed read
//   permission stops delivery at once and a re-granted one resumes it without a resubscribe.
// - 'revoked' (with token fingerprints: the sessions that used them; without: all) and
//   'deleted': the sessions are closed, and their wills are not published.
import type { BrokerContext } from './broker-context.js';
import type { GatewayClient } from './client-state.js';
import type { AccessChange } from './mqtt-access.js';
import { tokenSetOf, type RevocationLog } from './revocation-log.js';
import type { SessionRegistry } from './session-registry.js';

export interface AccessChangeDeps {
  revocations: RevocationLog;
  sessions: SessionRegistry;
}

export function createAccessChangeHandler(ctx: BrokerContext, { revocations, sessions }: AccessChangeDeps): (change: AccessChange) => void {
  const closeSession = (client: GatewayClient, reason: string): void => {
    const st = client.gatewayd!;
    if (st.revoked) return;
    st.revoked = true;
    sessions.forget(client);
    ctx.counters.revocationDisconnects++;
    ctx.log.audit('mqtt.session.closed', { clientId: client.id, username: st.principal?.username, reason });
    // No will: the session ends because its credentials are gone. _disconnected is what Aedes
    // checks to skip the will (set by a DISCONNECT packet); authorizePublish refuses it anyway.
    (client as unknown as { _disconnected: boolean })._disconnected = true;
    if (client.connected || client.closed) {
      client.close();
    } else {
      // Still inside the CONNECT sequence: closing now could race Aedes' registration of the
      // client; close as soon as the session is established.
      client.once('connected', () => client.close());
    }
  };

  return (change) => {
    try {
      if (change.kind !== 'permissions') revocations.record(change.userId, change.tokenFingerprints, change.passwordSessions);
      if (change.kind === 'deleted') sessions.releaseSessionsOf(change.userId);
      const clients = sessions.clientsOf(change.userId);
      if (!clients) return;
      if (change.kind === 'permissions') {
        for (const client of clients) {
          const st = client.gatewayd!;
          st.subscriptionsTrusted = false;
          st.clearDecisions();
        }
        return;
      }
      const tokens = change.kind === 'revoked' ? tokenSetOf(change) : null;
      for (const client of [...clients]) {
        const principal = client.gatewayd!.principal;
        const fp = principal?.tokenFingerprint;
        const byPassword = change.passwordSessions === true && principal?.method === 'password';
        if (tokens !== null && !byPassword && (fp === undefined || !tokens.has(fp))) continue;
        closeSession(client, change.kind === 'deleted' ? 'user deleted' : 'credentials revoked');
      }
    } catch (err) {
      ctx.log.error('mqtt access change handling failed', { userId: change.userId, kind: change.kind, error: (err as Error).message });
    }
  };
}
