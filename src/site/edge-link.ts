// An edge's link to its site (docs/scaling-out.md "On an edge"): it joins once with a one-time token
// (pinning the site's key), loads a signed snapshot, then follows the changes by long poll over
// the centrals' URLs. Every answer is verified before anything is applied; a central that is
// behind the edge is skipped, never followed backwards. The edge never needs the link to run:
// it decides from its replica, and the link only brings it up to date.
import type { Logger } from '../log/index.js';
import type { Store } from '../store/index.js';
import { joinSite, JoinError } from './edge-join.js';
import { ReplicaRefusal, type SiteReplica } from './replica.js';
import type { SiteClient, SiteResponse } from './site-client.js';
import { EDGE_HEADER, type ChangesAnswer } from './site-feed.js';
import type { siteFiles, EdgeJoinState } from './site-files.js';
import type { SiteSnapshot } from './site-records.js';
import { createSiteVerifier, SIGNATURE_HEADER, type SiteVerifier } from './signing.js';

export type EdgePhase = 'unjoined' | 'syncing' | 'following' | 'offline' | 'refused';

export interface EdgeLinkStatus {
  phase: EdgePhase;
  /** Epoch ms of the last answer of a central (persisted: a restart keeps the link's age). */
  lastContactAt: number;
  central?: string;
  resyncs: number;
  applied: number;
  /** Answers refused: a bad signature, another site, an older revision of the same epoch. */
  refusedAnswers: number;
  lastError?: string;
}

const LINK_KEY = 'site.link';
const PERSIST_EVERY_MS = 10 * 60_000;

