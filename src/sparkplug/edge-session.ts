// An edge node's Sparkplug sessions (specification chapter 5): connect with the NDEATH as will
// (a new bdSeq each time), subscribe NCMD, DCMD and the primary host's STATE, wait for that host
// to be online, then NBIRTH (seq 0, bdSeq, Node Control/Rebirth) and the devices' DBIRTHs; every
// later message takes the next seq (0-255). A lost session is retried after 1 s doubling to 30 s
// (on the next server of an upstream list). An intentional end publishes NDEATH then DISCONNECT;
// a host that goes offline ends the session the same way and the node is born again when it is back.
import type { Logger } from '../log/index.js';
import type { Timers } from '../mapping/drivers/types.js';
import { backoffDelay, errorText } from '../mapping/runtime-context.js';
import type { BdSeqStore } from './bdseq-store.js';
import { DATATYPES } from './metric-values.js';
import type { NodeLink } from './node-link.js';
import type { MetricMessage, PayloadCodec, PayloadMessage } from './payload-codec.js';
import type { DeviceMessageType, EdgeNodeTopics, MessageType } from './sparkplug-topics.js';

export type EdgeNodeState = 'disabled' | 'connecting' | 'waitingForHost' | 'born' | 'dead';
export type PublishedType = Exclude<MessageType, 'NCMD' | 'DCMD'>;
export type CommandOutcome = 'accepted' | 'refused' | 'failed';

export const REBIRTH_METRIC = 'Node Control/Rebirth';
const NDEATH_TIMEOUT_MS = 2000;
/** A primary host's retained STATE comes right after the subscription: waiting shorter than this is not the host being away. */
const HOST_STATE_GRACE_MS = 1000;

export interface EdgeSessionDeps {
  groupId: string;
  edgeNodeId: string;
  topics: EdgeNodeTopics;
  log: Logger;
  timers: Timers;
  codec: PayloadCodec;
  bdSeq: BdSeqStore;
  /** Throws why no session can be opened now (runAs's rights, a Bridge held down): checked before a bdSeq is spent on an attempt. */
  ready?(): void;
  /** Opens the MQTT session with this will; `attempt` picks the server of an upstream list; `signal` abandons it. Rejects with the reason. */
  connect(will: { topic: string; payload: Buffer }, attempt: number, signal: AbortSignal): Promise<NodeLink>;
  /** May runAs publish on this topic (its MQTT write permission)? */
  mayPublish(topic: string): boolean;
  /** The NBIRTH is out (again, for a rebirth): the devices follow. */
  onBorn(rebirth: boolean): void;
  /** The session ended: no device is born any more. */
  onEnded(): void;
  /**
   * The node is away from its host (awayFromHost just became true, or it is waiting or dead
   * again): keep what is read. tentative: it only waits for its host's STATE at the first
   * session, which usually comes at once with the subscription; a birth within
   * HOST_STATE_GRACE_MS takes back what was kept since (onAway(false) when it does not come).
   */
  onAway?(tentative: boolean): void;
  /** A DCMD for one of the devices. */
  onDeviceCommand(deviceId: string, payload: PayloadMessage): void;
  /** A state change (views, waiters). */
  changed(): void;
}

export class EdgeSession {
  state: EdgeNodeState = 'disabled';
  message: string | undefined;
  bdSeq: number | undefined;
  /** The seq of the next message. */
  seq = 0;
  bornAt: number | undefined;
  server: string | undefined;
  /** Which MQTT session is current: one more at every CONNECT. */
  sessionId = 0;
  readonly published: Record<PublishedType, number> = { NBIRTH: 0, NDEATH: 0, NDATA: 0, DBIRTH: 0, DDEATH: 0, DDATA: 0 };
  readonly commands: Record<'NCMD' | 'DCMD', Record<CommandOutcome, number>> = { NCMD: { accepted: 0, refused: 0, failed: 0 }, DCMD: { accepted: 0, refused: 0, failed: 0 } };
  private link: NodeLink | undefined;
  private active = false;
  private running: Promise<void> = Promise.resolve();
  private retryTimer: unknown;
  private wakeUp: (() => void) | undefined;
  /** Abandons the connect in progress when the node stops. */
  private connecting: AbortController | undefined;
  /** The primary host's last online STATE timestamp (kept across sessions), and whether it is online now. */
  private hostTimestamp: number | undefined;
  /** The newest STATE timestamp seen, online or offline (kept across sessions). */
  private stateTimestamp: number | undefined;
  private hostOnline = false;
  /** The host went offline: reconnect at once (to the next server), not after a backoff. */
  private walk = false;
  /** Why the session was ended from inside (shown instead of the connection's own reason). */
  private endReason: string | undefined;
  private readonly denied = new Set<string>();
  /** Since this run started, a session ended, an attempt failed, or the host was waited for. */
  private troubled = false;
  private graceTimer: unknown;
  /** An offline STATE of the primary host was taken in this run. */
  private hostSaidOffline = false;

