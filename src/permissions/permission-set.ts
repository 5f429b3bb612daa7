// The permission engine shared by the REST API and the MQTT broker.
//
// A user may hold ~100k grants, so decisions must not scan them: grants are compiled
// into one trie over topic levels per (context, read|write). A decision walks the
// trie along the topic's levels, so it costs O(levels) (times the bounded number of
// `+` branches that match), independent of how many grants exist.
//
// Layout: the tries are first built from plain nodes (Map of literal children, `+`
// child, `#` flag, end flag), then compiled into flat typed arrays. Measured reason
// (scripts/bench-permissions.ts): with 100k grants a Map-per-node trie is spread over
// many MB of heap objects, and a decision on a uniformly random topic paid several
// dependent cache/TLB misses, running 5-6x slower than with 10 grants. The flat form
// interns every distinct level string once (a small, hot dictionary) and finds children
// in one open-addressing table keyed by (parent id, level id) that also holds the
// child's flags, so a level costs one probe into one compact array (~1.2x slower).

import { BadRequestError, type ValidationIssue } from '../errors/errors.js';
import {
  LEVEL_SEPARATOR,
  MULTI_LEVEL_WILDCARD,
  SINGLE_LEVEL_WILDCARD,
  isDollarLevel,
  parsePattern,
  splitLevels,
} from './topic-pattern.js';

export type PermissionContext = 'mqtt' | 'http';
export type PermissionOperation = 'read' | 'write' | 'readWrite';
/** The operation of a single decision; `readWrite` is only a grant-side shorthand. */
export type AccessOperation = 'read' | 'write';

export interface PermissionGrant {
  /** MQTT topic filter (context mqtt) or URL path pattern without query (context http). */
  readonly resource: string;
  readonly operation: PermissionOperation;
  readonly context: PermissionContext;
}

// ---------------------------------------------------------------------------
// Build-time trie

class TrieNode {
  /** Literal next levels; created lazily because most nodes (leaves) have none. */
  literal: Map<string, TrieNode> | undefined = undefined;
  plus: TrieNode | undefined = undefined;
  /** A pattern `<prefix>/#` ends here: matches this node's topic and everything below. */
  hash = false;
  /** A pattern ends exactly here. */
  end = false;
}

/** Inserts one valid pattern; returns how many nodes it created (for sizing the table). */
function insert(root: TrieNode, levels: readonly string[], levelIds: Map<string, number>): number {
  let created = 0;
  let node = root;
  for (let i = 0; i < levels.length; i++) {
    const level = levels[i]!;
    if (level === MULTI_LEVEL_WILDCARD) {
      node.hash = true; // only valid as the last level
      return created;
    }
    let next: TrieNode | undefined;
    if (level === SINGLE_LEVEL_WILDCARD) {
      next = node.plus;
      if (next === undefined) {
        next = node.plus = new TrieNode();
        created++;
      }
    } else {
      if (!levelIds.has(level)) levelIds.set(level, levelIds.size + 1); // 0 is reserved for `+`
      node.literal ??= new Map();
      next = node.literal.get(level);
      if (next === undefined) {
        next = new TrieNode();
        node.literal.set(level, next);
        created++;
      }
    }
    node = next;
  }
  node.end = true;
  return created;
}

// ---------------------------------------------------------------------------
// Compiled (flat) trie

const END = 1;
const HASH = 2;
const PLUS = 4;
const FLAG_BITS = 3;
const FLAG_MASK = (1 << FLAG_BITS) - 1;
const PLUS_LEVEL_ID = 0; // literal level ids start at 1
const ROOT_PARENT = -1; // virtual parent of the four roots; their "level ids" are slot + 1
const SLOTS = 4; // one root per (context, op)
const NO_NODE = -1;
// Tags are (parent + 2) << FLAG_BITS in an int32, which bounds the table size.
const MAX_CAPACITY = 1 << 27;

// Integer mix of (parent, level id) for the open-addressing table (murmur3-style finaliser).
function edgeHash(parent: number, levelId: number): number {
  let h = Math.imul(parent, 0x9e3779b1) ^ Math.imul(levelId + 0x7f4a7c15, 0x85ebca6b);
  h ^= h >>> 15;
  h = Math.imul(h, 0x2c1b3c6d);
  h ^= h >>> 12;
  return h;
}

/**
 * The four tries in one open-addressing table. A node's id is the slot of the edge
 * leading to it, and the slot also holds the node's flags, so finding a child and
 * learning whether it ends a pattern or carries `#` costs one probe, usually one
 * cache line. Slot layout (two int32): [(parent + 2) << 3 | flags (0 = empty), level id].
 */
class FlatTrie {
  /** Distinct literal levels of all patterns -> id >= 1. A level not in here can only match `+`. */
  readonly levelIds: Map<string, number>;
  readonly slots: Int32Array;
  readonly mask: number;
  /** Per node: id of its `+` child (read only when the PLUS flag is set). */
  readonly plus: Int32Array;
  /** Node ids of the four roots, indexed by (context, op) slot. */
  readonly roots: Int32Array;

