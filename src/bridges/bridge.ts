// One running bridge (DESIGN §14): its out rules tap the gateway's broker and put every message
// the runAs user may read into the bridge's queue (a QoS 1/2 publisher is acknowledged once it is
// on disk); the sender takes the queue in order to the upstream broker, at most `maxInflight`
// unacknowledged and `drainRatePerSecond` per second, and a message leaves the queue only when
// upstream acknowledged it. Its in rules subscribe upstream and publish what the user may write
// on the gateway's broker. States: connecting → connected; a failed attempt or a lost link →
// reconnecting (the reason in `message`), tried again after reconnectMinSeconds doubling to
// reconnectMaxSeconds; `disabled` when its target is: the link is closed, the queue still takes
// messages (store-and-forward goes on; nothing is lost while an operator holds the link down).
import type { Logger } from '../log/index.js';
import type { BridgeQueue, DropReason, QueueFigures } from './bridge-queue.js';
import type { BridgeDefinition } from './bridge-definition.js';
import { EchoFilter } from './echo-filter.js';
import type { MessageProperties } from './queue-record.js';
import { RunAs, type BridgeAccess } from './run-as.js';
import { bringsIn, compileRules, inRuleFor, localFilters, localTopicOf, outRuleFor, remoteTopicOf, type TopicRule } from './topic-rules.js';
import { createUpstream, displayUrl, linkErrorText, type IncomingMessage, type OpenLink, type Upstream } from './upstream.js';

export type BridgeState = 'connecting' | 'connected' | 'reconnecting' | 'disabled';
export type BridgeTarget = 'connected' | 'disabled';

/** A message published on the gateway's broker, as a tap sees it. */
export interface TappedMessage {
  topic: string;
  payload: Buffer;
  qos: 0 | 1 | 2;
  retain: boolean;
  properties?: MessageProperties;
}

/** The broker's data plane as bridges use it (src/mqtt). */
export interface BridgeDataPlane {
  /**
   * Every publish on the broker matching `filter`. `done` must be called once the message is
   * taken care of: a QoS 1/2 publisher gets its acknowledgement only after every tap called it.
   */
  tap(filter: string, handler: (message: TappedMessage, done: () => void) => void): () => void;
  publish(topic: string, payload: Buffer, options: { qos: 0 | 1; retain: boolean; properties?: MessageProperties }): Promise<void>;
}

export interface BridgeFigures {
  id: string;
  state: BridgeState;
  connectedTo?: string;
  queue: QueueFigures;
  /** Messages upstream acknowledged (QoS 0: written). */
  forwarded: number;
  /** Messages sent again after a lost connection (upstream may see them twice). */
  resent: number;
  /** Messages from upstream published on the gateway's broker. */
  received: number;
  /** Messages the runAs user may not read (out) or write (in), never queued or published. */
  refused: { out: number; in: number };
  /** Messages from upstream recognised as the bridge's own (3.1.1 without no-local). */
  echoes: number;
}

export interface BridgeDeps {
  def: BridgeDefinition;
  queue: BridgeQueue;
  dataPlane: BridgeDataPlane | undefined;
  access: BridgeAccess;
  log: Logger;
  /** Resolves once what the broker stored is on disk (an incoming QoS 1/2 message is acknowledged upstream after it). */
  durable: () => Promise<void>;
  /** Announces a state change (the mapping runtime's waiters, the UI). */
  changed: () => void;
  /** Called when the bridge stops for good. */
  stopped?: () => void;
  now?: () => number;
}

const AGE_CHECK_MS = 1000;

export class Bridge {
  current: BridgeState = 'disabled';
  target: BridgeTarget = 'connected';
  message: string | undefined;
  private readonly rules: TopicRule[];
  private readonly runAs: RunAs;
  private readonly upstream: Upstream;
  private link: OpenLink | undefined;
  /** Bumped at every new or lost link: callbacks of an older link are ignored. */
  private generation = 0;
  private attempt = 0;
  private retryTimer: NodeJS.Timeout | undefined;
  private connecting = false;
  private stopped = false;
  private readonly untaps: (() => void)[] = [];
  /** Payloads this bridge published on the gateway's broker: never sent back out. */
  private readonly inbound = new WeakSet<Buffer>();
  private readonly echoes = new EchoFilter();
  private readonly counters = { forwarded: 0, received: 0, refusedOut: 0, refusedIn: 0 };
  private pumpScheduled = false;
  private tokens = 0;
  private tokensAt = 0;
  private rateTimer: NodeJS.Timeout | undefined;
  private readonly ageTimer: NodeJS.Timeout;
  private readonly dropEpisode = new Map<DropReason, number>();
  private readonly unready: () => void;
  private readonly now: () => number;

