// sessionPresent in the CONNACK whenever a returning client's session exists (MQTT-3.2.2-2 of
// 3.1.1; MQTT 5 §3.2.2.1.1), also when it holds no subscriptions.
//
// aedes 2.0.0-beta.1 decides the flag itself in its connect sequence (handlers/connect.js:
// restoreSubs sets `sessionPresent = !!subs`), on an object no hook or event can reach before the
// CONNACK is written. The broker decides when its authenticate hook admits the client (the first
// step of aedes' connect sequence, before aedes reads the session: persistence.resumeSession),
// marks the connection's state, and the CONNACK gets the flag where aedes serializes it
// (outbound-packets.ts):
// - changes nothing but the flag of a successful CONNACK on a marked connection (refusals keep 0,
//   MQTT-3.2.2-4/6), so a connection that was never marked, or the bare aedes of the benchmark,
//   is untouched;
// - needs no copy of aedes' connect handler, and keeps working if aedes starts setting the flag
//   itself. Rejected alternatives: rewriting CONNACK bytes on the socket (mqtt-packet issues a
//   packet in several writes, different per version), or a fake subscription so that aedes sets
//   the flag (it would be restored and delivered to).
import type { ClientState } from './client-state.js';

interface ConnackLike {
  sessionPresent?: unknown;
  returnCode?: unknown;
  reasonCode?: unknown;
}

/** The client on this connection resumes an existing session: its CONNACK says so if it is accepted. */
export function markSessionPresent(st: ClientState): void {
  st.sessionPresent = true;
}

/** Sets the flag on the connection's first CONNACK when it accepts a marked client. */
export function completeConnack(packet: ConnackLike, st: ClientState): void {
  if (!st.sessionPresent) return;
  st.sessionPresent = false;
  if ((packet.reasonCode ?? packet.returnCode) === 0) packet.sessionPresent = true;
}
