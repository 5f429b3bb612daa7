import type { Request, Response } from 'express';
import { BadRequestError } from '../../errors/errors.js';
import type { IdpService, IdpRequestContext } from '../../idp/index.js';
import type { RouteModule } from '../create-http-app.js';

/** Binds a started login to the browser; sent back only to the callback path. */
export const IDP_STATE_COOKIE = 'gatewayd_idp_state';
const CALLBACK_PATH = '/api/idp/redirect';
const STATE_COOKIE_SECONDS = 600;

/** The browser's view of this gateway: protocol and Host (X-Forwarded-* when trust proxy is on). */
function contextOf(req: Request, httpsPort: number): IdpRequestContext {
  const origin = `${req.protocol}://${req.host}`;
  let secureOrigin = origin;
  if (req.protocol !== 'https') {
    try {
      secureOrigin = new URL(`https://${req.hostname}:${httpsPort}`).origin;
    } catch {
      throw new BadRequestError('the Host header does not name a host');
    }
  }
  return { origin, secureOrigin, referer: req.get('referer'), stateCookie: cookieOf(req, IDP_STATE_COOKIE) };
}

function cookieOf(req: Request, name: string): string | undefined {
  for (const part of (req.get('cookie') ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/**
 * The state cookie: HttpOnly, SameSite=Lax (sent on the provider's top-level redirect back),
 * only to the callback path, Secure when the callback is https (the default) or the request is.
 * `value` undefined clears it.
 */
function setStateCookie(req: Request, res: Response, value: string | undefined, secureCallback = false): void {
  const attributes = [`Path=${CALLBACK_PATH}`, 'HttpOnly', 'SameSite=Lax', `Max-Age=${value === undefined ? 0 : STATE_COOKIE_SECONDS}`];
  if (secureCallback || req.protocol === 'https') attributes.push('Secure');
  res.append('Set-Cookie', `${IDP_STATE_COOKIE}=${value ?? ''}; ${attributes.join('; ')}`);
}

/** A redirect that no cache keeps and that leaks nothing in a Referer. */
function redirect(res: Response, location: string): void {
  res.setHeader('Cache-Control', 'no-store');
  res.setHeader('Referrer-Policy', 'no-referrer');
  res.status(302).location(location).end();
}

/**
 * GET /api/idp/login and GET /api/idp/redirect (public). Disabled idp: 501 JSON. Every other
 * failure is a 302 to the admin UI (or, for login, a Referer on this gateway or the admin UI)
 * with `#error=<message>`; success of the callback is a 302 to the admin UI with
 * `#token=<token>&expiresAt=<ISO time>` (a fragment: never sent to a server, never logged).
 */
export function idpRoutes(deps: { idp: IdpService; httpsPort: () => number }): RouteModule {
  const { idp } = deps;
  return (r) => {
    r.get('/api/idp/login', async (req, res) => {
      const start = await idp.beginLogin(contextOf(req, deps.httpsPort()));
      if (start.state) setStateCookie(req, res, start.state, start.secureCallback);
      redirect(res, start.location);
    });
    r.get(CALLBACK_PATH, async (req, res) => {
      const ctx = contextOf(req, deps.httpsPort());
      const location = await idp.completeLogin(ctx, req.query as Record<string, unknown>);
      // This browser's login is used up (a stray callback with another state leaves it be).
      if (ctx.stateCookie !== undefined && ctx.stateCookie === req.query.state) setStateCookie(req, res, undefined);
      redirect(res, location);
    });
  };
}
