// Shared by the bridge tests: a service file with one Bridge resource, waiting for a bridge's
// state through the runtime, and MQTT clients that record what they receive.
import type { IClientOptions, MqttClient } from 'mqtt';
import { stringify } from 'yaml';
import type { TestGateway } from './support/harness.js';
import { collect, connect } from './support/mqtt-test-kit.js';

export interface BridgeSpec {
  urls: string[];
  runAs: string;
  topics: Record<string, unknown>[];
  protocolVersion?: 4 | 5;
  clientId?: string;
  remote?: Record<string, unknown>;
  queue?: Record<string, unknown>;
  targetState?: string;
}

/**
 * A service file whose resource `name` is a Bridge (test-friendly timings: 1 s retries). The
 * keepalive is 5 s: with 1 s, mqtt.js gives a PINGRESP 0.5 s, which a loaded machine (test files
 * run in parallel) sometimes misses; a test of the keepalive itself sets its own (remote.keepaliveSeconds).
 */
export function bridgeService(name: string, spec: BridgeSpec): string {
  const remote: Record<string, unknown> = {
    urls: spec.urls,
    protocolVersion: spec.protocolVersion ?? 4,
    keepaliveSeconds: 5,
    connectTimeoutMs: 1500,
    reconnectMinSeconds: 1,
    reconnectMaxSeconds: 1,
    ...(spec.clientId ? { clientId: spec.clientId } : {}),
    ...spec.remote,
  };
  const properties: Record<string, unknown> = { remote, runAs: spec.runAs, topics: spec.topics };
  if (spec.queue) properties.queue = spec.queue;
  if (spec.targetState) properties.targetState = spec.targetState;
  return stringify({ resources: { [name]: { type: 'Bridge', properties } } });
}

/** Writes the service through the API (as admin) and waits until the runtime runs it. */
export async function putService(gw: TestGateway, token: string, id: string, text: string): Promise<void> {
  const res = await gw.api('PUT', `/api/services/${id}`, { token, raw: text, headers: { 'content-type': 'application/yaml' } });
  if (res.status !== 200 && res.status !== 201) throw new Error(`PUT service ${id}: ${res.status} ${JSON.stringify(res.body)}`);
}

/** Resolves when the bridge's view satisfies `pred` (checked at every state change of the runtime). */
export async function bridgeState(gw: TestGateway, id: string, pred: (view: any) => boolean = (v) => v.currentState === 'connected', ms = 15_000): Promise<any> {
  const rt = gw.mapping.runtime()!;
  let last: any;
  const ok = () => {
    try {
      last = rt.getBridge(id);
    } catch {
      return false;
    }
    return pred(last);
  };
  await rt.waitFor(ok, ms).catch(() => {
    throw new Error(`bridge ${id} did not reach the expected state: ${JSON.stringify(last)}`);
  });
  return last;
}

/** A client of the upstream broker with what it received. */
export async function upstreamClient(port: number, options: IClientOptions = {}): Promise<{ client: MqttClient; inbox: ReturnType<typeof collect> }> {
  const client = await connect(port, { reconnectPeriod: 0, ...options });
  return { client, inbox: collect(client) };
}
