import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import net, { type AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Express } from 'express';
import type { Part } from '../daemon.js';
import { routeTlsOnPlainPort } from './tls-on-plain-port.js';

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
 * a refused one never gets as far as a CONNECT packet and its credentials. With `tls` (the HTTPS
 * listener), a connection that opens with a TLS handshake is served by it (tls-on-plain-port.ts);
 * such connections belong to the HTTPS server, so a stop of this part stops both listeners.
 */
export function createHttpServerPart(deps: {
  app: Express;
  host: string;
  port: number;
  shutdownTimeoutMs: number;
  admitUpgrade?: (req: IncomingMessage, socket: Duplex) => boolean;
  tls?: ListenerPart<HttpsServer>;
  /** How long a new connection may stay silent (default: headersTimeout, as for a silent HTTP client). */
  firstByteTimeoutMs?: number;
}) {
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
  if (!deps.tls) return { ...listenerPart('http', server, deps), upgrades };
  const tls = deps.tls;
  const routing = routeTlsOnPlainPort(server, tls.server, { firstByteTimeoutMs: deps.firstByteTimeoutMs ?? HTTP_SERVER_TIMEOUTS.headersTimeout });
  // The HTTPS listener's own stop, finding none of this port's TLS connections among those it
  // accepted, may be over before its grace: this one closes them when idle, with its own.
  const closeIdle = () => {
    routing.closePending();
    tls.closeIdle();
  };
  const part = listenerPart('http', server, { ...deps, closeIdle });
  return { ...part, upgrades, stop: async () => void (await Promise.all([part.stop(), tls.stop()])) };
}

export type ListenerPart<S extends Server> = Part & {
  server: S;
  port: () => number;
  /** Closes the idle keep-alive connections and the upgraded (WebSocket) ones: what a stop closes after its grace. */
  closeIdle: () => void;
};

const CLIENT_ERRORS: Record<number, string> = { 400: 'Bad Request', 408: 'Request Timeout', 431: 'Request Header Fields Too Large' };

/**
 * What Node's HTTP parser refuses before the app sees a request (a request line and headers over
 * 16 KiB: 431, a malformed request: 400, headers too slow: 408) is answered as Node would, but
 * with the contract's error body instead of none (found by the REST fuzz pass: a 70,000-character
 * query got an empty 431).
 */
function answerClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  const response = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (err.code === 'ECONNRESET' || !socket.writable || response?.headersSent) {
    socket.destroy();
    return;
  }
  const statusCode = err.code === 'HPE_HEADER_OVERFLOW' ? 431 : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400;
  const error = CLIENT_ERRORS[statusCode]!;
  const message = statusCode === 431 ? 'request line and headers larger than 16 KiB' : statusCode === 408 ? 'request headers did not arrive in time' : 'malformed HTTP request';
  const body = JSON.stringify({ statusCode, error, message });
  socket.end(`HTTP/1.1 ${statusCode} ${error}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
}

/**
 * A listening HTTP(S) server as a daemon part. stop() refuses new connections, answers what
 * arrives on open ones with Connection: close, closes idle keep-alive sockets and upgraded ones
 * (and `closeIdle`, the caller's) after a short grace; after `shutdownTimeoutMs` it cuts every
 * connection still open, so a stop is bounded. A second stop() waits for the first.
 * `beforeListen` and `afterClose` let the TLS listener load and stop watching its certificate.
 */
export function listenerPart<S extends Server>(
  name: string,
  server: S,
  deps: { host: string; port: number; shutdownTimeoutMs: number; beforeListen?: () => Promise<void>; afterClose?: () => void; closeIdle?: () => void },
) {
  let port = 0;
  let closing = false;
  let stopping: Promise<void> | undefined;
  // While stopping, every answer says Connection: close, so a keep-alive client opens no new
  // request on a socket that is about to close (before the app: its handlers may answer at once).
  server.prependListener('request', (_req, res) => {
    if (closing) res.setHeader('Connection', 'close');
  });
  server.on('clientError', answerClientError);
  // The HTTP server's closeAllConnections knows only the connections it still parses: not an
  // upgraded one (MQTT over WebSocket), nor one in its TLS handshake or before its first byte.
  const accepted = trackedSockets();
  server.on('connection', accepted.add);
  // Upgraded connections are closed with the idle ones: the broker would close them at its own
  // stop anyway, and until then they would hold this one.
  const upgraded = trackedSockets();
  const trackUpgrade = (_req: IncomingMessage, socket: Duplex) => upgraded.add(socket);
  const closeIdle = () => {
    server.closeIdleConnections();
    upgraded.destroyAll();
    deps.closeIdle?.();
  };
  const part: ListenerPart<S> = {
    name,
    server,
    port: () => port,
    closeIdle,
    start: async () => {
      stopping = undefined;
      // Only beside an upgrade listener (the broker's, attached before the listeners start):
      // without one, Node hands an upgrade request to the app as an ordinary request.
      if (server.listenerCount('upgrade') > 0 && !server.listeners('upgrade').includes(trackUpgrade)) server.prependListener('upgrade', trackUpgrade);
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
      (stopping ??= new Promise<void>((resolve) => {
        if (!server.listening) {
          deps.afterClose?.();
          return resolve();
        }
        closing = true;
        const timer = setTimeout(() => {
          server.closeAllConnections();
          accepted.destroyAll();
        }, deps.shutdownTimeoutMs);
        timer.unref();
        // Idle keep-alive sockets get a short grace before they are closed: a request already
        // on its way on one of them is answered (with Connection: close) instead of reset.
        const grace = setTimeout(closeIdle, IDLE_GRACE_MS);
        grace.unref();
        // net.Server's close, not http.Server's: since Node 19 the latter also closes idle
        // connections at once, which resets a request that is arriving on one.
        net.Server.prototype.close.call(server, () => {
          clearTimeout(timer);
          clearTimeout(grace);
          deps.afterClose?.();
          resolve();
        });
      })),
  };
  return part;
}

/** A set of open sockets; a socket leaves it when it closes. */
function trackedSockets() {
  const open = new Set<Duplex>();
  return {
    add: (socket: Duplex) => {
      open.add(socket);
      socket.once('close', () => open.delete(socket));
    },
    destroyAll: () => open.forEach((socket) => socket.destroy()),
  };
}
