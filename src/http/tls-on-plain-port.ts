// TLS on the plain port (docs/https.md). Every HTTPS answer carries Strict-Transport-Security,
// and HSTS holds for a host name on every port: a browser that has been on https://gw:8443 turns
// http://gw:8080/ into https://gw:8080/. So the plain port looks at the first byte of each
// connection: a TLS handshake record (0x16; an HTTP request starts with a method's letter) goes
// to the HTTPS server — its certificate, reloads, protocol settings, HSTS, upgrades — and
// anything else to the plain HTTP server as before.
import type { Server as HttpServer } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import type { Socket } from 'node:net';

/** The content type of a TLS record carrying a handshake message: the first byte of a ClientHello. */
const TLS_HANDSHAKE_RECORD = 0x16;

export interface TlsOnPlainPort {
  /** Closes the connections that have not sent their first byte yet. */
  closePending(): void;
}

/**
 * Routes each connection of `plain` by its first byte. `plain` keeps listening itself (no
 * net.Server in front of it): only a listening http.Server enforces headersTimeout and
 * requestTimeout and can close its connections at a stop. Its own connection listener is taken
 * out and called for the connections that speak HTTP; TLS ones are emitted as 'connection' on
 * `tls` (documented: any socket may be injected). A client that sends nothing within
 * `firstByteTimeoutMs` is closed, as the HTTP server closes one that sends no headers.
 */
export function routeTlsOnPlainPort(plain: HttpServer, tls: HttpsServer, deps: { firstByteTimeoutMs: number }): TlsOnPlainPort {
  const own = plain.listeners('connection');
  if (own.length !== 1) throw new Error(`expected the HTTP server's own connection listener alone, found ${own.length}`);
  const serveHttp = own[0] as (socket: Socket) => void;
  plain.removeListener('connection', serveHttp);
  const pending = new Set<Socket>();

  plain.on('connection', (socket: Socket) => {
    pending.add(socket);
    const timer = setTimeout(() => socket.destroy(), deps.firstByteTimeoutMs);
    socket.once('close', () => {
      pending.delete(socket);
      clearTimeout(timer);
    });
    // Resets before the first byte concern nobody; once routed, the HTTP server reports on its
    // own listener and a TLS socket on the TLS one (this one stays: the raw socket must never
    // throw an unhandled 'error').
    socket.on('error', () => {});
    const hangUp = () => socket.destroy();
    // allowHalfOpen (the HTTP server's): a client that ends without a byte would otherwise linger.
    socket.once('end', hangUp);
    socket.once('data', (chunk: Buffer) => {
      clearTimeout(timer);
      pending.delete(socket);
      socket.off('end', hangUp);
      // Paused and put back: whichever server takes the socket reads the chunk first.
      socket.pause();
      socket.unshift(chunk);
      if (chunk[0] === TLS_HANDSHAKE_RECORD) {
        // The TLS socket takes over the connection and reads what is buffered itself.
        tls.emit('connection', socket);
      } else {
        serveHttp.call(plain, socket);
        socket.resume();
      }
    });
  });

  return { closePending: () => pending.forEach((socket) => socket.destroy()) };
}
