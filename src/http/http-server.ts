import { createServer, type Server } from 'node:http';
import net, { type AddressInfo } from 'node:net';
import type { Express } from 'express';
import type { Part } from '../daemon.js';

/**
 * The HTTP listener as a daemon part. stop() refuses new connections, answers what arrives on
 * open ones with Connection: close, closes idle keep-alive sockets after a short grace; after
 * `shutdownTimeoutMs` it cuts whatever is left so a stop is bounded.
 */
/** How long idle keep-alive sockets stay open after a stop began. */
const IDLE_GRACE_MS = 250;

export function createHttpServerPart(deps: { app: Express; host: string; port: number; shutdownTimeoutMs: number }) {
  // requestTimeout bounds a whole request: long enough for a restore upload over a slow link;
  // headersTimeout is the guard against clients that trickle headers.
  const server: Server = createServer({ requestTimeout: 600_000, headersTimeout: 20_000, keepAliveTimeout: 5_000 }, deps.app);
  let port = 0;
  let closing = false;
  // While stopping, every answer says Connection: close, so a keep-alive client opens no new
  // request on a socket that is about to close (before the app: its handlers may answer at once).
  server.prependListener('request', (_req, res) => {
    if (closing) res.setHeader('Connection', 'close');
  });
  const part: Part & { server: Server; port: () => number } = {
    name: 'http',
    server,
    port: () => port,
    start: () =>
      new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(deps.port, deps.host, () => {
          server.off('error', reject);
          port = (server.address() as AddressInfo).port;
          resolve();
        });
      }),
    stop: () =>
      new Promise<void>((resolve) => {
        if (!server.listening) return resolve();
        closing = true;
        const timer = setTimeout(() => server.closeAllConnections(), deps.shutdownTimeoutMs);
        timer.unref();
        // Idle keep-alive sockets get a short grace before they are closed: a request already
        // on its way on one of them is answered (with Connection: close) instead of reset.
        const grace = setTimeout(() => server.closeIdleConnections(), IDLE_GRACE_MS);
        grace.unref();
        // net.Server's close, not http.Server's: since Node 19 the latter also closes idle
        // connections at once, which resets a request that is arriving on one.
        net.Server.prototype.close.call(server, () => {
          clearTimeout(timer);
          clearTimeout(grace);
          resolve();
        });
      }),
  };
  return part;
}
