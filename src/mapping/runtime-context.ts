// What every resource of the mapping runtime shares: the data plane, the log, timers, rule
// compilation, the filter-then-transform step, and the change notifications that waitFor
// listens to.
import type { DataPlane, MessageOrigin } from '../mqtt/index.js';
import type { Logger } from '../log/index.js';
import type { Timers } from './drivers/types.js';
import { compileRule, type CompiledRule, type RuleContext, type RuleLimits } from './rules.js';
import { encodePayload } from './topics.js';
import type { LastWriteLookup } from './write-audit.js';

export const OPCUA_UNAVAILABLE = 'OPC UA is not available in this build';
export const BACKOFF_INITIAL_MS = 1000;
export const BACKOFF_MAX_MS = 30_000;
/** Messages a mapping or endpoint processes at once; more are dropped (counted, logged). */
export const MAX_IN_FLIGHT = 1000;
/**
 * A message produced by a mapping may feed further mappings, at most this many times in a row:
 * a loop (a → b → a, or a/# → a/x) stops instead of spinning the gateway's CPU.
 */
export const MAX_MAPPING_HOPS = 8;
/** Bound on stopping one resource whose definition changed or left (drivers bound their own close). */
export const RETIRE_TIMEOUT_MS = 15_000;

/**
 * MQTT 5 properties of a data-plane message, for a broker whose data plane passes them (a third
 * argument of the subscribe handler) and takes them on publish (`properties` in the options).
 * A broker that does not simply leaves them out.
 */
export interface MessageProperties {
  correlationData?: Buffer;
}

/** How a message goes out on the data plane (absent: QoS 0, not retained). */
export interface PublishOptions {
  qos?: 0 | 1 | 2;
  retain?: boolean;
  properties?: MessageProperties;
  /** Who the value is published for (a write's audit names them). */
  origin?: MessageOrigin;
}

/** The publish options of a definition's qos and retain; undefined for the plain QoS 0 publish. */
export function publishOptions(def: { qos?: 0 | 1 | 2; retain?: boolean }): PublishOptions | undefined {
  if (!def.qos && !def.retain) return undefined;
  return { qos: def.qos ?? 0, retain: def.retain ?? false };
}

export function errorText(err: unknown): string {
  if (err instanceof Error) return err.message;
  // Some libraries (modbus-serial's timeouts) throw objects that are not Errors.
  const message = (err as { message?: unknown } | null)?.message;
  return typeof message === 'string' ? message : String(err);
}

/** The delay before retry number `attempt` (0-based): 1 s doubling to at most 30 s. */
export function backoffDelay(attempt: number): number {
  return Math.min(BACKOFF_INITIAL_MS * 2 ** attempt, BACKOFF_MAX_MS);
}

export interface RuntimeContext {
  /** The embedded broker's port; undefined when the broker is off (nothing is published). */
  readonly dataPlane: DataPlane | undefined;
  readonly log: Logger;
  readonly timers: Timers;
  readonly agentName: string;
  /** True once the runtime stops: every resource then drives itself toward off. */
  stopped(): boolean;
  /** Announces a state change: waiters re-check their condition. */
  changed(): void;
  /** Resolves when `pred` holds (checked on every change); rejects after timeoutMs. */
  waitFor(pred: () => boolean, timeoutMs: number): Promise<void>;
  /** Releases every waiter (at stop). */
  releaseWaiters(): void;
  rule(src: string | undefined): CompiledRule | undefined;
  /** filter then transform; undefined: dropped by the filter. */
  applyRules(value: unknown, context: RuleContext, filter: CompiledRule | undefined, transform: CompiledRule | undefined): Promise<{ value: unknown } | undefined>;
  /** `origin` (in the options): who the value is published for (a write's audit names them). */
  publish(topic: string, value: unknown, options?: PublishOptions): Promise<void>;
  /** Mapping generation of each payload a mapping published (absent: 0, from a client or endpoint). */
  readonly hops: WeakMap<Buffer, number>;
  /** An endpoint's last write as the audit trail keeps it (absent: no trail, a write shows from this run on). */
  readonly lastWriteOf?: LastWriteLookup;
}


export function createRuntimeContext(deps: { dataPlane: DataPlane | undefined; log: Logger; timers: Timers; agentName: string; limits: RuleLimits; lastWriteOf?: LastWriteLookup }): OwnedRuntimeContext {
  const { dataPlane, limits } = deps;
  let stopped = false;
  const waiters = new Set<{ pred: () => boolean; resolve: () => void }>();
  const ctx: OwnedRuntimeContext = {
    dataPlane,
    log: deps.log,
    timers: deps.timers,
    agentName: deps.agentName,
    stopped: () => stopped,
    stop: () => {
      stopped = true;
    },
    changed() {
      for (const w of [...waiters]) {
        if (w.pred()) {
          waiters.delete(w);
          w.resolve();
        }
      }
    },
    waitFor(pred, timeoutMs) {
      if (pred()) return Promise.resolve();
      return new Promise<void>((resolve, reject) => {
        const w = {
          pred,
          resolve: () => {
            clearTimeout(t);
            resolve();
          },
        };
        const t = setTimeout(() => {
          waiters.delete(w);
          reject(new Error(`condition not reached within ${timeoutMs} ms`));
        }, timeoutMs);
        waiters.add(w);
      });
    },
    releaseWaiters() {
      for (const w of waiters) w.resolve();
      waiters.clear();
    },
    rule: (src) => (src === undefined ? undefined : compileRule(src, limits)),
    async applyRules(value, context, filter, transform) {
      if (filter) {
        const keep = await filter.evaluate(value, context);
        if (!keep) return undefined;
      }
      return { value: transform ? await transform.evaluate(value, context) : value };
    },
    publish(topic, value, options) {
      if (!dataPlane) return Promise.resolve();
      return options ? dataPlane.publish(topic, encodePayload(value), options) : dataPlane.publish(topic, encodePayload(value));
    },
    hops: new WeakMap<Buffer, number>(),
    ...(deps.lastWriteOf ? { lastWriteOf: deps.lastWriteOf } : {}),
  };
  return ctx;
}

/** The context with its stop switch (for the runtime that owns it). */
export type OwnedRuntimeContext = RuntimeContext & { stop(): void };
