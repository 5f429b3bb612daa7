// A connection's state machine (docs/design.md §11): disconnected → connecting → connected; a failed
// attempt or a lost connection → reconnecting, retried after 1 s, 2 s, 4 s ... at most 30 s
// (reset once connected, and not grown by an attempt that failed on a malformed answer);
// disconnect: disconnecting → disconnected. Without a driver (Opcua in
// a build without OPC UA support) it stays disconnected with a message.
//
// Liveness (docs/mapping.md "States"): the endpoints read and write through read()/write()
// here, which watch the outcomes. A device that answers, even to refuse (DeviceError), is
// alive; when every read and write fails otherwise (timeouts, malformed or out-of-step answers,
// a driver that lost its session) for timeoutMs × 3, the connection is closed and reopened with
// the backoff (`reconnecting`, with the reason): never `connected` while nothing is read.
import { DeviceError, RefusedWriteError, type ConnectionDriver } from './drivers/types.js';
import { ProtocolError } from '../errors/errors.js';
import type { EndpointDef } from './service-files.js';
import { PollGroups } from './poll-groups.js';
import type { ConnectionState, ConnectionView } from './resource-views.js';
import { BACKOFF_MAX_MS, backoffDelay, errorText, RETIRE_TIMEOUT_MS, type RuntimeContext } from './runtime-context.js';
import type { ConnectionDef } from './service-files.js';

/** What a connection tells the resources that use it (its endpoints) when its state changes. */
export interface ConnectionUser {
  reconcile(): void;
}

/** Connections that fail every request for this many timeouts are reopened. */
export const LIVENESS_TIMEOUTS = 3;
/** The request timeout of a protocol whose configuration names none. */
const DEFAULT_TIMEOUT_MS = 2000;

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
  /** Since when every read and write failed without an answer from the device (undefined: the last one was answered). */
  private failingSince: number | undefined;
  /** A loss the driver reported while an attempt to connect was in flight: that attempt failed. */
  private lostWhileConnecting: string | undefined;
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
      this.lostWhileConnecting = undefined;
      driver.connect().then(
        () => {
          this.busy = false;
          const lostMeanwhile = this.lostWhileConnecting;
          if (lostMeanwhile !== undefined) {
            // Connected and lost before this line ran: a failed attempt, never a `connected` without a session.
            this.message = lostMeanwhile;
            void driver.disconnect().catch(() => undefined);
            if (this.target !== 'connected' || this.ctx.stopped()) {
              this.set('disconnected');
              return this.reconcile();
            }
            return this.retry();
          }
          this.attempt = 0;
          this.failingSince = undefined;
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
          // The device is there and answered, with bytes that make no sense (a corrupting network,
          // a confused peer): retried after the first step, the backoff does not grow. A device
          // that cannot be reached or refuses backs off 1 s, 2 s ... 30 s.
          if (err instanceof ProtocolError) this.attempt = 0;
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
    if (this.busy && (this.current === 'connecting' || this.current === 'reconnecting')) {
      this.lostWhileConnecting = reason;
      return;
    }
    if (this.current !== 'connected') return;
    this.message = reason;
    this.ctx.log.warn('connection lost', { id: this.def.id, protocol: this.def.protocol, reason });
    this.attempt = 0;
    if (this.target === 'connected' && !this.ctx.stopped()) this.retry();
    else this.set('disconnected');
  }
  /** One reading through the driver, its outcome watched (liveness). */
  read(endpoint: EndpointDef): Promise<unknown> {
    return this.watched(this.driver!.read(endpoint));
  }
  /** One write through the driver, its outcome watched (liveness). */
  write(endpoint: EndpointDef, value: unknown): Promise<void> {
    return this.watched(this.driver!.write(endpoint, value));
  }
  private watched<T>(request: Promise<T>): Promise<T> {
    request.then(
      () => this.answered(),
      (err: unknown) => {
        // A value refused before anything was sent says nothing of the device either way.
        if (err instanceof RefusedWriteError) return;
        if (err instanceof DeviceError) this.answered();
        else this.failed(err);
      },
    );
    return request;
  }
  private answered(): void {
    this.failingSince = undefined;
  }
  private failed(err: unknown): void {
    if (this.current !== 'connected' || this.busy) return;
    const now = Date.now();
    this.failingSince ??= now;
    const timeoutMs = (this.def.configuration as { timeoutMs?: number }).timeoutMs ?? DEFAULT_TIMEOUT_MS;
    const window = LIVENESS_TIMEOUTS * timeoutMs;
    if (now - this.failingSince < window) return;
    this.reopen(`every request failed for ${now - this.failingSince} ms (more than ${LIVENESS_TIMEOUTS} × timeoutMs): ${errorText(err)}`);
  }
  /** Closes a connection that is up but not answering, and opens it again with the backoff. */
  private reopen(reason: string): void {
    const driver = this.driver!;
    this.failingSince = undefined;
    this.message = reason;
    this.ctx.log.warn('connection not answering, reopened', { id: this.def.id, protocol: this.def.protocol, reason });
    this.busy = true;
    this.attempt = 0;
    this.set('reconnecting');
    void driver
      .disconnect()
      .catch(() => undefined)
      .then(() => {
        this.busy = false;
        if (this.target === 'connected' && !this.ctx.stopped()) this.retry();
        else {
          this.set('disconnected');
          this.reconcile();
        }
      });
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
