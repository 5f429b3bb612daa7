// The local web UI (docs/design.md §13): static files built by scripts/build-ui.ts into dist/ui,
// served from `/` on the HTTP and HTTPS ports with a strict Content-Security-Policy. The UI itself speaks
// only the public REST API (and /mqtt), so nothing here reads the store or a credential.
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { RequestHandler, Response } from 'express';
import { NotFoundError } from '../errors/errors.js';

/** Where `npm run build` writes the UI (dist/ui, next to dist/src). */
export const webUiDir = fileURLToPath(new URL('../../ui', import.meta.url));

/**
 * First path segments the UI's router owns (history routing): a reload or bookmark of
 * /users/42 gets index.html. Listed explicitly so that /api, /mqtt, /health or /metrics are
 * never shadowed by the UI. Keep in step with ui/src/routes.ts (the browser tests reload every page).
 */
export const webUiPages = ['signin', 'account', 'users', 'roles', 'permissions', 'devices', 'maintenance', 'mapping', 'rules', 'topics', 'services', 'audit', 'clients'];

/** No inline script or style, no eval, nothing from another origin, never framed. */
export const webUiContentSecurityPolicy = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self' ws: wss:",
  "font-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

const contentTypes: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.txt': 'text/plain; charset=utf-8',
};

interface UiFile {
  body: Buffer;
  /** Pre-compressed at build time (level 9), so the gateway spends no CPU on it. */
  gzip?: Buffer;
  type: string;
  etag: string;
}

function loadFile(path: string): UiFile {
  const body = readFileSync(path);
  const gzPath = `${path}.gz`;
  return {
    body,
    gzip: existsSync(gzPath) ? readFileSync(gzPath) : undefined,
    type: contentTypes[extname(path)] ?? 'application/octet-stream',
    etag: `W/"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`,
  };
}

/** index.html and every file of assets/, read once (a few hundred KiB; the build never changes under a running daemon). */
function loadUi(dir: string): { index: UiFile; assets: Map<string, UiFile> } | undefined {
  const indexPath = join(dir, 'index.html');
  if (!existsSync(indexPath)) return undefined;
  const assets = new Map<string, UiFile>();
  const assetDir = join(dir, 'assets');
  if (existsSync(assetDir)) {
    for (const name of readdirSync(assetDir)) {
      if (!name.endsWith('.gz')) assets.set(name, loadFile(join(assetDir, name)));
    }
  }
  return { index: loadFile(indexPath), assets };
}

function setSecurityHeaders(res: Response): void {
  res.setHeader('Content-Security-Policy', webUiContentSecurityPolicy);
  res.setHeader('X-Content-Type-Options', 'nosniff');
  // same-origin: /api/idp/login may send a failed SSO back to the page it started from.
  res.setHeader('Referrer-Policy', 'same-origin');
  res.setHeader('X-Frame-Options', 'DENY');
  res.setHeader('Cross-Origin-Opener-Policy', 'same-origin');
}

/**
 * GET/HEAD of `/`, of a UI page, or of `/assets/<name>`; everything else goes on to the API.
 * Hashed assets are cached for a year (their name changes with their content); index.html
 * is revalidated on every load (no-cache + ETag), so a new build is picked up at once.
 */
export function createWebUi(options: { dir?: string } = {}): RequestHandler {
  const dir = options.dir ?? webUiDir;
  let ui: ReturnType<typeof loadUi> | null = null;
  const pages = new Set(webUiPages);

  return (req, res, next) => {
    if (req.method !== 'GET' && req.method !== 'HEAD') return next();
    const path = req.path;
    const first = path.split('/')[1] ?? '';
    const isAsset = first === 'assets';
    if (path !== '/' && !isAsset && !pages.has(first)) return next();
    ui ??= loadUi(dir);
    if (!ui) return next(new NotFoundError('the web UI is not built: run npm run build (it writes dist/ui)'));

    let file: UiFile | undefined;
    if (isAsset) {
      const name = path.slice('/assets/'.length);
      file = name.includes('/') ? undefined : ui.assets.get(name);
      if (!file) return next(new NotFoundError(`no UI asset ${path}`));
      res.setHeader('Cache-Control', 'public, max-age=31536000, immutable');
    } else {
      file = ui.index;
      res.setHeader('Cache-Control', 'no-cache');
    }
    setSecurityHeaders(res);
    res.setHeader('Content-Type', file.type);
    res.setHeader('Vary', 'Accept-Encoding');
    res.setHeader('ETag', file.etag);
    if (req.fresh) return void res.status(304).end();
    const gzip = file.gzip && req.acceptsEncodings('gzip', 'identity') === 'gzip';
    if (gzip) res.setHeader('Content-Encoding', 'gzip');
    const body = gzip ? file.gzip! : file.body;
    res.setHeader('Content-Length', String(body.length));
    res.status(200).end(req.method === 'HEAD' ? undefined : body);
  };
}
