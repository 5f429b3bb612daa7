// A connection's state machine (docs/design.md §11): disconnected → connecting → connected; a failed
// attempt or a lost connection → reconnecting, retried after 1 s, 2 s, 4 s ... at most 30 s
// (reset once connected); disconnect: disconnecting → disconnected. Without a driver (Opcua in
// a build without OPC UA support) it stays disconnected with a message.
import type { ConnectionDriver } from './drivers/types.js';
import { PollGroups } from './poll-groups.js';
import type { ConnectionState, ConnectionView } from './resource-views.js';
import { BACKOFF_MAX_MS, backoffDelay, errorText, RETIRE_TIMEOUT_MS, type RuntimeContext } from './runtime-context.js';
import type { ConnectionDef } from './service-files.js';

/** What a connection tells the resources that use it (its endpoints) when its state changes. */
export interface ConnectionUser {
  reconcile(): void;
}

export class ConnectionResource {
  current: ConnectionState = 'disconnected';
  target: 'connected' | 'disconnected';
  message: string | undefined;
  attempt = 0;
  timer: unknown;
  busy = false;
  readonly endpoints: ConnectionUser[] = [];
  /** The polling rounds of its endpoints, when its driver reads together. */
  readonly pollGroups: PollGroups;
  /** What went through this connection since it was (re)built: see ConnectionStats. */
  readonly counters = { reads: 0, writes: 0, failures: 0, refusedWrites: 0, published: 0, lastReadAt: 0 };
  constructor(
    private readonly ctx: RuntimeContext,
    readonly def: ConnectionDef,
    readonly driver: ConnectionDriver | undefined,
    message?: string,
  ) {
    this.target = def.targetState;
    this.message = message;
    this.pollGroups = new PollGroups(ctx.timers);
    this.driver?.onLost((reason) => this.lost(reason));
  }
  /** A reading was taken from the device. */
  counted(): void {
    this.counters.reads++;
    this.counters.lastReadAt = Date.now();
  }
  view(): ConnectionView {
    const { password: _p, headers: _h, ...configuration } = this.def.configuration as Record<string, unknown>;
    // Credentials in a URL (mqtt://user:pass@host) are not returned either.
    if (typeof configuration.url === 'string') configuration.url = configuration.url.replace(/\/\/[^/@]*@/, '//***@');
    const { reads, writes, failures, refusedWrites, published, lastReadAt } = this.counters;
    const figures: ConnectionView['figures'] = { reads, writes, failures, refusedWrites, published, ...(lastReadAt ? { lastReadAt: new Date(lastReadAt).toISOString() } : {}) };
    const v: ConnectionView = { id: this.def.id, currentState: this.current, targetState: this.target, connection: { protocol: this.def.protocol, ...configuration }, figures, agentName: this.ctx.agentName };
    if (this.message !== undefined) v.message = this.message;
    return v;
  }
  set(state: ConnectionState) {
    if (this.current === state) return;
    this.ctx.log.debug('connection state', { id: this.def.id, from: this.current, to: state });
    this.current = state;
    for (const ep of this.endpoints) ep.reconcile();
    this.ctx.changed();
  }
  reconcile(): void {
    if (this.busy || !this.driver) return;
    const { log } = this.ctx;
    const driver = this.driver;
    if (this.target === 'connected' && !this.ctx.stopped()) {
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
          if (this.target !== 'connected' || this.ctx.stopped()) {
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
    const delay = backoffDelay(this.attempt);
    if (delay < BACKOFF_MAX_MS) this.attempt++;
    this.ctx.log.info('connection failed, retrying', { id: this.def.id, protocol: this.def.protocol, retryInMs: delay, reason: this.message });
    this.set('reconnecting');
    this.timer = this.ctx.timers.setTimeout(() => {
      this.timer = undefined;
      this.reconcile();
    }, delay);
    this.ctx.changed(); // the retry is scheduled (the state may not have changed)
  }
  cancelRetry() {
    if (this.timer !== undefined) this.ctx.timers.clearTimeout(this.timer);
    this.timer = undefined;
  }
  lost(reason: string) {
    if (this.current !== 'connected') return;
    this.message = reason;
    this.ctx.log.warn('connection lost', { id: this.def.id, protocol: this.def.protocol, reason });
    this.attempt = 0;
    if (this.target === 'connected' && !this.ctx.stopped()) this.retry();
    else this.set('disconnected');
  }
  async shutdown() {
    this.cancelRetry();
    if (this.driver) await this.driver.disconnect().catch(() => undefined);
  }
  /** Stops for good (its definition changed or left the files): disconnected and closed. */
  async retire(): Promise<void> {
    this.target = 'disconnected';
    this.reconcile();
    await this.ctx.waitFor(() => !this.busy && this.current === 'disconnected', RETIRE_TIMEOUT_MS).catch(() => undefined);
    await this.shutdown();
  }
}
