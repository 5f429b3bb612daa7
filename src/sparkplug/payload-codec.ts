// Sparkplug B payloads on the wire: the specification's sparkplug_b.proto through protobufjs.
// The schema is parsed once, when the first edge node starts (a gateway without Sparkplug never
// loads protobufjs). Messages are encoded from plain objects without protobufjs' verify and
// fromObject steps: what we build is already in the schema's shape (camelCase field names).
import { createRequire } from 'node:module';
import type * as Protobuf from 'protobufjs';
import { SPARKPLUG_B_PROTO } from './sparkplug-b-proto.js';

/** The value members that metrics and property values share (one of them is set, or isNull). */
interface ValueMembers {
  isNull?: boolean;
  intValue?: number;
  /** number, a protobufjs Long, or (decoded with longs: String) a decimal string. */
  longValue?: unknown;
  floatValue?: number;
  doubleValue?: number;
  booleanValue?: boolean;
  stringValue?: string;
}

/** A PropertyValue: Sparkplug's typed value of a property (only the scalar members are used). */
export interface PropertyValueMessage extends ValueMembers {
  type: number;
}

export interface MetricMessage extends ValueMembers {
  name?: string;
  alias?: number;
  timestamp?: number;
  datatype?: number;
  /** A value acquired earlier and sent late (store and forward): hosts do not take it as the current one. */
  isHistorical?: boolean;
  properties?: { keys: string[]; values: PropertyValueMessage[] };
  bytesValue?: Uint8Array;
}

export interface PayloadMessage {
  timestamp?: number;
  metrics: MetricMessage[];
  seq?: number;
}

export interface PayloadCodec {
  encode(payload: PayloadMessage): Buffer;
  /** Throws on bytes that are not a Sparkplug B payload. 64-bit integers come back as decimal strings. */
  decode(bytes: Buffer): PayloadMessage;
}

const requireCjs = createRequire(import.meta.url);

export function createPayloadCodec(): PayloadCodec {
  let type: Protobuf.Type | undefined;
  const payloadType = (): Protobuf.Type => {
    if (type) return type;
    const protobuf = requireCjs('protobufjs') as typeof Protobuf;
    type = protobuf.parse(SPARKPLUG_B_PROTO).root.lookupType('org.eclipse.tahu.protobuf.Payload');
    return type;
  };
  return {
    encode(payload) {
      const bytes = payloadType().encode(payload).finish();
      return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    },
    decode(bytes) {
      const t = payloadType();
      const object = t.toObject(t.decode(bytes), { longs: String, arrays: true }) as PayloadMessage & { timestamp?: string | number; seq?: string | number };
      if (object.timestamp !== undefined) object.timestamp = Number(object.timestamp);
      if (object.seq !== undefined) object.seq = Number(object.seq);
      for (const m of object.metrics) {
        if (m.alias !== undefined) m.alias = Number(m.alias);
        if (m.timestamp !== undefined) m.timestamp = Number(m.timestamp);
      }
      return object;
    },
  };
}
