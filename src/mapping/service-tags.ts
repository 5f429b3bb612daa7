// The tags of service files (`!ref name`, `!sub "text ${x}"`) for the yaml package, and their
// JSON form ({"!ref": name}, {"!sub": text}) used by the API. No Node.js import: the web UI
// bundles this module too, so the browser converts a service file exactly as the gateway does.
import type { ScalarTag } from 'yaml';

export class Ref {
  constructor(readonly name: string) {}
}
export class Sub {
  constructor(readonly text: string) {}
}

export const customTags: ScalarTag[] = [
  {
    tag: '!ref',
    identify: (v) => v instanceof Ref,
    resolve: (str: string) => new Ref(str.trim()),
    stringify: (item) => {
      const name = (item.value as Ref).name;
      return /^[A-Za-z0-9_-]+$/.test(name) ? name : JSON.stringify(name);
    },
  },
  { tag: '!sub', identify: (v) => v instanceof Sub, resolve: (str: string) => new Sub(str), stringify: (item) => JSON.stringify((item.value as Sub).text) },
];

/** Parsed YAML (with Ref and Sub values) as JSON: `!ref x` becomes {"!ref": "x"}, `!sub t` {"!sub": "t"}. */
export function tagsToJson(v: unknown): unknown {
  if (v instanceof Ref) return { '!ref': v.name };
  if (v instanceof Sub) return { '!sub': v.text };
  if (Array.isArray(v)) return v.map(tagsToJson);
  if (v !== null && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, tagsToJson(x)]));
  return v;
}

/** The reverse: JSON with tag objects as values the yaml package writes as tags. */
export function jsonToTags(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(jsonToTags);
  if (v !== null && typeof v === 'object') {
    const entries = Object.entries(v);
    if (entries.length === 1 && entries[0]![0] === '!ref' && typeof entries[0]![1] === 'string') return new Ref(entries[0]![1]);
    if (entries.length === 1 && entries[0]![0] === '!sub' && typeof entries[0]![1] === 'string') return new Sub(entries[0]![1]);
    return Object.fromEntries(entries.map(([k, x]) => [k, jsonToTags(x)]));
  }
  return v;
}
