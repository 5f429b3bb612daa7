// Refused CONNECTs: counted by reason (stats().connectsRefusedByReason) and audited once per
// connection (mqtt.connect.refused), wherever the refusal was decided.
import type { BrokerContext } from './broker-context.js';
import { refusalReasonOf } from './broker-stats.js';
import type { ClientState } from './client-state.js';

export interface RefusalRecord {
  clientId?: string | undefined;
  username?: string | undefined;
  /** MQTT 3.1.1 return code (MQTT 5 clients get the matching reason code). */
  returnCode: number;
  reason: string;
}

export function recordRefusal(ctx: BrokerContext, st: ClientState, refusal: RefusalRecord): void {
  ctx.counters.connectsRefused++;
  ctx.refusalsByReason[refusalReasonOf(refusal.returnCode)]++;
  st.refusalCounted = true;
  ctx.log.audit('mqtt.connect.refused', { ...refusal, transport: st.transport, remote: st.remote });
}
