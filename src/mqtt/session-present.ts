// sessionPresent in the CONNACK whenever a returning client's session exists (MQTT-3.2.2-2 of
// 3.1.1; MQTT 5 §3.2.2.1.1), also when it holds no subscriptions.
//
// aedes 2.0.0-beta.1 decides the flag itself in its connect sequence (handlers/connect.js:
// restoreSubs sets `sessionPresent = !!subs`), on an object no hook or event can reach before the
// CONNACK is written. The broker decides when its authenticate hook admits the client (the first
// step of aedes' connect sequence, before aedes reads the session: persistence.resumeSession) and
// marks the connection; the CONNACK gets the flag where aedes serializes
// it: aedes writes every packet with `mqtt.writeToStream(packet, client.conn, ...)` on the shared
// CommonJS exports of mqtt-packet, looked up at each call. Wrapping that one function:
// - costs every other packet one string compare (`cmd === 'connack'`), nothing else;
// - changes nothing but the flag of a successful CONNACK on a marked connection (refusals keep 0,
//   MQTT-3.2.2-4/6), so a connection that was never marked, or the bare aedes of the benchmark,
//   is untouched;
// - needs no copy of aedes' connect handler, and keeps working if aedes starts setting the flag
//   itself. Rejected alternatives: rewriting CONNACK bytes on the socket (mqtt-packet issues a
//   packet in several writes, different per version), or a fake subscription so that aedes sets
//   the flag (it would be restored and delivered to).
// The module is the one aedes resolves (required from aedes' own location), so it is the same
// exports object aedes' ESM default import reads.
import { createRequire } from 'node:module';

interface ConnackLike {
  cmd?: string;
  sessionPresent?: boolean;
  returnCode?: number;
  reasonCode?: number;
}

interface MqttPacketModule {
  writeToStream(packet: ConnackLike, stream: object, opts?: object): boolean;
}

/** Connections whose next (first) CONNACK reports a present session, if it accepts the client. */
const marked = new WeakSet<object>();
let installed: boolean | undefined;

/** Installs the CONNACK hook once per process; false when mqtt-packet has an unexpected shape. */
export function installSessionPresentFlag(): boolean {
  if (installed !== undefined) return installed;
  const fromHere = createRequire(import.meta.url);
  const mqttPacket = createRequire(fromHere.resolve('aedes'))('mqtt-packet') as MqttPacketModule;
  const original = mqttPacket.writeToStream;
  if (typeof original !== 'function') return (installed = false);
  mqttPacket.writeToStream = function writeToStream(packet: ConnackLike, stream: object, opts?: object): boolean {
    if (packet.cmd === 'connack' && marked.delete(stream) && (packet.reasonCode ?? packet.returnCode) === 0) packet.sessionPresent = true;
    return original.call(mqttPacket, packet, stream, opts);
  };
  return (installed = true);
}

/** The client on this connection resumes an existing session: its CONNACK says so if it is accepted. */
export function markSessionPresent(connection: object): void {
  marked.add(connection);
}
