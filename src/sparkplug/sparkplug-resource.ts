// A Sparkplug resource of the mapping runtime (docs/design.md §14): disabled → enabling → enabled like
// an endpoint, and while enabled an edge node: its session (edge-session.ts) with the host's
// broker, its devices (edge-devices.ts) fed by the readings, read failures and states of the
// endpoints its metrics name, and its DCMD writes (device-commands.ts) through those endpoints.
// What its devices read while it is not born is kept (node-history.ts) and delivered after its
// births (history-replay.ts).
import type { EndpointObserver, EndpointResource } from '../mapping/endpoint-resource.js';
import { EnableableResource } from '../mapping/enableable-resource.js';
import type { SparkplugView } from '../mapping/resource-views.js';
import type { SparkplugNode, SparkplugStats } from '../mapping/runtime.js';
import { RETIRE_TIMEOUT_MS, type RuntimeContext } from '../mapping/runtime-context.js';
import type { SparkplugDef } from '../mapping/service-files.js';
import type { BdSeqStore } from './bdseq-store.js';
import { DeviceCommands } from './device-commands.js';
import { EdgeDevices, type DeviceSlot } from './edge-devices.js';
import { EdgeSession } from './edge-session.js';
import { HistoryReplay } from './history-replay.js';
import { jsonOf } from './metric-values.js';
import type { NodeConnector } from './node-connector.js';
import type { NodeHistory } from './node-history.js';
import { withoutCredentials } from './node-link.js';
import type { PayloadCodec } from './payload-codec.js';
import { edgeNodeTopics, type EdgeNodeTopics } from './sparkplug-topics.js';

/** What every edge node of the gateway shares (src/sparkplug/index.ts). */
export interface SparkplugSupport {
  codec: PayloadCodec;
  bdSeq: BdSeqStore;
  /** The values this edge node keeps while not born (undefined: the gateway has no store to keep them in). */
  historyOf(def: SparkplugDef): NodeHistory | undefined;
  connectorFor(def: SparkplugDef, topics: EdgeNodeTopics, bridgeTarget: (id: string) => 'connected' | 'disabled' | undefined): NodeConnector;
}

export class SparkplugResource extends EnableableResource implements SparkplugNode {
  readonly session: EdgeSession;
  readonly devices: EdgeDevices;
  private readonly commands: DeviceCommands;
  private readonly history: NodeHistory | undefined;
  private readonly replay: HistoryReplay | undefined;
  /** The history's mark when a first wait for the host began (edge-session.ts onAway). */
  private tentativeFrom: number | undefined;
  /** The endpoints followed, and how (one observer per metric and endpoint). */
  private readonly observed: Array<[EndpointResource, EndpointObserver]> = [];
  private busy = false;

