// A service file as YAML and as the JSON document the API answers (tags as {"!ref": name} and
// {"!sub": text}), converted in the browser with the gateway's own tag definitions
// (src/mapping/service-tags.ts), so the form and the YAML tab edit the same document.
import { Document, parseDocument } from 'yaml';
import { customTags, jsonToTags, tagsToJson } from '../../../src/mapping/service-tags.js';

export type TagValue = { '!ref': string } | { '!sub': string };

export interface ServiceResource {
  type: string;
  properties: Record<string, unknown>;
}
export interface ServiceDocument {
  description?: string;
  metadata?: Record<string, unknown>;
  parameters?: Record<string, { type?: string; default?: unknown; description?: string }>;
  resources: Record<string, ServiceResource>;
}

export function isTag(v: unknown): v is TagValue {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return false;
  const keys = Object.keys(v);
  return keys.length === 1 && (keys[0] === '!ref' || keys[0] === '!sub') && typeof (v as Record<string, unknown>)[keys[0]!] === 'string';
}

/** The problems of YAML that does not parse, with their line and column as the API reports them. */
export class YamlError extends Error {
  constructor(readonly problems: { path: string; message: string }[]) {
    super(problems.map((p) => `${p.path}: ${p.message}`).join('; '));
  }
}

export function yamlToDocument(text: string): ServiceDocument {
  const doc = parseDocument(text, { customTags, uniqueKeys: true });
  if (doc.errors.length) {
    throw new YamlError(doc.errors.map((e) => ({ path: e.linePos ? `line ${e.linePos[0].line}, column ${e.linePos[0].col}` : '', message: e.message.split('\n')[0]! })));
  }
  const value = tagsToJson(doc.toJS({ maxAliasCount: 100 })) ?? {};
  if (typeof value !== 'object' || Array.isArray(value)) throw new YamlError([{ path: '', message: 'a service file is a mapping (description, parameters, resources)' }]);
  const result = value as ServiceDocument;
  result.resources ??= {};
  return result;
}

export function documentToYaml(value: ServiceDocument): string {
  return new Document(jsonToTags(value), { customTags }).toString();
}