  constructor(private readonly deps: EdgeSessionDeps) {}

  get born(): boolean {
    return this.state === 'born';
  }

  /**
   * Not born, and not merely on the way to its first birth: a session of this run was born and
   * ended, an attempt failed, or the node waits for its primary host. What the devices read is
   * kept then (node-history.ts); the readings before the first birth of a start that goes well
   * are in the births themselves.
   */
  get awayFromHost(): boolean {
    return this.troubled && !this.born;
  }

  start(): void {
    if (this.active) return;
    this.active = true;
    this.running = this.run();
  }

  /** NDEATH and DISCONNECT when born; resolves once the session is closed. */
  async stop(): Promise<void> {
    this.active = false;
    this.wakeUp?.();
    this.connecting?.abort();
    const link = this.link;
    if (link) await this.leave(link);
    await this.running;
  }

  /**
   * The way to the broker closed or opened (the target of the Bridge it goes through): closed
   * ends the session (NDEATH when born, then DISCONNECT) and abandons a connect in progress —
   * the next attempt says why it cannot connect; opened tries again at once.
   */
  uplink(open: boolean): void {
    if (!this.active) return;
    if (open) {
      if (!this.link && !this.connecting) this.wakeUp?.();
      return;
    }
    if (this.link) {
      this.walk = true;
      void this.leave(this.link);
    } else if (this.connecting) {
      this.walk = true;
      this.connecting.abort();
    }
  }

  /**
   * Resolves once the broker has read everything session `id` published so far (history-replay.ts);
   * rejects when that session is over.
   */
  confirm(id: number): Promise<void> {
    const link = this.link;
    if (!link || id !== this.sessionId) return Promise.reject(new Error('the session is over'));
    return link.confirm();
  }

  /** Publishes a device message with the next seq; false when not born or not permitted. */
  send(type: Exclude<DeviceMessageType, 'DCMD'>, deviceId: string, metrics: MetricMessage[]): boolean {
    return this.born && this.publish(type, this.deps.topics.device(type, deviceId), metrics);
  }

  private async run(): Promise<void> {
    const { topics, log } = this.deps;
    let attempt = 0;
    while (this.active) {
      this.setState('connecting');
      let reason: string;
      try {
        this.deps.ready?.();
        const bdSeq = await this.deps.bdSeq.next(this.deps.groupId, this.deps.edgeNodeId);
        const will = { topic: topics.node('NDEATH'), payload: this.deathPayload(bdSeq) };
        this.connecting = new AbortController();
        const link = await this.deps.connect(will, attempt, this.connecting.signal);
        this.connecting = undefined;
        if (!this.active) {
          await link.end(true); // nothing was born in it
          break;
        }
        this.link = link;
        this.sessionId++;
        this.bdSeq = bdSeq;
        this.server = link.server;
        this.hostOnline = false;
        link.onMessage((topic, payload) => this.inbound(topic, payload));
        await link.subscribe([topics.node('NCMD'), topics.deviceCommands, ...(topics.hostState ? [topics.hostState] : [])]);
        // A stop while subscribing has ended the link already: nothing is born in it.
        if (this.active) {
          log.info('sparkplug session established', { groupId: this.deps.groupId, edgeNodeId: this.deps.edgeNodeId, server: link.server, bdSeq });
          attempt = 0;
          this.message = undefined;
          // The host's retained STATE may have come with the subscription already.
          if (topics.hostState && !this.hostOnline) this.setState('waitingForHost');
          else this.birth(false);
        }
        reason = await link.closed;
      } catch (err) {
        this.connecting = undefined;
        reason = errorText(err);
        await this.link?.end(true); // nothing was born in it: no will
      }
      if (this.endReason !== undefined) reason = this.endReason;
      this.endReason = undefined;
      this.link = undefined;
      this.troubled = true;
      this.deps.onEnded();
      if (!this.active) break;
      if (this.walk) {
        this.walk = false;
        attempt++;
        continue;
      }
      this.message = reason;
      log.warn('sparkplug session lost, retrying', { groupId: this.deps.groupId, edgeNodeId: this.deps.edgeNodeId, reason });
      this.setState('dead');
      await this.pause(backoffDelay(attempt++));
    }
    this.setState('disabled');
  }