  constructor(
    ctx: RuntimeContext,
    readonly def: SparkplugDef,
    private readonly endpointOf: (id: string) => EndpointResource,
    support: SparkplugSupport,
    private readonly bridgeTarget: (id: string) => 'connected' | 'disabled' | undefined = () => undefined,
  ) {
    super(ctx, 'sparkplug', def.id, def.targetState);
    const topics = edgeNodeTopics(def.groupId, def.edgeNodeId, def.primaryHostId);
    const connector = support.connectorFor(def, topics, bridgeTarget);
    const log = ctx.log.child({ sparkplug: def.id });
    this.session = new EdgeSession({
      groupId: def.groupId,
      edgeNodeId: def.edgeNodeId,
      topics,
      log,
      timers: ctx.timers,
      codec: support.codec,
      bdSeq: support.bdSeq,
      ready: () => connector.ready(),
      connect: (will, attempt, signal) => connector.connect(will, attempt, signal),
      mayPublish: (topic) => connector.mayPublish(topic),
      onBorn: (rebirth) => {
        // Born within the grace of a first wait for the host's STATE: it was not away after all.
        if (this.tentativeFrom !== undefined) this.history?.retract(this.tentativeFrom);
        this.tentativeFrom = undefined;
        this.devices.nodeBorn(rebirth);
      },
      onEnded: () => this.devices.sessionEnded(),
      onAway: (tentative) => {
        this.tentativeFrom = tentative ? this.history?.mark : undefined;
        this.devices.nodeAway();
      },
      onDeviceCommand: (deviceId, payload) => this.commands.handle(deviceId, payload),
      changed: () => ctx.changed(),
    });
    const history = (this.history = support.historyOf(def));
    this.devices = new EdgeDevices(
      def.devices,
      { nodeBorn: () => this.session.born, awayFromHost: () => this.session.awayFromHost, send: (type, deviceId, metrics) => this.session.send(type, deviceId, metrics) },
      ctx.timers,
      { birthWaitMs: def.birthWaitMs, aggregateMs: def.aggregateMs, maxMessagesPerSecond: def.maxMessagesPerSecond, datatypeInData: def.datatypeInData },
      history && {
        keeping: def.history.enabled,
        keep: (deviceId, metric, timestamp, value, quality) => history.keep(deviceId, metric, timestamp, value, quality),
        get size() {
          return history.size;
        },
        deviceBorn: () => this.replay?.kick(),
      },
    );
    this.replay =
      history &&
      new HistoryReplay({
        history,
        devices: this.devices,
        send: (deviceId, metrics) => this.session.send('DDATA', deviceId, metrics),
        sessionId: () => this.session.sessionId,
        confirm: (id) => this.session.confirm(id),
        nodeBorn: () => this.session.born,
        datatypeInData: def.datatypeInData,
        timers: ctx.timers,
        log,
      });
    this.commands = new DeviceCommands({
      devices: this.devices,
      dataPlane: ctx.dataPlane,
      topicOf: (id) => endpointOf(id).def.topic,
      mayPublish: (topic) => connector.mayPublish(topic),
      origin: () => {
        const userId = connector.runAsId();
        return { username: def.runAs, ...(userId ? { userId } : {}), via: `Sparkplug host${def.primaryHostId ? ` ${def.primaryHostId}` : ''} (DCMD to edge node ${def.id})` };
      },
      counters: this.session.commands.DCMD,
      timeoutMs: def.commandTimeoutMs,
      log,
    });
  }

  reconcile(): void {
    if (this.busy) return;
    if (this.target === 'enabled' && !this.ctx.stopped()) {
      if (this.current === 'enabled') return;
      this.set('enabling');
      this.follow();
      this.commands.start();
      this.replay?.start();
      this.session.start();
      this.set('enabled');
      return;
    }
    if (this.current === 'disabled') return;
    this.busy = true;
    this.set('disabling');
    void this.close().finally(() => {
      this.busy = false;
      this.set('disabled');
      this.reconcile();
    });
  }

  /** NDEATH and DISCONNECT, then the endpoints are no longer followed. */
  private async close(): Promise<void> {
    this.replay?.stop();
    await this.session.stop();
    this.commands.stop();
    this.devices.stop();
    for (const [endpoint, observer] of this.observed.splice(0)) endpoint.observers.delete(observer);
  }

  /** Its Bridge's target may have changed: a session held down by it ends (NDEATH), one let go connects now. */
  uplinkChanged(): void {
    if (this.def.via.kind !== 'bridge' || this.current !== 'enabled') return;
    this.session.uplink(this.bridgeTarget(this.def.via.bridgeId) !== 'disabled');
  }

  /** Stops for good (its definition changed or left, or the runtime stops): resolves once disabled. */
  override async retire(): Promise<void> {
    this.target = 'disabled';
    this.reconcile();
    await this.ctx.waitFor(() => !this.busy && this.current === 'disabled', RETIRE_TIMEOUT_MS).catch(() => undefined);
  }

