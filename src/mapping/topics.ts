// MQTT topic helpers of the mapping runtime: filter matching and named wildcards (`+machine`).

/** A mapping source filter with its named wildcards replaced by `+` (for the broker) and their names by level. */
export interface NamedFilter {
  /** The plain MQTT filter (named wildcards become `+`). */
  filter: string;
  /** Level index → variable name, for every named `+name` level. */
  names: Map<number, string>;
}

export function parseNamedFilter(source: string): NamedFilter {
  const names = new Map<number, string>();
  const levels = source.split('/').map((level, i) => {
    if (level.length > 1 && level.startsWith('+')) {
      names.set(i, level.slice(1));
      return '+';
    }
    return level;
  });
  return { filter: levels.join('/'), names };
}

/** Does the MQTT filter match the concrete topic? `$` topics only by an explicit `$` first level. */
export function topicMatches(filter: string, topic: string): boolean {
  if (topic.startsWith('$') && !filter.startsWith('$')) return false;
  const f = filter.split('/');
  const t = topic.split('/');
  for (let i = 0; i < f.length; i++) {
    const level = f[i]!;
    if (level === '#') return true;
    if (i >= t.length) return false;
    if (level !== '+' && level !== t[i]) return false;
  }
  return f.length === t.length;
}

/** The values of the named wildcards of `nf` in a topic it matched. */
export function varsOf(nf: NamedFilter, topic: string): Record<string, string> {
  const vars: Record<string, string> = {};
  if (nf.names.size === 0) return vars;
  const t = topic.split('/');
  for (const [i, name] of nf.names) vars[name] = t[i] ?? '';
  return vars;
}

/** Replaces `{name}` in a target topic by the variable's value (a missing variable stays as is). */
export function fillTopic(template: string, vars: Record<string, string>): string {
  return template.replace(/\{([A-Za-z0-9_]+)\}/g, (whole, name: string) => (name in vars ? vars[name]! : whole));
}

/** A payload as a rule sees it: JSON when it parses, the UTF-8 text otherwise. */
export function decodePayload(payload: Buffer): unknown {
  const text = payload.toString('utf8');
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

export function encodePayload(value: unknown): Buffer {
  return Buffer.from(JSON.stringify(value === undefined ? null : value), 'utf8');
}
