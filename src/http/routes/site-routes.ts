// The site's routes (src/site, docs/api.md "The site protocol"): thin; the site part decides.
// Edges' calls carry no user credential (public operations): a join token, then the edge's own
// credential, checked by the feed.
import { NotImplementedError } from '../../errors/errors.js';
import { EDGE_HEADER, SIGNATURE_HEADER, type Site } from '../../site/index.js';
import { principalOf, type RouteModule } from '../create-http-app.js';

export function siteRoutes(deps: { site: Site | undefined }): RouteModule {
  const { site } = deps;
  const feedOrThrow = () => {
    if (!site?.feed) throw new NotImplementedError(site ? 'this gateway is an edge of its site: ask a central' : 'this gateway is not part of a site (site.role)');
    return site.feed;
  };
  return (r) => {
    r.get('/api/site', (req, res) => {
      if (!site) throw new NotImplementedError('this gateway is not part of a site (site.role)');
      const status = site.status();
      res.json(req.query.verify === 'true' ? { ...status, recomputedDigest: site.recomputeDigest() } : status);
    });
    r.post('/api/site/join-tokens', async (req, res) => {
      const feed = feedOrThrow();
      const hours = (req.body as { expiresInHours?: number } | undefined)?.expiresInHours ?? 24;
      res.status(201).json(await feed.createJoinToken({ expiresInHours: hours, createdBy: principalOf(res).username }));
    });
    r.delete('/api/site/edges/:id', async (req, res) => {
      await feedOrThrow().removeEdge(req.params.id!);
      res.status(204).end();
    });
    r.post('/api/site/join', async (req, res) => {
      const feed = feedOrThrow();
      res.status(201).json(await feed.join(req.body as { token: string; name: string }));
    });
    r.get('/api/site/snapshot', (req, res) => {
      const feed = feedOrThrow();
      const { body, signature } = feed.snapshot(feed.edgeOf(req.get(EDGE_HEADER)));
      res.setHeader(SIGNATURE_HEADER, signature);
      res.setHeader('Cache-Control', 'no-store');
      res.type('application/json').send(body);
    });
    r.get('/api/site/changes', async (req, res) => {
      const feed = feedOrThrow();
      const edge = feed.edgeOf(req.get(EDGE_HEADER));
      const q = req.query as Record<string, string>;
      // The long poll ends with the client's connection (an edge that went away).
      const abort = new AbortController();
      res.on('close', () => abort.abort());
      const { body, signature } = await feed.changes(edge, { epoch: q.epoch!, since: Number(q.since), digest: q.digest!, waitMs: Number(q.wait ?? 0) * 1000 }, abort.signal);
      res.setHeader(SIGNATURE_HEADER, signature);
      res.setHeader('Cache-Control', 'no-store');
      res.type('application/json').send(body);
    });
  };
}
