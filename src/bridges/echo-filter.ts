// MQTT 3.1.1 has no no-local subscription option: an upstream broker that did not accept the
// bridge protocol level (RabbitMQ, EMQX) sends a bridge its own messages back when an in rule
// covers what an out rule sent. They would never loop (a message that came in is never sent out
// again), but local subscribers would get them twice. The filter remembers what was sent on
// topics an in rule covers (topic + SHA-1 of the payload, bounded) and drops one matching
// message from upstream per message sent.
import { createHash } from 'node:crypto';

const MAX_ENTRIES = 10_000;

export class EchoFilter {
  private readonly sent = new Map<string, number>();
  /** Messages from upstream recognised as the bridge's own. */
  dropped = 0;

  private static key(topic: string, payload: Buffer): string {
    return `${topic}\u0000${createHash('sha1').update(payload).digest('base64')}`;
  }

  /** A message was sent on `topic` (which an in rule covers). */
  remember(topic: string, payload: Buffer): void {
    const key = EchoFilter.key(topic, payload);
    this.sent.set(key, (this.sent.get(key) ?? 0) + 1);
    if (this.sent.size > MAX_ENTRIES) this.sent.delete(this.sent.keys().next().value!);
  }

  /** Is this message from upstream the echo of one the bridge sent? (Consumes it.) */
  isEcho(topic: string, payload: Buffer): boolean {
    if (this.sent.size === 0) return false;
    const key = EchoFilter.key(topic, payload);
    const n = this.sent.get(key);
    if (n === undefined) return false;
    if (n > 1) this.sent.set(key, n - 1);
    else this.sent.delete(key);
    this.dropped++;
    return true;
  }

  clear(): void {
    this.sent.clear();
  }
}
