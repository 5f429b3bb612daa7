// A bridge acts as its `runAs` gatewayd user (docs/design.md §14): what leaves is what that user may
// read, what comes in what it may write (under its publish prefix). Every message is checked with
// the permission engine, so a permission revoked while the bridge runs stops that flow with the
// next message; the access-change events the broker listens to tell the bridge at once, and the
// audit log records both the change of a rule's rights and the first message refused.
import type { Logger } from '../log/index.js';
import type { TopicRule } from './topic-rules.js';

export interface BridgePrincipal {
  userId: string;
  publishPrefix: string;
}

/** The permission engine as bridges use it. */
export interface BridgeAccess {
  /** The user named `username`, or undefined when there is none. */
  principal(username: string): BridgePrincipal | undefined;
  allows(userId: string, operation: 'read' | 'write', topic: string): boolean;
  /** Does one permission of that operation cover the whole filter? */
  covers(userId: string, operation: 'read' | 'write', filter: string): boolean;
  /** Changes of users' rights (the events the broker listens to); returns the unsubscribe function. */
  onChange(listener: (change: { userId: string; kind: string }) => void): () => void;
}

/** While the runAs user is missing, how often it is looked up again. */
const LOOKUP_INTERVAL_MS = 1000;
/** Read decisions remembered (by local topic); beyond, they are forgotten and asked again. */
const MAX_REMEMBERED_TOPICS = 10_000;

type Direction = 'out' | 'in';

export class RunAs {
  private cached: BridgePrincipal | undefined;
  private lookedUpAt = -Infinity;
  /** Rules (by direction) with a refused message since the last change of the user's rights: audited once. */
  private readonly refused = new Set<string>();
  /**
   * The engine's read decision per local topic for the user as cached: a message is checked when
   * queued and again when sent, and a bridge carries few distinct topics. Forgotten with the
   * user (any change of its rights, a restore), so a revocation still stops the next message.
   */
  private readonly readable = new Map<string, boolean>();
  private readonly unsubscribe: () => void;

  constructor(
    private readonly bridgeId: string,
    readonly username: string,
    private readonly rules: readonly TopicRule[],
    private readonly access: BridgeAccess,
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
    onChange: () => void = () => {},
  ) {
    this.unsubscribe = access.onChange((change) => {
      if (!this.cached || change.userId !== this.cached.userId) return;
      this.forget(); // the publish prefix may have changed too
      this.refused.clear();
      if (change.kind === 'deleted') log.audit('bridge.runAs.deleted', { bridge: bridgeId, runAs: username, effect: 'nothing flows until the user exists again' });
      else if (change.kind === 'permissions') this.auditRights();
      onChange();
    });
  }

  close(): void {
    this.unsubscribe();
  }

  /** Looks the user and its rights up again at the next message (its rights changed, or a restore replaced the store). */
  forget(): void {
    this.cached = undefined;
    this.lookedUpAt = -Infinity;
    this.readable.clear();
  }

  /** The user now (looked up again at most once a second while it does not exist). */
  principal(): BridgePrincipal | undefined {
    if (this.cached) return this.cached;
    const t = this.now();
    if (t - this.lookedUpAt < LOOKUP_INTERVAL_MS) return undefined;
    this.lookedUpAt = t;
    this.cached = this.access.principal(this.username);
    return this.cached;
  }

  /** Why nothing flows, if so. */
  problem(): string | undefined {
    return this.principal() ? undefined : `runAs user ${this.username} does not exist: nothing flows`;
  }

  /** May this local topic leave through `rule` (undefined: a queued message no current rule takes)? */
  mayRead(rule: TopicRule | undefined, topic: string): boolean {
    const p = this.principal();
    let ok = false;
    if (p !== undefined) {
      const known = this.readable.get(topic);
      if (known === undefined) {
        ok = this.access.allows(p.userId, 'read', topic);
        if (this.readable.size >= MAX_REMEMBERED_TOPICS) this.readable.clear();
        this.readable.set(topic, ok);
      } else ok = known;
    }
    return this.decide(rule, 'out', topic, ok);
  }

  /** The local topic (prefixed) a message from upstream is published to, or undefined when refused. */
  writeTopic(rule: TopicRule, localTopic: string): string | undefined {
    const p = this.principal();
    const topic = (p?.publishPrefix ?? '') + localTopic;
    const ok = p !== undefined && !topic.startsWith('$') && this.access.allows(p.userId, 'write', topic);
    return this.decide(rule, 'in', topic, ok) ? topic : undefined;
  }

  private decide(rule: TopicRule | undefined, direction: Direction, topic: string, ok: boolean): boolean {
    if (ok) return true;
    const key = `${direction}${rule?.index ?? 'queued'}`;
    if (!this.refused.has(key)) {
      this.refused.add(key);
      this.log.audit('bridge.flow.refused', {
        bridge: this.bridgeId,
        runAs: this.username,
        rule: rule?.index ?? null,
        direction,
        topic,
        reason: this.principal() ? `no ${direction === 'out' ? 'read' : 'write'} permission` : 'no such user',
        effect: 'not forwarded (further refusals of this rule are counted, not audited, until the user\'s rights change)',
      });
    }
    return false;
  }

  /** The user's rights changed: what each rule may carry now (a whole filter, or only some of it). */
  private auditRights(): void {
    const p = this.principal();
    const rules: { rule: number; direction: Direction; filter: string; wholeFilter: boolean }[] = [];
    for (const r of this.rules) {
      if (r.direction !== 'in') rules.push({ rule: r.index, direction: 'out', filter: r.localFilter, wholeFilter: p !== undefined && this.access.covers(p.userId, 'read', r.localFilter) });
      if (r.direction !== 'out') {
        const filter = (p?.publishPrefix ?? '') + r.localFilter;
        rules.push({ rule: r.index, direction: 'in', filter, wholeFilter: p !== undefined && this.access.covers(p.userId, 'write', filter) });
      }
    }
    this.log.audit('bridge.runAs.changed', { bridge: this.bridgeId, runAs: this.username, rules, effect: 'applies from the next message; topics the user may no longer read (out) or write (in) stop at once' });
  }
}
