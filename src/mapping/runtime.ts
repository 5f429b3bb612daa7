// The protocol-mapping runtime (DESIGN §11): drives every resource's currentState toward its
// targetState and moves data between the protocols and the embedded broker (the data plane).
//
// States
// - Connection: disconnected → connecting → connected; a failed attempt or a lost connection →
//   reconnecting, retried after 1 s, 2 s, 4 s ... at most 30 s (reset once connected);
//   disconnect: disconnecting → disconnected. Opcua without OPC UA support (deps.opcua absent):
//   stays disconnected with a message.
// - Endpoint: disabled → enabling → enabled; disabling → disabled. It stays (or goes back to)
//   enabling while its connection is not connected.
// - Mapping: disabled → enabling → enabled (once subscribed on the data plane); disabling → disabled.
// - Server::Opcua: disabled → enabling → enabled (listening); a failed start is retried with the
//   connection backoff. Node::Opcua: enabling while its server is not enabled, enabled once its
//   variables are in the server's address space. Without OPC UA support (deps.opcua absent) both
//   stay disabled with "OPC UA is not available in this build".
//
// Data
// - read endpoints publish readings to <topic> (Modbus and Http every pollIntervalMs, Mqtt per
//   message of the external broker) and answer <topic>/req on <topic>/res with a fresh reading
//   (Mqtt: the last message, or null);
// - write endpoints write what arrives on <topic>/set;
// - mapping items subscribe to their source (named wildcards `+name` fill $context.vars) and
//   publish the result to their target (`{name}` filled) or to a write endpoint's <topic>/set.
// - filter (falsy result: dropped) and then transform apply to every value; /res answers apply
//   the transform only.
import type { DataPlane } from '../mqtt/index.js';
import type { Logger } from '../log/index.js';
import { NotFoundError } from '../errors/errors.js';
import { createHttpDriver, type HttpConfiguration } from './drivers/http.js';
import { createModbusDriver, type ModbusConfiguration } from './drivers/modbus.js';
import { createMqttDriver, type MqttConfiguration } from './drivers/mqtt.js';
import { createOpcuaDriver, type OpcuaConfiguration } from './drivers/opcua.js';
import type { OpcuaSupport } from './opcua-support.js';
import { OpcuaServerError, startOpcuaServer, type NodeDef, type OpcuaAccess, type OpcuaServerHandle, type RunningNode, type ServerOptions } from './opcua-server.js';
import { DeviceError, realTimers, type ConnectionDriver, type Timers } from './drivers/types.js';
import { compileRule, type CompiledRule, type RuleContext, type RuleLimits } from './rules.js';
import type { ConnectionDef, EndpointDef, MappingDef, MappingItemDef, NodeSetDef, ServerDef, ServiceDef } from './service-files.js';
import { decodePayload, encodePayload, fillTopic, parseNamedFilter, varsOf, type NamedFilter } from './topics.js';

export const OPCUA_UNAVAILABLE = 'OPC UA is not available in this build';
export const BACKOFF_INITIAL_MS = 1000;
export const BACKOFF_MAX_MS = 30_000;
/** Messages a mapping or endpoint processes at once; more are dropped (counted, logged). */
const MAX_IN_FLIGHT = 1000;
/**
 * A message produced by a mapping may feed further mappings, at most this many times in a row:
 * a loop (a → b → a, or a/# → a/x) stops instead of spinning the gateway's CPU.
 */
export const MAX_MAPPING_HOPS = 8;

export type ConnectionState = 'disconnected' | 'connecting' | 'connected' | 'reconnecting' | 'disconnecting';
export type EnableState = 'disabled' | 'enabling' | 'enabled' | 'disabling';