  constructor(builders: readonly TrieNode[], levelIds: Map<string, number>, nodeCount: number) {
    // Load factor <= 0.5 keeps linear-probe chains short; probes stay in one cache line.
    const needed = (nodeCount + SLOTS) * 2;
    let capacity = 8;
    while (capacity < needed) capacity *= 2;
    if (capacity > MAX_CAPACITY) throw new RangeError(`permission set too large (${nodeCount} trie nodes)`);
    this.levelIds = levelIds;
    this.slots = new Int32Array(capacity * 2);
    this.mask = capacity - 1;
    this.plus = new Int32Array(capacity).fill(NO_NODE);
    this.roots = new Int32Array(SLOTS);

    // Iterative walk: pattern depth is bounded by validation, but no recursion is needed.
    const stack: Array<[TrieNode, number]> = [];
    builders.forEach((root, slot) => {
      const id = this.place(ROOT_PARENT, slot + 1);
      this.roots[slot] = id;
      stack.push([root, id]);
    });
    for (let item = stack.pop(); item !== undefined; item = stack.pop()) {
      const [node, id] = item;
      this.slots[id << 1] |= (node.end ? END : 0) | (node.hash ? HASH : 0) | (node.plus ? PLUS : 0);
      if (node.plus !== undefined) {
        const child = this.place(id, PLUS_LEVEL_ID);
        this.plus[id] = child;
        stack.push([node.plus, child]);
      }
      if (node.literal !== undefined) {
        for (const [level, child] of node.literal) stack.push([child, this.place(id, levelIds.get(level)!)]);
      }
    }
  }

  private place(parent: number, levelId: number): number {
    const slots = this.slots;
    let i = edgeHash(parent, levelId) & this.mask;
    while (slots[i << 1] !== 0) i = (i + 1) & this.mask;
    slots[i << 1] = (parent + 2) << FLAG_BITS;
    slots[(i << 1) + 1] = levelId;
    return i;
  }

  flags(node: number): number {
    return this.slots[node << 1]! & FLAG_MASK;
  }

  /** Child of `parent` along a literal level id, or NO_NODE. */
  child(parent: number, levelId: number): number {
    const slots = this.slots;
    const mask = this.mask;
    const tag = (parent + 2) << FLAG_BITS;
    let i = edgeHash(parent, levelId) & mask;
    for (;;) {
      const head = slots[i << 1]!;
      if (head === 0) return NO_NODE;
      if ((head & ~FLAG_MASK) === tag && slots[(i << 1) + 1] === levelId) return i;
      i = (i + 1) & mask;
    }
  }

  /**
   * Does a pattern below `node` match the rest of `topic`, whose current level starts at
   * `start` (-1 once every level is consumed)? Works on offsets; the only allocation is
   * the level substring used for the dictionary lookup. The walk tries the literal child
   * first and recurses only where a node has both a literal and a `+` way on, so
   * backtracking is bounded by the trie's shape (each node is visited at most once).
   */
  matchFrom(node: number, topic: string, start: number): boolean {
    for (;;) {
      const f = this.flags(node);
      if ((f & HASH) !== 0) return true;
      if (start < 0) return (f & END) !== 0;
      const slash = topic.indexOf(LEVEL_SEPARATOR, start);
      const next = slash === -1 ? -1 : slash + 1;
      const levelId = this.levelIds.get(
        start === 0 && slash === -1 ? topic : topic.slice(start, slash === -1 ? topic.length : slash),
      );
      const literal = levelId === undefined ? NO_NODE : this.child(node, levelId);
      if ((f & PLUS) === 0) {
        if (literal === NO_NODE) return false;
        node = literal;
      } else {
        if (literal !== NO_NODE && this.matchFrom(literal, topic, next)) return true;
        node = this.plus[node]!;
      }
      start = next;
    }
  }

  /** Does some single pattern below `node` cover the filter from level `d` on? */
  coverFrom(node: number, filter: readonly string[], d: number): boolean {
    const f = this.flags(node);
    // A pattern `#` in the first level does not cover a `$` filter (§4.7.2); a filter
    // whose first level is `+`/`#` excludes `$`-topics itself, so that is covered.
    if ((f & HASH) !== 0 && !(d === 0 && isDollarLevel(filter[0]!))) return true;
    if (d === filter.length) return (f & END) !== 0;
    const level = filter[d]!;
    const plus = (f & PLUS) !== 0 ? this.plus[node]! : NO_NODE;
    if (level === MULTI_LEVEL_WILDCARD) {
      // Filter `#` at level d >= 1 includes the parent topic, which only a pattern `#` at
      // the same level matches. At d = 0 there is no parent (topics have >= 1 level), so
      // `+/#` is exactly equivalent to `#`.
      return d === 0 && plus !== NO_NODE && (this.flags(plus) & HASH) !== 0;
    }
    if (level === SINGLE_LEVEL_WILDCARD) {
      // A literal pattern level matches one value; a filter `+` needs all of them.
      return plus !== NO_NODE && this.coverFrom(plus, filter, d + 1);
    }
    const levelId = this.levelIds.get(level);
    if (levelId !== undefined) {
      const child = this.child(node, levelId);
      if (child !== NO_NODE && this.coverFrom(child, filter, d + 1)) return true;
    }
    if (d === 0 && isDollarLevel(level)) return false; // `+` never matches a `$` first level
    return plus !== NO_NODE && this.coverFrom(plus, filter, d + 1);
  }
}

