// The PUBLISH packets a bridge sends upstream, encoded into one buffer each (MQTT 3.1.1 §3.3,
// MQTT 5 §3.3 with the properties a bridged message keeps). mqtt.js writes a packet through
// mqtt-packet's stream writer: one socket write per field, a nextTick per packet to uncork, and
// debug calls that allocate on every field; at the rates of a draining backlog that is most of
// the bridge's own CPU per message. Everything else (CONNECT, SUBSCRIBE, acknowledgements) stays
// mqtt.js's.
import type { MessageProperties } from './queue-record.js';

export interface OutgoingPublish {
  topic: string;
  payload: Buffer;
  qos: 0 | 1 | 2;
  retain: boolean;
  dup?: boolean;
  messageId?: number;
  properties?: Record<string, unknown>;
}

// MQTT 5 property identifiers (§2.2.2.2) of the properties a bridged message keeps.
const PAYLOAD_FORMAT = 0x01;
const MESSAGE_EXPIRY = 0x02;
const CONTENT_TYPE = 0x03;
const RESPONSE_TOPIC = 0x08;
const CORRELATION_DATA = 0x09;
const USER_PROPERTY = 0x26;
const KNOWN = new Set<string>(['payloadFormatIndicator', 'messageExpiryInterval', 'contentType', 'responseTopic', 'correlationData', 'userProperties']);

const varIntSize = (n: number) => (n < 0x80 ? 1 : n < 0x4000 ? 2 : n < 0x200000 ? 3 : 4);

function writeVarInt(out: Buffer, at: number, n: number): number {
  do {
    let byte = n % 0x80;
    n = Math.floor(n / 0x80);
    if (n > 0) byte |= 0x80;
    out[at++] = byte;
  } while (n > 0);
  return at;
}

function writeString(out: Buffer, at: number, text: string, length: number): number {
  out.writeUInt16BE(length, at);
  out.write(text, at + 2, length, 'utf8');
  return at + 2 + length;
}

/** A user property as written: name, value and their UTF-8 lengths. */
type Pair = [string, string, number, number];
const NO_PAIRS: Pair[] = [];

/** The user properties as pairs (an array value is one pair per element, as mqtt-packet sends them). */
function userPairs(p: MessageProperties['userProperties']): Pair[] {
  if (!p) return NO_PAIRS;
  const pairs: Pair[] = [];
  for (const [name, value] of Object.entries(p)) {
    for (const v of Array.isArray(value) ? value : [value]) pairs.push([name, String(v), Buffer.byteLength(name, 'utf8'), Buffer.byteLength(String(v), 'utf8')]);
  }
  return pairs;
}

/**
 * The packet in one buffer, or undefined when it is not one this encoder knows (a property other
 * than those a bridged message keeps, a packet identifier missing): mqtt.js then writes it.
 */
export function encodePublish(p: OutgoingPublish, protocolVersion: 4 | 5): Buffer | undefined {
  if (p.qos > 0 && typeof p.messageId !== 'number') return undefined;
  const topicLength = Buffer.byteLength(p.topic, 'utf8');
  if (topicLength > 0xffff) return undefined;
  let propsLength = 0;
  let props: MessageProperties | undefined;
  let pairs = NO_PAIRS;
  let contentTypeLength = 0;
  let responseTopicLength = 0;
  if (protocolVersion === 5 && p.properties) {
    for (const key of Object.keys(p.properties)) if (p.properties[key] !== undefined && !KNOWN.has(key)) return undefined;
    props = p.properties as MessageProperties;
    if (props.correlationData !== undefined && !Buffer.isBuffer(props.correlationData)) return undefined;
    if (props.payloadFormatIndicator !== undefined) propsLength += 2;
    if (props.messageExpiryInterval !== undefined) propsLength += 5;
    if (props.contentType !== undefined) propsLength += 3 + (contentTypeLength = Buffer.byteLength(props.contentType, 'utf8'));
    if (props.responseTopic !== undefined) propsLength += 3 + (responseTopicLength = Buffer.byteLength(props.responseTopic, 'utf8'));
    if (props.correlationData !== undefined) propsLength += 3 + props.correlationData.length;
    pairs = userPairs(props.userProperties);
    for (const [, , nameLength, valueLength] of pairs) propsLength += 5 + nameLength + valueLength;
  }
  const remaining = 2 + topicLength + (p.qos > 0 ? 2 : 0) + (protocolVersion === 5 ? varIntSize(propsLength) + propsLength : 0) + p.payload.length;
  if (remaining > 268_435_455) return undefined;
  const out = Buffer.allocUnsafe(1 + varIntSize(remaining) + remaining);
  out[0] = 0x30 | (p.dup ? 0x08 : 0) | (p.qos << 1) | (p.retain ? 0x01 : 0);
  let at = writeVarInt(out, 1, remaining);
  at = writeString(out, at, p.topic, topicLength);
  if (p.qos > 0) at = out.writeUInt16BE(p.messageId!, at);
  if (protocolVersion === 5) {
    at = writeVarInt(out, at, propsLength);
    if (props) {
      if (props.payloadFormatIndicator !== undefined) {
        out[at++] = PAYLOAD_FORMAT;
        out[at++] = props.payloadFormatIndicator ? 1 : 0;
      }
      if (props.messageExpiryInterval !== undefined) {
        out[at++] = MESSAGE_EXPIRY;
        at = out.writeUInt32BE(props.messageExpiryInterval, at);
      }
      if (props.contentType !== undefined) {
        out[at++] = CONTENT_TYPE;
        at = writeString(out, at, props.contentType, contentTypeLength);
      }
      if (props.responseTopic !== undefined) {
        out[at++] = RESPONSE_TOPIC;
        at = writeString(out, at, props.responseTopic, responseTopicLength);
      }
      if (props.correlationData !== undefined) {
        out[at++] = CORRELATION_DATA;
        at = out.writeUInt16BE(props.correlationData.length, at);
        at += props.correlationData.copy(out, at);
      }
      for (const [name, value, nameLength, valueLength] of pairs) {
        out[at++] = USER_PROPERTY;
        at = writeString(out, at, name, nameLength);
        at = writeString(out, at, value, valueLength);
      }
    }
  }
  p.payload.copy(out, at);
  return out;
}
