// Polling in rounds, for the endpoints of a connection whose driver reads many items in one
// request (S7): one timer per poll interval, every member's read started in the same turn of
// the event loop (so the driver sees them together), the next round intervalMs after the round's
// last read finished. Independent timers drift apart by the time each reading takes to publish,
// and a loaded gateway would then send a request per endpoint.
import type { Timers } from './drivers/types.js';

interface Group {
  members: Set<() => Promise<void>>;
  timer: unknown;
  /** The first round is scheduled and has not run: a member joining now waits for it. */
  starting: boolean;
}

export class PollGroups {
  private readonly groups = new Map<number, Group>();
  constructor(private readonly timers: Timers) {}

  /**
   * Takes `read` (which never rejects) into the rounds of `intervalMs`; returns the leave function.
   * A member joining a group that already runs reads at once, then with the group.
   */
  join(intervalMs: number, read: () => Promise<void>): () => void {
    let group = this.groups.get(intervalMs);
    if (group) {
      group.members.add(read);
      if (!group.starting) void read();
    } else {
      group = { members: new Set([read]), timer: undefined, starting: true };
      this.groups.set(intervalMs, group);
      this.schedule(intervalMs, group, 0);
    }
    const g = group;
    return () => {
      g.members.delete(read);
      if (g.members.size || this.groups.get(intervalMs) !== g) return;
      this.groups.delete(intervalMs);
      if (g.timer !== undefined) this.timers.clearTimeout(g.timer);
      g.timer = undefined;
    };
  }

  private schedule(intervalMs: number, g: Group, delay: number): void {
    g.timer = this.timers.setTimeout(() => {
      g.timer = undefined;
      g.starting = false;
      void Promise.all([...g.members].map((read) => read())).then(() => {
        if (g.members.size && this.groups.get(intervalMs) === g) this.schedule(intervalMs, g, intervalMs);
      });
    }, delay);
  }
}
