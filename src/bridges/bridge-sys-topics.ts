// The bridges' figures under $SYS/broker/ (published with the broker's own statistics):
// `connection/<id>/state` (1 connected, 0 not: Mosquitto's topic for its bridges) and
// `bridges/<id>/...`: state, queue messages, bytes, oldest age, drops by reason, forwarded,
// received, resent. A bridge that is gone has its topics cleared (empty retained message).
import { DROP_REASONS } from './bridge-queue.js';
import type { BridgeFigures } from './bridge.js';

export function createBridgeSysTopics(figures: () => BridgeFigures[]): () => Iterable<[string, string | number]> {
  let published = new Map<string, string[]>();
  return () => {
    const out: [string, string | number][] = [];
    const now = new Map<string, string[]>();
    for (const f of figures()) {
      const base = `bridges/${f.id}`;
      const entries: [string, string | number][] = [
        [`connection/${f.id}/state`, f.state === 'connected' ? 1 : 0],
        [`${base}/state`, f.state],
        [`${base}/queue/messages`, f.queue.messages],
        [`${base}/queue/bytes`, f.queue.bytes],
        [`${base}/queue/oldest seconds`, Math.floor(f.queue.oldestAgeSeconds)],
        ...DROP_REASONS.map((r): [string, number] => [`${base}/queue/dropped/${r}`, f.queue.dropped[r]]),
        [`${base}/messages/forwarded`, f.forwarded],
        [`${base}/messages/received`, f.received],
        [`${base}/messages/resent`, f.resent],
      ];
      out.push(...entries);
      now.set(f.id, entries.map(([name]) => name));
    }
    for (const [id, names] of published) if (!now.has(id)) for (const name of names) out.push([name, '']);
    published = now;
    return out;
  };
}