export interface ConnectionView {
  id: string;
  currentState: ConnectionState;
  targetState: 'connected' | 'disconnected';
  connection: Record<string, unknown>;
  agentName: string;
  message?: string;
}
export interface EndpointView {
  id: string;
  currentState: EnableState;
  targetState: 'enabled' | 'disabled';
  connectionId: string;
  operation: string;
  address: Record<string, unknown>;
  agentName: string;
  message?: string;
}
export interface MappingView {
  id: string;
  currentState: EnableState;
  targetState: 'enabled' | 'disabled';
  mappings: Record<string, unknown>[];
  agentName: string;
  message?: string;
}
export interface ServerView {
  id: string;
  options: Record<string, unknown>;
  /** The server's endpoint URL while it runs. */
  endpointUrl?: string;
  currentState: EnableState;
  targetState: 'enabled' | 'disabled';
  protocol: string;
  agentName: string;
  message?: string;
}
export interface NodeSetView {
  id: string;
  currentState: EnableState;
  targetState: 'enabled' | 'disabled';
  nodes: Record<string, unknown>[];
  agentName: string;
  message?: string;
}
export interface TopicsView {
  endpoints: { id: string; topics: string[] }[];
  mappings: { id: string; topics: string[] }[];
  nodes: { id: string; topics: string[] }[];
}

export interface MappingRuntimeDeps {
  services: ServiceDef[];
  /** The embedded broker's port; undefined when the broker is off (nothing is published). */
  dataPlane: DataPlane | undefined;
  log: Logger;
  limits: RuleLimits;
  agentName: string;
  timers?: Timers;
  /** Tests may replace the protocol drivers. */
  driverFor?: (def: ConnectionDef) => ConnectionDriver;
  /** OPC UA (client and server); absent: OPC UA resources report OPCUA_UNAVAILABLE. */
  opcua?: {
    support: OpcuaSupport;
    /** gatewayd's users and permissions for the server's sessions; absent: anonymous only. */
    access?: OpcuaAccess;
    /** The bind address of the server when its options name none (the gateway's host). */
    defaultHost: string;
  };
}

export interface MappingRuntime {
  start(): void;
  stop(): Promise<void>;
  listConnections(): ConnectionView[];
  getConnection(id: string): ConnectionView;
  setConnectionOperation(id: string, operation: 'connect' | 'disconnect'): ConnectionView;
  listEndpoints(): EndpointView[];
  getEndpoint(id: string): EndpointView;
  endpointTopics(id: string): string[];
  setEndpointOperation(id: string, operation: 'enable' | 'disable'): EndpointView;
  listMappings(): MappingView[];
  getMapping(id: string): MappingView;
  mappingEndpointTopics(id: string): Record<string, string[]>;
  setMappingOperation(id: string, operation: 'enable' | 'disable'): MappingView;
  listServers(): ServerView[];
  getServer(id: string): ServerView;
  setServerOperation(id: string, operation: 'enable' | 'disable'): ServerView;
  listNodes(): NodeSetView[];
  getNodeSet(id: string): NodeSetView;
  topics(): TopicsView;
  /** Resolves when `pred` holds (checked on every state change); for tests and tools. */
  waitFor(pred: () => boolean, timeoutMs?: number): Promise<void>;
}

function defaultDriver(def: ConnectionDef): ConnectionDriver {
  switch (def.protocol) {
    case 'Modbus':
      return createModbusDriver(def.configuration as ModbusConfiguration);
    case 'Mqtt':
      return createMqttDriver(def.configuration as MqttConfiguration, `gatewayd-${def.id}`.slice(0, 23));
    case 'Http':
      return createHttpDriver(def.configuration as HttpConfiguration);
    default:
      throw new Error(OPCUA_UNAVAILABLE);
  }
}

