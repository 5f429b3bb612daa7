// The gateway's OPC UA server resources (docs/design.md §11).
// - Server::Opcua: disabled → enabling → enabled (listening); a failed start is retried with the
//   connection backoff.
// - Node::Opcua: enabling while its server is not enabled, enabled once its variables are in the
//   server's address space; their values follow data-plane topics, client writes go to set topics.
// Without OPC UA support both stay disabled with OPCUA_UNAVAILABLE.
import type { CompiledRule } from './rules.js';
import { EnableableResource } from './enableable-resource.js';
import { OpcuaServerError, startOpcuaServer, type NodeDef, type OpcuaAccess, type OpcuaServerHandle, type OpcuaSessionUser, type RunningNode, type ServerOptions } from './opcua-server.js';
import type { OpcuaSupport } from './opcua-support.js';
import type { NodeSetView, ServerView } from './resource-views.js';
import { BACKOFF_MAX_MS, backoffDelay, errorText, OPCUA_UNAVAILABLE, type RuntimeContext } from './runtime-context.js';
import type { NodeSetDef, ServerDef } from './service-files.js';
import { decodePayload } from './topics.js';

/** Bound on closing an OPC UA server at stop or disable. */
const SERVER_STOP_MS = 3000;

/** OPC UA support of the runtime (absent: OPC UA resources report OPCUA_UNAVAILABLE). */
export interface OpcuaRuntimeSupport {
  support: OpcuaSupport;
  /** gatewayd's users and permissions for the server's sessions; absent: anonymous only. */
  access?: OpcuaAccess;
  /** The bind address of the server when its options name none (the gateway's host). */
  defaultHost: string;
}

export function setTopicOf(n: NodeDef): string {
  return n.setTopic ?? `${n.topic}/set`;
}

export class ServerResource extends EnableableResource {
  busy = false;
  attempt = 0;
  timer: unknown;
  handle: OpcuaServerHandle | undefined;
  readonly nodeSets: NodeSetResource[] = [];
  constructor(
    ctx: RuntimeContext,
    readonly def: ServerDef,
    private readonly opcua: OpcuaRuntimeSupport | undefined,
  ) {
    super(ctx, 'server', def.id, def.targetState);
    if (!opcua) this.message = OPCUA_UNAVAILABLE;
  }
  view(): ServerView {
    const v: ServerView = { id: this.def.id, options: this.def.options, currentState: this.current, targetState: this.target, protocol: this.def.protocol, agentName: this.ctx.agentName };
    if (this.handle) v.endpointUrl = this.handle.endpointUrl;
    return this.withMessage(v);
  }
  override onState(): void {
    for (const n of this.nodeSets) n.reconcile();
  }
  reconcile(): void {
    const { opcua } = this;
    const { log, timers } = this.ctx;
    if (!opcua || this.busy) return;
    if (this.target === 'enabled' && !this.ctx.stopped()) {
      if (this.current === 'enabled' || this.timer !== undefined) return;
      this.set('enabling');
      this.busy = true;
      startOpcuaServer({ support: opcua.support, log, serverId: this.def.id, options: this.def.options as ServerOptions, defaultHost: opcua.defaultHost, access: opcua.access }).then(
        (handle) => {
          if (this.target !== 'enabled' || this.ctx.stopped()) {
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
          if (this.target !== 'enabled' || this.ctx.stopped()) {
            this.set('disabled');
            return this.reconcile();
          }
          if (err instanceof OpcuaServerError && /allowAnonymous/.test(this.message)) {
            log.error('OPC UA server not started', { id: this.def.id, reason: this.message });
            return; // a configuration problem: no retry
          }
          const delay = backoffDelay(this.attempt);
          if (delay < BACKOFF_MAX_MS) this.attempt++;
          log.warn('OPC UA server failed to start, retrying', { id: this.def.id, retryInMs: delay, reason: this.message });
          this.timer = timers.setTimeout(() => {
            this.timer = undefined;
            this.reconcile();
          }, delay);
          this.ctx.changed();
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
  override async retire(): Promise<void> {
    this.target = 'disabled';
    this.reconcile();
    await this.shutdown();
  }
  /** Resolves once the server is closed (bounded). */
  async shutdown(): Promise<void> {
    if (this.timer !== undefined) this.ctx.timers.clearTimeout(this.timer);
    this.timer = undefined;
    await this.ctx.waitFor(() => !this.busy, SERVER_STOP_MS + 15_000).catch(() => undefined);
    const handle = this.handle;
    this.handle = undefined;
    if (handle) await handle.stop(SERVER_STOP_MS);
  }
}

export class NodeSetResource extends EnableableResource {
  readonly transforms: Array<CompiledRule | undefined>;
  constructor(
    ctx: RuntimeContext,
    readonly def: NodeSetDef,
    readonly server: ServerResource,
    private readonly available: boolean,
  ) {
    super(ctx, 'node set', def.id, def.targetState);
    this.transforms = (def.nodes as unknown as NodeDef[]).map((n) => ctx.rule(n.transform));
    if (!available) this.message = OPCUA_UNAVAILABLE;
    server.nodeSets.push(this);
  }
  override async retire(): Promise<void> {
    await super.retire();
    const i = this.server.nodeSets.indexOf(this);
    if (i >= 0) this.server.nodeSets.splice(i, 1);
  }
  view(): NodeSetView {
    return this.withMessage<NodeSetView>({ id: this.def.id, currentState: this.current, targetState: this.target, nodes: this.def.nodes, agentName: this.ctx.agentName });
  }
  topics(): string[] {
    return (this.def.nodes as unknown as NodeDef[]).flatMap((n) => ((n.access ?? 'read') === 'read' ? [n.topic] : n.access === 'write' ? [setTopicOf(n)] : [n.topic, setTopicOf(n)]));
  }
  reconcile(): void {
    if (!this.available) return;
    const handle = this.server.current === 'enabled' ? this.server.handle : undefined;
    if (this.target === 'enabled' && !this.ctx.stopped()) {
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
        this.ctx.log.warn('node set could not start', { id: this.def.id, error: this.message });
      }
      return;
    }
    this.disable(() => this.halt());
  }
  activate(handle: OpcuaServerHandle): () => void {
    const { dataPlane, log } = this.ctx;
    const defs = this.def.nodes as unknown as NodeDef[];
    const added = handle.addNodeSet(
      this.def.name,
      this.def.id,
      defs.map((d) => ({
        def: d,
        setTopic: setTopicOf(d),
        publishWrite: (value: unknown, session: OpcuaSessionUser) => {
          if (!dataPlane) return Promise.reject(new Error('the embedded broker is not running'));
          log.debug('OPC UA write', { id: this.def.id, topic: setTopicOf(d) });
          const via = `OPC UA server ${this.def.serverId}${session.username === undefined ? ' (anonymous session)' : ''}`;
          return this.ctx.publish(setTopicOf(d), value, { origin: { ...session, via } });
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
