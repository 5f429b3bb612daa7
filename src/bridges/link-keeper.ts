// A bridge's link to its upstream broker as a state machine: connecting → connected (the in
// rules subscribed); a failed attempt or a lost link → reconnecting, the reason in `message`,
// tried again after reconnectMinSeconds doubling to reconnectMaxSeconds (back to the first once
// connected); `disabled` while its target is. Callbacks of a link that is gone are ignored (each
// link has its generation).
import type { Logger } from '../log/index.js';
import { displayUrl, linkErrorText, type IncomingMessage, type OpenLink, type Upstream } from './upstream.js';

export type BridgeState = 'connecting' | 'connected' | 'reconnecting' | 'disabled';
export type BridgeTarget = 'connected' | 'disabled';

export interface LinkKeeperDeps {
  id: string;
  upstream: Upstream;
  backoff: { reconnectMinSeconds: number; reconnectMaxSeconds: number };
  log: Logger;
  /** What to subscribe upstream once connected (the in rules). */
  subscriptions: { filter: string; qos: 0 | 1 | 2 }[];
  /** A message from upstream on the current link. */
  message(m: IncomingMessage): Promise<void>;
  /** A link is up (subscribed). */
  up(link: OpenLink): void;
  /** The link went away (lost or closed): what was in flight on it is to be sent again. */
  down(): void;
  /** A state or message changed. */
  changed(): void;
}

export class LinkKeeper {
  current: BridgeState = 'disabled';
  target: BridgeTarget = 'connected';
  message: string | undefined;
  link: OpenLink | undefined;
  /** Bumped at every new, lost or closed link. */
  private generation = 0;
  private attempt = 0;
  private retryTimer: NodeJS.Timeout | undefined;
  private connecting = false;
  private stopped = false;

  constructor(private readonly deps: LinkKeeperDeps) {}

  /** The generation of the link now (a callback that kept an older one is stale). */
  get now(): number {
    return this.generation;
  }

  /** Drives currentState toward the target. */
  reconcile(): void {
    if (this.stopped) return;
    if (this.target === 'disabled') {
      this.cancelRetry();
      if (this.link) void this.close().then(() => this.reconcile());
      else if (!this.connecting) this.set('disabled');
      return;
    }
    if (this.link || this.connecting || this.retryTimer) return;
    if (this.current === 'disabled') this.set('connecting');
    this.connect();
  }

  /** For good: the link closed, no more attempts. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.cancelRetry();
    await this.close();
    this.set('disabled');
  }

  private set(state: BridgeState): void {
    if (this.current === state) return;
    this.deps.log.debug('bridge state', { id: this.deps.id, from: this.current, to: state });
    this.current = state;
    this.deps.changed();
  }

  private connect(): void {
    this.connecting = true;
    const generation = ++this.generation;
    const current = () => generation === this.generation;
    this.deps.upstream
      .open({
        message: (m) => (current() ? this.deps.message(m) : Promise.resolve()),
        lost: (reason) => {
          if (current()) this.lost(reason);
        },
      })
      .then(
        async (link) => {
          const gone = () => this.stopped || this.target !== 'connected' || !current();
          let error: unknown;
          if (!gone()) {
            try {
              await link.subscribe(this.deps.subscriptions);
            } catch (err) {
              error = err;
            }
          }
          this.connecting = false;
          if (gone() || error !== undefined) {
            await link.close();
            return error !== undefined && current() ? this.failed(error) : this.reconcile();
          }
          this.link = link;
          this.attempt = 0;
          this.message = undefined;
          this.deps.log.info('bridge connected', { id: this.deps.id, url: displayUrl(link.url), sessionPresent: link.sessionPresent });
          this.set('connected');
          this.deps.up(link);
        },
        (err: unknown) => {
          this.connecting = false;
          if (this.stopped) return;
          if (!current()) return this.reconcile();
          this.failed(err);
        },
      );
  }

  private failed(err: unknown): void {
    this.message = linkErrorText(err);
    if (this.target !== 'connected' || this.stopped) return this.reconcile();
    if (this.retryTimer) return; // already scheduled (the link was lost while subscribing)
    this.retry();
  }

  private retry(): void {
    const { reconnectMinSeconds, reconnectMaxSeconds } = this.deps.backoff;
    const delay = Math.min(reconnectMinSeconds * 2 ** this.attempt, reconnectMaxSeconds) * 1000;
    if (delay < reconnectMaxSeconds * 1000) this.attempt++;
    this.deps.log.info('bridge connection failed, retrying', { id: this.deps.id, retryInMs: delay, reason: this.message });
    this.set('reconnecting');
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      this.reconcile();
    }, delay);
    this.retryTimer.unref();
    this.deps.changed();
  }

  private cancelRetry(): void {
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
  }

  private lost(reason: string): void {
    this.generation++;
    this.link = undefined;
    this.deps.down();
    this.message = reason;
    this.deps.log.warn('bridge connection lost', { id: this.deps.id, reason });
    this.attempt = 0;
    if (this.target === 'connected' && !this.stopped) this.retry();
    else this.reconcile();
  }

  private async close(): Promise<void> {
    const link = this.link;
    this.generation++;
    this.link = undefined;
    this.deps.down();
    if (link) await link.close();
  }
}