  constructor(private readonly deps: BridgeDeps) {
    const { def, queue, log } = deps;
    this.now = deps.now ?? Date.now;
    this.rules = compileRules(def.topics);
    this.upstream = createUpstream(def.remote, () =>
      log.info('upstream refused the MQTT 3.1.1 bridge protocol level (try_private): connecting as a plain client; its own messages sent back are recognised and dropped', { id: def.id }),
    );
    this.runAs = new RunAs(def.id, def.runAs, this.rules, deps.access, log, this.now, () => this.changedRights());
    queue.limits = { maxMessages: def.queue.maxMessages, maxBytes: def.queue.maxBytes, maxAgeSeconds: def.queue.maxAgeSeconds };
    this.unready = queue.onReady(() => this.schedulePump());
    queue.onDrop = (reason, n) => this.noteDrop(reason, n);
    this.ageTimer = setInterval(() => queue.enforceAge(), AGE_CHECK_MS);
    this.ageTimer.unref();
  }

  get id(): string {
    return this.deps.def.id;
  }

  /** Starts tapping the broker (the queue fills whatever the link does) and drives the state. */
  start(): void {
    const dp = this.deps.dataPlane;
    if (dp) for (const filter of localFilters(this.rules)) this.untaps.push(dp.tap(filter, (m, done) => this.take(filter, m, done)));
    this.reconcile();
  }

  /** Stops for good: no more taps, the link closed; the queue stays (on disk). */
  async stop(): Promise<void> {
    this.stopped = true;
    this.deps.stopped?.();
    for (const untap of this.untaps.splice(0)) untap();
    this.cancelRetry();
    if (this.rateTimer) clearTimeout(this.rateTimer);
    clearInterval(this.ageTimer);
    this.unready();
    this.runAs.close();
    this.deps.queue.onDrop = () => {};
    await this.closeLink();
    this.set('disabled');
  }

  /** Drives currentState toward the target. */
  reconcile(): void {
    if (this.stopped) return;
    if (this.target === 'disabled') {
      this.cancelRetry();
      if (this.link) void this.closeLink().then(() => this.reconcile());
      else if (!this.connecting) this.set('disabled');
      return;
    }
    if (this.link || this.connecting || this.retryTimer) return;
    if (this.current === 'disabled') this.set('connecting');
    this.connect();
  }

  figures(): BridgeFigures {
    const f: BridgeFigures = {
      id: this.id,
      state: this.current,
      queue: this.deps.queue.figures(),
      forwarded: this.counters.forwarded,
      resent: this.deps.queue.resent,
      received: this.counters.received,
      refused: { out: this.counters.refusedOut, in: this.counters.refusedIn },
      echoes: this.echoes.dropped,
    };
    if (this.link) f.connectedTo = displayUrl(this.link.url);
    return f;
  }

  /** Why the bridge is not where it should be, or what keeps its messages from flowing. */
  problem(): string | undefined {
    return this.message ?? this.runAs.problem();
  }

  private set(state: BridgeState): void {
    if (this.current === state) return;
    this.deps.log.debug('bridge state', { id: this.id, from: this.current, to: state });
    this.current = state;
    this.deps.changed();
  }