export function createEdgeLink(deps: {
  store: Store;
  replica: SiteReplica;
  client: SiteClient;
  files: ReturnType<typeof siteFiles>;
  joinToken: () => string;
  name: string;
  longPollSeconds: number;
  log: Logger;
  now?: () => number;
}) {
  const { store, replica, client, files, log } = deps;
  const now = deps.now ?? Date.now;
  const persisted = store.meta.get(LINK_KEY) as { lastContactAt?: number } | undefined;
  const status: EdgeLinkStatus = { phase: 'unjoined', lastContactAt: persisted?.lastContactAt ?? 0, resyncs: 0, applied: 0, refusedAnswers: 0 };
  let joined: EdgeJoinState | undefined = files.edge();
  let verifier: SiteVerifier | undefined = joined ? createSiteVerifier(joined.publicKeyPem, joined.fingerprint) : undefined;
  let needSnapshot = !replica.state();
  let persistedAt = 0;
  let stopped = false;
  let wake: (() => void) | undefined;
  let timer: NodeJS.Timeout | undefined;

  function noteContact(url: string): void {
    status.lastContactAt = now();
    status.central = url;
    if (status.lastContactAt - persistedAt > PERSIST_EVERY_MS) persistContact();
  }
  function persistContact(): void {
    persistedAt = status.lastContactAt;
    store.meta.put(LINK_KEY, { lastContactAt: status.lastContactAt }).catch((err: unknown) => store.noteWriteFailure(err));
  }

  /** The answer's body once its signature is the site's; else counted, logged and thrown. */
  function verified(res: SiteResponse, what: string): Buffer {
    if (res.status !== 200) throw new Error(`${what}: ${res.url} answered ${res.status} ${res.body.toString('utf8').slice(0, 200)}`);
    const signature = res.headers[SIGNATURE_HEADER];
    if (!verifier!.verify(res.body, typeof signature === 'string' ? signature : undefined)) {
      status.refusedAnswers++;
      client.skip();
      log.error('site answer refused: not signed by the site\'s key', { central: res.url, what });
      throw new Error(`${what}: the answer of ${res.url} is not signed by the site`);
    }
    return res.body;
  }

  async function join(): Promise<void> {
    const token = deps.joinToken();
    if (!token) throw new Error('not joined to a site yet: set site.joinToken (or site.joinTokenFile)');
    try {
      const done = await joinSite({ store, replica, client, token, name: deps.name, now: now() });
      joined = done.joined;
      files.saveEdge(joined);
      verifier = done.verifier;
      needSnapshot = true;
      noteContact(done.central);
      log.info('joined the site', { siteId: joined.siteId, edgeId: joined.edgeId, central: done.central });
    } catch (err) {
      if (err instanceof JoinError && err.refused) status.phase = 'refused';
      throw err;
    }
  }

  async function loadSnapshot(): Promise<void> {
    status.phase = 'syncing';
    const res = await client.request('/api/site/snapshot', { headers: { [EDGE_HEADER]: joined!.credential }, timeoutMs: 120_000 });
    const snapshot = JSON.parse(verified(res, 'snapshot').toString('utf8')) as SiteSnapshot;
    noteContact(res.url);
    if (snapshot.siteId !== joined!.siteId) {
      status.refusedAnswers++;
      throw new Error(`snapshot of ${res.url} is of another site`);
    }
    try {
      const { changed } = await replica.loadSnapshot(snapshot);
      status.resyncs++;
      needSnapshot = false;
      log.info('site snapshot loaded', { central: res.url, epoch: snapshot.epoch, rev: snapshot.rev, records: snapshot.records.length, changed });
    } catch (err) {
      if (err instanceof ReplicaRefusal) {
        status.refusedAnswers++;
        client.skip();
        log.warn('site snapshot refused', { central: res.url, reason: err.reason, error: err.message });
      }
      throw err;
    }
  }

  async function poll(): Promise<void> {
    const s = replica.state()!;
    const query = new URLSearchParams({ epoch: s.epoch, since: String(s.rev), digest: s.digest, wait: String(deps.longPollSeconds) });
    const res = await client.request(`/api/site/changes?${query.toString()}`, { headers: { [EDGE_HEADER]: joined!.credential }, timeoutMs: (deps.longPollSeconds + 10) * 1000 });
    if (res.status === 401) {
      status.phase = 'refused';
      throw new Error(`${res.url} no longer knows this edge (removed from the site?)`);
    }
    const answer = JSON.parse(verified(res, 'changes').toString('utf8')) as ChangesAnswer;
    noteContact(res.url);
    status.phase = 'following';
    if (answer.resync || answer.epoch !== s.epoch) {
      needSnapshot = true;
      return;
    }
    if (answer.rev < s.rev) {
      // This central is behind the edge (its PostgreSQL link is slow): ask another.
      client.skip();
      await pause(500);
      return;
    }
    for (const row of answer.rows) {
      try {
        await replica.applyRow(row, answer.epoch);
        status.applied++;
      } catch (err) {
        if (!(err instanceof ReplicaRefusal)) throw err;
        if (err.reason !== 'rollback') needSnapshot = true;
        return;
      }
    }
    const after = replica.state()!;
    if (answer.rows.length === 0 && answer.rev === after.rev && answer.digest !== after.digest) needSnapshot = true;
  }

  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      wake = resolve;
      timer = setTimeout(resolve, ms);
    }).finally(() => {
      clearTimeout(timer);
      wake = undefined;
    });

  /** One step of the link: join, snapshot or one poll. */
  async function step(): Promise<void> {
    if (!joined) await join();
    if (needSnapshot || !replica.state()) await loadSnapshot();
    else await poll();
  }

  let loop: Promise<void> | undefined;
  async function run(): Promise<void> {
    let backoffMs = 250;
    let lastError = '';
    while (!stopped) {
      try {
        await step();
        backoffMs = 250;
        if (lastError) log.info('site link restored', { central: status.central });
        lastError = '';
        delete status.lastError;
      } catch (err) {
        if (stopped) break;
        const message = (err as Error).message;
        status.lastError = message;
        if (status.phase !== 'refused' && status.phase !== 'unjoined') status.phase = 'offline';
        if (message !== lastError) log.warn('site link: no answer from the centrals; deciding from the replica', { error: message });
        lastError = message;
        // Short: the link's return must be noticed within seconds (a refused edge waits longer).
        await pause(status.phase === 'refused' ? 30_000 : backoffMs);
        backoffMs = Math.min(2000, backoffMs * 2);
      }
    }
  }

  return {
    status: (): EdgeLinkStatus => ({ ...status }),
    joined: () => joined,
    /** Joins and loads the first snapshot if it can within `waitMs`; the loop goes on after. */
    async start(waitMs: number): Promise<void> {
      stopped = false;
      if (joined && replica.state()) status.phase = 'offline';
      if (!joined || !replica.state()) {
        const deadline = now() + waitMs;
        while (!stopped && now() < deadline && (!joined || !replica.state())) {
          try {
            await step();
          } catch (err) {
            status.lastError = (err as Error).message;
            if (status.phase === 'refused') break;
            await pause(500);
          }
        }
      }
      loop = run();
    },
    async stop(): Promise<void> {
      stopped = true;
      wake?.();
      client.abortAll();
      await loop;
      if (status.lastContactAt > persistedAt) persistContact();
      await store.flushed();
    },
  };
}
export type EdgeLink = ReturnType<typeof createEdgeLink>;
