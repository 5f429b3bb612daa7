import { createServer, type IncomingMessage, type Server } from 'node:http';
import net, { type AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Express } from 'express';
import type { Part } from '../daemon.js';

/** How long idle keep-alive sockets stay open after a stop began. */
const IDLE_GRACE_MS = 250;

/**
 * requestTimeout bounds a whole request: long enough for a restore upload over a slow link;
 * headersTimeout is the guard against clients that trickle headers. The same for the plain and
 * the TLS listener.
 */
export const HTTP_SERVER_TIMEOUTS = { requestTimeout: 600_000, headersTimeout: 20_000, keepAliveTimeout: 5_000 } as const;

/**
 * The plain HTTP listener as a daemon part (see listenerPart). With `admitUpgrade`, WebSocket
 * upgrades reach `upgrades` (where the broker attaches its /mqtt endpoint) only once admitted:
 * a refused one never gets as far as a CONNECT packet and its credentials.
 */
export function createHttpServerPart(deps: { app: Express; host: string; port: number; shutdownTimeoutMs: number; admitUpgrade?: (req: IncomingMessage, socket: Duplex) => boolean }) {
  const server = createServer(HTTP_SERVER_TIMEOUTS, deps.app);
  let upgrades = server;
  if (deps.admitUpgrade) {
    const admit = deps.admitUpgrade;
    // Never listens: it only carries the admitted upgrades to their listeners.
    upgrades = createServer();
    server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      if (!admit(req, socket)) return;
      if (upgrades.listenerCount('upgrade') === 0) socket.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
      else upgrades.emit('upgrade', req, socket, head);
    });
  }
  return { ...listenerPart('http', server, deps), upgrades };
}

/**
 * A listening HTTP(S) server as a daemon part. stop() refuses new connections, answers what
 * arrives on open ones with Connection: close, closes idle keep-alive sockets after a short grace;
 * after `shutdownTimeoutMs` it cuts whatever is left so a stop is bounded. `beforeListen` and
 * `afterClose` let the TLS listener load and stop watching its certificate.
 */
export function listenerPart<S extends Server>(
  name: string,
  server: S,
  deps: { host: string; port: number; shutdownTimeoutMs: number; beforeListen?: () => Promise<void>; afterClose?: () => void },
) {
  let port = 0;
  let closing = false;
  // While stopping, every answer says Connection: close, so a keep-alive client opens no new
  // request on a socket that is about to close (before the app: its handlers may answer at once).
  server.prependListener('request', (_req, res) => {
    if (closing) res.setHeader('Connection', 'close');
  });
  const part: Part & { server: S; port: () => number } = {
    name,
    server,
    port: () => port,
    start: async () => {
      await deps.beforeListen?.();
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(deps.port, deps.host, () => {
          server.off('error', reject);
          port = (server.address() as AddressInfo).port;
          resolve();
        });
      });
    },
    stop: () =>
      new Promise<void>((resolve) => {
        if (!server.listening) {
          deps.afterClose?.();
          return resolve();
        }
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
          deps.afterClose?.();
          resolve();
        });
      }),
  };
  return part;
}
