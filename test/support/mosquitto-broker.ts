// A real Mosquitto 2 on a free loopback port (test/support/mosquitto.ts), with every log type on:
// the broker on the far side of a gateway (a Sparkplug host's), whose log shows connections,
// wills and refusals.
import { startMosquitto as startKit } from './mosquitto.js';

export interface MosquittoBroker {
  port: number;
  url: string;
  /** What it logged (connections, wills, refusals). */
  log(): string;
  stop(): Promise<void>;
}

/** Anonymous clients allowed, no persistence: `extra` lines are appended to the configuration. */
export async function startMosquitto(extra: string[] = []): Promise<MosquittoBroker> {
  const m = await startKit({ config: ['log_type all', ...extra] });
  return { port: m.port, url: m.url, log: () => m.output(), stop: () => m.close() };
}
