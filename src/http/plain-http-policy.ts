// What the plain HTTP port serves to whom (docs/https.md). Clients in http.plainAllowedFrom
// (default: loopback) get everything, as before. Everybody else gets /health and /health/ready
// (probes), a redirect to HTTPS for the web UI's pages, and a 403 naming the HTTPS address for
// API calls, /metrics and WebSocket upgrades — decided from the request line and the address
// alone, before anything reads a credential, so a refused call is never a failed login. A
// request that came over TLS (the HTTPS port, or a TLS-terminating proxy when http.trustProxy
// is on and says X-Forwarded-Proto: https) is never affected.
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { TLSSocket } from 'node:tls';
import type { RequestHandler } from 'express';
import { inAddressRanges, parseAddressRanges } from '../config/address-ranges.js';
import { ForbiddenError } from '../errors/errors.js';

export interface PlainHttpPolicy {
  /** Express middleware, before the probes and the API. */
  middleware: RequestHandler;
  /** Whether an upgrade request may go on to the WebSocket endpoint; else it was answered 403. */
  admitUpgrade(req: IncomingMessage, socket: Duplex): boolean;
}

/** A host name or an IP literal as it may appear in a URL: anything else is not echoed in a Location. */
const URL_HOST = /^([A-Za-z0-9-]{1,63}\.)*[A-Za-z0-9-]{1,63}$|^\[[0-9A-Fa-f:.]{2,45}\]$/;

function firstHeaderValue(req: IncomingMessage, name: string): string | undefined {
  const raw = req.headers[name];
  const value = Array.isArray(raw) ? raw[0] : raw;
  return value?.split(',')[0]?.trim() || undefined;
}

export function createPlainHttpPolicy(deps: { allowedFrom: string[]; trustProxy: boolean; httpsPort: () => number }): PlainHttpPolicy {
  const allowed = parseAddressRanges(deps.allowedFrom);

  /** Over TLS, directly or (trusted proxy) as the proxy says: Express's req.protocol, for raw requests too. */
  function secure(req: IncomingMessage): boolean {
    if ((req.socket as TLSSocket).encrypted) return true;
    return deps.trustProxy && firstHeaderValue(req, 'x-forwarded-proto') === 'https';
  }

  /** The client's address as Express's req.ip sees it: behind a trusted proxy, the first X-Forwarded-For entry. */
  function clientAddress(req: IncomingMessage): string | undefined {
    return (deps.trustProxy && firstHeaderValue(req, 'x-forwarded-for')) || req.socket.remoteAddress;
  }

  function admitted(req: IncomingMessage): boolean {
    return secure(req) || inAddressRanges(allowed, clientAddress(req));
  }

  /** https://<the host the client asked for>:<HTTPS port>; the listener's address when the Host header is unusable. */
  function httpsOrigin(req: IncomingMessage): string {
    const asked = (req.headers.host ?? '').replace(/:\d*$/, '');
    const local = (req.socket.localAddress ?? '127.0.0.1').replace(/^::ffff:(?=\d+\.)/, '');
    const host = URL_HOST.test(asked) ? asked : local.includes(':') ? `[${local}]` : local;
    return `https://${host}:${deps.httpsPort()}`;
  }

  function refusal(req: IncomingMessage): string {
    return `plain HTTP is served only to the addresses of http.plainAllowedFrom: use ${httpsOrigin(req)}`;
  }

  return {
    middleware: (req, res, next) => {
      if (admitted(req)) return next();
      const path = req.path;
      if (path === '/health' || path.startsWith('/health/')) return next();
      const api = path === '/api' || path.startsWith('/api/') || path === '/metrics';
      if (!api && (req.method === 'GET' || req.method === 'HEAD')) {
        // The web UI: the browser follows to HTTPS. Not cached: a later plainAllowedFrom change takes effect at once.
        res.setHeader('Cache-Control', 'no-store');
        res.redirect(302, httpsOrigin(req) + req.originalUrl);
        return;
      }
      // Nothing is read from the request (body, Authorization): the error handler answers at once.
      next(new ForbiddenError(refusal(req)));
    },
    admitUpgrade(req, socket) {
      if (admitted(req)) return true;
      const body = JSON.stringify({ statusCode: 403, error: 'Forbidden', message: refusal(req) });
      socket.end(`HTTP/1.1 403 Forbidden\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
      return false;
    },
  };
}
