// Watches a daemon process from outside, as an operator's monitoring would: its RSS from
// /proc/<pid>/status every 250 ms, GET /health every second (answered within 500 ms, or it
// counts as not answered), its connections (GET /api/connections: state, reads, message) every
// second, and /metrics every 5 s (the event loop's p99 delay since the last scrape,
// gatewayd_nodejs_eventloop_lag_p99_seconds, and each connection's reads). Nothing inside the
// process is looked at.
import { readFileSync } from 'node:fs';

export interface ConnectionSample {
  id: string;
  state: string;
  reads: number;
  failures: number;
  message?: string;
}

export interface DaemonWatch {
  readonly rss: Array<{ t: number; kib: number }>;
  readonly health: Array<{ t: number; ms: number; status: number }>;
  readonly loopP99: Array<{ t: number; seconds: number }>;
  readonly connections: Array<{ t: number; list: ConnectionSample[] }>;
  /** The RSS now (KiB). */
  rssKiB(): number;
  /** The process is alive (signal 0). */
  alive(): boolean;
  stop(): Promise<void>;
}

export function vmRssKiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : NaN;
}

export function startDaemonWatch(options: { pid: number; httpPort: number; authorization: string }): DaemonWatch {
  const { pid, httpPort, authorization } = options;
  const base = `http://127.0.0.1:${httpPort}`;
  const watch = {
    rss: [] as DaemonWatch['rss'],
    health: [] as DaemonWatch['health'],
    loopP99: [] as DaemonWatch['loopP99'],
    connections: [] as DaemonWatch['connections'],
  };
  const alive = () => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  const rssTimer = setInterval(() => {
    if (alive()) watch.rss.push({ t: Date.now(), kib: vmRssKiB(pid) });
  }, 250);
  const pending = new Set<Promise<unknown>>();
  const track = (p: Promise<unknown>) => {
    pending.add(p);
    void p.finally(() => pending.delete(p));
  };
  const healthTimer = setInterval(() => {
    track(
      (async () => {
        const t = Date.now();
        let status = 0;
        try {
          const res = await fetch(`${base}/health`, { signal: AbortSignal.timeout(500) });
          await res.text();
          status = res.status;
        } catch {
          status = 0; // not answered within 500 ms
        }
        watch.health.push({ t, ms: Date.now() - t, status });
      })(),
    );
    track(
      (async () => {
        try {
          const res = await fetch(`${base}/api/connections`, { headers: { authorization }, signal: AbortSignal.timeout(2000) });
          const list = (await res.json()) as Array<{ id: string; currentState: string; message?: string; figures: { reads: number; failures: number } }>;
          watch.connections.push({ t: Date.now(), list: list.map((c) => ({ id: c.id, state: c.currentState, reads: c.figures.reads, failures: c.figures.failures, ...(c.message ? { message: c.message } : {}) })) });
        } catch {
          // the health probe reports an unanswering daemon
        }
      })(),
    );
  }, 1000);
  const scrape = async () => {
    try {
      const res = await fetch(`${base}/metrics`, { headers: { authorization }, signal: AbortSignal.timeout(2000) });
      const text = await res.text();
      const m = /^gatewayd_nodejs_eventloop_lag_p99_seconds(?:\{[^}]*\})? ([0-9.e+-]+)$/m.exec(text);
      if (m) watch.loopP99.push({ t: Date.now(), seconds: Number(m[1]) });
    } catch {
      // counted by the health probe
    }
  };
  void scrape(); // the first scrape starts the event-loop monitor
  const metricsTimer = setInterval(() => track(scrape()), 5000);
  return {
    ...watch,
    rssKiB: () => vmRssKiB(pid),
    alive,
    async stop() {
      clearInterval(rssTimer);
      clearInterval(healthTimer);
      clearInterval(metricsTimer);
      await Promise.allSettled([...pending]);
    },
  };
}
