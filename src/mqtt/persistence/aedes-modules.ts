// Typed access to the two CommonJS helpers aedes' own persistence is built on: QlobberSub (the
// subscription trie aedes-persistence uses) and aedes-packet (the queued packet shape).
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

/** A persistent subscription as the trie stores and matches it (aedes-persistence's shape). */
export interface TrieSubscription {
  clientId: string;
  topic: string;
  qos: number;
  rh?: number;
  rap?: boolean;
  nl?: boolean;
}

export interface SubscriptionTrie {
  /** Distinct (client, filter) pairs held. */
  readonly subscriptionsCount: number;
  add(topic: string, sub: TrieSubscription): void;
  remove(topic: string, sub: { clientId: string; topic: string }): void;
  match(topic: string): TrieSubscription[];
  clear(): void;
}

const QlobberSub = require('qlobber/aedes/qlobber-sub') as new (options: object) => SubscriptionTrie;

export function createSubscriptionTrie(): SubscriptionTrie {
  return new QlobberSub({ wildcard_one: '+', wildcard_some: '#', separator: '/' });
}

/** A packet as aedes queues it: copied fields, brokerId/brokerCounter, messageId reset for QoS > 0. */
export type StoredPacket = Record<string, unknown> & {
  cmd: string;
  topic?: string;
  qos?: number;
  messageId?: number;
  brokerId?: string;
  brokerCounter?: number;
};

const AedesPacket = require('aedes-packet') as new (original: object, broker?: object) => StoredPacket;

export function aedesPacket(original: object): StoredPacket {
  return new AedesPacket(original);
}