// Trie slot: context * 2 + operation bit.
const READ = 0;
const WRITE = 1;

function slotOf(context: string, op: string): number {
  const c = context === 'mqtt' ? 0 : context === 'http' ? 2 : -1;
  const o = op === 'read' ? READ : op === 'write' ? WRITE : -1;
  return c < 0 || o < 0 ? -1 : c + o;
}

/**
 * An immutable, compiled set of grants. Rebuild it when a user's roles change (about
 * 0.2-0.3 s for 100k grants; a decision costs well under a microsecond).
 */
export class PermissionSet {
  static readonly EMPTY = new PermissionSet([]);

  /** Number of distinct grants (context, operation, resource) the set was built from. */
  readonly size: number;
  /** How many of them are in the mqtt context (0: the holder has no business on the broker). */
  readonly mqttGrants: number;
  private readonly trie: FlatTrie;

  /** @throws BadRequestError listing every invalid grant (resource, operation or context). */
  constructor(grants: Iterable<PermissionGrant>) {
    const roots = [new TrieNode(), new TrieNode(), new TrieNode(), new TrieNode()];
    const levelIds = new Map<string, number>();
    const issues: ValidationIssue[] = [];
    // Distinct resources per (context, operation) [mqtt r/w/rw, http r/w/rw]; keyed by
    // the caller's strings, so de-duplicating allocates nothing per grant.
    const seen = Array.from({ length: 6 }, () => new Set<string>());
    let size = 0;
    let nodes = 0;
    let index = 0;
    for (const grant of grants) {
      const at = index++;
      const { resource, operation, context } = grant;
      if (context !== 'mqtt' && context !== 'http') {
        issues.push({ path: `permissions[${at}].context`, message: `unknown context '${String(context)}'` });
        continue;
      }
      if (operation !== 'read' && operation !== 'write' && operation !== 'readWrite') {
        issues.push({ path: `permissions[${at}].operation`, message: `unknown operation '${String(operation)}'` });
        continue;
      }
      const { levels, reason } = parsePattern(resource, context);
      if (levels === null) {
        issues.push({ path: `permissions[${at}].resource`, message: reason });
        continue;
      }
      const bucket = seen[(context === 'mqtt' ? 0 : 3) + (operation === 'read' ? 0 : operation === 'write' ? 1 : 2)]!;
      if (bucket.has(resource)) continue;
      bucket.add(resource);
      size++;
      const base = context === 'mqtt' ? 0 : 2;
      if (operation !== 'write') nodes += insert(roots[base + READ]!, levels, levelIds);
      if (operation !== 'read') nodes += insert(roots[base + WRITE]!, levels, levelIds);
    }
    if (issues.length > 0) throw new BadRequestError('invalid permission', issues);
    this.size = size;
    this.mqttGrants = seen[0]!.size + seen[1]!.size + seen[2]!.size;
    this.trie = new FlatTrie(roots, levelIds, nodes);
    Object.freeze(this);
  }

  /**
   * Decision 1: may `op` be performed on the concrete topic / path `resource`?
   * HTTP callers pass the path without query string (see stripQuery). Unknown
   * contexts or operations are denied.
   */
  allows(context: PermissionContext, op: AccessOperation, resource: string): boolean {
    const slot = slotOf(context, op);
    if (slot < 0) return false;
    const trie = this.trie;
    const root = trie.roots[slot]!;
    if (!isDollarLevel(resource)) return trie.matchFrom(root, resource, 0);
    // `$`-topics: neither `#` nor `+` in the first level match, only a literal one.
    const slash = resource.indexOf(LEVEL_SEPARATOR);
    const levelId = trie.levelIds.get(slash === -1 ? resource : resource.slice(0, slash));
    if (levelId === undefined) return false;
    const child = trie.child(root, levelId);
    return child !== NO_NODE && trie.matchFrom(child, resource, slash === -1 ? -1 : slash + 1);
  }

  /**
   * Decision 2: does ONE granted pattern cover every topic the (valid) subscription
   * filter can match? `a/#` covers `a/+/b/#`; `a/+/c` does not cover `a/#`.
   */
  coversFilter(context: PermissionContext, op: AccessOperation, filter: string): boolean {
    const slot = slotOf(context, op);
    if (slot < 0) return false;
    // Subscriptions are far rarer than publishes, so splitting here is fine.
    return this.trie.coverFrom(this.trie.roots[slot]!, splitLevels(filter), 0);
  }
}

/** Maps an HTTP method to the operation it needs; unknown methods need write (fail safe). */
export function operationFor(httpMethod: string): AccessOperation {
  switch (httpMethod.toUpperCase()) {
    case 'GET':
    case 'HEAD':
    case 'OPTIONS':
      return 'read';
    case 'POST':
    case 'PUT':
    case 'PATCH':
    case 'DELETE':
      return 'write';
    default:
      return 'write';
  }
}
