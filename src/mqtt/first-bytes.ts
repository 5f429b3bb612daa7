// The first bytes of a connection, before mqtt-packet's parser keeps any: they must start a
// CONNECT [MQTT-3.1.0-1]. aedes checks only a whole parsed packet, so a first PUBLISH declaring
// 256 KiB was buffered up to mqtt.maxPacketSizeBytes for up to connectTimeoutMs (the class of
// Mosquitto's CVE-2023-0809, refused there from the first byte too): such a connection is closed
// before anything is kept. The parse wrapper is one shared function ('this' is the parser) and
// goes at the first bytes: no closure, and no cost, per connection afterwards.
import type { EventEmitter } from 'node:events';

const CLIENT = Symbol('gatewayd.firstBytesClient');
const CONNECT = 1;

interface FirstBytesClient {
  broker?: { maximumPacketSize?: number };
  conn?: { writable?: boolean; write(b: Buffer): unknown };
}

interface FirstBytesParser extends EventEmitter {
  [CLIENT]: FirstBytesClient;
  parse(buf: Buffer): number;
}

/** An MQTT 5 CONNACK refusing with 0x95 Packet too large. */
const CONNACK_TOO_LARGE_V5 = Buffer.from([0x20, 0x03, 0x00, 0x95, 0x00]);

/**
 * The parser's parse until the first bytes arrived: they must start a CONNECT. aedes refuses a
 * CONNECT above the maximum packet size from its fixed header (before its body is buffered) by
 * closing; an MQTT 5 client, whose protocol level is in these first bytes, is told why first
 * with CONNACK 0x95 [MQTT-4.13.1-1 allows a CONNACK >= 0x80 before the close].
 */
function parseFirstBytes(this: FirstBytesParser, buf: Buffer): number {
  if (buf.length === 0) return 0;
  // The prototype's parse from now on (the own property goes, the parser keeps its shape).
  delete (this as { parse?: unknown }).parse;
  if (buf[0]! >> 4 !== CONNECT) {
    this.emit('error', new Error('first packet is not CONNECT'));
    return 0;
  }
  const client = this[CLIENT];
  const max = client.broker?.maximumPacketSize ?? 0;
  if (max > 0 && connectTooLargeV5(buf, max) && client.conn?.writable) client.conn.write(CONNACK_TOO_LARGE_V5);
  return this.parse(buf);
}

/** Whether these first bytes are an MQTT 5 CONNECT declaring more than `max` bytes in all. */
function connectTooLargeV5(buf: Buffer, max: number): boolean {
  let remaining = 0;
  let mul = 1;
  let i = 1;
  for (; i < 5; i++) {
    const b = buf[i];
    if (b === undefined) return false;
    remaining += (b & 0x7f) * mul;
    mul *= 128;
    if ((b & 0x80) === 0) break;
  }
  if (i === 5 || 1 + i + remaining <= max) return false;
  const nameLength = buf.length > i + 2 ? buf.readUInt16BE(i + 1) : -1;
  return nameLength === 4 && buf[i + 3 + nameLength] === 5;
}

/** Checks the first bytes of `parser` (aedes' parser of `client`) before it parses them. */
export function guardFirstBytes(parser: FirstBytesParser, client: FirstBytesClient): void {
  parser[CLIENT] = client;
  (parser as unknown as { parse: typeof parseFirstBytes }).parse = parseFirstBytes;
}
