// MQTT topic filter matching for retained-message lookups (MQTT 3.1.1 §4.7, MQTT 5 §4.7).

/** Whether `topic` matches the subscription `filter`; `$` topics are not matched by a leading wildcard (MQTT-4.7.2-1). */
export function topicMatches(filter: string, topic: string): boolean {
  if (topic.charCodeAt(0) === 36 /* $ */ && (filter[0] === '+' || filter[0] === '#')) return false;
  const f = filter.split('/');
  const t = topic.split('/');
  for (let i = 0; i < f.length; i++) {
    const level = f[i]!;
    if (level === '#') return true; // also matches the parent level: 'a/#' matches 'a'
    if (i >= t.length) return false;
    if (level !== '+' && level !== t[i]) return false;
  }
  return f.length === t.length;
}

export function hasWildcard(filter: string): boolean {
  return filter.includes('+') || filter.includes('#');
}

/**
 * The literal start every matching topic shares: 'a/b/+/c' → 'a/b/', 'a/b/#' → 'a/b' ('#' matches
 * the parent 'a/b' too), '+/x' and '#' → '' (the whole range).
 */
export function literalPrefix(filter: string): string {
  const levels = filter.split('/');
  const wild = levels.findIndex((l) => l === '+' || l === '#');
  if (wild <= 0) return wild === 0 ? '' : filter;
  const literal = levels.slice(0, wild).join('/');
  return levels[wild] === '+' ? literal + '/' : literal;
}