  /** NBIRTH with seq 0 (a rebirth keeps the session's bdSeq), then the devices' DBIRTHs. */
  private birth(rebirth: boolean): void {
    this.seq = 0;
    const now = Date.now();
    const metrics: MetricMessage[] = [
      { name: 'bdSeq', timestamp: now, datatype: DATATYPES.Int64, longValue: this.bdSeq! },
      // Never aliased: any host can ask for a rebirth without knowing the aliases.
      { name: REBIRTH_METRIC, timestamp: now, datatype: DATATYPES.Boolean, booleanValue: false },
    ];
    if (!this.publish('NBIRTH', this.deps.topics.node('NBIRTH'), metrics)) {
      // runAs lost the right to publish it: the session ends and the retries say why.
      this.endReason = `runAs may not publish ${this.deps.topics.node('NBIRTH')}`;
      void this.link?.end(true);
      return;
    }
    this.bornAt = now;
    this.setState('born');
    this.deps.onBorn(rebirth);
  }

  private publish(type: PublishedType, topic: string, metrics: MetricMessage[]): boolean {
    const link = this.link;
    if (!link) return false;
    if (!this.deps.mayPublish(topic)) {
      if (!this.denied.has(topic)) this.deps.log.warn('sparkplug message not published: runAs may not publish on its topic', { topic });
      this.denied.add(topic);
      return false;
    }
    this.denied.delete(topic);
    const seq = this.seq;
    this.seq = (seq + 1) % 256;
    link.publish(topic, this.deps.codec.encode({ timestamp: Date.now(), metrics, seq })).catch((err: unknown) => this.deps.log.debug('sparkplug publish failed', { topic, error: errorText(err) }));
    this.published[type]++;
    return true;
  }

  /** The NDEATH payload: bdSeq only, no seq (the will, and what an intentional end publishes). */
  private deathPayload(bdSeq: number): Buffer {
    return this.deps.codec.encode({ timestamp: Date.now(), metrics: [{ name: 'bdSeq', timestamp: Date.now(), datatype: DATATYPES.Int64, longValue: bdSeq }] });
  }

  /**
   * Publishes the NDEATH (when born), then DISCONNECT: the broker drops the will. MQTT 5: a
   * DISCONNECT with reason code 0x04 instead, so the broker publishes the will as the NDEATH
   * (Sparkplug 3.0, tck-id-payloads-ndeath-will-message-publisher-disconnect-mqtt50).
   */
  private async leave(link: NodeLink): Promise<void> {
    const wasBorn = this.born;
    // From now on what is read is kept (the NDEATH may take a moment).
    this.troubled = true;
    // Nothing more goes out in this session.
    this.setState(this.active ? 'connecting' : 'disabled');
    const topic = this.deps.topics.node('NDEATH');
    if (wasBorn && this.deps.mayPublish(topic) && link.disconnectsWithWill) {
      this.published.NDEATH++;
      await link.end(true, true);
      return;
    }
    if (wasBorn && this.deps.mayPublish(topic)) {
      const sent = link.publish(topic, this.deathPayload(this.bdSeq!), { qos: 1 }).catch(() => undefined);
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([sent, new Promise((resolve) => (timer = setTimeout(resolve, NDEATH_TIMEOUT_MS)))]);
      clearTimeout(timer);
      this.published.NDEATH++;
    }
    await link.end(true);
  }

