// One running bridge (docs/design.md §14): its out rules tap the gateway's broker and put every message
// the runAs user may read into the bridge's queue (a QoS 1/2 publisher is acknowledged once the
// queue's copy is safe: upstream acknowledged it, or it is on disk); the sender takes the queue in order to the upstream broker, at most `maxInflight`
// unacknowledged and `drainRatePerSecond` per second, and a message leaves the queue only when
// upstream acknowledged it. Its in rules subscribe upstream and publish what the user may write
// on the gateway's broker. The link's states are link-keeper.ts's; while `disabled` the queue
// still takes messages (store-and-forward goes on; nothing is lost while an operator holds the
// link down).
import type { Logger } from '../log/index.js';
import type { BridgeQueue, QueueFigures } from './bridge-queue.js';
import type { BridgeDefinition } from './bridge-definition.js';
import { EchoFilter } from './echo-filter.js';
import { pickProperties, type MessageProperties, type MessageToQueue } from './queue-record.js';
import { DropEpisodes, TokenBucket } from './flow-control.js';
import { RunAs, type BridgeAccess } from './run-as.js';
import { bringsIn, compileRules, inRuleFor, localFilters, localTopicOf, outRuleFor, remoteTopicOf, type TopicRule } from './topic-rules.js';
import { createUpstream, displayUrl, type IncomingMessage, type OpenLink } from './upstream.js';
import { LinkKeeper, type BridgeState, type BridgeTarget } from './link-keeper.js';

export type { BridgeState, BridgeTarget } from './link-keeper.js';

/** A message published on the gateway's broker, as a tap sees it. */
export interface TappedMessage {
  topic: string;
  payload: Buffer;
  qos: 0 | 1 | 2;
  retain: boolean;
  properties?: MessageProperties;
  /** The publish it is (aedes' brokerCounter, QoS 1/2): its publisher's acknowledgement waits for the queue's copy. */
  publishId?: number;
}

/** The broker's data plane as bridges use it (src/mqtt). */
export interface BridgeDataPlane {
  /** Every publish on the broker matching `filter`; `done` once the handler took it. */
  tap(filter: string, handler: (message: TappedMessage, done: () => void) => void): () => void;
  /** `durable`: resolves once every copy the publish made (persistent sessions, other bridges) is safe. */
  /** `origin`: who a message from upstream is published for (the audit of a write it causes). */
  publish(topic: string, payload: Buffer, options: { qos: 0 | 1; retain: boolean; properties?: MessageProperties; durable?: boolean; origin?: { userId?: string; username?: string; via?: string } }): Promise<void>;
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
  /** Announces a state change (the mapping runtime's waiters, the UI). */
  changed: () => void;
  /** Called when the bridge stops for good. */
  stopped?: () => void;
  now?: () => number;
}

const AGE_CHECK_MS = 1000;

export class Bridge {
  private readonly rules: TopicRule[];
  private readonly runAs: RunAs;
  private readonly keeper: LinkKeeper;
  private readonly untaps: (() => void)[] = [];
  /** Payloads this bridge published on the gateway's broker: never sent back out. */
  private readonly inbound = new WeakSet<Buffer>();
  private readonly echoes = new EchoFilter();
  private readonly counters = { forwarded: 0, received: 0, refusedOut: 0, refusedIn: 0 };
  private pumpScheduled = false;
  private readonly rate: TokenBucket;
  private rateTimer: NodeJS.Timeout | undefined;
  private readonly ageTimer: NodeJS.Timeout;
  private readonly drops: DropEpisodes;
  private readonly unready: () => void;
  private readonly now: () => number;

  constructor(private readonly deps: BridgeDeps) {
    const { def, queue, log } = deps;
    this.now = deps.now ?? Date.now;
    this.rules = compileRules(def.topics);
    this.runAs = new RunAs(def.id, def.runAs, this.rules, deps.access, log, this.now, () => deps.changed());
    this.keeper = new LinkKeeper({
      id: def.id,
      upstream: createUpstream(def.remote, () =>
        log.info('upstream refused the MQTT 3.1.1 bridge protocol level (try_private): connecting as a plain client; its own messages sent back are recognised and dropped', { id: def.id }),
      ),
      backoff: def.remote,
      log,
      subscriptions: this.rules.filter(bringsIn).map((r) => ({ filter: r.remoteFilter, qos: r.qos })),
      message: (m) => this.bringIn(m),
      up: () => {
        queue.setLinkUp(true);
        this.schedulePump();
      },
      down: () => {
        queue.setLinkUp(false);
        queue.connectionLost();
        this.echoes.clear();
      },
      changed: deps.changed,
    });
    queue.limits = { maxMessages: def.queue.maxMessages, maxBytes: def.queue.maxBytes, maxAgeSeconds: def.queue.maxAgeSeconds };
    this.unready = queue.onReady(() => this.schedulePump());
    this.rate = new TokenBucket(def.queue.drainRatePerSecond, this.now);
    this.drops = new DropEpisodes(def.id, def.queue, log, () => queue.size);
    queue.onDrop = (reason, n) => {
      this.drops.note(reason, n);
      deps.changed();
    };
    this.ageTimer = setInterval(() => queue.enforceAge(), AGE_CHECK_MS);
    this.ageTimer.unref();
  }

