// What paces and reports a bridge's outgoing flow: the drain rate (a token bucket) and the
// logging of drops from its queue (once when an episode starts, once with its totals when
// messages flow again).
import type { Logger } from '../log/index.js';
import type { DropReason } from './bridge-queue.js';

/** At most `ratePerSecond` takes per second, with a second's burst; 0: no limit. */
export class TokenBucket {
  private tokens = 0;
  private at = 0;
  constructor(
    private readonly ratePerSecond: number,
    private readonly now: () => number,
  ) {}

  take(): boolean {
    const rate = this.ratePerSecond;
    if (rate <= 0) return true;
    const t = this.now();
    this.tokens = Math.min(rate, this.tokens + ((t - this.at) * rate) / 1000);
    this.at = t;
    if (this.tokens < 1) return false;
    this.tokens--;
    return true;
  }

  /** How long until the next take succeeds. */
  waitMs(): number {
    return Math.max(1, Math.ceil(((1 - this.tokens) * 1000) / this.ratePerSecond));
  }
}

export class DropEpisodes {
  private readonly episode = new Map<DropReason, number>();
  constructor(
    private readonly id: string,
    private readonly limits: { maxMessages: number; maxBytes: number; maxAgeSeconds: number },
    private readonly log: Logger,
    private readonly queued: () => number,
  ) {}

  /** Drops of one reason: the first of an episode is logged at warn with the limits. */
  note(reason: DropReason, n: number): void {
    const before = this.episode.get(reason);
    this.episode.set(reason, (before ?? 0) + n);
    if (before !== undefined) return;
    const { maxMessages, maxBytes, maxAgeSeconds } = this.limits;
    this.log.warn('bridge queue drops messages', { id: this.id, reason, limits: { maxMessages, maxBytes, maxAgeSeconds }, queued: this.queued() });
  }

  /** Messages flow again (upstream acknowledged one): the episode's totals, if there was one. */
  end(): void {
    if (this.episode.size === 0) return;
    this.log.info('bridge queue dropped messages', { id: this.id, dropped: Object.fromEntries(this.episode) });
    this.episode.clear();
  }
}
