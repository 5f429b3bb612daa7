// The broker state of aedes 2 (retained messages, sessions and subscriptions of clean=false
// clients, offline queues, in-flight QoS 1/2 packets, wills) in named databases of the gateway's
// LMDB environment, so it survives restarts and crashes and travels with backups.
//
// Every method answers as soon as its writes are staged: reads see them at once, and the storage
// policy (src/storage) decides when they reach the disk — a copy for a connected client only if
// the client has not acknowledged it within the hold, a copy for a client away in the next group
// commit, bookkeeping in the background. Durability is a separate barrier (`whenSettled`):
// acknowledgements wait for it (durable-acks.ts), the publish path never does. See
// docs/mqtt-broker.md "Broker state on disk" for why.
import { Readable } from 'node:stream';
import type { GatewayConfig } from '../../config/config-schema.js';
import type { Logger } from '../../log/index.js';
import { prefixRange, type Store } from '../../store/index.js';
import { aedesPacket, type StoredPacket } from './aedes-modules.js';
import { OutgoingQueues, keyId } from './outgoing-queues.js';
import { RetainedMessages, type RetainedPacket, type RetainedRefusal } from './retained-messages.js';
import { SessionIndex, clientKey, type Session, type SessionClient, type SessionRecord, type StoredSubscription, type SubscriptionInput } from './sessions.js';
import { createStoragePolicy, STORAGE_DEFAULTS, type StagedTable, type StoragePolicy, type WriteHow, type WriteTag } from '../../storage/index.js';

const NOTHING: readonly StoredPacket[] = [];

export interface LmdbPersistenceLimits {
  /** Messages one session may hold (offline queue + unacknowledged); new ones beyond are dropped. */
  maxQueuedMessages: number;
  /** Retained topics; a new topic beyond is refused, existing ones keep being updated. */
  maxRetainedMessages: number;
  /** Bytes (topic + payload) of all retained messages. */
  maxRetainedBytes: number;
  /** Lifetime of an abandoned MQTT 3.1/3.1.1 persistent session; the upper bound of an MQTT 5 session expiry interval. */
  sessionExpirySeconds: number;
}

export interface LmdbPersistenceDeps {
  store: Store;
  /** The gateway's storage policy (one for every writer of the store); without it, one of its own with the defaults. */
  policy?: StoragePolicy;
  limits: LmdbPersistenceLimits;
  log?: Logger;
  /** Period of the sweep of expired sessions (default 60 s). */
  sweepIntervalMs?: number;
  /** Sessions one sweep looks at (default 1,000); at most a tenth of them are wiped per sweep. */
  sweepBatch?: number;
  now?: () => number;
  /**
   * What `outgoingStream` gives aedes to send again at a reconnect: a PUBLISH that already has its
   * packet identifier was sent before (maybe received), so it goes with DUP 1 [MQTT-3.3.1-1], as
   * Mosquitto sends it. Off: the packets as stored (the aedes-persistence contract, which its
   * abstract suite checks); the gatewayd broker turns it on.
   */
  markResends?: boolean;
}

/** A stored session as the broker admin API shows it. */
export interface SessionInfo {
  /** Messages waiting for the client (offline queue), and sent but not acknowledged yet. */
  queued: number;
  inflight: number;
  /** Epoch ms; null while its client is connected. */
  expiresAt: number | null;
  expirySeconds: number;
  /** The user id it belongs to ('' anonymous), when known. */
  owner: string | undefined;
  subscriptions: SubscriptionInput[];
}

export interface BrokerStateStats {
  /** Clients with persistent state (subscriptions, queued or in-flight messages, will). */
  sessions: number;
  /** Subscriptions of persistent sessions (any QoS). */
  subscriptions: number;
  /** Outgoing messages held for persistent sessions (offline queues + unacknowledged). */
  queuedMessages: number;
  retainedMessages: number;
  retainedBytes: number;
  /** Messages not queued because a session queue was full (maxQueuedMessages). */
  queueDrops: number;
  /** Retained messages not stored because of maxRetainedMessages / maxRetainedBytes. */
  retainedRefused: number;
  /** Sessions removed by the expiry sweep. */
  sessionsExpired: number;
  /** Writes whose commit failed (each is logged). */
  writeErrors: number;
}

