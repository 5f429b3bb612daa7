// A mapping (docs/design.md §11): disabled → enabling → enabled once subscribed on the data plane.
// Each item subscribes to its source (named wildcards `+name` fill $context.vars) and publishes
// the filtered, transformed value to its target (`{name}` filled) or to a write endpoint's
// <topic>/set. A mapping's output feeds further mappings at most MAX_MAPPING_HOPS times.
import type { MessageOrigin } from '../mqtt/index.js';
import type { CompiledRule, RuleContext } from './rules.js';
import { EnableableResource } from './enableable-resource.js';
import type { MappingView } from './resource-views.js';
import { errorText, MAX_IN_FLIGHT, MAX_MAPPING_HOPS, publishOptions, type PublishOptions, type RuntimeContext } from './runtime-context.js';
import type { MappingDef, MappingItemDef } from './service-files.js';
import { decodePayload, encodePayload, fillTopic, parseNamedFilter, varsOf, type NamedFilter } from './topics.js';

interface MappingItem {
  def: MappingItemDef;
  source: NamedFilter;
  target: string;
  viaEndpoint: boolean;
  /** The item's qos and retain. */
  options: PublishOptions | undefined;
  filter: CompiledRule | undefined;
  transform: CompiledRule | undefined;
}

export class MappingResource extends EnableableResource {
  readonly items: MappingItem[];
  subs: Array<() => void> = [];
  inFlight = 0;
  dropped = 0;
  /** Messages this mapping published (what it routes counts among the gateway's messages in). */
  published = 0;
  /**
   * @param topicOf the data-plane topic of an endpoint of the same service (sourceEndpoint,
   *   targetEndpoint).
   */
  constructor(
    ctx: RuntimeContext,
    readonly def: MappingDef,
    topicOf: (endpointId: string) => string,
  ) {
    super(ctx, 'mapping', def.id, def.targetState);
    this.items = def.mappings.map((m) => {
      const sourceTopic = m.sourceEndpoint !== undefined ? topicOf(m.sourceEndpoint) : m.source!;
      const targetTopic = m.targetEndpoint !== undefined ? `${topicOf(m.targetEndpoint)}/set` : m.target!;
      return { def: m, source: parseNamedFilter(sourceTopic), target: targetTopic, viaEndpoint: m.targetEndpoint !== undefined, options: publishOptions(m), filter: ctx.rule(m.filter), transform: ctx.rule(m.transform) };
    });
    if (!ctx.dataPlane) this.message = 'the embedded broker is not running (mqtt.enabled is false)';
  }
  view(): MappingView {
    return this.withMessage<MappingView>({ id: this.def.id, currentState: this.current, targetState: this.target, mappings: this.def.mappings as Record<string, unknown>[], agentName: this.ctx.agentName });
  }
  topics(): string[] {
    return [...new Set(this.items.flatMap((i) => [i.source.filter, i.target]))];
  }
  reconcile(): void {
    const { dataPlane } = this.ctx;
    if (this.target === 'enabled' && !this.ctx.stopped()) {
      if (this.current === 'enabled') return;
      this.set('enabling');
      if (!dataPlane) return;
      try {
        for (const item of this.items) this.subs.push(dataPlane.subscribe(item.source.filter, (topic, payload, _properties, origin) => this.handle(item, topic, payload, origin)));
      } catch (err) {
        this.unsubscribe();
        this.message = errorText(err);
        return;
      }
      this.message = undefined;
      this.set('enabled');
      return;
    }
    this.disable(() => this.unsubscribe());
  }
  unsubscribe() {
    for (const u of this.subs.splice(0)) u();
  }
  /** `origin`: who published the source message; the output is published for them, through this mapping. */
  handle(item: MappingItem, topic: string, payload: Buffer, origin: MessageOrigin) {
    if (this.current !== 'enabled') return;
    const { log, dataPlane, hops } = this.ctx;
    const hop = hops.get(payload) ?? 0;
    if (hop >= MAX_MAPPING_HOPS) {
      if (this.dropped++ % 1000 === 0) log.warn('mapping loop stopped', { id: this.def.id, topic, hops: hop, dropped: this.dropped });
      return;
    }
    if (this.inFlight >= MAX_IN_FLIGHT) {
      if (this.dropped++ % 1000 === 0) log.warn('mapping overloaded, message dropped', { id: this.def.id, dropped: this.dropped });
      return;
    }
    this.inFlight++;
    const vars = varsOf(item.source, topic);
    const context: RuleContext = { topic, vars, label: item.def.label ?? this.def.name };
    this.ctx
      .applyRules(decodePayload(payload), context, item.filter, item.transform)
      .then(async (out) => {
        if (!out || !dataPlane) return;
        const buf = encodePayload(out.value);
        hops.set(buf, hop + 1);
        const to = item.viaEndpoint ? item.target : fillTopic(item.target, vars);
        const { via: _via, ...who } = origin;
        await dataPlane.publish(to, buf, { ...item.options, origin: { ...who, via: `mapping ${this.def.id}` } });
        this.published++;
      })
      .catch((err: unknown) => log.warn('mapping failed', { id: this.def.id, topic, error: errorText(err) }))
      .finally(() => {
        this.inFlight--;
      });
  }
}
