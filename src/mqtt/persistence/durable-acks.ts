// aedes 2 answers a QoS 1 PUBLISH with PUBACK *before* it stores the retained message and the
// offline copies (lib/handlers/publish.js: write PUBACK, then broker.publish), and a QoS 2 one
// with PUBREC once they are stored but not yet on disk. A publisher that got its acknowledgement
// has handed the message over (MQTT 4.3.2/4.3.3), so a crash must not lose it.
//
// This holds the acknowledgement back without changing aedes: the publisher's socket is corked
// (for QoS 1 before aedes writes the PUBACK, for QoS 2 when the publish is done, before the
// PUBREC), and uncorked once the writes of that publish are flushed. A publish that writes
// nothing (not retained, no persistent session queues a copy: `writesFor`, decided when it is
// authorized) is not held and costs no more than aedes alone; QoS 0 passes straight through.
// Deliveries to that client wait the same few milliseconds; the publish path itself never waits,
// so message order and aedes' duplicate check by broker counter are untouched.
import type { Aedes, Client } from 'aedes';

/** What the gate needs from the persistence (LmdbPersistence has all three). */
export interface DurabilityBarrier {
  /** The number of writes issued so far. */
  writeMark(): number;
  /** Resolves once every write issued after `mark` is on disk (at once when there was none). */
  whenDurable(mark: number): Promise<void>;
  /** Whether publishing this message writes to the store (absent: assume it may). */
  writesFor?(packet: { topic: string; qos: number; retain?: boolean }): boolean;
}

interface Corkable {
  cork?(): void;
  uncork?(): void;
}

/**
 * Installs the gate on an aedes instance (after its creation, before clients connect). Wraps
 * aedes.authorizePublish and aedes.published, so it composes with the hooks given as options.
 */
export function acknowledgeWhenDurable(aedes: Aedes, barrier: DurabilityBarrier): void {
  /** Publishes of clients that passed authorization and will write: the write mark at that moment. */
  const marks = new WeakMap<object, number>();
  const authorize = aedes.authorizePublish;
  const published = aedes.published;
  const writes = barrier.writesFor?.bind(barrier) ?? (() => true);

  aedes.authorizePublish = function (client, packet, callback) {
    if (packet.qos === 0 || !client) return authorize.call(this, client, packet, callback);
    authorize.call(this, client, packet, (error) => {
      if (!error && writes(packet)) {
        marks.set(packet, barrier.writeMark());
        // aedes writes the PUBACK right after this callback: it must already be held.
        if (packet.qos === 1) cork(client);
      }
      callback(error);
    });
  };

  aedes.published = function (packet, client, callback) {
    const mark = client && packet.qos > 0 ? marks.get(packet) : undefined;
    if (mark !== undefined) {
      marks.delete(packet);
      // QoS 2: aedes writes the PUBREC after this hook (a retransmitted QoS 2 PUBLISH is not
      // published again and gets its PUBREC at once: it was stored the first time).
      if (packet.qos === 2) cork(client!);
      const release = () => uncork(client!);
      barrier.whenDurable(mark).then(release, release);
    }
    published.call(this, packet, client, callback);
  };
}

function cork(client: Client): void {
  (client.conn as Corkable).cork?.();
}

function uncork(client: Client): void {
  (client.conn as Corkable).uncork?.();
}
