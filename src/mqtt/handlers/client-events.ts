// aedes' client events: session bookkeeping, connect/disconnect logs, the refusals aedes decides
// itself before any hook (an unsupported protocol version, a malformed client id), and packets
// above mqtt.maxPacketSizeBytes (aedes' maximumPacketSize: refused from the fixed header, before
// the body is buffered; MQTT 5 clients get DISCONNECT 0x95).
import type { Aedes } from 'aedes';
import type { BrokerContext } from '../broker-context.js';
import { stateOf } from '../client-state.js';
import { recordRefusal } from '../connect-refusals.js';
import type { SessionRegistry } from '../session-registry.js';

export function watchClientEvents(ctx: BrokerContext, aedes: Aedes, sessions: SessionRegistry): void {
  const log = ctx.log;
  aedes.on('client', (client) => sessions.registered(client));
  aedes.on('clientReady', (client) => {
    const st = stateOf(client);
    // At debug, like the disconnect: a thousand devices coming back after a reboot are not a
    // thousand lines in a journal on the gateway's flash (refusals are audited at info).
    log.debug('mqtt client connected', {
      clientId: client.id,
      username: st?.principal?.username,
      anonymous: st?.anonymous || undefined,
      transport: st?.transport,
      remote: st?.remote,
    });
  });
  aedes.on('clientDisconnect', (client) => {
    sessions.unregistered(client);
    log.debug('mqtt client disconnected', { clientId: client.id, username: stateOf(client)?.principal?.username });
  });
  const tooLarge = (client: { id?: string | null }, err: Error): boolean => {
    const size = (err as { size?: unknown }).size;
    if (typeof size !== 'number' || err.message !== 'packet too large') return false;
    ctx.counters.oversizeDisconnects++;
    log.info('mqtt packet too large, disconnecting', { clientId: client.id ?? undefined, remote: stateOf(client as never)?.remote, bytes: size, limit: ctx.cfg.maxPacketSizeBytes });
    return true;
  };
  aedes.on('clientError', (client, err) => {
    if (tooLarge(client, err)) return;
    log.debug('mqtt client error', { clientId: client.id, username: stateOf(client)?.principal?.username, error: err.message });
  });
  aedes.on('connectionError', (client, err) => {
    if (tooLarge(client, err)) return;
    const st = stateOf(client);
    const code = (err as { errorCode?: unknown }).errorCode;
    // Ours were counted where they were decided.
    if (st && !st.refusalCounted && typeof code === 'number' && code > 0) {
      recordRefusal(ctx, st, { clientId: client.id || undefined, returnCode: code, reason: err.message });
      return;
    }
    log.debug('mqtt connection error', { remote: st?.remote, error: err.message });
  });
}
