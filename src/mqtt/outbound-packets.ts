// Every packet aedes writes to a client passes here. aedes 2.0.0-beta.1 serializes each one with
// `mqtt.writeToStream(packet, client.conn, opts)` on the shared CommonJS exports of mqtt-packet,
// looked up at each call (lib/write.js); one wrapper of that function, installed once per
// process, lets the broker complete a CONNACK (session-present.ts) and adjust or drop the packets
// of an MQTT 5 connection (mqtt5/mqtt5-connection.ts: outbound topic aliases, the client's
// maximum packet size, flow-control accounting). Connections of other aedes instances in the
// process (the bare brokers of benchmarks and tests) carry no gatewayd state and are untouched;
// a packet of any other connection costs two property reads.
// The module is the one aedes resolves (required from aedes' own location), so it is the same
// exports object aedes' ESM default import reads.
import { createRequire } from 'node:module';
import type { Writable } from 'node:stream';
import type { GatewayClient } from './client-state.js';
import type { OutboundPacket } from './packet-types.js';
import { completeConnack } from './session-present.js';
import { HeldAcks } from './persistence/held-acks.js';
import { lingerAfterDisconnect } from './lingering-close.js';

interface MqttPacketModule {
  writeToStream(packet: OutboundPacket, stream: object, opts?: object): boolean;
  generate(packet: OutboundPacket, opts?: object): Buffer;
}

let installed: boolean | undefined;
let mqttPacket: MqttPacketModule | undefined;
/**
 * Acknowledgements held until what they acknowledge is safe (persistence/durable-acks.ts). One per
 * process, like the wrapper that consults it: mqtt-packet's writeToStream is process-wide.
 */
let held: HeldAcks | undefined;

/** The held acknowledgements of every connection (installs the wrapper if needed). */
export function heldAcks(): HeldAcks {
  if (!installOutboundPackets() || !held) throw new Error('mqtt-packet has an unexpected shape');
  return held;
}

function load(): MqttPacketModule {
  const fromHere = createRequire(import.meta.url);
  return createRequire(fromHere.resolve('aedes'))('mqtt-packet') as MqttPacketModule;
}

/** Installs the wrapper once per process; false when mqtt-packet has an unexpected shape. */
export function installOutboundPackets(): boolean {
  if (installed !== undefined) return installed;
  const module = load();
  const original = module.writeToStream;
  if (typeof original !== 'function' || typeof module.generate !== 'function') return (installed = false);
  mqttPacket = module;
  const acks = (held = new HeldAcks((packet, stream, opts) => void module.writeToStream(packet as OutboundPacket, stream, opts)));
  module.writeToStream = function writeToStream(packet: OutboundPacket, stream: object, opts?: object): boolean {
    // Kept and written later (through this wrapper again) when it must wait: as if it had been sent.
    if (acks.hold(packet, stream, opts)) return true;
    if (packet.cmd === 'disconnect') lingerAfterDisconnect(stream);
    const st = (stream as { client?: GatewayClient }).client?.gatewayd;
    if (st !== undefined) {
      if (packet.cmd === 'connack') completeConnack(packet as Parameters<typeof completeConnack>[0], st);
      const mqtt5 = st.mqtt5;
      if (mqtt5 !== undefined) {
        const out = mqtt5.outbound(packet);
        if (out === null) return true; // dropped as if it had been sent
        if (Buffer.isBuffer(out)) return (stream as Writable).write(out);
        packet = out;
      }
    }
    return original.call(module, packet, stream, opts);
  };
  return (installed = true);
}

/** The bytes of an MQTT 5 packet (what aedes would write). */
export function serializeMqtt5(packet: OutboundPacket): Buffer {
  mqttPacket ??= load();
  return mqttPacket.generate(packet, { protocolVersion: 5 });
}

/** Writes a packet to a connection through the wrapper (a packet aedes has no writer for). */
export function writePacket(packet: OutboundPacket, conn: object, protocolVersion: number): boolean {
  mqttPacket ??= load();
  return mqttPacket.writeToStream(packet, conn, { protocolVersion });
}
