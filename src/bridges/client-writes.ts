// How a bridge's mqtt.js client writes (upstream.ts): its PUBLISH packets in one buffer each
// (publish-packet.ts), the publications of one pump in one corked write, no copies kept of what is
// in flight, and the CONNECT of a 3.1.1 bridge marked as one (try_private).
import type { IStore, MqttClient, Packet } from 'mqtt';
import { encodePublish, type OutgoingPublish } from './publish-packet.js';

type MqttModule = typeof import('mqtt');

/**
 * mqtt.js keeps a copy of every QoS 1/2 publication in its outgoing store until it is
 * acknowledged, to send it again when the same client reconnects. A bridge never reconnects a
 * client (each connection is a new one) and its queue sends again what was not acknowledged, so
 * the copies would never be read: this store keeps none (less held per message in flight, which
 * V8 would otherwise promote and collect in the old generation).
 */
let KeepNothing: (new () => IStore) | undefined;
export function storeKeepingNothing(mqtt: MqttModule): IStore {
  KeepNothing ??= class extends mqtt.Store {
    override put(_packet: Packet, cb: () => void): this {
      cb?.();
      return this;
    }
    override del(packet: Pick<Packet, 'messageId'>, cb: (error?: Error, packet?: Packet) => void): this {
      cb?.(undefined, packet as Packet);
      return this;
    }
  };
  return new KeepNothing();
}

/**
 * The client's packet writer, wrapped before it connects (manualConnect):
 * - mqtt.js has no option for the bridge bit of the CONNECT's protocol level (0x80 | 4); its
 *   packet writer (mqtt-packet) has one, `bridgeMode`, which the CONNECT then carries;
 * - PUBLISH packets are written in one buffer each (publish-packet.ts), mqtt.js's callback
 *   semantics kept (called once written, or at the next drain).
 * Every other packet passes unchanged.
 */
export function wrapWriter(c: MqttClient, bridgeMode: boolean, protocolVersion: 4 | 5): void {
  const client = c as unknown as { _writePacket(packet: { cmd: string; bridgeMode?: boolean }, cb?: () => void): void; stream: NodeJS.WritableStream };
  const write = client._writePacket.bind(client);
  client._writePacket = (packet, cb) => {
    const bytes = packet.cmd === 'publish' ? encodePublish(packet as unknown as OutgoingPublish, protocolVersion) : undefined;
    if (!bytes) return write(bridgeMode && packet.cmd === 'connect' ? { ...packet, bridgeMode: true } : packet, cb);
    if (client.stream.write(bytes) || !cb) cb?.();
    else client.stream.once('drain', cb);
  };
}

/** Runs `send` with the client's connection corked: what it writes leaves in one write. */
export function corked(c: MqttClient, send: () => void): void {
  const stream = (c as unknown as { stream?: NodeJS.WritableStream & { cork?(): void; uncork?(): void } }).stream;
  stream?.cork?.();
  try {
    send();
  } finally {
    stream?.uncork?.();
  }
}
