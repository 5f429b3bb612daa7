// Grammar and reference semantics of permission patterns, MQTT topic names and
// topic filters (MQTT 3.1.1 §4.7). The same grammar is used for HTTP paths so the
// REST API and the broker share one permission engine.
//
// patternMatches / patternCovers are deliberately naive: they are the oracle the
// tests compare the trie in permission-set.ts against, not the production path.

export const LEVEL_SEPARATOR = '/';
export const SINGLE_LEVEL_WILDCARD = '+';
export const MULTI_LEVEL_WILDCARD = '#';

/** MQTT caps topic names and filters at 65,535 UTF-8 bytes (§1.5.3). */
export const MAX_TOPIC_BYTES = 65_535;

/**
 * Permission patterns may have at most this many levels. MQTT sets no limit, but the
 * matcher walks (and on `+` branches recurses) once per pattern level, so an unbounded
 * depth would let one stored pattern exhaust the stack. Real topics are far shallower.
 */
export const MAX_PATTERN_LEVELS = 128;

/** Splits on '/'. Empty levels are kept: `/api/users` -> ['', 'api', 'users']. */
export function splitLevels(topicOrPattern: string): string[] {
  return topicOrPattern.split(LEVEL_SEPARATOR);
}

/** Drops the query string so a request target (`/api/users?limit=5`) can be matched as a path. */
export function stripQuery(path: string): string {
  const q = path.indexOf('?');
  return q === -1 ? path : path.slice(0, q);
}

/** True when a topic's first level starts with `$` (e.g. `$SYS`), which wildcards at level 0 never match (§4.7.2). */
export function isDollarLevel(level: string): boolean {
  return level.charCodeAt(0) === 36; // '$'
}

function commonChecks(value: string, what: string): string | null {
  if (typeof value !== 'string') return `${what} must be a string`;
  if (value.length === 0) return `${what} must not be empty`;
  if (value.includes('\u0000')) return `${what} must not contain the NUL character`;
  // Cheap pre-check before computing the UTF-8 length: a UTF-16 unit is at most 3 bytes.
  if (value.length * 3 > MAX_TOPIC_BYTES && Buffer.byteLength(value, 'utf8') > MAX_TOPIC_BYTES) {
    return `${what} must not exceed ${MAX_TOPIC_BYTES} bytes`;
  }
  return null;
}

function checkFilterLevels(levels: readonly string[]): string | null {
  for (let i = 0; i < levels.length; i++) {
    const level = levels[i]!;
    if (level.includes(MULTI_LEVEL_WILDCARD)) {
      if (level !== MULTI_LEVEL_WILDCARD) {
        return `'#' must occupy an entire level (level ${i + 1}: '${level}')`;
      }
      if (i !== levels.length - 1) return `'#' is only allowed as the last level (level ${i + 1})`;
    }
    if (level.includes(SINGLE_LEVEL_WILDCARD) && level !== SINGLE_LEVEL_WILDCARD) {
      return `'+' must occupy an entire level (level ${i + 1}: '${level}')`;
    }
  }
  return null;
}

/**
 * Validates a topic filter: `+` must occupy a whole level, `#` a whole level and only
 * the last one. Returns a human-readable reason, or null when valid.
 */
export function validateTopicFilter(filter: string): string | null {
  return commonChecks(filter, 'topic filter') ?? checkFilterLevels(splitLevels(filter));
}

export type ParsedPattern = { levels: string[]; reason: null } | { levels: null; reason: string };

/**
 * Validates and splits a permission resource in one pass (compiling 100k grants should
 * not split each twice). Same grammar as a topic filter, plus a depth limit; for the
 * http context a `?` is rejected too, as paths are matched without their query string.
 */
export function parsePattern(resource: string, context?: 'mqtt' | 'http'): ParsedPattern {
  const common = commonChecks(resource, 'resource');
  if (common !== null) return { levels: null, reason: common };
  const levels = splitLevels(resource);
  const reason =
    checkFilterLevels(levels) ??
    (levels.length > MAX_PATTERN_LEVELS ? `resource must not have more than ${MAX_PATTERN_LEVELS} levels` : null) ??
    (context === 'http' && resource.includes('?') ? 'resource must not contain a query string' : null);
  return reason === null ? { levels, reason } : { levels: null, reason };
}

/** Validates a permission resource pattern; returns the reason it is invalid, or null. */
export function validatePattern(resource: string, context?: 'mqtt' | 'http'): string | null {
  return parsePattern(resource, context).reason;
}

/** Validates a concrete topic name for PUBLISH: non-empty, no wildcards, no NUL. */
export function validateTopicName(topic: string): string | null {
  const common = commonChecks(topic, 'topic name');
  if (common !== null) return common;
  if (topic.includes(SINGLE_LEVEL_WILDCARD) || topic.includes(MULTI_LEVEL_WILDCARD)) {
    return 'topic name must not contain wildcards (+ or #)';
  }
  return null;
}

/**
 * Reference matcher: does a (valid) pattern match a concrete topic or path?
 * `#` matches the parent level and everything below; `+` exactly one (possibly empty)
 * level; wildcards in the first level never match a `$`-topic.
 */
export function patternMatches(pattern: string, topic: string): boolean {
  const p = splitLevels(pattern);
  const t = splitLevels(topic);
  if (isDollarLevel(t[0]!) && (p[0] === SINGLE_LEVEL_WILDCARD || p[0] === MULTI_LEVEL_WILDCARD)) {
    return false;
  }
  for (let i = 0; i < p.length; i++) {
    if (p[i] === MULTI_LEVEL_WILDCARD) return true; // topic has >= i levels here: parent or deeper
    if (i >= t.length) return false;
    if (p[i] !== SINGLE_LEVEL_WILDCARD && p[i] !== t[i]) return false;
  }
  return p.length === t.length;
}

// A level value no valid pattern can contain literally, so only `+`/`#` can match it.
const FRESH_LEVEL = '\u0000';

/**
 * Reference coverage check: does `pattern` match every topic that `filter` can match?
 *
 * Obviously-correct by reduction to patternMatches: a filter's wildcard levels are
 * replaced by a value no literal can equal, and a trailing `#` is expanded to every
 * length up to one past the pattern's (beyond that a pattern behaves uniformly).
 * Matching those representatives is equivalent to matching the whole filter.
 */
export function patternCovers(pattern: string, filter: string): boolean {
  const p = splitLevels(pattern);
  const f = splitLevels(filter);
  const hasHash = f[f.length - 1] === MULTI_LEVEL_WILDCARD;
  const fixed = (hasHash ? f.slice(0, -1) : f).map((l) => (l === SINGLE_LEVEL_WILDCARD ? FRESH_LEVEL : l));
  const representatives: string[][] = [];
  if (!hasHash) {
    representatives.push(fixed);
  } else {
    // `a/#` includes the parent `a`; a topic always has at least one level.
    const minLen = Math.max(fixed.length, 1);
    const maxLen = Math.max(p.length, fixed.length) + 1;
    for (let n = minLen; n <= maxLen; n++) {
      representatives.push([...fixed, ...new Array<string>(n - fixed.length).fill(FRESH_LEVEL)]);
    }
  }
  return representatives.every((t) => patternMatches(pattern, t.join(LEVEL_SEPARATOR)));
}