  get id(): string {
    return this.deps.def.id;
  }
  get current(): BridgeState {
    return this.keeper.current;
  }
  get target(): BridgeTarget {
    return this.keeper.target;
  }
  set target(t: BridgeTarget) {
    this.keeper.target = t;
  }

  /** Starts tapping the broker (the queue fills whatever the link does) and drives the state. */
  start(): void {
    const dp = this.deps.dataPlane;
    if (dp) for (const filter of localFilters(this.rules)) this.untaps.push(dp.tap(filter, (m, done) => this.take(filter, m, done)));
    this.keeper.reconcile();
  }

  /** Drives currentState toward the target. */
  reconcile(): void {
    this.keeper.reconcile();
  }

  /** Stops for good: no more taps, the link closed; the queue stays (on disk). */
  async stop(): Promise<void> {
    this.deps.stopped?.();
    for (const untap of this.untaps.splice(0)) untap();
    if (this.rateTimer) clearTimeout(this.rateTimer);
    clearInterval(this.ageTimer);
    this.unready();
    this.runAs.close();
    this.deps.queue.onDrop = () => {};
    await this.keeper.stop();
    // Nothing acknowledges the held messages any more: they are written in the next commit.
    this.deps.queue.setLinkUp(false);
  }

  figures(): BridgeFigures {
    const f: BridgeFigures = {
      id: this.id,
      state: this.keeper.current,
      queue: this.deps.queue.figures(),
      forwarded: this.counters.forwarded,
      resent: this.deps.queue.resent,
      received: this.counters.received,
      refused: { out: this.counters.refusedOut, in: this.counters.refusedIn },
      echoes: this.echoes.dropped,
    };
    const link = this.keeper.link;
    if (link) f.connectedTo = displayUrl(link.url);
    return f;
  }

  /** A restore replaced the store: the runAs user and its rights are looked up again. */
  forgetAccess(): void {
    this.runAs.forget();
  }

  /** Why the bridge is not where it should be, or what keeps its messages from flowing. */
  problem(): string | undefined {
    return this.keeper.message ?? this.runAs.problem();
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
    const message: MessageToQueue = { localTopic: m.topic, remoteTopic: remoteTopicOf(rule, m.topic), payload: m.payload, qos: Math.min(rule.qos, m.qos) as 0 | 1 | 2, retain: rule.retainAsPublished && m.retain };
    const properties = m.properties && pickProperties(m.properties);
    if (properties) message.properties = properties;
    // The publish does not wait here: its publisher's acknowledgement waits for this copy's tag.
    this.deps.queue.enqueue(message, m.publishId);
    done();
  }

  private schedulePump(): void {
    if (this.pumpScheduled || !this.keeper.link) return;
    this.pumpScheduled = true;
    setImmediate(() => {
      this.pumpScheduled = false;
      this.pump();
    });
  }

  /** Sends from the queue while the link is up, the in-flight window open and the rate allows. */
  private pump(): void {
    const link = this.keeper.link;
    // What one pump sends leaves in one write to the connection.
    if (link) link.batch(() => this.send(link));
  }

  private send(link: OpenLink): void {
    const { queue, def } = this.deps;
    const window = Math.min(def.remote.maxInflight, link.receiveMaximum);
    const generation = this.keeper.now;
    while (this.keeper.link === link && queue.inFlight < window && queue.waiting > 0) {
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
      const options: { qos: 0 | 1 | 2; retain: boolean; properties?: MessageProperties } = { qos: m.qos, retain: m.retain };
      if (properties) options.properties = properties;
      link.publish(m.remoteTopic, m.payload, options, (err) => {
        if (generation !== this.keeper.now) return; // that link is gone: the message is sent again
        if (err && (err as { refused?: boolean }).refused) queue.drop(seq, 'rejectedUpstream');
        else if (err) return; // the link is failing: lost() follows
        else if (queue.acknowledged(seq)) {
          this.counters.forwarded++;
          this.drops.end();
          if (queue.size === 0) this.deps.changed(); // drained: waiters on the queue re-check
        }
        this.schedulePump();
      });
    }
  }

  /** Rate limit of the sender: false (and a wake-up scheduled) when it must wait. */
  private takeToken(): boolean {
    if (this.rate.take()) return true;
    if (!this.rateTimer) {
      this.rateTimer = setTimeout(() => {
        this.rateTimer = undefined;
        this.schedulePump();
      }, this.rate.waitMs());
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
    // Acknowledged upstream (mqtt.js answers once this resolves) only when its copies here are safe.
    const userId = this.runAs.principal()?.userId;
    const link = this.keeper.link;
    const origin = { username: this.deps.def.runAs, ...(userId ? { userId } : {}), via: `bridge ${this.deps.def.id} from ${link ? displayUrl(link.url) : 'upstream'}` };
    await dp.publish(topic, payload, { qos, retain: rule.retainAsPublished && m.retain, durable: m.qos > 0, origin, ...(m.properties ? { properties: pickProperties(m.properties) } : {}) });
    this.counters.received++;
  }

}
