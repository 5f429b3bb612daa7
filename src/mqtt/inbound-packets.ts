// Every packet a client sends passes here before aedes handles it. aedes 2.0.0-beta.1 has no hook
// between a connection's parser and its handlers, so the one 'packet' listener aedes puts on the
// parser is replaced by one that calls the broker first, then aedes' listener (still one
// listener: an emitter with several copies its listener list at every packet). For:
// - SUBSCRIBE and UNSUBSCRIBE, any version: shared subscription filters (mqtt5/shared-subscriptions.ts);
// - SUBSCRIBE: its retained messages before the live ones it matches (retained-first.ts);
// - MQTT 5 connections: flow control (mqtt5/mqtt5-connection.ts).
// The parser also reports a CONNECT of an unknown protocol level first to the broker (its
// 'error' listener, ahead of aedes'). Both listeners are shared by every parser ('this' is the
// parser, which carries its client and aedes' listener): no closures per connection.
import type { EventEmitter } from 'node:events';
import type { GatewayClient } from './client-state.js';
import { renameSharedFilters } from './mqtt5/shared-subscriptions.js';
import { subscribeRead } from './retained-first-hooks.js';
import type { InboundPacket } from './packet-types.js';

const CLIENT = Symbol('gatewayd.client');
const AEDES_LISTENER = Symbol('gatewayd.aedesListener');
const ON_ERROR = Symbol('gatewayd.onError');

type ParserErrorHandler = (client: GatewayClient, err: Error) => void;
interface WatchedParser extends EventEmitter {
  [CLIENT]: GatewayClient;
  [AEDES_LISTENER]: (this: unknown, packet: InboundPacket) => void;
  [ON_ERROR]: ParserErrorHandler;
}

function inboundPacket(this: WatchedParser, packet: InboundPacket): void {
  const cmd = packet.cmd;
  const client = this[CLIENT];
  if (cmd === 'subscribe' || cmd === 'unsubscribe') renameSharedFilters(packet);
  if (cmd === 'subscribe' && packet.subscriptions !== undefined) subscribeRead(client, packet.subscriptions.map((s) => s.topic));
  const mqtt5 = client.gatewayd?.mqtt5;
  if (mqtt5 !== undefined) {
    mqtt5.inbound(packet);
    // Flow control closed the connection for this very packet (0x93): aedes' close has taken its
    // parser state away, and the packets of the same read must not reach aedes (they would land
    // in a queue that no longer exists: an uncaught TypeError, before the CONNACK too).
    if (client.closed) return;
  }
  this[AEDES_LISTENER].call(this, packet);
}

function parserError(this: WatchedParser, err: Error): void {
  this[ON_ERROR](this[CLIENT], err);
}

/** False when the parser has an unexpected shape (a changed dependency). */
export function watchInboundPackets(client: GatewayClient, onError: ParserErrorHandler): boolean {
  const parser = client._parser as WatchedParser | undefined;
  if (!parser || typeof parser.listeners !== 'function') return false;
  const listeners = parser.listeners('packet');
  if (listeners.length !== 1) return false;
  parser[CLIENT] = client;
  parser[AEDES_LISTENER] = listeners[0] as WatchedParser[typeof AEDES_LISTENER];
  parser[ON_ERROR] = onError;
  parser.removeAllListeners('packet');
  parser.on('packet', inboundPacket);
  parser.prependListener('error', parserError);
  return true;
}
