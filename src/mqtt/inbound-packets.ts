// Every packet a client sends passes here before aedes handles it. aedes 2.0.0-beta.1 has no hook
// between a connection's parser and its handlers, so the one 'packet' listener aedes puts on the
// parser is replaced by one that calls the broker first, then aedes' listener (still one
// listener: an emitter with several copies its listener list at every packet). For:
// - SUBSCRIBE and UNSUBSCRIBE, any version: shared subscription filters (mqtt5/shared-subscriptions.ts);
// - MQTT 5 connections: flow control (mqtt5/mqtt5-connection.ts).
import type { EventEmitter } from 'node:events';
import type { GatewayClient } from './client-state.js';
import { renameSharedFilters } from './mqtt5/shared-subscriptions.js';
import type { InboundPacket } from './packet-types.js';

/** False when the parser has an unexpected shape (a changed dependency). */
export function watchInboundPackets(client: GatewayClient): boolean {
  const parser = client._parser as EventEmitter | undefined;
  if (!parser || typeof parser.listeners !== 'function') return false;
  const listeners = parser.listeners('packet');
  if (listeners.length !== 1) return false;
  const aedesListener = listeners[0] as (this: unknown, packet: InboundPacket) => void;
  parser.removeAllListeners('packet');
  parser.on('packet', function inboundPacket(this: unknown, packet: InboundPacket): void {
    const cmd = packet.cmd;
    if (cmd === 'subscribe' || cmd === 'unsubscribe') renameSharedFilters(packet);
    const mqtt5 = client.gatewayd?.mqtt5;
    if (mqtt5 !== undefined) mqtt5.inbound(packet);
    aedesListener.call(this, packet);
  });
  return true;
}