  private connect(): void {
    this.connecting = true;
    const generation = ++this.generation;
    this.upstream
      .open({
        message: (m) => (generation === this.generation ? this.bringIn(m) : Promise.resolve()),
        lost: (reason) => {
          if (generation === this.generation) this.lost(reason);
        },
      })
      .then(
        async (link) => {
          const gone = () => this.stopped || this.target !== 'connected' || generation !== this.generation;
          let error: unknown;
          if (!gone()) {
            try {
              await link.subscribe(this.rules.filter(bringsIn).map((r) => ({ filter: r.remoteFilter, qos: r.qos })));
            } catch (err) {
              error = err;
            }
          }
          if (gone() || error !== undefined) {
            this.connecting = false;
            await link.close();
            return error !== undefined && generation === this.generation ? this.failed(error) : this.reconcile();
          }
          this.connecting = false;
          this.link = link;
          this.attempt = 0;
          this.message = undefined;
          this.deps.log.info('bridge connected', { id: this.id, url: displayUrl(link.url), sessionPresent: link.sessionPresent, queued: this.deps.queue.size });
          this.set('connected');
          this.schedulePump();
        },
        (err: unknown) => {
          this.connecting = false;
          if (this.stopped) return;
          if (generation !== this.generation) return this.reconcile();
          this.failed(err);
        },
      );
  }

  private failed(err: unknown): void {
    this.message = linkErrorText(err);
    if (this.target !== 'connected' || this.stopped) return this.reconcile();
    if (this.retryTimer) return; // already scheduled (the link was lost while subscribing)
    this.retry();
  }