  /** Observers on every endpoint the metrics name; liveness of each device from their states. */
  private follow(): void {
    const { devices } = this;
    for (const device of devices.devices) {
      for (const slot of device.metrics) {
        const { readEndpoint, writeEndpoint } = slot.def;
        if (readEndpoint !== undefined) {
          this.observe(readEndpoint, {
            reading: (value, at) => devices.reading(device, slot, value, at),
            readFailed: (error, at) => devices.readFailed(device, slot, error, at),
            stateChanged: () => this.updateLiveness(device),
          });
        }
        if (writeEndpoint !== undefined) this.observe(writeEndpoint, { reading: () => {}, readFailed: () => {}, stateChanged: () => this.updateLiveness(device) });
      }
      this.updateLiveness(device);
    }
  }

  private observe(endpointId: string, observer: EndpointObserver): void {
    const endpoint = this.endpointOf(endpointId);
    endpoint.observers.add(observer);
    this.observed.push([endpoint, observer]);
  }

  /** A device is up while every endpoint it reads and writes through is enabled (its connection is up). */
  private updateLiveness(device: DeviceSlot): void {
    const up = device.metrics.every((m) => [m.def.readEndpoint, m.def.writeEndpoint].every((id) => id === undefined || this.endpointOf(id).current === 'enabled'));
    this.devices.setAlive(device, up);
  }

  stats(): SparkplugStats {
    const { session } = this;
    const stats: SparkplugStats = { id: this.def.id, state: session.state, messages: { ...session.published }, commands: { NCMD: { ...session.commands.NCMD }, DCMD: { ...session.commands.DCMD } } };
    const { history } = this;
    if (history) stats.history = { values: history.size, published: history.published, dropped: { ...history.dropped } };
    return stats;
  }

  view(): SparkplugView {
    const { def, session } = this;
    const upstream = def.via.kind === 'remote' ? def.via : def.via.kind === 'bridge' ? def.via.upstream : undefined;
    const shown = upstream && { urls: upstream.urls.map(withoutCredentials), ...(upstream.username !== undefined ? { username: upstream.username } : {}) };
    const via: SparkplugView['via'] = def.via.kind === 'remote' ? { kind: 'remote', ...shown! } : def.via.kind === 'bridge' ? { kind: 'bridge', bridgeId: def.via.bridgeId, ...shown! } : { kind: 'local' };
    const node: SparkplugView['node'] = { state: session.state, seq: session.seq };
    if (session.message !== undefined) node.message = session.message;
    if (session.bdSeq !== undefined) node.bdSeq = session.bdSeq;
    if (session.server !== undefined && session.state !== 'disabled') node.server = session.server;
    if (session.bornAt !== undefined) node.bornAt = session.bornAt;
    const devices = this.devices.devices.map((d) => ({
      deviceId: d.deviceId,
      state: d.born ? ('born' as const) : d.alive ? ('waiting' as const) : ('dead' as const),
      metrics: d.metrics.map((m) => ({
        name: m.def.name,
        alias: m.alias,
        datatype: m.type,
        writable: m.def.writeEndpoint !== undefined,
        value: jsonOf(m.value),
        quality: !d.born ? ('STALE' as const) : m.bad ? ('BAD' as const) : ('GOOD' as const),
        ...(m.timestamp ? { timestamp: m.timestamp } : {}),
        ...(m.error !== undefined ? { error: m.error } : {}),
      })),
    }));
    const { messages, commands } = this.stats();
    const v: SparkplugView = {
      id: def.id,
      currentState: this.current,
      targetState: this.target,
      groupId: def.groupId,
      edgeNodeId: def.edgeNodeId,
      via,
      runAs: def.runAs,
      node,
      devices,
      messages,
      commands,
      agentName: this.ctx.agentName,
    };
    if (def.primaryHostId !== undefined) v.primaryHostId = def.primaryHostId;
    if (this.history) v.history = { ...def.history, ...this.history.figures() };
    return this.withMessage(v);
  }
}
