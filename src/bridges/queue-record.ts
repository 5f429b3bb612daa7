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
}

const VERSION = 1;
const HEADER = 10;

export function encodeMessage(m: Omit<QueuedMessage, 'seq'>): Buffer {
  const local = Buffer.from(m.localTopic, 'utf8');
  const remote = m.remoteTopic === m.localTopic ? local : Buffer.from(m.remoteTopic, 'utf8');
  const props = m.properties && Object.keys(m.properties).length ? Buffer.from(JSON.stringify(m.properties, propertyReplacer), 'utf8') : undefined;
  const size = HEADER + 4 + local.length + 4 + remote.length + (props ? 4 + props.length : 0) + m.payload.length;
  const out = Buffer.allocUnsafe(size);
  out[0] = VERSION;
  out[1] = (m.qos & 3) | (m.retain ? 4 : 0) | (props ? 8 : 0);
  out.writeDoubleLE(m.enqueuedAt, 2);
  let at = HEADER;
  for (const part of props ? [local, remote, props] : [local, remote]) {
    out.writeUInt32LE(part.length, at);
    part.copy(out, at + 4);
    at += 4 + part.length;
  }
  m.payload.copy(out, at);
  return out;
}

export function decodeMessage(seq: number, b: Buffer): QueuedMessage {
  if (b[0] !== VERSION) throw new Error(`queued message of unknown version ${b[0]}`);
  const flags = b[1]!;
  let at = HEADER;
  const field = (): Buffer => {
    const n = b.readUInt32LE(at);
    const part = b.subarray(at + 4, at + 4 + n);
    at += 4 + n;
    return part;
  };
  const localTopic = field().toString('utf8');
  const remoteTopic = field().toString('utf8');
  const m: QueuedMessage = { seq, localTopic, remoteTopic, qos: (flags & 3) as 0 | 1 | 2, retain: (flags & 4) !== 0, enqueuedAt: b.readDoubleLE(2), payload: Buffer.alloc(0) };
  if (flags & 8) m.properties = JSON.parse(field().toString('utf8'), propertyReviver) as MessageProperties;
  m.payload = Buffer.from(b.subarray(at));
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
