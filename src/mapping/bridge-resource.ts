// A Bridge resource of the mapping runtime (docs/design.md §14): declared, diffed and restarted like a
// connection; what it does is the engine of src/bridges. Its target is `connected` or
// `disabled` (PUT /api/bridges/{id}/operation connect|disconnect); disabled closes the link
// while the queue keeps taking messages.
import { QUEUE_DEFAULTS, type Bridge, type BridgeService } from '../bridges/index.js';
import type { BridgeView } from './resource-views.js';
import type { RuntimeContext } from './runtime-context.js';
import type { BridgeDef } from './service-files.js';

export const BRIDGES_UNAVAILABLE = 'bridges are not available (the store or the broker is off)';

export class BridgeResource {
  private readonly bridge: Bridge | undefined;
  private started = false;
  private targetState: 'connected' | 'disabled';
  constructor(
    private readonly ctx: RuntimeContext,
    readonly def: BridgeDef,
    private readonly service: BridgeService | undefined,
  ) {
    this.targetState = def.targetState;
    this.bridge = service?.create(def.id, def.properties, () => ctx.changed());
    if (this.bridge) this.bridge.target = def.targetState;
  }
  get target(): 'connected' | 'disabled' {
    return this.targetState;
  }
  set target(t: 'connected' | 'disabled') {
    this.targetState = t;
    if (this.bridge) this.bridge.target = t;
  }
  reconcile(): void {
    const b = this.bridge;
    if (!b || this.ctx.stopped()) return;
    if (!this.started) {
      this.started = true;
      b.start();
    } else b.reconcile();
  }
  view(): BridgeView {
    const { password: _p, ...remote } = this.def.properties.remote;
    const f = this.bridge?.figures();
    const q = { ...QUEUE_DEFAULTS, ...this.def.properties.queue };
    const v: BridgeView = {
      id: this.def.id,
      currentState: f?.state ?? 'disabled',
      targetState: this.targetState,
      remote: { ...remote, ...(f?.connectedTo ? { connectedTo: f.connectedTo } : {}) },
      runAs: this.def.properties.runAs,
      topics: this.def.properties.topics.map((t) => ({ ...t })),
      queue: {
        messages: f?.queue.messages ?? 0,
        bytes: f?.queue.bytes ?? 0,
        oldestAgeSeconds: Math.round((f?.queue.oldestAgeSeconds ?? 0) * 1000) / 1000,
        dropped: { ...(f?.queue.dropped ?? {}) },
        limits: { ...q },
      },
      counters: { forwarded: f?.forwarded ?? 0, resent: f?.resent ?? 0, received: f?.received ?? 0, refusedOut: f?.refused.out ?? 0, refusedIn: f?.refused.in ?? 0, echoes: f?.echoes ?? 0 },
      agentName: this.ctx.agentName,
    };
    const message = this.bridge ? this.bridge.problem() : BRIDGES_UNAVAILABLE;
    if (message !== undefined) v.message = message;
    return v;
  }
  /** Stops for good (its definition changed or left the files); the queue stays. */
  async retire(): Promise<void> {
    await this.bridge?.stop();
  }
  shutdown(): Promise<void> {
    return this.retire();
  }
  /** The bridge left the service files: its queue goes too. */
  discard(): void {
    this.service?.discard(this.def.id);
  }
}
