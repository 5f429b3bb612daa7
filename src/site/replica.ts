// The site's records in this gateway's store (docs/design.md §17): every login, REST call, MQTT
// decision and broker hook reads them from LMDB as on a gateway on its own. Changes come in
// revision order, each applied in one store transaction together with the replica's (epoch,
// revision, digest); a snapshot replaces them all in one transaction too. The replica checks
// every step: the next revision only, the digest after it, no older revision of the same
// epoch. What it cannot apply it refuses, and the caller resynchronises from a snapshot.
import type { AccessChange, AccessEvents } from '../auth/access-events.js';
import { prefixRange, type Store } from '../store/index.js';
import { accessChangesOf } from './change-events.js';
import { oneAtATime } from './one-at-a-time.js';
import { createReplicaTables } from './replica-tables.js';
import { canonicalJson, moveDigest, plainDoc, recordHash, ZERO_DIGEST, type LogRow, type RecordChange, type SiteHead, type SiteKind, type SiteSnapshot } from './site-records.js';

/** Where the replica stands; absent until its first snapshot. */
export interface ReplicaState extends SiteHead {
  siteId: string;
  /** When the last change or snapshot was applied (epoch ms). */
  appliedAt: number;
}

/** A step the replica refuses: the caller resynchronises (gap, digest) or drops it (rollback). */
export class ReplicaRefusal extends Error {
  constructor(
    readonly reason: 'gap' | 'epoch' | 'digest' | 'rollback' | 'site',
    message: string,
  ) {
    super(message);
    this.name = 'ReplicaRefusal';
  }
}

const STATE_KEY = 'site.replica';

export interface ReplicaOptions {
  store: Store;
  events: AccessEvents;
  /** Centrals keep the rows they applied, to serve edges' "changes since" (bounded). */
  keepLog: number;
}

