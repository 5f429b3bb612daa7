// An endpoint (docs/design.md §11): disabled → enabling → enabled; it stays (or goes back to) enabling
// while its connection is not connected. What it runs while enabled (its activities):
// - read endpoints publish readings to <topic> (Modbus, Http and Opcua every pollIntervalMs,
//   Mqtt and sampled Opcua per message) and answer <topic>/req on <topic>/res with a fresh
//   reading (Mqtt: the last message, or null);
// - write endpoints write what arrives on <topic>/set and acknowledge it on <topic>/set/result.
// filter (falsy result: dropped) and then transform apply to every value; /res answers apply
// the transform only.
import type { CompiledRule, RuleContext } from './rules.js';
import type { ConnectionResource } from './connection-resource.js';
import { DeviceError, RefusedWriteError, type ConnectionDriver } from './drivers/types.js';
import { EnableableResource } from './enableable-resource.js';
import type { EndpointView } from './resource-views.js';
import { errorText, MAX_IN_FLIGHT, publishOptions, RETIRE_TIMEOUT_MS, type MessageProperties, type PublishOptions, type RuntimeContext } from './runtime-context.js';
import type { EndpointDef } from './service-files.js';
import { decodePayload } from './topics.js';
import { auditWrite, type LastWrite } from './write-audit.js';
import type { MessageOrigin } from '../mqtt/index.js';

/** The data-plane topics of an endpoint: read [topic, /req, /res], write [/set, /set/result]. */
export function endpointTopicList(def: EndpointDef): string[] {
  return def.operation === 'read' ? [def.topic, `${def.topic}/req`, `${def.topic}/res`] : [`${def.topic}/set`, `${def.topic}/set/result`];
}

/** The acknowledgement of a write on <topic>/set/result. */
export interface WriteResult {
  ok: boolean;
  /** The value written (after filter and transform), when it got that far. */
  value?: unknown;
  error?: string;
  /** When the value arrived on <topic>/set (epoch ms). */
  timestamp: number;
  /** MQTT 5 correlation data of the request, as UTF-8 text. */
  correlationData?: string;
}

/** Who follows an endpoint's readings and state besides the broker (a Sparkplug edge node). */
export interface EndpointObserver {
  /** A reading, as published on the endpoint's topic (after its filter and transform). */
  reading(value: unknown, at: number): void;
  /** A poll, or a message the device pushed, failed (the reason). */
  readFailed(error: string, at: number): void;
  /** The endpoint's state changed. */
  stateChanged(): void;
}

