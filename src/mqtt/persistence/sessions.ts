// Sessions and subscriptions of clients with persistent state. Everything a publish needs is in
// memory, rebuilt from LMDB when the persistence opens: the session records and a QlobberSub trie
// of the QoS > 0 subscriptions (as aedes' in-memory persistence keeps it), so matching a topic
// costs O(topic levels), not O(subscriptions). Queued messages stay on disk (outgoing-queues.ts).
import { createSubscriptionTrie, type SubscriptionTrie } from './aedes-modules.js';
import { CLIENT_KEY_BYTES, FILTER_KEY_BYTES, boundedKey } from './keys.js';
import type { QueueIndex, QueuedSession } from './outgoing-queues.js';
import type { RemoveHow, StagedTable, WriteHow, WriteTag } from '../../storage/index.js';

/** What aedes passes as a subscription (SUBSCRIBE payload entry, MQTT 5 options included). */
export interface SubscriptionInput {
  topic: string;
  qos: number;
  rh?: number;
  rap?: boolean;
  nl?: boolean;
  subscriptionIdentifier?: number;
}

/** One stored subscription, as subscriptionsByClient returns it (without clientId). */
export type SubscriptionOptions = Omit<SubscriptionInput, 'topic'>;

export interface StoredSubscription extends SubscriptionInput {
  clientId: string;
}

/** The durable part of a session. `expiresAt` is null while the client is connected. */
export interface SessionRecord {
  clientId: string;
  expiresAt: number | null;
  expirySeconds: number;
  /** Who the session belongs to (the broker's user id, '' anonymous); absent in records of older versions. */
  owner?: string;
}

/** The client fields that decide a session's lifetime (aedes' Client). */
export interface SessionClient {
  id: string;
  clean?: boolean;
  version?: number;
  sessionExpiryInterval?: number;
  connecting?: boolean;
  connected?: boolean;
}

export class Session implements QueuedSession {
  readonly subscriptions = new Map<string, SubscriptionOptions>();
  /** Outgoing queue: entries held and the next sequence number (maintained by OutgoingQueues). */
  queued = 0;
  nextSeq = 1;
  /** Set on the first dropped message of a full queue, cleared when it has room again (one warning per episode). */
  dropping = false;
  /** Where its queued packets are, while its client is connected (OutgoingQueues). */
  queueIndex: QueueIndex | undefined;
  /** Who the session belongs to (SessionRecord.owner). */
  owner: string | undefined;
  /** QoS 2 PUBLISH packets received from its client and not released yet (mqtt-incoming). */
  incoming = 0;

  constructor(
    readonly clientId: string,
    readonly key: string,
    public expiresAt: number | null,
    public expirySeconds: number,
  ) {}
}

export function clientKey(clientId: string): string {
  return boundedKey(clientId, CLIENT_KEY_BYTES);
}

export interface SessionIndexOptions {
  sessions: StagedTable<SessionRecord>;
  subscriptions: StagedTable<StoredSubscription>;
  /** Lifetime of an abandoned MQTT 3.1/3.1.1 session; the bound of an MQTT 5 session expiry interval. */
  sessionExpirySeconds: number;
  now: () => number;
}

export class SessionIndex {
  private readonly byKey = new Map<string, Session>();
  private readonly trie: SubscriptionTrie = createSubscriptionTrie();
  /** filter → client ids holding it (any QoS), for getClientList. */
  private readonly clientsByFilter = new Map<string, Set<string>>();
  private clientsWithSubscriptions = 0;
  private subscriptionCount = 0;
  private sweepCursor: Iterator<Session> | undefined;

  constructor(private readonly o: SessionIndexOptions) {
    this.load();
  }

  /** Reads the session records and subscriptions (never the queued messages). */
  private load(): void {
    const now = this.o.now();
    for (const { value } of this.o.sessions.db.getRange()) {
      // The configured bound applies to sessions stored under an older one, and a session that
      // was connected when the process died starts its expiry now.
      const expirySeconds = Math.min(value.expirySeconds, this.o.sessionExpirySeconds);
      const latest = now + expirySeconds * 1000;
      const expiresAt = value.expiresAt === null ? latest : Math.min(value.expiresAt, latest);
      const session = new Session(value.clientId, clientKey(value.clientId), expiresAt, expirySeconds);
      session.owner = value.owner;
      this.byKey.set(session.key, session);
    }
    for (const { value } of this.o.subscriptions.db.getRange()) {
      const session = this.byKey.get(clientKey(value.clientId)) ?? this.ensure({ id: value.clientId });
      const { clientId: _clientId, topic, ...options } = value;
      this.index(session, topic, options);
    }
  }

  get size(): number {
    return this.byKey.size;
  }

  get subscriptions(): number {
    return this.subscriptionCount;
  }

