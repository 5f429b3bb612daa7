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
// Before any of that, the first bytes must start a CONNECT (first-bytes.ts).
import type { EventEmitter } from 'node:events';
import { createRequire } from 'node:module';
import type { GatewayClient } from './client-state.js';
import { guardFirstBytes } from './first-bytes.js';
import { disconnectWith } from './mqtt5/server-disconnect.js';
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

/**
 * The first property given more than once in an MQTT 5 packet (mqtt-packet makes an array of
 * it), or undefined. Only user properties may repeat from a client [MQTT-2.2.2-2 and each
 * property's "more than once is a Protocol Error"]: a DISCONNECT carrying two Session Expiry
 * Intervals gave aedes an array, whose NaN timer threw out of its close and ended the process
 * (found by the MQTT ingress fuzz target).
 */
function duplicatedProperty(packet: InboundPacket): string | undefined {
  const sets = [packet.properties, (packet as { will?: { properties?: Record<string, unknown> } }).will?.properties];
  for (const properties of sets) {
    if (!properties) continue;
    for (const [name, value] of Object.entries(properties)) if (name !== 'userProperties' && Array.isArray(value)) return name;
  }
  return undefined;
}

/** How mqtt-packet reads each MQTT 5 property (its own table: 'string', 'binary', 'int16', 'pair', ...). */
const PROPERTY_TYPES = (createRequire(import.meta.url)('mqtt-packet/constants.js') as { propertiesTypes: Record<string, string> }).propertiesTypes;

const readAs: Record<string, (value: unknown) => boolean> = {
  string: (v) => typeof v === 'string',
  binary: (v) => Buffer.isBuffer(v),
  byte: (v) => typeof v === 'boolean',
  int8: (v) => Number.isInteger(v) && (v as number) >= 0,
  int16: (v) => Number.isInteger(v) && (v as number) >= 0,
  int32: (v) => Number.isInteger(v) && (v as number) >= 0,
  var: (v) => Number.isInteger(v) && (v as number) >= 0,
  pair: (v) => typeof v === 'object' && v !== null && Object.values(v).every((value) => [value].flat().every((s) => typeof s === 'string')),
};

/**
 * The first MQTT 5 property mqtt-packet could not read, or undefined. Its property loop keeps
 * what a failed read returns (a string or binary value running past the packet is null, a
 * number -1 or false) and goes on: a PUBLISH whose Response Topic ran past its end reached
 * aedes with a null Response Topic, whose indexOf threw out of the parser and ended the
 * daemon (found by the MQTT ingress fuzz target's long run). Such a packet is malformed
 * [MQTT-1.5.4, 2.2.2].
 */
function unreadableProperty(packet: InboundPacket): string | undefined {
  const sets = [packet.properties, (packet as { will?: { properties?: Record<string, unknown> } }).will?.properties];
  for (const properties of sets) {
    if (!properties) continue;
    for (const [name, value] of Object.entries(properties)) {
      const check = readAs[PROPERTY_TYPES[name] ?? ''];
      if (!check || !check(value)) return name;
    }
  }
  return undefined;
}

/** A packet refused for its properties: a connected MQTT 5 client is told (DISCONNECT with `code`), any other closed. */
function refuse(parser: WatchedParser, code: number, err: Error): void {
  const client = parser[CLIENT] as GatewayClient & { connackSent?: boolean; version?: number | null };
  (parser as unknown as { error: Error }).error = err; // mqtt-packet parses no further
  if (client.connackSent && client.version === 5) disconnectWith(client as never, code);
  else parser.emit('error', err);
}

function inboundPacket(this: WatchedParser, packet: InboundPacket): void {
  const duplicate = duplicatedProperty(packet);
  // A Protocol Error (0x82).
  if (duplicate !== undefined) return refuse(this, 0x82, new Error(`MQTT 5 property ${duplicate} given more than once`));
  const unreadable = unreadableProperty(packet);
  // A Malformed Packet (0x81).
  if (unreadable !== undefined) return refuse(this, 0x81, new Error(`MQTT 5 property ${unreadable} could not be read`));
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

interface ConnectingClient {
  closed: boolean;
  connackSent: boolean;
  _parsingBatch: number;
  conn: { read(): Buffer | null; on(event: 'readable', l: () => void): unknown; removeListener(event: 'readable', l: () => void): unknown };
}

/**
 * Serves a client whose connect sequence is held after its CONNACK (the replay of its session's
 * queue waits for its Receive Maximum, mqtt5/flow-control.ts) until the returned function is
 * called. aedes handles packets that came with the CONNECT only once the sequence ends, and reads
 * no more while one waits: the acknowledgements that would free the quota were never read, and a
 * client that waits for its SUBACK or PINGRESP before acknowledging waited forever (found by the
 * MQTT ingress fuzz target). So the waiting packets are handled now, in order, and the connection
 * is read as data comes, as aedes does for packets that arrive after the CONNACK.
 */
export function serveWhileConnecting(client: GatewayClient): () => void {
  const parser = client._parser as (WatchedParser & { _queue?: InboundPacket[] | null; parse(buf: Buffer): number }) | undefined;
  const c = client as unknown as ConnectingClient;
  if (!parser || parser[AEDES_LISTENER] === undefined || !c.connackSent || c.closed) return () => {};
  const waiting = parser._queue;
  if (waiting && waiting.length > 0) {
    parser._queue = null; // aedes' own dequeue at the end of the sequence finds nothing left
    for (const packet of waiting) {
      // aedes counted it when it queued it; its listener counts it again and handles it at once.
      c._parsingBatch--;
      parser[AEDES_LISTENER].call(parser, packet);
    }
  }
  const read = () => {
    for (let chunk = c.conn.read(); chunk !== null && !c.closed; chunk = c.conn.read()) parser.parse(chunk);
  };
  c.conn.on('readable', read);
  read();
  return () => void c.conn.removeListener('readable', read);
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
  guardFirstBytes(parser as never, client);
  return true;
}