export class EndpointResource extends EnableableResource {
  busy = false;
  readonly observers = new Set<EndpointObserver>();
  readonly filter: CompiledRule | undefined;
  readonly transform: CompiledRule | undefined;
  inFlight = 0;
  dropped = 0;
  /** The last failure logged at info/warn; repeats (every poll) go to debug. */
  lastError: string | undefined;
  /** How readings are published (the definition's qos and retain). */
  readonly readingOptions: PublishOptions | undefined;
  /** Write endpoints: the last value written or refused, and for whom (the view shows it). */
  lastWrite: LastWrite | undefined;
  /** Whether the audit trail was asked for the last write of an earlier run (once: an index lookup). */
  lastWriteLookedUp = false;
  constructor(
    ctx: RuntimeContext,
    readonly def: EndpointDef,
    readonly conn: ConnectionResource,
  ) {
    super(ctx, 'endpoint', def.id, def.targetState);
    this.filter = ctx.rule(def.filter);
    this.transform = ctx.rule(def.transform);
    this.readingOptions = publishOptions(def);
    conn.endpoints.push(this);
  }
  view(): EndpointView {
    const view = this.withMessage<EndpointView>({ id: this.def.id, currentState: this.current, targetState: this.target, connectionId: this.def.connectionId, operation: this.def.operation, address: this.def.address, agentName: this.ctx.agentName });
    if (this.def.operation === 'read') view.publish = { topic: this.def.topic, qos: this.def.qos ?? 0, retain: this.def.retain ?? false };
    const lastWrite = this.lastWriteKnown();
    if (lastWrite) view.lastWrite = { ...lastWrite, at: new Date(lastWrite.at).toISOString() };
    return view;
  }
  /**
   * The last write: this run's, else the newest in the audit trail (a restart keeps what the
   * page said). The trail is asked once per endpoint, through its endpoint index: one short
   * range read, whatever the trail holds.
   */
  lastWriteKnown(): LastWrite | undefined {
    if (this.lastWrite || this.lastWriteLookedUp || this.def.operation !== 'write' || !this.ctx.lastWriteOf) return this.lastWrite;
    try {
      this.lastWrite = this.ctx.lastWriteOf(this.def.id);
      this.lastWriteLookedUp = true;
    } catch (err) {
      // The store is away (a restore swapping it): asked again at the next view.
      this.ctx.log.debug('last write not read from the audit trail', { id: this.def.id, error: errorText(err) });
    }
    return this.lastWrite;
  }
  context(topic: string): RuleContext {
    return { topic, vars: {}, label: this.def.name };
  }
  reconcile(): void {
    if (this.busy) return;
    const up = this.conn.current === 'connected';
    if (this.target === 'enabled' && !this.ctx.stopped()) {
      if (this.current === 'enabled') {
        if (up) return;
        this.halt();
        this.set('enabling');
        return;
      }
      this.set('enabling');
      if (!up) return;
      this.busy = true;
      this.activate().then(
        (stop) => {
          this.busy = false;
          this.stopActivity = stop;
          this.message = undefined;
          this.set('enabled');
          this.reconcile();
        },
        (err: unknown) => {
          this.busy = false;
          this.message = errorText(err);
          this.ctx.log.warn('endpoint could not start', { id: this.def.id, error: this.message });
          // Stays enabling; retried on the connection's next change.
          this.ctx.changed();
        },
      );
      return;
    }
    this.disable(() => this.halt());
  }
  override async retire(): Promise<void> {
    this.target = 'disabled';
    // An activation in flight finishes first (then disables itself).
    await this.ctx.waitFor(() => !this.busy, RETIRE_TIMEOUT_MS).catch(() => undefined);
    this.reconcile();
    const i = this.conn.endpoints.indexOf(this);
    if (i >= 0) this.conn.endpoints.splice(i, 1);
  }
  /** Starts what the endpoint does; resolves its stop function. */
  async activate(): Promise<() => void> {
    const def = this.def;
    const driver = this.conn.driver!;
    const stops: Array<() => void> = [];
    const stopAll = () => {
      for (const s of stops.splice(0)) s();
    };
    try {
      if (def.operation === 'read') {
        stops.push(...this.answerRequests());
        if (driver.subscribe && (def.protocol === 'Mqtt' || (def.protocol === 'Opcua' && def.address.samplingIntervalMs !== undefined))) {
          stops.push(await this.relay(driver));
        }
        if (def.pollIntervalMs !== undefined) stops.push(this.poll(driver, def.pollIntervalMs));
      } else stops.push(...this.acceptWrites());
    } catch (err) {
      stopAll();
      throw err;
    }
    return stopAll;
  }
  /** <topic>/req → a fresh reading on <topic>/res. */
  answerRequests(): Array<() => void> {
    const { dataPlane } = this.ctx;
    if (!dataPlane) return [];
    const def = this.def;
    return [
      dataPlane.subscribe(`${def.topic}/req`, (topic) =>
        this.guard(topic, async () => {
          const value = await this.conn.read(def);
          this.readTaken();
          const ctx = this.context(topic);
          await this.ctx.publish(`${def.topic}/res`, this.transform ? await this.transform.evaluate(value, ctx) : value);
          this.conn.counters.published++;
        }),
      ),
    ];
  }
  /** Messages the device pushes (Mqtt subscriptions, OPC UA monitored items) → <topic>. */
  relay(driver: ConnectionDriver): Promise<() => void> {
    const def = this.def;
    return driver.subscribe!(def, (topic, value) =>
      this.guard(
        topic,
        async () => {
          this.readTaken();
          const out = await this.ctx.applyRules(value, this.context(topic), this.filter, this.transform);
          if (out) await this.published(def.topic, out.value);
        },
        undefined,
        (error) => this.readFailed(error),
      ),
    );
  }
  /**
   * Sends the acknowledgement of a value that arrived on <topic>/set with these properties, and
   * records the write in the audit trail (write-audit.ts): from `origin`, asked to write `asked`.
   */
  acknowledger(properties: MessageProperties | undefined, origin: MessageOrigin, asked: unknown): (result: WriteResult) => void {
    const def = this.def;
    const correlationData = properties?.correlationData;
    return (result) => {
      this.lastWrite = auditWrite(this.ctx.log, def, origin, { ...result, value: result.value ?? asked });
      if (correlationData) result.correlationData = correlationData.toString('utf8');
      this.ctx
        .publish(`${def.topic}/set/result`, result, { qos: 1, ...(correlationData ? { properties: { correlationData } } : {}) })
        .then(() => void this.conn.counters.published++)
        .catch((err: unknown) => this.ctx.log.debug('write acknowledgement not published', { id: def.id, error: errorText(err) }));
    };
  }
  /**
   * <topic>/set → a write to the device, acknowledged on <topic>/set/result with
   * {ok, value?, error?, timestamp (when the value arrived, epoch ms), correlationData?}; MQTT 5
   * correlation data, when the broker passes it, is echoed as a property and in the body.
   */
  acceptWrites(): Array<() => void> {
    const { dataPlane } = this.ctx;
    if (!dataPlane) return [];
    const def = this.def;
    return [
      dataPlane.subscribe(`${def.topic}/set`, (topic: string, payload: Buffer, properties: MessageProperties | undefined, origin: MessageOrigin) => {
        const timestamp = Date.now();
        const asked = decodePayload(payload);
        const acknowledge = this.acknowledger(properties, origin, asked);
        void this.guard(
          topic,
          async () => {
            let value: unknown;
            try {
              const out = await this.ctx.applyRules(asked, this.context(topic), this.filter, this.transform);
              if (!out) return acknowledge({ ok: false, error: 'dropped by the endpoint filter', timestamp });
              value = out.value;
              await this.conn.write(def, value);
            } catch (err) {
              acknowledge({ ok: false, ...(value === undefined ? {} : { value }), error: errorText(err), timestamp });
              throw err;
            }
            this.conn.counters.writes++;
            acknowledge({ ok: true, value, timestamp });
          },
          () => acknowledge({ ok: false, error: 'the endpoint is overloaded: value dropped', timestamp }),
        );
      }),
    ];
  }
  /**
   * While a write endpoint waits for its connection (enabling), values on <topic>/set are not
   * written; the writer is told so on <topic>/set/result instead of hearing nothing.
   */
  refusals: (() => void) | undefined;
  override onState(): void {
    for (const o of this.observers) o.stateChanged();
    const waiting = this.def.operation === 'write' && this.current === 'enabling' && this.target === 'enabled' && !this.ctx.stopped();
    const { dataPlane } = this.ctx;
    if (waiting && !this.refusals && dataPlane) {
      this.refusals = dataPlane.subscribe(`${this.def.topic}/set`, (_topic: string, payload: Buffer, properties: MessageProperties | undefined, origin: MessageOrigin) => {
        if (this.current !== 'enabling') return;
        const why = this.conn.message ? `: ${this.conn.message}` : '';
        this.acknowledger(properties, origin, decodePayload(payload))({ ok: false, error: `not written: connection ${this.conn.def.id} is ${this.conn.current}${why}`, timestamp: Date.now() });
      });
    } else if (!waiting) this.dropRefusals();
  }
  dropRefusals(): void {
    const off = this.refusals;
    this.refusals = undefined;
    off?.();
  }
  override halt(): void {
    super.halt();
    this.dropRefusals();
  }
  async published(topic: string, value: unknown): Promise<void> {
    if (this.observers.size) {
      const at = Date.now();
      for (const o of this.observers) o.reading(value, at);
    }
    await this.ctx.publish(topic, value, this.readingOptions);
    this.conn.counters.published++;
  }
  /** Polls every intervalMs: on a timer of its own, or in the connection's rounds when its driver reads together. */
  poll(driver: ConnectionDriver, intervalMs: number): () => void {
    const { timers } = this.ctx;
    let active = true;
    let timer: unknown;
    const read = () =>
      this.guard(
        this.def.topic,
        async () => {
          const value = await this.conn.read(this.def);
          this.readTaken();
          const out = await this.ctx.applyRules(value, this.context(this.def.topic), this.filter, this.transform);
          if (out && active) await this.published(this.def.topic, out.value);
        },
        undefined,
        (error) => active && this.readFailed(error),
      );
    if (driver.readsTogether) {
      const leave = this.conn.pollGroups.join(intervalMs, () => (active ? read() : Promise.resolve()));
      return () => {
        active = false;
        leave();
      };
    }
    const tick = () => {
      timer = undefined;
      if (!active) return;
      void read().finally(() => {
        if (active) timer = timers.setTimeout(tick, intervalMs);
      });
    };
    timer = timers.setTimeout(tick, 0);
    return () => {
      active = false;
      if (timer !== undefined) timers.clearTimeout(timer);
    };
  }
  /** A reading came from the device: counted, and the last read failure (the message) is over. */
  readTaken(): void {
    this.conn.counted();
    if (this.message !== undefined && this.current === 'enabled') this.message = undefined;
  }
  /** A poll, or a message the device pushed, failed: the endpoint's message until the next reading. */
  readFailed(error: string): void {
    this.message = error;
    const at = Date.now();
    for (const o of this.observers) o.readFailed(error, at);
  }
  /**
   * Runs one unit of work with a bound on concurrency; failures are logged and counted, never
   * thrown (onFailed is told the reason). Work beyond the bound is dropped (onDropped is told).
   */
  guard(topic: string, work: () => Promise<void>, onDropped?: () => void, onFailed?: (error: string) => void): Promise<void> {
    const { log } = this.ctx;
    if (this.inFlight >= MAX_IN_FLIGHT) {
      if (this.dropped++ % 1000 === 0) log.warn('endpoint overloaded, message dropped', { id: this.def.id, dropped: this.dropped });
      onDropped?.();
      return Promise.resolve();
    }
    this.inFlight++;
    return work()
      .then(() => {
        this.lastError = undefined;
      })
      .catch((err: unknown) => {
        // A value refused before anything was sent is no failure of the communication.
        if (err instanceof RefusedWriteError) this.conn.counters.refusedWrites++;
        else this.conn.counters.failures++;
        const text = errorText(err);
        const level = text === this.lastError ? 'debug' : err instanceof DeviceError ? 'info' : 'warn';
        this.lastError = text;
        log[level]('endpoint operation failed', { id: this.def.id, topic, error: text });
        onFailed?.(text);
      })
      .finally(() => {
        this.inFlight--;
      });
  }
}