/** The part of aedes' broker the persistence uses: its id, and its client events when there are. */
export interface PersistenceBroker {
  id: string;
  clients?: Record<string, unknown>;
  on?(event: 'client' | 'clientDisconnect', listener: (client: SessionClient) => void): unknown;
  removeListener?(event: 'client' | 'clientDisconnect', listener: (client: SessionClient) => void): unknown;
}

interface ClientRef {
  id: string;
}

type WillPacket = Record<string, unknown> & { brokerId?: string; clientId?: string };

/** Named databases of the store (src/mqtt/broker-admin.ts pages the sessions and retained ones read-only). */
export const DATABASES = {
  retained: 'mqtt-retained',
  sessions: 'mqtt-sessions',
  subscriptions: 'mqtt-subscriptions',
  outgoing: 'mqtt-outgoing',
  incoming: 'mqtt-incoming',
  wills: 'mqtt-wills',
} as const;

/** What is rebuilt from the store when it opens or is reopened after a restore. */
interface LoadedState {
  retained: RetainedMessages;
  sessions: SessionIndex;
  queues: OutgoingQueues;
  incoming: StagedTable<StoredPacket>;
  wills: StagedTable<WillPacket>;
  /** session key → brokerId of its will (streamWill filters on it without reading the wills). */
  willBrokers: Map<string, string>;
  queuedTotal: number;
}

/** The limits from the configuration: mqtt.persistence, and mqtt.maxQueuedMessages for the queues. */
export function persistenceLimits(mqtt: GatewayConfig['mqtt']): LmdbPersistenceLimits {
  const { maxRetainedMessages, maxRetainedBytes, sessionExpirySeconds } = mqtt.persistence;
  return { maxQueuedMessages: mqtt.maxQueuedMessages, maxRetainedMessages, maxRetainedBytes, sessionExpirySeconds };
}

export function createLmdbPersistence(deps: LmdbPersistenceDeps): LmdbPersistence {
  return new LmdbPersistence(deps);
}

