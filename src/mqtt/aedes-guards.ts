// Guards around aedes 2.0.0-beta.1's own state against what a client can send, each for a bug of
// aedes that ended the daemon (found by the MQTT fuzz targets, issue 35). One place, installed on
// the aedes instance before any client connects, so each can go when aedes fixes it.
import type { Aedes } from 'aedes';

interface AedesState {
  clients: Record<string, unknown>;
  persistence: { incomingDelPacket(client: unknown, packet: unknown): Promise<unknown> };
}

export function guardAedesState(aedes: Aedes): void {
  const a = aedes as unknown as AedesState;
  // The registry of live clients is a plain object keyed by client id: a client named
  // "constructor", "toString" or "__proto__" found Object's members there, and the takeover of
  // that "previous" client threw a TypeError out of the connect. Without prototype, as aedes 1.2
  // had for subscriptions (connections.ts).
  a.clients = Object.create(null) as Record<string, unknown>;
  // aedes' PUBREL handler deletes the stored QoS 2 packet with `.finally(done)`, no catch: two
  // PUBRELs of one packet id in one read both found it, the second delete rejected ('no such
  // packet'), unhandled, and the daemon exits on an unhandled rejection. A packet that is gone
  // is released: the delete of an absent one is done.
  const persistence = a.persistence;
  const incomingDelPacket = persistence.incomingDelPacket.bind(persistence);
  persistence.incomingDelPacket = (client, packet) =>
    incomingDelPacket(client, packet).catch((err: unknown) => {
      if ((err as Error | undefined)?.message !== 'no such packet') throw err;
    });
}
