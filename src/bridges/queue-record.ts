// One queued message of a bridge as it is stored (LMDB value, binary): its size on disk is the
// buffer's length, so counting the bytes of a queue needs no decoding, and the enqueue time sits
// at a fixed offset (the age limit reads only that).
//
//   0      version (1)
//   1      flags: bits 0-1 QoS, bit 2 retain, bit 3 MQTT 5 properties follow
//   2..9   enqueued at (epoch ms, float64 LE)
//   10..13 length of the local topic (uint32 LE), then the local topic (UTF-8)
//   ...    length of the remote topic (uint32 LE), then the remote topic
//   ...    if bit 3: length of the properties (uint32 LE), then the properties as JSON
//   ...    the payload (the rest)

export interface MessageProperties {
  contentType?: string;
  responseTopic?: string;
  correlationData?: Buffer;
  userProperties?: Record<string, string | string[]>;
  messageExpiryInterval?: number;
  payloadFormatIndicator?: boolean;
}

export interface QueuedMessage {
  /** Its place in the bridge's queue (order of arrival). */
  seq: number;
  localTopic: string;
  remoteTopic: string;
  payload: Buffer;
  qos: 0 | 1 | 2;
  retain: boolean;
  properties?: MessageProperties;
  /** When it was queued (epoch ms). */
  enqueuedAt: number;
  /** Bytes of its record (what it takes on disk). */
  size: number;
}

/** What a bridge queues: the message without its place, time and record size. */
export type MessageToQueue = Omit<QueuedMessage, 'seq' | 'enqueuedAt' | 'size'>;

const VERSION = 1;
const HEADER = 10;

/** The record of a message, in one buffer (the topics written in place, no intermediate copies). */
export function encodeMessage(m: MessageToQueue, enqueuedAt: number): Buffer {
  const localLength = Buffer.byteLength(m.localTopic, 'utf8');
  const remoteLength = m.remoteTopic === m.localTopic ? localLength : Buffer.byteLength(m.remoteTopic, 'utf8');
  const props = m.properties && Object.keys(m.properties).length ? JSON.stringify(m.properties, propertyReplacer) : undefined;
  const propsLength = props === undefined ? 0 : Buffer.byteLength(props, 'utf8');
  const size = HEADER + 4 + localLength + 4 + remoteLength + (props === undefined ? 0 : 4 + propsLength) + m.payload.length;
  const out = Buffer.allocUnsafe(size);
  out[0] = VERSION;
  out[1] = (m.qos & 3) | (m.retain ? 4 : 0) | (props === undefined ? 0 : 8);
  out.writeDoubleLE(enqueuedAt, 2);
  let at = field(out, HEADER, m.localTopic, localLength);
  at = field(out, at, m.remoteTopic, remoteLength);
  if (props !== undefined) at = field(out, at, props, propsLength);
  m.payload.copy(out, at);
  return out;
}

/** Writes a length-prefixed UTF-8 field at `at`; returns where the next one starts. */
function field(out: Buffer, at: number, text: string, length: number): number {
  out.writeUInt32LE(length, at);
  out.write(text, at + 4, length, 'utf8');
  return at + 4 + length;
}

/**
 * The message as it was queued, without decoding its record: the fields it was made of, its
 * payload a view of the record (the record is the one buffer it holds while it waits in memory).
 */
export function queuedFrom(m: MessageToQueue, record: Buffer, seq: number, enqueuedAt: number): QueuedMessage {
  const queued: QueuedMessage = { seq, localTopic: m.localTopic, remoteTopic: m.remoteTopic, payload: record.subarray(record.length - m.payload.length), qos: m.qos, retain: m.retain, enqueuedAt, size: record.length };
  if (record[1]! & 8) queued.properties = m.properties!;
  return queued;
}

export function decodeMessage(seq: number, b: Buffer): QueuedMessage {
  if (b[0] !== VERSION) throw new Error(`queued message of unknown version ${b[0]}`);
  const flags = b[1]!;
  let at = HEADER;
  const text = (): string => {
    const n = b.readUInt32LE(at);
    const part = b.toString('utf8', at + 4, at + 4 + n);
    at += 4 + n;
    return part;
  };
  const localTopic = text();
  const remoteTopic = text();
  const properties = flags & 8 ? (JSON.parse(text(), propertyReviver) as MessageProperties) : undefined;
  // A view, not a copy: records read from disk are buffers of their own.
  const m: QueuedMessage = { seq, localTopic, remoteTopic, payload: b.subarray(at), qos: (flags & 3) as 0 | 1 | 2, retain: (flags & 4) !== 0, enqueuedAt: b.readDoubleLE(2), size: b.length };
  if (properties) m.properties = properties;
  return m;
}

/** When a stored message was queued, without decoding it. */
export const enqueuedAtOf = (b: Buffer): number => b.readDoubleLE(2);

// correlationData is binary: kept as base64 in the JSON.
function propertyReplacer(key: string, value: unknown): unknown {
  if (key === 'correlationData' && value && typeof value === 'object' && (value as { type?: string }).type === 'Buffer') {
    return { base64: Buffer.from((value as { data: number[] }).data).toString('base64') };
  }
  return value;
}
function propertyReviver(key: string, value: unknown): unknown {
  if (key === 'correlationData' && value && typeof value === 'object' && 'base64' in value) return Buffer.from((value as { base64: string }).base64, 'base64');
  return value;
}

/** The MQTT 5 properties a bridged message keeps (topic aliases and subscription ids are per connection). */
export function pickProperties(p: MessageProperties): MessageProperties | undefined {
  const out: MessageProperties = {};
  if (p.contentType !== undefined) out.contentType = p.contentType;
  if (p.responseTopic !== undefined) out.responseTopic = p.responseTopic;
  if (p.correlationData !== undefined) out.correlationData = p.correlationData;
  if (p.userProperties !== undefined) out.userProperties = p.userProperties;
  if (p.messageExpiryInterval !== undefined) out.messageExpiryInterval = p.messageExpiryInterval;
  if (p.payloadFormatIndicator !== undefined) out.payloadFormatIndicator = p.payloadFormatIndicator;
  return Object.keys(out).length ? out : undefined;
}