export function createSiteReplica(options: ReplicaOptions) {
  const { store, events } = options;
  const tables = createReplicaTables(store);
  const { current, applyInTxn } = tables;
  const appliedListeners = new Set<(state: ReplicaState) => void>();
  /** One apply at a time: each reads the state the previous one left. */
  const serialized = oneAtATime();

  const state = (): ReplicaState | undefined => store.meta.get(STATE_KEY) as ReplicaState | undefined;

  function emit(changes: AccessChange[]): void {
    for (const change of changes) events.emit(change);
  }

  function notifyApplied(): void {
    const s = state();
    if (s) for (const l of appliedListeners) l(s);
  }

  function pruneLog(rev: number): void {
    if (options.keepLog <= 0) return;
    for (const key of tables.rows().getKeys({ end: rev - options.keepLog + 1 })) tables.rows().remove(key);
  }

  return {
    state,
    isSiteRecord: (kind: SiteKind, id: string): boolean => tables.records().get([kind, id]) !== undefined,
    /** A site document of a kind without a table of its own (edges, join tokens). */
    doc: (kind: 'edge' | 'join', id: string) => tables.docs().get([kind, id]),
    /** The table of the site's edges and join tokens (a writer's changes of them are captured there). */
    docsTable: () => tables.docs(),
    docsOf: (kind: 'edge' | 'join') => [...tables.docs().getRange(prefixRange(kind))].map(({ value }) => value),
    current,

    /**
     * Applies the next row of the site's log in one transaction and raises its access events
     * (on the gateway that wrote it too: a site's events say whether a grant was lost, which the
     * services' own cannot; src/site/index.ts keeps theirs out). `emitEvents: false`: a row that
     * seeds an empty site. `local`: changes of this gateway's own records made by the same write.
     */
    applyRow(row: LogRow, epoch: string, opts: { emitEvents?: boolean; local?: RecordChange[] } = {}): Promise<void> {
      return serialized(async () => {
        const events = await store.transaction(() => {
          const s = state();
          if (!s || s.epoch !== epoch) throw new ReplicaRefusal('epoch', `row ${row.rev} is of epoch ${epoch}, the replica of ${s?.epoch ?? 'none'}`);
          if (row.rev <= s.rev) throw new ReplicaRefusal('rollback', `row ${row.rev} is not newer than the replica's revision ${s.rev}`);
          if (row.rev !== s.rev + 1) throw new ReplicaRefusal('gap', `row ${row.rev} does not follow the replica's revision ${s.rev}`);
          const site = applyInTxn(row.changes, true, s.digest);
          if (site.digest !== row.digest) throw new ReplicaRefusal('digest', `digest after row ${row.rev} differs from the site's`);
          const local = opts.local?.length ? applyInTxn(opts.local, false, site.digest) : undefined;
          store.meta.put(STATE_KEY, { ...s, rev: row.rev, digest: row.digest, appliedAt: Date.now() } satisfies ReplicaState);
          if (options.keepLog > 0) {
            tables.rows().put(row.rev, JSON.stringify(row));
            pruneLog(row.rev);
          }
          return [
            ...accessChangesOf(site.applied, site.before, site.after),
            ...(local ? accessChangesOf(local.applied, local.before, local.after) : []),
          ];
        });
        if (opts.emitEvents !== false) emit(events);
        notifyApplied();
      });
    },

    /**
     * Replaces the site's records with a snapshot in one transaction, as the difference from
     * what the replica holds (records of this gateway stay). Refused: an older revision of the
     * epoch the replica is on (unless forced), and a snapshot whose records do not add up to
     * its digest.
     */
    loadSnapshot(snapshot: SiteSnapshot, opts: { force?: boolean } = {}): Promise<{ changed: number }> {
      return serialized(async () => {
        const s = state();
        // force: a central taking PostgreSQL's word (the authority), never an edge.
        if (s && !opts.force && s.epoch === snapshot.epoch && snapshot.rev < s.rev) {
          throw new ReplicaRefusal('rollback', `snapshot at revision ${snapshot.rev} is older than the replica's ${s.rev} of the same epoch`);
        }
        if (s && s.siteId !== snapshot.siteId) throw new ReplicaRefusal('site', 'the snapshot is of another site');
        const wanted = new Map<string, { kind: SiteKind; id: string; doc: Record<string, unknown>; hash: string }>();
        let digest = ZERO_DIGEST;
        const hashes: string[] = [];
        for (const r of snapshot.records) {
          const doc = plainDoc(r.doc);
          const hash = recordHash(r.kind, r.id, canonicalJson(doc));
          wanted.set(`${r.kind}\0${r.id}`, { kind: r.kind, id: r.id, doc, hash });
          hashes.push(hash);
        }
        digest = moveDigest(digest, [], hashes);
        if (digest !== snapshot.digest) throw new ReplicaRefusal('digest', 'the snapshot\'s records do not add up to its digest');
        const result = await store.transaction(() => {
          const changes: RecordChange[] = [];
          for (const { key, value: hash } of tables.records().getRange()) {
            const [kind, id] = key as [SiteKind, string];
            const w = wanted.get(`${kind}\0${id}`);
            if (!w) changes.push({ kind, id, doc: null });
            else if (w.hash === hash) wanted.delete(`${kind}\0${id}`);
          }
          for (const w of wanted.values()) changes.push({ kind: w.kind, id: w.id, doc: w.doc });
          const applied = applyInTxn(changes, true, s?.digest ?? ZERO_DIGEST);
          if (applied.digest !== snapshot.digest) throw new ReplicaRefusal('digest', 'the replica does not add up to the snapshot\'s digest after loading it');
          store.meta.put(STATE_KEY, { epoch: snapshot.epoch, rev: snapshot.rev, digest: snapshot.digest, siteId: snapshot.siteId, appliedAt: Date.now() } satisfies ReplicaState);
          // Rows of another epoch, or with a hole before this snapshot, are not served again.
          if (options.keepLog > 0) for (const key of tables.rows().getKeys()) tables.rows().remove(key);
          return { events: accessChangesOf(applied.applied, applied.before, applied.after), changed: changes.length };
        });
        emit(result.events);
        notifyApplied();
        return { changed: result.changed };
      });
    },

    /** Changes of this gateway's own records (never the site's), in one transaction. */
    applyLocal(changes: RecordChange[]): Promise<void> {
      return serialized(async () => {
        const events = await store.transaction(() => {
          for (const c of changes) if (tables.records().get([c.kind, c.id]) !== undefined) throw new ReplicaRefusal('site', `${c.kind} ${c.id} is a record of the site`);
          const applied = applyInTxn(changes, false, ZERO_DIGEST);
          return accessChangesOf(applied.applied, applied.before, applied.after);
        });
        emit(events);
      });
    },

    /** The site's records as this replica holds them, read in one go (one read snapshot). */
    exportSnapshot(): SiteSnapshot | undefined {
      const s = state();
      if (!s) return undefined;
      const out: SiteSnapshot['records'] = [];
      for (const { key } of tables.records().getRange()) {
        const [kind, id] = key as [SiteKind, string];
        const doc = current(kind, id);
        if (doc) out.push({ kind, id, doc });
      }
      return { siteId: s.siteId, epoch: s.epoch, rev: s.rev, digest: s.digest, records: out };
    },

    /** Rows after `rev` this replica kept (centrals), or 'gap' when they do not reach back that far. */
    rowsSince(rev: number, limit: number): LogRow[] | 'gap' {
      const s = state();
      if (!s || rev >= s.rev) return [];
      const out: LogRow[] = [];
      for (const { key, value } of tables.rows().getRange({ start: rev + 1, limit })) {
        if (out.length === 0 && key !== rev + 1) return 'gap';
        out.push(JSON.parse(value) as LogRow);
      }
      return out.length ? out : 'gap';
    },

    /** The digest recomputed from every record the replica holds (not the running one). */
    recomputeDigest(): string {
      const hashes: string[] = [];
      for (const { key } of tables.records().getRange()) {
        const [kind, id] = key as [SiteKind, string];
        const doc = current(kind, id);
        if (doc) hashes.push(recordHash(kind, id, canonicalJson(plainDoc(doc))));
      }
      return moveDigest(ZERO_DIGEST, [], hashes);
    },

    /** Starts an empty replica of a site (a central on an empty authority). */
    async init(head: SiteHead & { siteId: string }): Promise<void> {
      await serialized(() => store.transaction(() => store.meta.put(STATE_KEY, { ...head, appliedAt: Date.now() } satisfies ReplicaState)));
    },

    /** Forgets the replica (an edge that joins anew): its records become local ones. */
    async forget(): Promise<void> {
      await serialized(() =>
        store.transaction(() => {
          for (const key of tables.records().getKeys()) tables.records().remove(key);
          for (const key of tables.rows().getKeys()) tables.rows().remove(key);
          store.meta.remove(STATE_KEY);
        }),
      );
    },

    onApplied(listener: (state: ReplicaState) => void): () => void {
      appliedListeners.add(listener);
      return () => appliedListeners.delete(listener);
    },
  };
}
export type SiteReplica = ReturnType<typeof createSiteReplica>;
