// What a central serves the site's edges (docs/api.md "The site protocol"): the one-time join,
// a signed snapshot of the site's records, and the changes since a revision as a long poll, all
// from this central's replica — so an edge keeps following while PostgreSQL fails over, as long
// as one central answers. Edges authenticate with the credential they got when they joined.
import { createHash, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { BadRequestError, NotFoundError, ServiceUnavailableError, UnauthorizedError } from '../errors/errors.js';
import type { Logger } from '../log/index.js';
import type { SiteIdentityWriter } from './central-writer.js';
import type { SiteReplica } from './replica.js';
import type { SiteSigner } from './signing.js';
import type { LogRow } from './site-records.js';

export const EDGE_HEADER = 'x-gatewayd-site-edge';
const TOKEN_PREFIX = 'gws1';
const MAX_ROWS = 500;

export interface JoinDoc {
  id: string;
  secretHash: string;
  expiresAt: string;
  createdAt: string;
  createdBy: string;
  usedAt?: string;
  edgeId?: string;
}

export interface EdgeDoc {
  id: string;
  name: string;
  secretHash: string;
  joinedAt: string;
}

/** What the centrals answer an edge's "changes since": signed as one body. */
export interface ChangesAnswer {
  epoch: string;
  rev: number;
  digest: string;
  rows: LogRow[];
  /** Set instead of rows: the edge needs a snapshot (another epoch, or rows this central no longer keeps). */
  resync?: 'epoch' | 'gap';
}

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

function sameHash(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** The parts of a join token: `gws1.<join id>.<secret>.<fingerprint of the site key>`. */
export function parseJoinToken(token: string): { id: string; secret: string; fingerprint: string } {
  const parts = token.trim().split('.');
  if (parts.length !== 4 || parts[0] !== TOKEN_PREFIX || !/^[0-9a-f-]{36}$/.test(parts[1]!) || !/^[A-Za-z0-9_-]{43}$/.test(parts[2]!) || !/^[A-Za-z0-9_-]{43}$/.test(parts[3]!)) {
    throw new BadRequestError('not a join token of a site');
  }
  return { id: parts[1]!, secret: parts[2]!, fingerprint: parts[3]! };
}

export function createSiteFeed(deps: { replica: SiteReplica; identity: SiteIdentityWriter; signer: () => SiteSigner | undefined; mfaKeyHex: () => string | undefined; log: Logger; now?: () => number }) {
  const { replica, identity, log } = deps;
  const now = deps.now ?? Date.now;
  /** What each edge said of itself at its last poll (in memory: a status page, not a record). */
  const seen = new Map<string, { at: number; epoch: string; rev: number; digest: string }>();
  /** The long polls waiting now (answered at once when the daemon stops). */
  const waiting = new Set<() => void>();
  let stopping = false;

  function signerOrThrow(): SiteSigner {
    const signer = deps.signer();
    if (!signer) throw new ServiceUnavailableError('this central has not reached the site yet', 5);
    return signer;
  }

  function edgeOf(header: string | undefined): EdgeDoc {
    const [id, secret] = (header ?? '').split('.', 2);
    const edge = id && secret ? (replica.doc('edge', id) as EdgeDoc | undefined) : undefined;
    // The same work whether the edge exists or not.
    const ok = sameHash(edge?.secretHash ?? '0'.repeat(64), sha256(secret ?? ''));
    if (!edge || !ok) throw new UnauthorizedError('unknown edge credential');
    return edge;
  }

  function signed(payload: unknown): { body: Buffer; signature: string } {
    const body = Buffer.from(JSON.stringify(payload));
    return { body, signature: signerOrThrow().sign(body) };
  }

  function answerOf(epoch: string, since: number): ChangesAnswer | undefined {
    const s = replica.state()!;
    if (s.epoch !== epoch) return { epoch: s.epoch, rev: s.rev, digest: s.digest, rows: [], resync: 'epoch' };
    if (since >= s.rev) return undefined;
    const rows = replica.rowsSince(since, MAX_ROWS);
    if (rows === 'gap') return { epoch: s.epoch, rev: s.rev, digest: s.digest, rows: [], resync: 'gap' };
    return { epoch: s.epoch, rev: s.rev, digest: s.digest, rows };
  }

  return {
    async createJoinToken(input: { expiresInHours: number; createdBy: string }): Promise<{ token: string; expiresAt: string }> {
      const signer = signerOrThrow();
      const id = randomUUID();
      const secret = randomBytes(32).toString('base64url');
      const expiresAt = new Date(now() + input.expiresInHours * 3_600_000).toISOString();
      const doc: JoinDoc = { id, secretHash: sha256(secret), expiresAt, createdAt: new Date(now()).toISOString(), createdBy: input.createdBy };
      await identity.transactionWithDocs((docs) => docs.put(['join', id], doc as unknown as Record<string, unknown>));
      log.audit('site join token created', { joinId: id, expiresAt });
      return { token: [TOKEN_PREFIX, id, secret, signer.fingerprint].join('.'), expiresAt };
    },

    /** An edge's one-time join: its credential, the site's public key and MFA key. */
    async join(input: { token: string; name: string }): Promise<{ siteId: string; edgeId: string; secret: string; publicKey: string; mfaKey: string }> {
      const { id, secret } = parseJoinToken(input.token);
      const signer = signerOrThrow();
      const invalid = () => new UnauthorizedError('the join token is unknown, used or expired');
      const check = (join: JoinDoc | undefined): JoinDoc => {
        const ok = sameHash(join?.secretHash ?? '0'.repeat(64), sha256(secret));
        if (!join || !ok || join.usedAt || Date.parse(join.expiresAt) <= now()) throw invalid();
        return join;
      };
      check(replica.doc('join', id) as JoinDoc | undefined);
      const edgeId = randomUUID();
      const edgeSecret = randomBytes(32).toString('base64url');
      const at = new Date(now()).toISOString();
      await identity.transactionWithDocs((docs) => {
        // Checked again inside the change: two edges presenting one token, one wins.
        const join = check(docs.get(['join', id]) as unknown as JoinDoc | undefined);
        docs.put(['join', id], { ...join, usedAt: at, edgeId } as unknown as Record<string, unknown>);
        docs.put(['edge', edgeId], { id: edgeId, name: input.name, secretHash: sha256(edgeSecret), joinedAt: at } satisfies EdgeDoc as unknown as Record<string, unknown>);
      });
      log.audit('site edge joined', { edgeId, name: input.name, joinId: id });
      return { siteId: replica.state()!.siteId, edgeId, secret: `${edgeId}.${edgeSecret}`, publicKey: signer.publicKeyPem, mfaKey: deps.mfaKeyHex() ?? '' };
    },

    edgeOf,

    snapshot(edge: EdgeDoc): { body: Buffer; signature: string } {
      const snapshot = replica.exportSnapshot();
      if (!snapshot) throw new ServiceUnavailableError('this central has no replica of the site yet', 5);
      log.info('site snapshot served', { edgeId: edge.id, rev: snapshot.rev, records: snapshot.records.length });
      return signed(snapshot);
    },

    /**
     * The rows after `since` of `epoch`, at once when there are some; else waits up to `waitMs`
     * for the next change. `edgeState`: where the edge stands (the status page's figures).
     */
    async changes(edge: EdgeDoc, q: { epoch: string; since: number; digest: string; waitMs: number }, signal: AbortSignal): Promise<{ body: Buffer; signature: string }> {
      if (!replica.state()) throw new ServiceUnavailableError('this central has no replica of the site yet', 5);
      seen.set(edge.id, { at: now(), epoch: q.epoch, rev: q.since, digest: q.digest });
      let answer = answerOf(q.epoch, q.since);
      if (!answer && q.waitMs > 0 && !signal.aborted && !stopping) {
        await new Promise<void>((resolve) => {
          const done = () => {
            clearTimeout(timer);
            off();
            signal.removeEventListener('abort', done);
            waiting.delete(done);
            resolve();
          };
          const timer = setTimeout(done, q.waitMs);
          const off = replica.onApplied(done);
          signal.addEventListener('abort', done, { once: true });
          waiting.add(done);
        });
        answer = answerOf(q.epoch, q.since);
      }
      const s = replica.state()!;
      return signed(answer ?? { epoch: s.epoch, rev: s.rev, digest: s.digest, rows: [] });
    },

    /** The daemon stops: waiting long polls are answered now (the edges ask the other central), none waits again. */
    endWaits(): void {
      stopping = true;
      for (const done of [...waiting]) done();
    },

    edges() {
      const s = replica.state();
      return (replica.docsOf('edge') as unknown as EdgeDoc[]).map((e) => {
        const last = seen.get(e.id);
        return {
          id: e.id,
          name: e.name,
          joinedAt: e.joinedAt,
          ...(last
            ? { lastSeenAt: new Date(last.at).toISOString(), revision: last.rev, inStep: !!s && last.epoch === s.epoch && last.rev === s.rev && last.digest === s.digest }
            : {}),
        };
      });
    },

    async removeEdge(id: string): Promise<void> {
      if (!replica.doc('edge', id)) throw new NotFoundError(`edge ${id} not found`);
      await identity.transactionWithDocs((docs) => docs.remove(['edge', id]));
      seen.delete(id);
      log.audit('site edge removed', { edgeId: id });
    },
  };
}
export type SiteFeed = ReturnType<typeof createSiteFeed>;
