// Which resources a new set of service definitions changes (docs/design.md §13: "the runtime diffs old
// and new definitions and restarts only what changed"). Each resource gets
// - its definition hash: a stable hash of its resolved definition (what an operation's stored
//   target state is bound to), and
// - its run key: the hash without targetState, plus the run key of what it runs on (an
//   endpoint's connection, a node set's server, a Sparkplug edge node's endpoints) or the
//   topics it names (a mapping's endpoints). A resource restarts when its run key changes; when only targetState changed it
//   keeps running and takes the new target.
import { createHash } from 'node:crypto';
import type { ResourceDef, ServiceDef } from './service-files.js';

/** JSON with object keys in sorted order: equal values give equal text. */
export function stableJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map((v) => stableJson(v === undefined ? null : v)).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const keys = Object.keys(value).filter((k) => (value as Record<string, unknown>)[k] !== undefined).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${stableJson((value as Record<string, unknown>)[k])}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

export interface KeyedResource {
  def: ResourceDef;
  /** Hash of the resolved definition. */
  hash: string;
  /** Changes when the resource must restart. */
  runKey: string;
}

/**
 * Every resource of `services` with its hash and run key, by id, in the order of the files.
 * References never leave a service, so each service is keyed on its own; `cache` keeps the
 * keys of service definitions seen before (the same object: an unchanged file).
 */
export function keyResources(services: ServiceDef[], cache?: WeakMap<ServiceDef, KeyedResource[]>): Map<string, KeyedResource> {
  const out = new Map<string, KeyedResource>();
  for (const service of services) {
    let keyed = cache?.get(service);
    if (!keyed) {
      keyed = keyService(service);
      cache?.set(service, keyed);
    }
    for (const k of keyed) out.set(k.def.id, k);
  }
  return out;
}

function keyService(service: ServiceDef): KeyedResource[] {
  const all = service.resources;
  const own = new Map<string, string>();
  for (const def of all) own.set(def.id, sha256(stableJson({ ...def, targetState: undefined })));
  const topicOf = new Map(all.flatMap((d) => (d.kind === 'endpoint' ? [[d.id, d.topic] as const] : [])));
  const endpointRunKey = new Map(all.flatMap((d) => (d.kind === 'endpoint' ? [[d.id, sha256(`${own.get(d.id)}/${own.get(d.connectionId)}`)] as const] : [])));
  return all.map((def) => {
    let runKey = own.get(def.id)!;
    if (def.kind === 'endpoint') runKey = endpointRunKey.get(def.id)!;
    if (def.kind === 'sparkplug') {
      // It follows its endpoints' readings and states: it restarts (a new birth) with them.
      const ids = [...new Set(def.devices.flatMap((d) => d.metrics.flatMap((m) => [m.readEndpoint, m.writeEndpoint])))].filter((id) => id !== undefined).sort();
      runKey = sha256(`${runKey}/${ids.map((id) => endpointRunKey.get(id)).join(',')}`);
    }
    if (def.kind === 'nodes') runKey = sha256(`${runKey}/${own.get(def.serverId)}`);
    if (def.kind === 'mapping') {
      const topics = def.mappings.flatMap((m) => [m.sourceEndpoint, m.targetEndpoint].map((id) => (id === undefined ? '' : (topicOf.get(id) ?? ''))));
      runKey = sha256(`${runKey}/${stableJson(topics)}`);
    }
    return { def, hash: sha256(stableJson(def)), runKey };
  });
}

/** What applying new definitions does to each resource (ids, sorted). */
export interface ResourceChanges {
  /** New resources: started. */
  added: string[];
  /** Their definition (or what they run on) changed: stopped and started again. */
  restarted: string[];
  /** Only targetState changed in the file: they keep running and take the new target. */
  retargeted: string[];
  /** Gone from the files: stopped. */
  removed: string[];
  /** Untouched: they keep running, their connections stay open. */
  unchanged: string[];
}

export function diffResources(current: Map<string, KeyedResource>, next: Map<string, KeyedResource>): ResourceChanges {
  const changes: ResourceChanges = { added: [], restarted: [], retargeted: [], removed: [], unchanged: [] };
  for (const [id, n] of next) {
    const c = current.get(id);
    if (!c) changes.added.push(id);
    else if (c.runKey !== n.runKey) changes.restarted.push(id);
    else if (c.hash !== n.hash) changes.retargeted.push(id);
    else changes.unchanged.push(id);
  }
  for (const id of current.keys()) if (!next.has(id)) changes.removed.push(id);
  for (const list of Object.values(changes)) list.sort();
  return changes;
}