function endpointTopicList(def: EndpointDef): string[] {
  return def.operation === 'read' ? [def.topic, `${def.topic}/req`, `${def.topic}/res`] : [`${def.topic}/set`];
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

export function createMappingRuntime(deps: MappingRuntimeDeps): MappingRuntime {
  const { dataPlane, log, limits, agentName } = deps;
  const timers = deps.timers ?? realTimers;
  const driverFor = deps.driverFor ?? defaultDriver;
  const opcua = deps.opcua;
  /** Bound on closing an OPC UA server at stop or disable. */
  const SERVER_STOP_MS = 3000;
  let stopped = false;
  const waiters = new Set<{ pred: () => boolean; resolve: () => void }>();
  const changed = () => {
    for (const w of [...waiters]) {
      if (w.pred()) {
        waiters.delete(w);
        w.resolve();
      }
    }
  };

  const rule = (src: string | undefined) => (src === undefined ? undefined : compileRule(src, limits));

  /** filter then transform; undefined: dropped. */
  async function apply(value: unknown, context: RuleContext, filter: CompiledRule | undefined, transform: CompiledRule | undefined): Promise<{ value: unknown } | undefined> {
    if (filter) {
      const keep = await filter.evaluate(value, context);
      if (!keep) return undefined;
    }
    return { value: transform ? await transform.evaluate(value, context) : value };
  }

  /** Mapping generation of each payload a mapping published (absent: 0, from a client or endpoint). */
  const hops = new WeakMap<Buffer, number>();

  function publish(topic: string, value: unknown): Promise<void> {
    if (!dataPlane) return Promise.resolve();
    return dataPlane.publish(topic, encodePayload(value));
  }

  // ---------------------------------------------------------------- connections

  class ConnectionRt {
    current: ConnectionState = 'disconnected';
    target: 'connected' | 'disconnected';
    message: string | undefined;
    attempt = 0;
    timer: unknown;
    busy = false;
    driver: ConnectionDriver | undefined;
    readonly endpoints: EndpointRt[] = [];
    constructor(readonly def: ConnectionDef) {
      this.target = def.targetState;
      if (def.protocol === 'Opcua' && !deps.driverFor) {
        if (opcua) this.driver = createOpcuaDriver(def.configuration as OpcuaConfiguration, { support: opcua.support, log, id: def.id });
        else this.message = OPCUA_UNAVAILABLE;
      } else this.driver = driverFor(def);
      this.driver?.onLost((reason) => this.lost(reason));
    }
    view(): ConnectionView {
      const { password: _p, headers: _h, ...configuration } = this.def.configuration as Record<string, unknown>;
      // Credentials in a URL (mqtt://user:pass@host) are not returned either.
      if (typeof configuration.url === 'string') configuration.url = configuration.url.replace(/\/\/[^/@]*@/, '//***@');
      const v: ConnectionView = { id: this.def.id, currentState: this.current, targetState: this.target, connection: { protocol: this.def.protocol, ...configuration }, agentName };
      if (this.message !== undefined) v.message = this.message;
      return v;
    }
    set(state: ConnectionState) {
      if (this.current === state) return;
      log.debug('connection state', { id: this.def.id, from: this.current, to: state });
      this.current = state;
      for (const ep of this.endpoints) ep.reconcile();
      changed();
    }
    reconcile(): void {
      if (this.busy || !this.driver) return;
      const driver = this.driver;
      if (this.target === 'connected' && !stopped) {
        if (this.current === 'connected') return;
        if (this.current === 'reconnecting' && this.timer !== undefined) return; // waiting for the retry
        if (this.current === 'disconnected' || this.current === 'disconnecting') this.set('connecting');
        this.busy = true;
        driver.connect().then(
          () => {
            this.busy = false;
            this.attempt = 0;
            this.message = undefined;
            log.info('connection connected', { id: this.def.id, protocol: this.def.protocol });
            this.set('connected');
            this.reconcile();
          },
          (err: unknown) => {
            this.busy = false;
            this.message = errorText(err);
            if (this.target !== 'connected' || stopped) {
              this.set('disconnected');
              return this.reconcile();
            }
            this.retry();
          },
        );
        return;
      }
      this.cancelRetry();
      if (this.current === 'disconnected') return;
      if (this.current === 'reconnecting' || this.current === 'connecting') {
        // Not connected (a connect in flight finishes first: busy).
        this.set('disconnected');
        return;
      }
      this.set('disconnecting');
      this.busy = true;
      driver
        .disconnect()
        .catch(() => undefined)
        .then(() => {
          this.busy = false;
          this.set('disconnected');
          this.reconcile();
        });
    }
    retry() {
      const delay = Math.min(BACKOFF_INITIAL_MS * 2 ** this.attempt, BACKOFF_MAX_MS);
      if (delay < BACKOFF_MAX_MS) this.attempt++;
      log.info('connection failed, retrying', { id: this.def.id, protocol: this.def.protocol, retryInMs: delay, reason: this.message });
      this.set('reconnecting');
      this.timer = timers.setTimeout(() => {
        this.timer = undefined;
        this.reconcile();
      }, delay);
      changed(); // the retry is scheduled (the state may not have changed)
    }
    cancelRetry() {
      if (this.timer !== undefined) timers.clearTimeout(this.timer);
      this.timer = undefined;
    }
    lost(reason: string) {
      if (this.current !== 'connected') return;
      this.message = reason;
      log.warn('connection lost', { id: this.def.id, protocol: this.def.protocol, reason });
      this.attempt = 0;
      if (this.target === 'connected' && !stopped) this.retry();
      else this.set('disconnected');
    }
    async shutdown() {
      this.cancelRetry();
      if (this.driver) await this.driver.disconnect().catch(() => undefined);
    }
  }

  // ---------------------------------------------------------------- endpoints

  /**
   * What endpoints, mappings, servers and node sets share: the enable state machine's fields,
   * state changes (logged, then announced), the message in views, and the disable sequence.
   */
  abstract class EnableableRt {
    current: EnableState = 'disabled';
    target: 'enabled' | 'disabled';
    message: string | undefined;
    constructor(
      readonly kind: string,
      readonly id: string,
      target: 'enabled' | 'disabled',
    ) {
      this.target = target;
    }
    set(state: EnableState) {
      if (this.current === state) return;
      log.debug(`${this.kind} state`, { id: this.id, from: this.current, to: state });
      this.current = state;
      this.onState();
      changed();
    }
    /** Called on every state change, before the change is announced. */
    onState(): void {}
    withMessage<V extends { message?: string }>(view: V): V {
      if (this.message !== undefined) view.message = this.message;
      return view;
    }
    /** Stops what an enabled resource runs (endpoints' polls and subscriptions, node sets' nodes). */
    stopActivity: (() => void) | undefined;
    halt() {
      const stop = this.stopActivity;
      this.stopActivity = undefined;
      stop?.();
    }
    /** disabling → stop what runs → disabled (nothing when already disabled). */
    disable(stop: () => void): void {
      if (this.current === 'disabled') return;
      this.set('disabling');
      stop();
      this.set('disabled');
    }
  }

  class EndpointRt extends EnableableRt {
    busy = false;
    readonly filter: CompiledRule | undefined;
    readonly transform: CompiledRule | undefined;
    inFlight = 0;
    dropped = 0;
    /** The last failure logged at info/warn; repeats (every poll) go to debug. */
    lastError: string | undefined;
    constructor(
      readonly def: EndpointDef,
      readonly conn: ConnectionRt,
    ) {
      super('endpoint', def.id, def.targetState);
      this.filter = rule(def.filter);
      this.transform = rule(def.transform);
      conn.endpoints.push(this);
    }
    view(): EndpointView {
      return this.withMessage<EndpointView>({ id: this.def.id, currentState: this.current, targetState: this.target, connectionId: this.def.connectionId, operation: this.def.operation, address: this.def.address, agentName });
    }
    context(topic: string): RuleContext {
      return { topic, vars: {}, label: this.def.name };
    }
    reconcile(): void {
      if (this.busy) return;
      const up = this.conn.current === 'connected';
      if (this.target === 'enabled' && !stopped) {
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
            log.warn('endpoint could not start', { id: this.def.id, error: this.message });
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
          if (dataPlane) {
            stops.push(
              dataPlane.subscribe(`${def.topic}/req`, (topic) =>
                this.guard(topic, async () => {
                  const value = await driver.read(def);
                  const ctx = this.context(topic);
                  await publish(`${def.topic}/res`, this.transform ? await this.transform.evaluate(value, ctx) : value);
                }),
              ),
            );
          }
          if (driver.subscribe && (def.protocol === 'Mqtt' || (def.protocol === 'Opcua' && def.address.samplingIntervalMs !== undefined))) {
            stops.push(
              await driver.subscribe(def, (topic, value) =>
                this.guard(topic, async () => {
                  const out = await apply(value, this.context(topic), this.filter, this.transform);
                  if (out) await publish(def.topic, out.value);
                }),
              ),
            );
          }
          if (def.pollIntervalMs !== undefined) stops.push(this.poll(driver, def.pollIntervalMs));
        } else if (dataPlane) {
          stops.push(
            dataPlane.subscribe(`${def.topic}/set`, (topic, payload) =>
              this.guard(topic, async () => {
                const out = await apply(decodePayload(payload), this.context(topic), this.filter, this.transform);
                if (out) await driver.write(def, out.value);
              }),
            ),
          );
        }
      } catch (err) {
        stopAll();
        throw err;
      }
      return stopAll;
    }
    poll(driver: ConnectionDriver, intervalMs: number): () => void {
      let active = true;
      let timer: unknown;
      const tick = () => {
        timer = undefined;
        if (!active) return;
        this.guard(this.def.topic, async () => {
          const value = await driver.read(this.def);
          const out = await apply(value, this.context(this.def.topic), this.filter, this.transform);
          if (out && active) await publish(this.def.topic, out.value);
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

  // ---------------------------------------------------------------- mappings

  interface ItemRt {
    def: MappingItemDef;
    source: NamedFilter;
    target: string;
    viaEndpoint: boolean;
    filter: CompiledRule | undefined;
    transform: CompiledRule | undefined;
  }

  class MappingRt extends EnableableRt {
    readonly items: ItemRt[];
    subs: Array<() => void> = [];
    inFlight = 0;
    dropped = 0;
    constructor(readonly def: MappingDef) {
      super('mapping', def.id, def.targetState);
      this.items = def.mappings.map((m) => {
        const sourceTopic = m.sourceEndpoint !== undefined ? endpoints.get(m.sourceEndpoint)!.def.topic : m.source!;
        const targetTopic = m.targetEndpoint !== undefined ? `${endpoints.get(m.targetEndpoint)!.def.topic}/set` : m.target!;
        return { def: m, source: parseNamedFilter(sourceTopic), target: targetTopic, viaEndpoint: m.targetEndpoint !== undefined, filter: rule(m.filter), transform: rule(m.transform) };
      });
      if (!dataPlane) this.message = 'the embedded broker is not running (mqtt.enabled is false)';
    }
    view(): MappingView {
      return this.withMessage<MappingView>({ id: this.def.id, currentState: this.current, targetState: this.target, mappings: this.def.mappings as Record<string, unknown>[], agentName });
    }
    topics(): string[] {
      return [...new Set(this.items.flatMap((i) => [i.source.filter, i.target]))];
    }
    reconcile(): void {
      if (this.target === 'enabled' && !stopped) {
        if (this.current === 'enabled') return;
        this.set('enabling');
        if (!dataPlane) return;
        try {
          for (const item of this.items) this.subs.push(dataPlane.subscribe(item.source.filter, (topic, payload) => this.handle(item, topic, payload)));
        } catch (err) {
          this.unsubscribe();
          this.message = errorText(err);
          return;
        }
        this.message = undefined;
        this.set('enabled');
        return;
      }
      this.disable(() => this.unsubscribe());
    }
    unsubscribe() {
      for (const u of this.subs.splice(0)) u();
    }
    handle(item: ItemRt, topic: string, payload: Buffer) {
      if (this.current !== 'enabled') return;
      const hop = hops.get(payload) ?? 0;
      if (hop >= MAX_MAPPING_HOPS) {
        if (this.dropped++ % 1000 === 0) log.warn('mapping loop stopped', { id: this.def.id, topic, hops: hop, dropped: this.dropped });
        return;
      }
      if (this.inFlight >= MAX_IN_FLIGHT) {
        if (this.dropped++ % 1000 === 0) log.warn('mapping overloaded, message dropped', { id: this.def.id, dropped: this.dropped });
        return;
      }
      this.inFlight++;
      const vars = varsOf(item.source, topic);
      const context: RuleContext = { topic, vars, label: item.def.label ?? this.def.name };
      apply(decodePayload(payload), context, item.filter, item.transform)
        .then(async (out) => {
          if (!out || !dataPlane) return;
          const buf = encodePayload(out.value);
          hops.set(buf, hop + 1);
          await dataPlane.publish(item.viaEndpoint ? item.target : fillTopic(item.target, vars), buf);
        })
        .catch((err: unknown) => log.warn('mapping failed', { id: this.def.id, topic, error: errorText(err) }))
        .finally(() => {
          this.inFlight--;
        });
    }
  }

  // ---------------------------------------------------------------- OPC UA server and node sets

  class ServerRt extends EnableableRt {
    busy = false;
    attempt = 0;
    timer: unknown;
    handle: OpcuaServerHandle | undefined;
    readonly nodeSets: NodeSetRt[] = [];
    constructor(readonly def: ServerDef) {
      super('server', def.id, def.targetState);
      if (!opcua) this.message = OPCUA_UNAVAILABLE;
    }
    view(): ServerView {
      const v: ServerView = { id: this.def.id, options: this.def.options, currentState: this.current, targetState: this.target, protocol: this.def.protocol, agentName };
      if (this.handle) v.endpointUrl = this.handle.endpointUrl;
      return this.withMessage(v);
    }
    override onState(): void {
      for (const n of this.nodeSets) n.reconcile();
    }
    reconcile(): void {
      if (!opcua || this.busy) return;
      if (this.target === 'enabled' && !stopped) {
        if (this.current === 'enabled' || this.timer !== undefined) return;
        this.set('enabling');
        this.busy = true;
        startOpcuaServer({ support: opcua.support, log, serverId: this.def.id, options: this.def.options as ServerOptions, defaultHost: opcua.defaultHost, access: opcua.access }).then(
          (handle) => {
            if (this.target !== 'enabled' || stopped) {
              // Disabled (or the daemon stopping) meanwhile: close it again, still busy.
              void handle
                .stop(SERVER_STOP_MS)
                .catch(() => undefined)
                .then(() => {
                  this.busy = false;
                  this.set('disabled');
                  this.reconcile();
                });
              return;
            }
            this.busy = false;
            this.handle = handle;
            this.attempt = 0;
            this.message = undefined;
            log.info('OPC UA server started', { id: this.def.id, endpointUrl: handle.endpointUrl });
            this.set('enabled');
          },
          (err: unknown) => {
            this.busy = false;
            this.message = errorText(err);
            if (this.target !== 'enabled' || stopped) {
              this.set('disabled');
              return this.reconcile();
            }
            if (err instanceof OpcuaServerError && /allowAnonymous/.test(this.message)) {
              log.error('OPC UA server not started', { id: this.def.id, reason: this.message });
              return; // a configuration problem: no retry
            }
            const delay = Math.min(BACKOFF_INITIAL_MS * 2 ** this.attempt, BACKOFF_MAX_MS);
            if (delay < BACKOFF_MAX_MS) this.attempt++;
            log.warn('OPC UA server failed to start, retrying', { id: this.def.id, retryInMs: delay, reason: this.message });
            this.timer = timers.setTimeout(() => {
              this.timer = undefined;
              this.reconcile();
            }, delay);
            changed();
          },
        );
        return;
      }
      if (this.timer !== undefined) timers.clearTimeout(this.timer);
      this.timer = undefined;
      if (this.current === 'disabled') return;
      const handle = this.handle;
      this.handle = undefined;
      this.set('disabling'); // node sets halt (back to enabling)
      if (!handle) return this.set('disabled');
      this.busy = true;
      handle
        .stop(SERVER_STOP_MS)
        .catch(() => undefined)
        .then(() => {
          this.busy = false;
          log.info('OPC UA server stopped', { id: this.def.id });
          this.set('disabled');
          this.reconcile();
        });
    }
    /** Resolves once the server is closed (bounded). */
    async shutdown(): Promise<void> {
      if (this.timer !== undefined) timers.clearTimeout(this.timer);
      this.timer = undefined;
      await waitFor(() => !this.busy, SERVER_STOP_MS + 15_000).catch(() => undefined);
      const handle = this.handle;
      this.handle = undefined;
      if (handle) await handle.stop(SERVER_STOP_MS);
    }
  }

  class NodeSetRt extends EnableableRt {
    readonly transforms: Array<CompiledRule | undefined>;
    constructor(
      readonly def: NodeSetDef,
      readonly server: ServerRt,
    ) {
      super('node set', def.id, def.targetState);
      this.transforms = (def.nodes as unknown as NodeDef[]).map((n) => rule(n.transform));
      if (!opcua) this.message = OPCUA_UNAVAILABLE;
      server.nodeSets.push(this);
    }
    view(): NodeSetView {
      return this.withMessage<NodeSetView>({ id: this.def.id, currentState: this.current, targetState: this.target, nodes: this.def.nodes, agentName });
    }
    topics(): string[] {
      return (this.def.nodes as unknown as NodeDef[]).flatMap((n) => (n.access ?? 'read') === 'read' ? [n.topic] : (n.access === 'write' ? [setTopicOf(n)] : [n.topic, setTopicOf(n)]));
    }
    reconcile(): void {
      if (!opcua) return;
      const handle = this.server.current === 'enabled' ? this.server.handle : undefined;
      if (this.target === 'enabled' && !stopped) {
        if (this.current === 'enabled') {
          if (handle) return;
          this.halt();
          this.set('enabling');
          return;
        }
        this.set('enabling');
        if (!handle) {
          if (this.server.target !== 'enabled') this.message = `server ${this.server.def.id} is not enabled`;
          return;
        }
        try {
          this.stopActivity = this.activate(handle);
          this.message = undefined;
          this.set('enabled');
        } catch (err) {
          this.message = errorText(err);
          log.warn('node set could not start', { id: this.def.id, error: this.message });
        }
        return;
      }
      this.disable(() => this.halt());
    }
    activate(handle: OpcuaServerHandle): () => void {
      const defs = this.def.nodes as unknown as NodeDef[];
      const added = handle.addNodeSet(
        this.def.name,
        this.def.id,
        defs.map((d) => ({
          def: d,
          setTopic: setTopicOf(d),
          publishWrite: (value: unknown) => {
            if (!dataPlane) return Promise.reject(new Error('the embedded broker is not running'));
            log.debug('OPC UA write', { id: this.def.id, topic: setTopicOf(d) });
            return publish(setTopicOf(d), value);
          },
        })),
      );
      const subs: Array<() => void> = [];
      if (dataPlane) {
        defs.forEach((d, i) => {
          if ((d.access ?? 'read') === 'write') return;
          const node: RunningNode = added.nodes[i]!;
          const transform = this.transforms[i];
          subs.push(
            dataPlane.subscribe(d.topic, (topic, payload) => {
              const value = decodePayload(payload);
              if (!transform) return node.update(value);
              transform.evaluate(value, { topic, vars: {}, label: d.browseName ?? this.def.name }).then(
                (out) => node.update(out),
                (err: unknown) => log.info('node transform failed', { id: this.def.id, topic, error: errorText(err) }),
              );
            }),
          );
        });
      } else this.message = 'the embedded broker is not running (mqtt.enabled is false)';
      return () => {
        for (const u of subs.splice(0)) u();
        added.remove();
      };
    }
  }

  function setTopicOf(n: NodeDef): string {
    return n.setTopic ?? `${n.topic}/set`;
  }

  function waitFor(pred: () => boolean, timeoutMs: number): Promise<void> {
    if (pred()) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const w = {
        pred,
        resolve: () => {
          clearTimeout(t);
          resolve();
        },
      };
      const t = setTimeout(() => {
        waiters.delete(w);
        reject(new Error(`condition not reached within ${timeoutMs} ms`));
      }, timeoutMs);
      waiters.add(w);
    });
  }

  // ---------------------------------------------------------------- build

  const connections = new Map<string, ConnectionRt>();
  const endpoints = new Map<string, EndpointRt>();
  const mappings = new Map<string, MappingRt>();
  const servers = new Map<string, ServerRt>();
  const nodeSets = new Map<string, NodeSetRt>();
  const all = deps.services.flatMap((s) => s.resources);
  for (const r of all) if (r.kind === 'connection') connections.set(r.id, new ConnectionRt(r));
  for (const r of all) if (r.kind === 'endpoint') endpoints.set(r.id, new EndpointRt(r, connections.get(r.connectionId)!));
  for (const r of all) if (r.kind === 'mapping') mappings.set(r.id, new MappingRt(r));
  for (const r of all) if (r.kind === 'server') servers.set(r.id, new ServerRt(r));
  for (const r of all) if (r.kind === 'nodes') nodeSets.set(r.id, new NodeSetRt(r, servers.get(r.serverId)!));

  const find = <T>(map: Map<string, T>, id: string, what: string): T => {
    const v = map.get(id);
    if (!v) throw new NotFoundError(`${what} not found`);
    return v;
  };
  const serverView = (s: ServerRt): ServerView => s.view();
  const nodeView = (n: NodeSetRt): NodeSetView => n.view();
  const sorted = <T extends { id: string }>(list: T[]) => list.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));

  return {
    start() {
      for (const c of connections.values()) c.reconcile();
      for (const e of endpoints.values()) e.reconcile();
      for (const m of mappings.values()) m.reconcile();
      for (const s of servers.values()) s.reconcile();
      for (const n of nodeSets.values()) n.reconcile();
    },
    async stop() {
      stopped = true;
      for (const m of mappings.values()) m.reconcile();
      for (const e of endpoints.values()) e.halt();
      for (const n of nodeSets.values()) n.halt();
      await Promise.all([...connections.values()].map((c) => c.shutdown()).concat([...servers.values()].map((s) => s.shutdown())));
      await opcua?.support.dispose();
      for (const w of waiters) w.resolve();
      waiters.clear();
    },
    listConnections: () => sorted([...connections.values()].map((c) => c.view())),
    getConnection: (id) => find(connections, id, 'Connection').view(),
    setConnectionOperation(id, operation) {
      const c = find(connections, id, 'Connection');
      c.target = operation === 'connect' ? 'connected' : 'disconnected';
      log.info('connection operation', { id, operation });
      c.reconcile();
      changed();
      return c.view();
    },
    listEndpoints: () => sorted([...endpoints.values()].map((e) => e.view())),
    getEndpoint: (id) => find(endpoints, id, 'Endpoint').view(),
    endpointTopics: (id) => endpointTopicList(find(endpoints, id, 'Endpoint').def),
    setEndpointOperation(id, operation) {
      const e = find(endpoints, id, 'Endpoint');
      e.target = operation === 'enable' ? 'enabled' : 'disabled';
      log.info('endpoint operation', { id, operation });
      e.reconcile();
      changed();
      return e.view();
    },
    listMappings: () => sorted([...mappings.values()].map((m) => m.view())),
    getMapping: (id) => find(mappings, id, 'Mapping').view(),
    mappingEndpointTopics(id) {
      const m = find(mappings, id, 'Mapping');
      const out: Record<string, string[]> = {};
      for (const item of m.def.mappings) {
        for (const epId of [item.sourceEndpoint, item.targetEndpoint]) {
          if (epId !== undefined) out[epId] = endpointTopicList(endpoints.get(epId)!.def);
        }
      }
      return out;
    },
    setMappingOperation(id, operation) {
      const m = find(mappings, id, 'Mapping');
      m.target = operation === 'enable' ? 'enabled' : 'disabled';
      log.info('mapping operation', { id, operation });
      m.reconcile();
      changed();
      return m.view();
    },
    listServers: () => sorted([...servers.values()].map(serverView)),
    getServer: (id) => serverView(find(servers, id, 'Server')),
    setServerOperation(id, operation) {
      const s = find(servers, id, 'Server');
      s.target = operation === 'enable' ? 'enabled' : 'disabled';
      log.info('server operation', { id, operation });
      s.reconcile();
      for (const n of s.nodeSets) n.reconcile();
      changed();
      return serverView(s);
    },
    listNodes: () => sorted([...nodeSets.values()].map(nodeView)),
    getNodeSet: (id) => nodeView(find(nodeSets, id, 'Node set')),
    topics: () => ({
      endpoints: sorted([...endpoints.values()].map((e) => ({ id: e.def.id, topics: endpointTopicList(e.def) }))),
      mappings: sorted([...mappings.values()].map((m) => ({ id: m.def.id, topics: m.topics() }))),
      nodes: sorted([...nodeSets.values()].map((n) => ({ id: n.def.id, topics: n.topics() }))),
    }),
    waitFor: (pred, timeoutMs = 10_000) => waitFor(pred, timeoutMs),
  };
}
