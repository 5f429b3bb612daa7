// Broker statistics under Mosquitto's `$SYS/broker/...` topic names, so dashboards and scripts
// written for Mosquitto work unchanged. Published retained every interval from the same
// counters as /metrics (BrokerStats); retained `$SYS` messages stay in memory (no flash writes).
// Only users with a read permission on them can subscribe: `#` never matches `$` topics.
import type { BrokerStats } from './broker-stats.js';

export interface SysTopicsDeps {
  stats: () => BrokerStats;
  /** Publishes one retained QoS 0 message from the broker itself. */
  publish: (topic: string, payload: string) => void;
  version: string;
  intervalSeconds: number;
  now?: () => number;
  /** More topics of other parts (bridges), below $SYS/broker/; an empty value clears a retained topic. */
  extra?: () => Iterable<[name: string, value: string | number]>;
}

/** Mosquitto's load averages: exponentially weighted per-minute rates over 1, 5 and 15 minutes. */
class LoadAverage {
  private readonly values = new Map<number, number>();
  private last: number | undefined;
  constructor(private readonly intervalSeconds: number) {}
  /** Feeds the counter's current total; returns the per-minute rates by window (minutes). */
  update(total: number): Map<number, number> {
    const delta = this.last === undefined ? 0 : Math.max(0, total - this.last);
    this.last = total;
    const perMinute = (delta * 60) / this.intervalSeconds;
    for (const minutes of [1, 5, 15]) {
      const k = Math.exp(-this.intervalSeconds / (minutes * 60));
      const previous = this.values.get(minutes) ?? perMinute;
      this.values.set(minutes, previous * k + perMinute * (1 - k));
    }
    return this.values;
  }
}

export interface SysTopics {
  /** Publishes every topic now (also runs every interval once started). */
  publishNow(): void;
  start(): void;
  stop(): void;
}

export function createSysTopics(deps: SysTopicsDeps): SysTopics {
  const loads = {
    'messages/received': new LoadAverage(deps.intervalSeconds),
    'messages/sent': new LoadAverage(deps.intervalSeconds),
    'bytes/received': new LoadAverage(deps.intervalSeconds),
    'bytes/sent': new LoadAverage(deps.intervalSeconds),
  };
  let timer: NodeJS.Timeout | undefined;

  function publishNow(): void {
    const s = deps.stats();
    const put = (name: string, value: string | number) => deps.publish(`$SYS/broker/${name}`, String(value));
    put('version', `gatewayd ${deps.version}`);
    put('uptime', `${s.uptimeSeconds} seconds`);
    put('clients/connected', s.clients);
    put('clients/active', s.clients);
    put('messages/received', s.messagesReceived);
    put('messages/sent', s.messagesSent);
    put('publish/messages/dropped', s.queueDrops);
    put('bytes/received', s.bytesReceived);
    put('bytes/sent', s.bytesSent);
    put('retained messages/count', s.persistence?.retainedMessages ?? 0);
    put('subscriptions/count', s.persistence?.subscriptions ?? 0);
    put('store/messages/count', s.persistence?.queuedMessages ?? 0);
    const totals = { 'messages/received': s.messagesReceived, 'messages/sent': s.messagesSent, 'bytes/received': s.bytesReceived, 'bytes/sent': s.bytesSent };
    for (const [name, load] of Object.entries(loads)) {
      const [kind, direction] = name.split('/');
      for (const [minutes, value] of load.update(totals[name as keyof typeof totals])) put(`load/${kind}/${direction}/${minutes}min`, value.toFixed(2));
    }
    if (deps.extra) for (const [name, value] of deps.extra()) put(name, value);
  }

  return {
    publishNow,
    start() {
      if (deps.intervalSeconds <= 0 || timer) return;
      publishNow();
      timer = setInterval(publishNow, deps.intervalSeconds * 1000);
      timer.unref();
    },
    stop() {
      if (timer) clearInterval(timer);
      timer = undefined;
    },
  };
}
