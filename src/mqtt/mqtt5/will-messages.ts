// Will messages of MQTT 5 clients. Exists because aedes 2.0.0-beta.1 publishes a will as it was
// stored, with its Will Properties: `willDelayInterval` is not a PUBLISH property (§3.3.2.3), so
// every subscriber gets a malformed PUBLISH and strict clients (Paho) reject it ("Property
// WillDelayInterval does not apply to packet type Publish"; aedes issue #1098, its PR #1129
// strips it the same way). The other Will Properties (user properties, content type, message
// expiry, ...) travel on. Will delay itself, and its interaction with session expiry, are aedes'
// own: the will goes after min(Will Delay Interval, Session Expiry Interval) (client.js close →
// scheduleWill), and not at all when the session is resumed before (clearDelayedWill).
import type { Aedes, Client } from 'aedes';

interface WillPacket {
  properties?: Record<string, unknown> & { willDelayInterval?: number };
}

export function publishWillsWithoutWillDelay(aedes: Aedes): void {
  const target = aedes as unknown as { publishWill(client: Client, will: WillPacket): void };
  const publishWill = target.publishWill;
  target.publishWill = function (client: Client, will: WillPacket): void {
    publishWill.call(this, client, withoutWillDelay(will));
  };
}

export function withoutWillDelay<W extends WillPacket>(will: W): W {
  if (will?.properties?.willDelayInterval === undefined) return will;
  const { willDelayInterval: _willOnly, ...properties } = will.properties;
  return { ...will, properties };
}
