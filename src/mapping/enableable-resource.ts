// What endpoints, mappings, servers and node sets share: the enable state machine's fields
// (disabled → enabling → enabled; disabling → disabled), state changes (logged, then
// announced), the message in views, and the disable sequence.
import type { EnableState } from './resource-views.js';
import type { RuntimeContext } from './runtime-context.js';

export abstract class EnableableResource {
  current: EnableState = 'disabled';
  target: 'enabled' | 'disabled';
  message: string | undefined;
  constructor(
    protected readonly ctx: RuntimeContext,
    readonly kind: string,
    readonly id: string,
    target: 'enabled' | 'disabled',
  ) {
    this.target = target;
  }
  abstract reconcile(): void;
  set(state: EnableState) {
    if (this.current === state) return;
    this.ctx.log.debug(`${this.kind} state`, { id: this.id, from: this.current, to: state });
    this.current = state;
    this.onState();
    this.ctx.changed();
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
  /** Stops for good (its definition changed or left the files). */
  async retire(): Promise<void> {
    this.target = 'disabled';
    this.reconcile();
  }
  /** disabling → stop what runs → disabled (nothing when already disabled). */
  disable(stop: () => void): void {
    if (this.current === 'disabled') return;
    this.set('disabling');
    stop();
    this.set('disabled');
  }
}