  private retry(): void {
    const { reconnectMinSeconds, reconnectMaxSeconds } = this.deps.def.remote;
    const delay = Math.min(reconnectMinSeconds * 2 ** this.attempt, reconnectMaxSeconds) * 1000;
    if (delay < reconnectMaxSeconds * 1000) this.attempt++;
    this.deps.log.info('bridge connection failed, retrying', { id: this.id, retryInMs: delay, reason: this.message });
    this.set('reconnecting');
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      this.reconcile();
    }, delay);
    this.retryTimer.unref();
    this.deps.changed();
  }

  private cancelRetry(): void {
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
  }

  private lost(reason: string): void {
    this.generation++;
    this.link = undefined;
    this.deps.queue.connectionLost();
    this.echoes.clear();
    this.message = reason;
    this.deps.log.warn('bridge connection lost', { id: this.id, reason, queued: this.deps.queue.size });
    this.attempt = 0;
    if (this.target === 'connected' && !this.stopped) this.retry();
    else this.reconcile();
  }

  private async closeLink(): Promise<void> {
    const link = this.link;
    this.generation++;
    this.link = undefined;
    this.deps.queue.connectionLost();
    this.echoes.clear();
    if (link) await link.close();
  }

  /** A message on the gateway's broker that the tap of `filter` saw. */
  private take(filter: string, m: TappedMessage, done: () => void): void {
    // What came in through this bridge never goes back out (no loop between two gateways).
    if (this.inbound.has(m.payload)) return done();
    const rule = outRuleFor(this.rules, m.topic);
    // Overlapping rules: the message goes once, through the first rule (in that rule's tap).
    if (!rule || rule.localFilter !== filter) return done();
    if (!this.runAs.mayRead(rule, m.topic)) {
      this.counters.refusedOut++;
      return done();
    }
    const qos = Math.min(rule.qos, m.qos) as 0 | 1 | 2;
    const properties = m.properties && pickProperties(m.properties);
    const message = { localTopic: m.topic, remoteTopic: remoteTopicOf(rule, m.topic), payload: m.payload, qos, retain: rule.retainAsPublished && m.retain, ...(properties ? { properties } : {}) };
    // QoS 0: nobody waits for an acknowledgement, so the publish does not wait for the disk.
    if (m.qos === 0) {
      this.deps.queue.enqueue(message);
      done();
    } else this.deps.queue.enqueue(message, done);
  }

  private schedulePump(): void {
    if (this.pumpScheduled || !this.link) return;
    this.pumpScheduled = true;
    setImmediate(() => {
      this.pumpScheduled = false;
      this.pump();
    });
  }

  /** Sends from the queue while the link is up, the in-flight window open and the rate allows. */
  private pump(): void {
    const { queue, def } = this.deps;
    const link = this.link;
    if (!link) return;
    const window = Math.min(def.remote.maxInflight, link.receiveMaximum);
    const generation = this.generation;
    while (this.link === link && queue.inFlight < window && queue.waiting > 0) {
      if (!this.takeToken()) return;
      const m = queue.next();
      if (!m) return;
      // Checked again at sending: a right revoked after queueing stops the message too. (A
      // message queued under rules since changed keeps the remote topic it was queued with.)
      if (!this.runAs.mayRead(outRuleFor(this.rules, m.localTopic), m.localTopic)) {
        this.counters.refusedOut++;
        queue.drop(m.seq, 'notAuthorized');
        continue;
      }
      let properties = m.properties;
      if (properties?.messageExpiryInterval !== undefined) {
        const left = properties.messageExpiryInterval - Math.floor((this.now() - m.enqueuedAt) / 1000);
        if (left <= 0) {
          queue.drop(m.seq, 'expired');
          continue;
        }
        properties = { ...properties, messageExpiryInterval: left };
      }
      if (!link.noEcho && inRuleFor(this.rules, m.remoteTopic)) this.echoes.remember(m.remoteTopic, m.payload);
      const seq = m.seq;
      link.publish(m.remoteTopic, m.payload, { qos: m.qos, retain: m.retain, ...(properties ? { properties } : {}) }, (err) => {
        if (generation !== this.generation) return; // that link is gone: the message is sent again
        if (err && (err as { refused?: boolean }).refused) queue.drop(seq, 'rejectedUpstream');
        else if (err) return; // the link is failing: lost() follows
        else if (queue.acknowledged(seq)) {
          this.counters.forwarded++;
          if (this.dropEpisode.size) this.endDropEpisode();
          if (queue.size === 0) this.deps.changed(); // drained: waiters on the queue re-check
        }
        this.schedulePump();
      });
    }
  }

  /** Rate limit of the sender (token bucket, a second's burst). */
  private takeToken(): boolean {
    const rate = this.deps.def.queue.drainRatePerSecond;
    if (rate <= 0) return true;
    const t = this.now();
    this.tokens = Math.min(rate, this.tokens + ((t - this.tokensAt) * rate) / 1000);
    this.tokensAt = t;
    if (this.tokens >= 1) {
      this.tokens--;
      return true;
    }
    if (!this.rateTimer) {
      this.rateTimer = setTimeout(() => {
        this.rateTimer = undefined;
        this.schedulePump();
      }, Math.ceil(((1 - this.tokens) * 1000) / rate));
      this.rateTimer.unref();
    }
    return false;
  }

  /** A message from upstream: published on the gateway's broker if the runAs user may write it. */
  private async bringIn(m: IncomingMessage): Promise<void> {
    const rule = inRuleFor(this.rules, m.topic);
    if (!rule) return;
    if (this.echoes.isEcho(m.topic, m.payload)) return;
    const topic = this.runAs.writeTopic(rule, localTopicOf(rule, m.topic));
    if (topic === undefined) {
      this.counters.refusedIn++;
      return;
    }
    const dp = this.deps.dataPlane;
    if (!dp) return;
    // Its own buffer: the mark that keeps it from going back out is this object.
    const payload = Buffer.from(m.payload);
    this.inbound.add(payload);
    const qos = Math.min(rule.qos, m.qos, 1) as 0 | 1;
    await dp.publish(topic, payload, { qos, retain: rule.retainAsPublished && m.retain, ...(m.properties ? { properties: pickProperties(m.properties) } : {}) });
    if (m.qos > 0) await this.deps.durable();
    this.counters.received++;
  }

  /** Called by the queue for each drop: the first of an episode is logged, the episode's total at its end. */
  noteDrop(reason: DropReason, n: number): void {
    const before = this.dropEpisode.get(reason);
    this.dropEpisode.set(reason, (before ?? 0) + n);
    this.deps.changed();
    if (before === undefined) {
      const q = this.deps.def.queue;
      this.deps.log.warn('bridge queue drops messages', { id: this.id, reason, limits: { maxMessages: q.maxMessages, maxBytes: q.maxBytes, maxAgeSeconds: q.maxAgeSeconds }, queued: this.deps.queue.size });
    }
  }

  private endDropEpisode(): void {
    this.deps.log.info('bridge queue dropped messages', { id: this.id, dropped: Object.fromEntries(this.dropEpisode) });
    this.dropEpisode.clear();
  }

  private changedRights(): void {
    this.deps.changed();
  }
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