  sessions(): IterableIterator<Session> {
    return this.byKey.values();
  }

  get(clientId: string): Session | undefined {
    return this.byKey.get(clientKey(clientId));
  }

  /** The session stored under this key (the first element of its keys in the other databases). */
  byStoredKey(key: string): Session | undefined {
    return this.byKey.get(key);
  }

  /** Seconds a session outlives its connection: 0 for a clean one. */
  expirySeconds(client: SessionClient): number {
    if (client.version === 5) return Math.min(client.sessionExpiryInterval ?? 0, this.o.sessionExpirySeconds);
    return client.clean ? 0 : this.o.sessionExpirySeconds;
  }

  /** The session of `client`, created (and stored) on its first persistent state. */
  ensure(client: SessionClient): Session {
    const key = clientKey(client.id);
    const existing = this.byKey.get(key);
    if (existing) return existing;
    // Only a real aedes client object says whether it is connected; a bare { id } is offline.
    const online = client.connected === true || client.connecting === true;
    const expirySeconds = client.clean === undefined ? this.o.sessionExpirySeconds : this.expirySeconds(client);
    const session = new Session(client.id, key, online ? null : this.o.now() + expirySeconds * 1000, expirySeconds);
    this.byKey.set(key, session);
    this.save(session, BOOKKEEPING);
    return session;
  }

  /**
   * The client connected: its session does not expire while it stays. A client that asked for a
   * persistent session has one from now on, even before it subscribes (sessionPresent, MQTT-3.2.2-2).
   */
  connected(client: SessionClient): void {
    const expirySeconds = this.expirySeconds(client);
    const { id, clean, version, sessionExpiryInterval } = client;
    const session = this.get(id) ?? (expirySeconds > 0 ? this.ensure({ id, clean, version, sessionExpiryInterval, connected: true }) : undefined);
    if (!session) return;
    if (session.expiresAt === null && session.expirySeconds === expirySeconds) return;
    session.expiresAt = null;
    session.expirySeconds = expirySeconds;
    this.save(session, BOOKKEEPING);
  }

  /** The client went away: its session expires after its expiry interval. */
  disconnected(client: SessionClient): void {
    const session = this.get(client.id);
    if (!session) return;
    session.queueIndex = undefined;
    session.expirySeconds = this.expirySeconds(client);
    session.expiresAt = this.o.now() + session.expirySeconds * 1000;
    this.save(session, BOOKKEEPING);
  }

  /**
   * Records who the session belongs to (undefined: nobody in particular); written only when it
   * changes, promptly: after a restart the owner still keeps other users off the client id.
   */
  setOwner(session: Session, owner: string | undefined): void {
    if (session.owner === owner) return;
    session.owner = owner;
    this.save(session, { class: 'prompt' });
  }

  private save(session: Session, how: WriteHow): void {
    const record: SessionRecord = { clientId: session.clientId, expiresAt: session.expiresAt, expirySeconds: session.expirySeconds };
    if (session.owner !== undefined) record.owner = session.owner;
    this.o.sessions.put(session.key, session.key, record, how);
  }

  // ------------------------------------------------------------------ subscriptions

  /**
   * Adds (or changes) subscriptions; a subscription that is stored as it is already (aedes
   * restores a session's subscriptions at every reconnect) writes nothing. The writes are prompt
   * and carry `tag`: the SUBACK waits for them.
   */
  addSubscriptions(client: SessionClient, subs: readonly SubscriptionInput[], tag?: WriteTag): void {
    const session = this.ensure(client);
    for (const sub of subs) {
      const options: SubscriptionOptions = { qos: sub.qos, rh: sub.rh, rap: sub.rap, nl: sub.nl };
      // MQTT 5 subscription identifier: stored only when present, so 3.1.1 records keep their shape.
      if (sub.subscriptionIdentifier !== undefined) options.subscriptionIdentifier = sub.subscriptionIdentifier;
      if (sameOptions(session.subscriptions.get(sub.topic), options)) continue;
      this.index(session, sub.topic, options);
      const key = subscriptionKey(session.key, sub.topic);
      this.o.subscriptions.put(key.join('\u0000'), key, { clientId: session.clientId, topic: sub.topic, ...options }, { class: 'prompt', tag });
    }
  }

  removeSubscriptions(clientId: string, topics: readonly string[], how: RemoveHow = { class: 'prompt' }): void {
    const session = this.get(clientId);
    if (!session) return;
    for (const topic of topics) {
      if (!this.unindex(session, topic)) continue;
      const key = subscriptionKey(session.key, topic);
      this.o.subscriptions.remove(key.join('\u0000'), key, how);
    }
  }

