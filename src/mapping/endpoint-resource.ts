// An endpoint (DESIGN §11): disabled → enabling → enabled; it stays (or goes back to) enabling
// while its connection is not connected. What it runs while enabled (its activities):
// - read endpoints publish readings to <topic> (Modbus, Http and Opcua every pollIntervalMs,
//   Mqtt and sampled Opcua per message) and answer <topic>/req on <topic>/res with a fresh
//   reading (Mqtt: the last message, or null);
// - write endpoints write what arrives on <topic>/set.
// filter (falsy result: dropped) and then transform apply to every value; /res answers apply
// the transform only.
import type { CompiledRule, RuleContext } from './rules.js';
import type { ConnectionResource } from './connection-resource.js';
import { DeviceError, type ConnectionDriver } from './drivers/types.js';
import { EnableableResource } from './enableable-resource.js';
import type { EndpointView } from './resource-views.js';
import { errorText, MAX_IN_FLIGHT, type RuntimeContext } from './runtime-context.js';
import type { EndpointDef } from './service-files.js';
import { decodePayload } from './topics.js';

/** The data-plane topics of an endpoint: read [topic, /req, /res], write [/set]. */
export function endpointTopicList(def: EndpointDef): string[] {
  return def.operation === 'read' ? [def.topic, `${def.topic}/req`, `${def.topic}/res`] : [`${def.topic}/set`];
}

export class EndpointResource extends EnableableResource {
  busy = false;
  readonly filter: CompiledRule | undefined;
  readonly transform: CompiledRule | undefined;
  inFlight = 0;
  dropped = 0;
  /** The last failure logged at info/warn; repeats (every poll) go to debug. */
  lastError: string | undefined;
  constructor(
    ctx: RuntimeContext,
    readonly def: EndpointDef,
    readonly conn: ConnectionResource,
  ) {
    super(ctx, 'endpoint', def.id, def.targetState);
    this.filter = ctx.rule(def.filter);
    this.transform = ctx.rule(def.transform);
    conn.endpoints.push(this);
  }
  view(): EndpointView {
    return this.withMessage<EndpointView>({ id: this.def.id, currentState: this.current, targetState: this.target, connectionId: this.def.connectionId, operation: this.def.operation, address: this.def.address, agentName: this.ctx.agentName });
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
        },
      );
      return;
    }
    this.disable(() => this.halt());
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
        stops.push(...this.answerRequests(driver));
        if (driver.subscribe && (def.protocol === 'Mqtt' || (def.protocol === 'Opcua' && def.address.samplingIntervalMs !== undefined))) {
          stops.push(await this.relay(driver));
        }
        if (def.pollIntervalMs !== undefined) stops.push(this.poll(driver, def.pollIntervalMs));
      } else stops.push(...this.acceptWrites(driver));
    } catch (err) {
      stopAll();
      throw err;
    }
    return stopAll;
  }
  /** <topic>/req → a fresh reading on <topic>/res. */
  answerRequests(driver: ConnectionDriver): Array<() => void> {
    const { dataPlane } = this.ctx;
    if (!dataPlane) return [];
    const def = this.def;
    return [
      dataPlane.subscribe(`${def.topic}/req`, (topic) =>
        this.guard(topic, async () => {
          const value = await driver.read(def);
          const ctx = this.context(topic);
          await this.ctx.publish(`${def.topic}/res`, this.transform ? await this.transform.evaluate(value, ctx) : value);
        }),
      ),
    ];
  }
  /** Messages the device pushes (Mqtt subscriptions, OPC UA monitored items) → <topic>. */
  relay(driver: ConnectionDriver): Promise<() => void> {
    const def = this.def;
    return driver.subscribe!(def, (topic, value) =>
      this.guard(topic, async () => {
        const out = await this.ctx.applyRules(value, this.context(topic), this.filter, this.transform);
        if (out) await this.ctx.publish(def.topic, out.value);
      }),
    );
  }
  /** <topic>/set → a write to the device. */
  acceptWrites(driver: ConnectionDriver): Array<() => void> {
    const { dataPlane } = this.ctx;
    if (!dataPlane) return [];
    const def = this.def;
    return [
      dataPlane.subscribe(`${def.topic}/set`, (topic, payload) =>
        this.guard(topic, async () => {
          const out = await this.ctx.applyRules(decodePayload(payload), this.context(topic), this.filter, this.transform);
          if (out) await driver.write(def, out.value);
        }),
      ),
    ];
  }
  poll(driver: ConnectionDriver, intervalMs: number): () => void {
    const { timers } = this.ctx;
    let active = true;
    let timer: unknown;
    const tick = () => {
      timer = undefined;
      if (!active) return;
      this.guard(this.def.topic, async () => {
        const value = await driver.read(this.def);
        const out = await this.ctx.applyRules(value, this.context(this.def.topic), this.filter, this.transform);
        if (out && active) await this.ctx.publish(this.def.topic, out.value);
      }).finally(() => {
        if (active) timer = timers.setTimeout(tick, intervalMs);
      });
    };
    timer = timers.setTimeout(tick, 0);
    return () => {
      active = false;
      if (timer !== undefined) timers.clearTimeout(timer);
    };
  }
  /** Runs one unit of work with a bound on concurrency; failures are logged, never thrown. */
  guard(topic: string, work: () => Promise<void>): Promise<void> {
    const { log } = this.ctx;
    if (this.inFlight >= MAX_IN_FLIGHT) {
      if (this.dropped++ % 1000 === 0) log.warn('endpoint overloaded, message dropped', { id: this.def.id, dropped: this.dropped });
      return Promise.resolve();
    }
    this.inFlight++;
    return work()
      .then(() => {
        this.lastError = undefined;
      })
      .catch((err: unknown) => {
        const text = errorText(err);
        const level = text === this.lastError ? 'debug' : err instanceof DeviceError ? 'info' : 'warn';
        this.lastError = text;
        log[level]('endpoint operation failed', { id: this.def.id, topic, error: text });
      })
      .finally(() => {
        this.inFlight--;
      });
  }
}
