import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Express } from 'express';
import type { Part } from '../daemon.js';

/**
 * The HTTP listener as a daemon part. stop() refuses new connections, lets in-flight
 * requests finish and closes idle keep-alive sockets; after `shutdownTimeoutMs` it cuts
 * whatever is left so a stop is bounded.
 */
export function createHttpServerPart(deps: { app: Express; host: string; port: number; shutdownTimeoutMs: number }) {
  // requestTimeout bounds a whole request: long enough for a restore upload over a slow link;
  // headersTimeout is the guard against clients that trickle headers.
  const server: Server = createServer({ requestTimeout: 600_000, headersTimeout: 20_000, keepAliveTimeout: 5_000 }, deps.app);
  let port = 0;
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
        const timer = setTimeout(() => server.closeAllConnections(), deps.shutdownTimeoutMs);
        timer.unref();
        // Keep-alive sockets become idle as their last request finishes: close them then,
        // instead of waiting for the keep-alive timeout.
        const sweep = setInterval(() => server.closeIdleConnections(), 50);
        server.close(() => {
          clearTimeout(timer);
          clearInterval(sweep);
          resolve();
        });
        server.closeIdleConnections();
      }),
  };
  return part;
}