  private inbound(topic: string, payload: Buffer): void {
    const { topics, log } = this.deps;
    if (topic === topics.hostState) return this.hostState(payload);
    const kind = topic === topics.node('NCMD') ? 'NCMD' : topics.commandDevice(topic) !== undefined ? 'DCMD' : undefined;
    if (!kind) return;
    let decoded: PayloadMessage;
    try {
      decoded = this.deps.codec.decode(payload);
    } catch (err) {
      this.commands[kind].refused++;
      log.info('sparkplug command refused: not a Sparkplug B payload', { topic, error: errorText(err) });
      return;
    }
    if (kind === 'DCMD') return this.deps.onDeviceCommand(topics.commandDevice(topic)!, decoded);
    for (const m of decoded.metrics) {
      if (m.name === REBIRTH_METRIC && m.booleanValue === true && this.born) {
        this.commands.NCMD.accepted++;
        log.info('sparkplug rebirth requested', { groupId: this.deps.groupId, edgeNodeId: this.deps.edgeNodeId });
        this.birth(true);
      } else {
        this.commands.NCMD.refused++;
        log.info('sparkplug node command refused: only Node Control/Rebirth (true) is supported', { metric: m.name ?? m.alias });
      }
    }
  }

  /** spBv1.0/STATE/<primary host>: {"online": boolean, "timestamp": epoch ms} (Sparkplug 3.0). */
  private hostState(payload: Buffer): void {
    let state: { online?: unknown; timestamp?: unknown };
    try {
      state = JSON.parse(payload.toString('utf8'));
    } catch {
      state = {};
    }
    if (typeof state.online !== 'boolean' || typeof state.timestamp !== 'number') {
      this.deps.log.info('sparkplug STATE ignored: not {"online": boolean, "timestamp": number}', { topic: this.deps.topics.hostState });
      return;
    }
    // Late (the will of an earlier host session, a retained leftover), ignored: an online STATE older
    // than the last STATE, an offline one older than the last online one (Sparkplug 3.0,
    // tck-id-message-flow-edge-node-birth-publish-phid-wait-timestamp, -termination-host-offline-timestamp).
    const last = state.online ? this.stateTimestamp : this.hostTimestamp;
    if (last !== undefined && state.timestamp < last) return;
    this.stateTimestamp = Math.max(this.stateTimestamp ?? state.timestamp, state.timestamp);
    if (state.online) {
      this.hostTimestamp = state.timestamp;
      this.hostOnline = true;
      if (this.state === 'waitingForHost') this.birth(false);
      return;
    }
    this.hostOnline = false;
    this.hostSaidOffline = true;
    // Said offline while the first session waits: away at once, not after the grace.
    if (this.state === 'waitingForHost' && this.graceTimer !== undefined) {
      this.deps.timers.clearTimeout(this.graceTimer);
      this.away();
    }
    if (this.state === 'born' && this.link) {
      this.deps.log.info('sparkplug primary host offline: NDEATH, reconnecting', { host: this.deps.topics.hostState });
      this.walk = true;
      void this.leave(this.link);
    }
  }

  private pause(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const done = () => {
        this.wakeUp = undefined;
        if (this.retryTimer !== undefined) this.deps.timers.clearTimeout(this.retryTimer);
        this.retryTimer = undefined;
        resolve();
      };
      this.wakeUp = done;
      this.retryTimer = this.deps.timers.setTimeout(done, ms);
    });
  }

  private setState(state: EdgeNodeState): void {
    if (state !== 'born') this.bornAt = undefined;
    if (this.state === state) return;
    this.state = state;
    if (this.graceTimer !== undefined) this.deps.timers.clearTimeout(this.graceTimer);
    this.graceTimer = undefined;
    if (state === 'dead' || (state === 'waitingForHost' && (this.troubled || this.hostSaidOffline))) this.away();
    else if (state === 'waitingForHost') {
      // Waiting at the first session, no STATE heard yet: the host's retained one may be on its way.
      this.troubled = true;
      this.deps.onAway?.(true);
      this.graceTimer = this.deps.timers.setTimeout(() => this.away(), HOST_STATE_GRACE_MS);
    }
    this.deps.changed();
  }

  private away(): void {
    this.graceTimer = undefined;
    this.troubled = true;
    this.deps.onAway?.(false);
  }
}