  cleanSubscriptions(clientId: string, how?: RemoveHow): void {
    const session = this.get(clientId);
    if (session && session.subscriptions.size > 0) this.removeSubscriptions(clientId, [...session.subscriptions.keys()], how);
  }

  subscriptionsOf(clientId: string): SubscriptionInput[] {
    const session = this.get(clientId);
    if (!session) return [];
    return [...session.subscriptions].map(([topic, options]) => ({ topic, ...options }));
  }

  /** The QoS > 0 subscriptions matching a topic, as aedes-persistence returns them. */
  match(topic: string): { clientId: string; topic: string; qos: number }[] {
    return this.trie.match(topic);
  }

  /** QoS 1/2 subscriptions of persistent sessions: none means no publish is queued for one. */
  get queuingSubscriptions(): number {
    return this.trie.subscriptionsCount;
  }

  /** Changes at every subscription added or removed (a cached match() stays valid while it does not). */
  get version(): number {
    return this.changes;
  }

  count(): { subsCount: number; clientsCount: number } {
    return { subsCount: this.trie.subscriptionsCount, clientsCount: this.clientsWithSubscriptions };
  }

  clientsSubscribedTo(filter: string): string[] {
    return [...(this.clientsByFilter.get(filter) ?? [])];
  }

  private changes = 0;

  private index(session: Session, topic: string, options: SubscriptionOptions): void {
    this.changes++;
    const stored = session.subscriptions.get(topic);
    // Only QoS > 0 subscriptions get offline messages, so only they are matched (as aedes-persistence does).
    if (options.qos > 0) this.trie.add(topic, { clientId: session.clientId, topic, qos: options.qos, rh: options.rh, rap: options.rap, nl: options.nl });
    else if (stored && stored.qos > 0) this.trie.remove(topic, { clientId: session.clientId, topic });
    if (!stored) {
      if (session.subscriptions.size === 0) this.clientsWithSubscriptions++;
      this.subscriptionCount++;
      let clients = this.clientsByFilter.get(topic);
      if (!clients) this.clientsByFilter.set(topic, (clients = new Set()));
      clients.add(session.clientId);
    }
    session.subscriptions.set(topic, options);
  }

  private unindex(session: Session, topic: string): boolean {
    this.changes++;
    const stored = session.subscriptions.get(topic);
    if (!stored) return false;
    if (stored.qos > 0) this.trie.remove(topic, { clientId: session.clientId, topic });
    session.subscriptions.delete(topic);
    this.subscriptionCount--;
    if (session.subscriptions.size === 0) this.clientsWithSubscriptions--;
    const clients = this.clientsByFilter.get(topic);
    clients?.delete(session.clientId);
    if (clients?.size === 0) this.clientsByFilter.delete(topic);
    return true;
  }

  // ------------------------------------------------------------------ expiry

  /**
   * Checks up to `batch` sessions (round robin over all of them, so each tick does bounded work)
   * and returns up to `max` that expired and whose client is not connected.
   */
  expired(batch: number, max: number, isConnected: (clientId: string) => boolean): Session[] {
    const now = this.o.now();
    const found: Session[] = [];
    const checks = Math.min(batch, this.byKey.size);
    for (let i = 0; i < checks && found.length < max; i++) {
      let next = this.sweepCursor?.next();
      if (!next || next.done) {
        this.sweepCursor = this.byKey.values();
        next = this.sweepCursor.next();
        if (next.done) break;
      }
      const session = next.value;
      if (session.expiresAt === null || session.expiresAt > now) continue;
      if (isConnected(session.clientId)) this.connectedWithoutEvent(session);
      else found.push(session);
    }
    return found;
  }

  /** A connected client the broker did not announce (no events): it expires once it leaves. */
  private connectedWithoutEvent(session: Session): void {
    session.expiresAt = null;
    this.save(session, BOOKKEEPING);
  }

  /** Forgets the session and its subscriptions (the caller removes its other data). */
  remove(session: Session): void {
    this.cleanSubscriptions(session.clientId, BOOKKEEPING);
    this.byKey.delete(session.key);
    this.o.sessions.remove(session.key, session.key, BOOKKEEPING);
  }
}

/**
 * Session times and sessions ending: a power cut within the background interval costs at most a
 * session whose expiry starts again at the restart, or one that comes back after it ended.
 */
const BOOKKEEPING: WriteHow = { class: 'background' };

function sameOptions(a: SubscriptionOptions | undefined, b: SubscriptionOptions): boolean {
  return a !== undefined && a.qos === b.qos && a.rh === b.rh && a.rap === b.rap && a.nl === b.nl && a.subscriptionIdentifier === b.subscriptionIdentifier;
}

export function subscriptionKey(sessionKey: string, topic: string): [string, string] {
  return [sessionKey, boundedKey(topic, FILTER_KEY_BYTES)];
}
