// A bridge's topic rules, as Mosquitto writes them (`topic pattern direction qos local-prefix
// remote-prefix`): an `out` rule subscribes `localPrefix + pattern` on the gateway's broker and
// publishes each message upstream under `remotePrefix + (topic without localPrefix)`; an `in`
// rule subscribes `remotePrefix + pattern` upstream and publishes locally under
// `localPrefix + (topic without remotePrefix)`; `both` is both. An empty pattern maps one topic:
// the prefixes themselves. A message that several rules of one direction match goes through the
// first of them (Mosquitto would send it once per rule).

export type RuleDirection = 'out' | 'in' | 'both';

export interface TopicRuleSpec {
  pattern: string;
  direction: RuleDirection;
  qos?: 0 | 1 | 2;
  localPrefix?: string;
  remotePrefix?: string;
  /** Keep the retained flag as published (default true, like Mosquitto's bridges). */
  retainAsPublished?: boolean;
}

export interface TopicRule {
  /** Position in the definition (what logs and audit records name). */
  index: number;
  direction: RuleDirection;
  qos: 0 | 1 | 2;
  retainAsPublished: boolean;
  localPrefix: string;
  remotePrefix: string;
  /** The filter on the gateway's broker (out) and the topics it publishes to (in). */
  localFilter: string;
  /** The filter subscribed upstream (in) and the topics it publishes to (out). */
  remoteFilter: string;
}

/** Is `filter` a valid MQTT topic filter (`+` a whole level, `#` the whole last level)? */
export function isValidFilter(filter: string): boolean {
  if (filter.length === 0 || filter.includes('\u0000')) return false;
  const levels = filter.split('/');
  return levels.every((l, i) => (l.includes('#') ? l === '#' && i === levels.length - 1 : !l.includes('+') || l === '+'));
}

/** Does the MQTT filter match the concrete topic? `$` topics only by a filter that names `$` first. */
export function filterMatches(filter: string, topic: string): boolean {
  if (topic.charCodeAt(0) === 36 && filter.charCodeAt(0) !== 36) return false; // '$'
  let f = 0;
  let t = 0;
  for (;;) {
    const fEnd = filter.indexOf('/', f);
    const fLevel = filter.slice(f, fEnd === -1 ? undefined : fEnd);
    if (fLevel === '#') return true;
    if (t > topic.length) return false; // the topic has no more levels
    const tEnd = topic.indexOf('/', t);
    const tLevel = topic.slice(t, tEnd === -1 ? undefined : tEnd);
    if (fLevel !== '+' && fLevel !== tLevel) return false;
    if (fEnd === -1) return tEnd === -1;
    f = fEnd + 1;
    t = tEnd === -1 ? topic.length + 1 : tEnd + 1;
  }
}

/** Where a rule spec is wrong (a path below the rule, and why); empty when it is valid. */
export function ruleProblems(spec: TopicRuleSpec): { path: string; reason: string }[] {
  const problems: { path: string; reason: string }[] = [];
  const local = spec.localPrefix ?? '';
  const remote = spec.remotePrefix ?? '';
  for (const [key, value] of [['localPrefix', local], ['remotePrefix', remote]] as const) {
    if (/[#+\u0000]/.test(value)) problems.push({ path: key, reason: 'a prefix is part of a topic: no wildcards' });
  }
  if (spec.pattern === '') {
    if (local === '' || remote === '') problems.push({ path: 'pattern', reason: 'an empty pattern maps one topic: localPrefix and remotePrefix name it' });
  } else if (!isValidFilter(spec.pattern)) {
    problems.push({ path: 'pattern', reason: 'not a valid topic filter (+ is a whole level, # the whole last level)' });
  }
  if (local.startsWith('$') || (local === '' && spec.pattern.startsWith('$'))) problems.push({ path: 'pattern', reason: '$ topics of the gateway are not bridged' });
  return problems;
}

/** Builds the rules of a definition that ruleProblems found valid. */
export function compileRules(specs: TopicRuleSpec[]): TopicRule[] {
  return specs.map((s, index) => {
    const localPrefix = s.localPrefix ?? '';
    const remotePrefix = s.remotePrefix ?? '';
    return {
      index,
      direction: s.direction,
      qos: s.qos ?? 0,
      retainAsPublished: s.retainAsPublished ?? true,
      localPrefix,
      remotePrefix,
      localFilter: localPrefix + s.pattern,
      remoteFilter: remotePrefix + s.pattern,
    };
  });
}

export const sendsOut = (r: TopicRule) => r.direction !== 'in';
export const bringsIn = (r: TopicRule) => r.direction !== 'out';

/** The first out rule whose local filter matches a local topic. */
export function outRuleFor(rules: readonly TopicRule[], topic: string): TopicRule | undefined {
  for (const r of rules) if (sendsOut(r) && topic.startsWith(r.localPrefix) && filterMatches(r.localFilter, topic)) return r;
  return undefined;
}

/** The first in rule whose remote filter matches a remote topic. */
export function inRuleFor(rules: readonly TopicRule[], topic: string): TopicRule | undefined {
  for (const r of rules) if (bringsIn(r) && topic.startsWith(r.remotePrefix) && filterMatches(r.remoteFilter, topic)) return r;
  return undefined;
}

export const remoteTopicOf = (r: TopicRule, localTopic: string) => r.remotePrefix + localTopic.slice(r.localPrefix.length);
export const localTopicOf = (r: TopicRule, remoteTopic: string) => r.localPrefix + remoteTopic.slice(r.remotePrefix.length);

/** The distinct local filters of the out rules (one subscription each on the gateway's broker). */
export function localFilters(rules: readonly TopicRule[]): string[] {
  return [...new Set(rules.filter(sendsOut).map((r) => r.localFilter))];
}
