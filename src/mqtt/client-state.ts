import type { Client } from 'aedes';
import { DecisionCache, TokenBucket } from './limits.js';
import type { MqttPrincipal } from './mqtt-access.js';
import type { Mqtt5Features } from './mqtt5/mqtt5-features.js';
import type { OverlappingSubscriptions } from './mqtt5/overlapping-subscriptions.js';
import type { RetainedFirst } from './retained-first.js';

export type Transport = 'tcp' | 'tls' | 'ws';

/** Decision caches hold at most this many topics per client and direction. */
const DECISION_CACHE_SIZE = 256;

/** Per-connection state, stored on the Aedes client object as `gatewayd`. */
export class ClientState {
  /** null until authenticated, and for an admitted anonymous client. */
  principal: MqttPrincipal | null = null;
  anonymous = false;
  /** A CONNACK return code decided in preConnect and sent from authenticate (0: none). */
  refuseCode = 0;
  refuseReason = '';
  /** The refusal of this connection was logged and counted (aedes may report it once more). */
  refusalCounted = false;
  /** The CONNECT asked to resume its session (clean session 0 / clean start 0). */
  resumeRequested = false;
  /** The session it resumes exists: its CONNACK says sessionPresent (session-present.ts). */
  sessionPresent = false;
  /** What the MQTT 5 features of this connection need (mqtt5/); undefined for MQTT 3.1/3.1.1. */
  mqtt5: Mqtt5Features | undefined = undefined;
  /** One delivery per message when its subscriptions overlap (mqtt5/overlapping-subscriptions.ts). */
  overlap: OverlappingSubscriptions | undefined = undefined;
  /** A new subscription's retained messages before live ones (retained-first.ts); made at the first SUBSCRIBE. */
  retainedFirst: RetainedFirst | undefined = undefined;
  /** Since when the client publishes faster than its allowance (undefined: it does not). */
  overLimitSince: number | undefined;
  /** Its socket is not read until its allowance has a token again. */
  slowed = false;
  /** Dropped for staying over its allowance: what it still sent before the close is refused. */
  rateDropped = false;
  /** Revoked or deleted: no more decisions are granted, the connection is being closed. */
  revoked = false;
  /**
   * Every live subscription of this client was granted under the user's current permissions.
   * A subscription is granted only when one read permission covers its whole filter, i.e. every
   * topic it can match is readable, so forwarding through it needs no per-message check. Cleared
   * for good by the first 'permissions' change of the user (per-message checks from then on).
   */
  subscriptionsTrusted = true;
  // Made at their first use: most connections of a gateway only publish, or only subscribe,
  // and thousands of them sit idle (docs/footprint.md, memory per connection).
  private read: DecisionCache | undefined;
  private write: DecisionCache | undefined;
  private tokens: TokenBucket | undefined;
  constructor(
    readonly transport: Transport,
    readonly remote: string,
    private readonly publishesPerSecond: number,
  ) {}
  /** Decisions on the topics delivered to the client. */
  get readCache(): DecisionCache {
    return (this.read ??= new DecisionCache(DECISION_CACHE_SIZE));
  }
  /** Decisions on the topics the client publishes to. */
  get writeCache(): DecisionCache {
    return (this.write ??= new DecisionCache(DECISION_CACHE_SIZE));
  }
  /** Its publish allowance. */
  get bucket(): TokenBucket {
    return (this.tokens ??= new TokenBucket(this.publishesPerSecond));
  }
  /** Forgets the decisions taken so far (the user's permissions changed). */
  clearDecisions(): void {
    this.read?.clear();
    this.write?.clear();
  }
}

export type GatewayClient = Client & { gatewayd?: ClientState; _parser?: unknown };

export function stateOf(client: Client | null | undefined): ClientState | undefined {
  return client ? (client as GatewayClient).gatewayd : undefined;
}