export class LmdbPersistence {
  #broker: PersistenceBroker | undefined;
  #state: LoadedState;
  #destroyed = false;
  #sweeper: NodeJS.Timeout | undefined;
  readonly #policy: StoragePolicy;
  readonly #outgoing: StagedTable<StoredPacket>;
  readonly #now: () => number;
  readonly #counters = { queueDrops: 0, retainedRefused: 0, sessionsExpired: 0 };
  readonly #warned = new Map<string, number>();
  /** Per client id, the ticket of its newest subscription change not yet durable. */
  readonly #subscriptionTickets = new Map<string, WriteTag>();
  readonly #onClient = (client: SessionClient) => this.#state.sessions.connected(client);
  readonly #onClientDisconnect = (client: SessionClient) => {
    const session = this.#state.sessions.get(client.id);
    this.#state.sessions.disconnected(client);
    // Its copies held for an acknowledgement that will not come now: written in the next commit.
    if (session) this.#outgoing.promote(session.key);
  };

  constructor(private readonly deps: LmdbPersistenceDeps) {
    this.#now = deps.now ?? Date.now;
    this.#policy = deps.policy ?? createStoragePolicy({ store: deps.store, timings: STORAGE_DEFAULTS, log: deps.log, now: this.#now });
    this.#outgoing = this.#policy.table<StoredPacket>(DATABASES.outgoing, { keyEncoding: 'ordered-binary' });
    this.#state = this.#load();
  }

  /** Reads the indexes from the store: sessions, subscriptions, queue counts, retained sizes, will owners. */
  #load(): LoadedState {
    const { limits } = this.deps;
    const table = <V>(name: string, keyEncoding: 'ordered-binary' | 'binary' = 'ordered-binary') => this.#policy.table<V>(name, { keyEncoding });
    const sessions = new SessionIndex({
      sessions: table<SessionRecord>(DATABASES.sessions),
      subscriptions: table<StoredSubscription>(DATABASES.subscriptions),
      sessionExpirySeconds: limits.sessionExpirySeconds,
      now: this.#now,
    });
    const queues = new OutgoingQueues(this.#outgoing, limits.maxQueuedMessages);
    let queuedTotal = 0;
    for (const session of sessions.sessions()) {
      queues.load(session);
      queuedTotal += session.queued;
    }
    const wills = table<WillPacket>(DATABASES.wills);
    const willBrokers = new Map<string, string>();
    for (const { key, value } of wills.db.getRange()) willBrokers.set(key as string, value.brokerId ?? '');
    const incoming = table<StoredPacket>(DATABASES.incoming);
    for (const key of incoming.db.getKeys()) {
      const session = sessions.byStoredKey((key as [string, number])[0]);
      if (session) session.incoming++;
    }
    return {
      retained: new RetainedMessages(table<RetainedPacket>(DATABASES.retained, 'binary'), limits),
      sessions,
      queues,
      incoming,
      wills,
      willBrokers,
      queuedTotal,
    };
  }

  /**
   * Rebuilds every index from the store after `store.reopen()` (a restore): call it from a
   * store.onReopen listener. Synchronous, so no aedes call sees a half-loaded state.
   */
  reload(): void {
    this.#state = this.#load();
  }

  get broker(): PersistenceBroker | undefined {
    return this.#broker;
  }

  /** Called by aedes (listen) with the broker: follows its clients and starts the expiry sweep. */
  async setup(broker: PersistenceBroker): Promise<void> {
    if (this.#broker && this.#broker !== broker) this.#unfollow(this.#broker);
    this.#broker = broker;
    broker.on?.('client', this.#onClient);
    broker.on?.('clientDisconnect', this.#onClientDisconnect);
    this.#sweeper ??= setInterval(() => {
      try {
        this.sweepExpiredSessions();
      } catch (error) {
        this.#warn('sweep', 'mqtt session expiry sweep failed', { error });
      }
    }, this.deps.sweepIntervalMs ?? 60_000);
    this.#sweeper.unref();
  }

  // ------------------------------------------------------------------ retained

  async storeRetained(packet: RetainedPacket): Promise<void> {
    // Coalesced per topic until written: a QoS 0 update in the background (a power cut costs at
    // most the background interval), a QoS 1/2 one promptly, and its publisher's acknowledgement waits for it.
    const qos = packet.qos as number | undefined;
    const how: WriteHow = qos !== undefined && qos > 0 ? { class: 'prompt', tag: publishIdOf(packet) } : { class: 'background' };
    const refusal = this.#state.retained.store(packet, how);
    if (refusal) this.#retainedRefused(packet.topic, refusal);
  }

  createRetainedStream(pattern: string): Readable {
    return Readable.from(this.#state.retained.matching([pattern]));
  }

  createRetainedStreamCombi(patterns: string[]): Readable {
    return Readable.from(this.#state.retained.matching(patterns));
  }

  // ------------------------------------------------------------------ subscriptions

  /**
   * Answers as soon as the new subscriptions are staged: aedes makes them live (its in-memory
   * subscription) once this resolves, so a message published right after the SUBSCRIBE reaches
   * the client at once, as with Mosquitto. Had it waited for the commit, publishes in between
   * found the staged subscription (a queued copy) but no live one: the copy waited for the next
   * connect. The SUBACK still waits for the commit (`subscriptionsPending`, held-acks.ts).
   *
   * Answered synchronously, not by a promise: aedes handles the packets of one read side by
   * side, so a PUBLISH right behind the SUBSCRIBE on the same connection would otherwise be
   * routed before the subscription is live (a microtask later). Mosquitto handles a
   * connection's packets in order; so does gatewayd.
   */
  addSubscriptions(client: SessionClient, subs: SubscriptionInput[]): Promise<void> {
    const ticket = this.#policy.ticket();
    this.#state.sessions.addSubscriptions(client, subs, ticket);
    this.#awaitSubscriptions(client.id, ticket);
    return ANSWERED_AT_ONCE;
  }

  /** As addSubscriptions: the subscriptions stop at once, the UNSUBACK waits for the commit. */
  removeSubscriptions(client: ClientRef, topics: string[]): Promise<void> {
    const ticket = this.#policy.ticket();
    this.#state.sessions.removeSubscriptions(client.id, topics, { class: 'prompt', tag: ticket });
    this.#awaitSubscriptions(client.id, ticket);
    return ANSWERED_AT_ONCE;
  }

  #awaitSubscriptions(clientId: string, ticket: WriteTag): void {
    if (!this.#policy.pending(ticket)) return; // nothing staged (a repeated subscription)
    const tickets = this.#subscriptionTickets;
    tickets.set(clientId, ticket);
    void this.#policy.whenSettled(ticket).then(() => {
      if (tickets.get(clientId) === ticket) tickets.delete(clientId);
    });
  }

  /**
   * Resolves once every subscription change staged so far for `clientId` is durable; undefined
   * when none waits (the SUBACK / UNSUBACK leaves at once). The newest change's ticket stands
   * for the earlier ones: a commit writes everything staged before it.
   */
  subscriptionsPending(clientId: string): Promise<void> | undefined {
    const ticket = this.#subscriptionTickets.get(clientId);
    return ticket === undefined || !this.#policy.pending(ticket) ? undefined : this.#policy.whenSettled(ticket);
  }

  async subscriptionsByClient(client: ClientRef): Promise<SubscriptionInput[]> {
    return this.#state.sessions.subscriptionsOf(client.id);
  }

  async countOffline(): Promise<{ subsCount: number; clientsCount: number }> {
    return this.#state.sessions.count();
  }

  async subscriptionsByTopic(topic: string): Promise<{ clientId: string; topic: string; qos: number }[]> {
    return this.#queuingSubscriptions(topic);
  }

  /**
   * Whether publishing this message writes to the store: a retained message, or a QoS 1/2 one
   * for which a persistent session queues a copy (durable-acks.ts holds only those
   * acknowledgements). The match is kept for aedes' subscriptionsByTopic of the same publish.
   */
  writesFor(packet: { topic: string; qos: number; retain?: boolean }): boolean {
    if (packet.retain === true) return true;
    if (packet.qos === 0 || this.#state.sessions.queuingSubscriptions === 0) return false;
    return this.#queuingSubscriptions(packet.topic).length > 0;
  }

  #lastMatch: { state: LoadedState; topic: string; version: number; subs: { clientId: string; topic: string; qos: number }[] } | undefined;

  #queuingSubscriptions(topic: string): { clientId: string; topic: string; qos: number }[] {
    const state = this.#state;
    const version = state.sessions.version;
    const last = this.#lastMatch;
    if (last !== undefined && last.topic === topic && last.version === version && last.state === state) return last.subs;
    const subs = state.sessions.match(topic);
    this.#lastMatch = { state, topic, version, subs };
    return subs;
  }

  async cleanSubscriptions(client: ClientRef): Promise<void> {
    this.#state.sessions.cleanSubscriptions(client.id);
    // aedes asks this at every clean start (and when a session ends): the QoS 2 messages the
    // client had not released belong to the discarded session [MQTT-3.1.2-4]. Kept, a message of
    // the new session that reuses such a packet id would be taken for a retransmission and lost.
    const session = this.#state.sessions.get(client.id);
    if (session && session.incoming > 0) this.#dropIncoming(session);
  }

  #dropIncoming(session: Session): void {
    const { start, end } = prefixRange(session.key);
    this.#state.incoming.removeOwnedBy(session.key, start, end, (key) => keyId(key as (string | number)[]), { class: 'background', delivered: true });
    session.incoming = 0;
  }

  getClientList(topic: string): Readable {
    return Readable.from(this.#state.sessions.clientsSubscribedTo(topic));
  }

  // ------------------------------------------------------------------ outgoing

  async outgoingEnqueue(sub: { clientId: string; qos?: number }, packet: object): Promise<void> {
    this.#enqueue(sub.clientId, packet, sub.qos);
  }

  /**
   * One copy per session, at the QoS its subscription was granted [MQTT-3.8.4-6]; a client whose
   * subscriptions overlap gets one copy at the highest of them [MQTT-3.3.5-1], as it does live
   * (mqtt5/overlapping-subscriptions.ts).
   */
  async outgoingEnqueueCombi(subs: readonly { clientId: string; qos?: number }[], packet: object): Promise<void> {
    if (subs.length === 1) return this.#enqueue(subs[0]!.clientId, packet, subs[0]!.qos);
    const granted = new Map<string, number>();
    // A subscription without a QoS (not ours: aedes' own callers) caps nothing.
    for (const sub of subs) granted.set(sub.clientId, Math.max(granted.get(sub.clientId) ?? -1, sub.qos ?? 2));
    for (const [clientId, qos] of granted) this.#enqueue(clientId, packet, qos);
  }

  #enqueue(clientId: string, packet: object, grantedQos: number | undefined): void {
    // While the store cannot write, an offline session's copy is dropped like one over a full
    // queue: every failed commit is a risk (lmdb-js corrupted its heap after a few dozen failed
    // commits in a row on a full disk, test/storage-faults.test.ts), and it could not be kept.
    if (!this.deps.store.writeHealth().writable) {
      this.#counters.queueDrops++;
      this.#warn('unwritable', 'mqtt: messages for offline sessions are dropped while the store cannot write', { clientId });
      return;
    }
    const state = this.#state;
    const session = state.sessions.ensure({ id: clientId });
    // One copy per session: aedes may change a queued packet it streams to one client.
    const copy = aedesPacket(packet);
    if (grantedQos !== undefined && grantedQos < (copy.qos as number)) copy.qos = grantedQos;
    if (state.queues.enqueue(session, copy, this.#copyHow(session, packet))) {
      state.queuedTotal++;
      return;
    }
    this.#counters.queueDrops++;
    if (!session.dropping) {
      session.dropping = true;
      this.#warn('queue', 'mqtt session queue full: new messages are dropped until it has room', { clientId, maxQueuedMessages: this.deps.limits.maxQueuedMessages });
    }
  }

  async outgoingUpdate(client: ClientRef, packet: StoredPacket): Promise<void> {
    const session = this.#state.sessions.get(client.id);
    if (!session) throw new Error('no such packet');
    if (this.#state.queues.update(session, packet, this.#copyHow(session, packet)) === 'added') this.#state.queuedTotal++;
  }

  /**
   * A copy for a client that is connected is held (its PUBACK within the hold cancels it); for a
   * client away it is written in the next group commit. Its publisher's acknowledgement waits for it.
   */
  #copyHow(session: Session, packet: object): WriteHow {
    return { class: session.expiresAt === null ? 'held' : 'prompt', tag: publishIdOf(packet) };
  }

  async outgoingClearMessageId(client: ClientRef, packet: Partial<StoredPacket> | undefined): Promise<StoredPacket | undefined> {
    const session = this.#state.sessions.get(client.id);
    if (!session || typeof packet !== 'object') return undefined;
    const cleared = this.#state.queues.clear(session, packet);
    if (cleared) this.#state.queuedTotal--;
    return cleared;
  }

  outgoingStream(client: ClientRef): Readable {
    // aedes asks at every connect, clean sessions too: a client without a session or with an
    // empty queue (most connects) costs no range read and no pass over the pending writes.
    const session = this.#state.sessions.get(client.id);
    if (!session || session.queued === 0) return Readable.from(NOTHING);
    const entries = this.#state.queues.entries(session.key);
    return Readable.from(this.deps.markResends === true ? markedResends(entries) : entries);
  }

  // ------------------------------------------------------------------ incoming QoS 2

  async incomingStorePacket(client: SessionClient, packet: StoredPacket): Promise<void> {
    const session = this.#state.sessions.ensure(client);
    const stored = aedesPacket(packet);
    stored.messageId = packet.messageId;
    const key = [session.key, packet.messageId ?? 0];
    const id = keyId(key);
    if (!this.#state.incoming.get(id, key)) session.incoming++;
    // Held: the client's PUBREL normally cancels it within the hold. Nobody waits for it: it only
    // recognises a retransmitted PUBLISH, which a power cut before the PUBREC makes a duplicate at
    // worst (docs/mqtt-broker.md "What an acknowledgement means").
    this.#state.incoming.put(id, key, stored, { class: 'held' });
  }

  async incomingGetPacket(client: ClientRef, packet: { messageId?: number }): Promise<StoredPacket> {
    const key = [clientKey(client.id), packet.messageId ?? 0];
    const stored = this.#state.incoming.get(keyId(key), key);
    if (!stored) throw new Error('no such packet');
    return stored;
  }

  async incomingDelPacket(client: ClientRef, packet: { messageId?: number }): Promise<void> {
    const key = [clientKey(client.id), packet.messageId ?? 0];
    const id = keyId(key);
    if (!this.#state.incoming.get(id, key)) throw new Error('no such packet');
    this.#state.incoming.remove(id, key, { class: 'prompt', delivered: true });
    const session = this.#state.sessions.get(client.id);
    if (session && session.incoming > 0) session.incoming--;
  }

  // ------------------------------------------------------------------ wills

  async putWill(client: SessionClient, packet: WillPacket): Promise<void> {
    // As aedes-persistence: the will carries the broker and client it belongs to.
    packet.brokerId = this.#broker?.id;
    packet.clientId = client.id;
    const session = this.#state.sessions.ensure(client);
    // Promptly: after a power cut the will of a client that was connected is still published.
    this.#state.wills.put(session.key, session.key, { ...packet }, { class: 'prompt' });
    this.#state.willBrokers.set(session.key, packet.brokerId ?? '');
  }

  async getWill(client: ClientRef): Promise<WillPacket | undefined> {
    const key = clientKey(client.id);
    return this.#state.wills.get(key, key);
  }

  async delWill(client: ClientRef): Promise<WillPacket | undefined> {
    const key = clientKey(client.id);
    // willBrokers lists every stored will: no read for the clients without one (every connect asks).
    if (!this.#state.willBrokers.has(key)) return undefined;
    const will = this.#state.wills.get(key, key);
    if (will) this.#removeWill(key);
    return will;
  }

  #removeWill(key: string): void {
    this.#state.wills.remove(key, key, { class: 'background' });
    this.#state.willBrokers.delete(key);
  }

  /** Wills of clients whose broker is not among `brokers` (after a restart: every will of the previous run). */
  streamWill(brokers: Record<string, unknown> = {}): Readable {
    const { wills, willBrokers } = this.#state;
    const orphaned = [...willBrokers].filter(([, brokerId]) => !brokers[brokerId]).map(([key]) => key);
    return Readable.from(
      (function* () {
        for (const key of orphaned) {
          const will = wills.get(key, key);
          if (will) yield will;
        }
      })(),
    );
  }

  // ------------------------------------------------------------------ expiry, stats, durability

  /**
   * Wipes sessions whose expiry passed while their client stayed away: subscriptions, queue,
   * in-flight packets, will. Bounded work per call (sweepBatch sessions looked at, a tenth wiped).
   * Runs on a timer once setup() was called; returns how many sessions it wiped.
   */
  sweepExpiredSessions(): number {
    if (this.#destroyed || !this.deps.store.isOpen()) return 0;
    const state = this.#state;
    const batch = this.deps.sweepBatch ?? 1000;
    const clients = this.#broker?.clients;
    const expired = state.sessions.expired(batch, Math.ceil(batch / 10), (clientId) => clients?.[clientId] !== undefined);
    for (const session of expired) this.#wipe(session);
    // Retained messages past their Message Expiry Interval, also those no subscriber asked for.
    const retainedExpired = state.retained.sweepExpired(this.#now(), batch);
    if (retainedExpired > 0) this.deps.log?.debug('mqtt retained messages expired', { count: retainedExpired });
    if (expired.length > 0) this.deps.log?.info('mqtt sessions expired', { count: expired.length, clientIds: expired.slice(0, 10).map((s) => s.clientId) });
    return expired.length;
  }

  #wipe(session: Session, expired = true): void {
    const state = this.#state;
    state.queuedTotal -= session.queued;
    state.queues.wipe(session);
    this.#dropIncoming(session);
    if (state.willBrokers.has(session.key)) this.#removeWill(session.key);
    state.sessions.remove(session);
    if (expired) this.#counters.sessionsExpired++;
  }

  /** A client id's session for the broker admin API (src/mqtt/broker-admin.ts): what it holds, whose it is, when it ends. */
  sessionInfo(clientId: string): SessionInfo | undefined {
    if (this.#destroyed || !this.deps.store.isOpen()) return undefined;
    const session = this.#state.sessions.get(clientId);
    if (!session) return undefined;
    const inflight = session.queueIndex?.byMessageId.size ?? 0;
    return { queued: session.queued - inflight, inflight, expiresAt: session.expiresAt, expirySeconds: session.expirySeconds, owner: session.owner, subscriptions: this.#state.sessions.subscriptionsOf(clientId) };
  }

  /** Ends an offline client's session now, as the expiry sweep would (the admin API). False: none, or its client is connected. */
  deleteSession(clientId: string): boolean {
    if (this.#destroyed || !this.deps.store.isOpen()) return false;
    const session = this.#state.sessions.get(clientId);
    if (!session || this.#broker?.clients?.[clientId] !== undefined) return false;
    this.#wipe(session, false);
    return true;
  }

  /** Whether a session is stored for this client id (MQTT 3.1.1 sessionPresent: whether or not it holds subscriptions). */
  hasSession(clientId: string): boolean {
    return this.#state.sessions.get(clientId) !== undefined;
  }

  /**
   * A client connects asking to resume its session (clean session 0 / clean start 0): whether it
   * finds one (the CONNACK's sessionPresent, MQTT-3.2.2-2), with or without subscriptions. A
   * session whose expiry passed but which the sweep has not reached yet is wiped now, so aedes
   * restores none of it; a session that ends with its connection (expiry 0) is not resumed.
   */
  resumeSession(clientId: string): boolean {
    if (this.#destroyed || !this.deps.store.isOpen()) return false;
    const session = this.#state.sessions.get(clientId);
    if (!session) return false;
    if (session.expiresAt === null) return session.expirySeconds > 0; // its client is connected (a takeover)
    if (session.expiresAt > this.#now()) return true;
    if (this.#broker?.clients?.[clientId] === undefined) this.#wipe(session);
    return false;
  }

  /**
   * Records who a client's session belongs to (the broker's user id), so that after a restart
   * another user still cannot take its client id over. Only sessions that exist are marked.
   */
  setSessionOwner(clientId: string, owner: string): void {
    if (this.#destroyed || !this.deps.store.isOpen()) return;
    const session = this.#state.sessions.get(clientId);
    if (session) this.#state.sessions.setOwner(session, owner);
  }

  /** The owner of a client id's session while it lasts (connected, or not expired yet); undefined otherwise. */
  sessionOwner(clientId: string): string | undefined {
    if (this.#destroyed || !this.deps.store.isOpen()) return undefined;
    const session = this.#state.sessions.get(clientId);
    if (!session) return undefined;
    const lasting = session.expiresAt === null ? session.expirySeconds > 0 : session.expiresAt > this.#now();
    return lasting ? session.owner : undefined;
  }

  /** A deleted user: its sessions no longer hold their client ids against other users. */
  releaseSessionsOf(owner: string): void {
    if (this.#destroyed || !this.deps.store.isOpen()) return;
    for (const session of this.#state.sessions.sessions()) if (session.owner === owner) this.#state.sessions.setOwner(session, undefined);
  }

  stats(): BrokerStateStats {
    const s = this.#state;
    return {
      sessions: s.sessions.size,
      subscriptions: s.sessions.subscriptions,
      queuedMessages: s.queuedTotal,
      retainedMessages: s.retained.count,
      retainedBytes: s.retained.bytes,
      ...this.#counters,
      writeErrors: this.#policy.stats().failedWrites,
    };
  }

  /** The session and retained tables as they will be on disk (staged writes included), for the broker admin API to page. */
  storedTables(): { sessions: StagedTable<SessionRecord>; retained: StagedTable<RetainedPacket> } {
    return {
      sessions: this.#policy.table<SessionRecord>(DATABASES.sessions, { keyEncoding: 'ordered-binary' }),
      retained: this.#policy.table<RetainedPacket>(DATABASES.retained, { keyEncoding: 'binary' }),
    };
  }

  /** Resolves once every copy the publish `publishId` (aedes' brokerCounter) made is durable or taken by its recipient. */
  whenSettled(publishId: number): Promise<void> {
    return this.#policy.whenSettled(publishId);
  }

  /** Commits everything staged (held copies too) and resolves once it is on disk. */
  flush(): Promise<void> {
    return this.#policy.flush();
  }

  /** Stops the sweep and waits until every write is on disk. The store stays open (it is the gateway's). */
  async destroy(): Promise<void> {
    if (this.#destroyed) return;
    this.#destroyed = true;
    clearInterval(this.#sweeper);
    if (this.#broker) this.#unfollow(this.#broker);
    await this.#policy.flush();
  }

  #unfollow(broker: PersistenceBroker): void {
    broker.removeListener?.('client', this.#onClient);
    broker.removeListener?.('clientDisconnect', this.#onClientDisconnect);
  }

  #retainedRefused(topic: string, refusal: RetainedRefusal): void {
    this.#counters.retainedRefused++;
    const { maxRetainedMessages, maxRetainedBytes } = this.deps.limits;
    this.#warn('retained', 'mqtt retained message not stored: the retained limit is reached', { topic, limit: refusal === 'count' ? { maxRetainedMessages } : { maxRetainedBytes } });
  }

  /** At most one warning per kind and minute: a device retrying every second must not flood the log. */
  #warn(kind: string, message: string, fields: Record<string, unknown>): void {
    const now = this.#now();
    if ((this.#warned.get(kind) ?? -Infinity) > now - 60_000) return;
    this.#warned.set(kind, now);
    this.deps.log?.warn(message, fields);
  }
}

/**
 * Settled the moment it is asked (`then` calls back synchronously): what aedes awaits of a staged
 * subscription change is already done. Typed as a promise, as aedes' persistence interface is;
 * `await` and `.then` are all aedes and the abstract suite use of it.
 */
const ANSWERED_AT_ONCE = {
  then(onFulfilled?: (value: void) => unknown) {
    return Promise.resolve(onFulfilled?.());
  },
} as unknown as Promise<void>;

/** A PUBLISH that has its packet identifier was sent before: DUP 1 (LmdbPersistenceDeps.markResends). PUBREL has no DUP. */
function* markedResends(entries: Iterable<StoredPacket>): Generator<StoredPacket> {
  for (const packet of entries) yield packet.messageId !== undefined && packet.cmd === 'publish' ? { ...packet, dup: true } : packet;
}

/** The publish a packet is a copy of (aedes' brokerCounter), for QoS 1/2: its publisher's acknowledgement waits for the copy. */
function publishIdOf(packet: object): number | undefined {
  const p = packet as { qos?: number; brokerCounter?: number };
  return p.qos !== undefined && p.qos > 0 && typeof p.brokerCounter === 'number' && p.brokerCounter > 0 ? p.brokerCounter : undefined;
}
