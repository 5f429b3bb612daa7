// The broker's listeners: TCP, TLS (client certificates verified against tls.ca(), re-read by
// refreshTls) and MQTT over WebSocket on the HTTP server's upgrade at config.websocketPath.
import type http from 'node:http';
import { createRequire } from 'node:module';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import tls from 'node:tls';
import type { WebSocket, WebSocketServer } from 'ws';
import type { BrokerContext } from './broker-context.js';
import type { Connections } from './connections.js';
import { listen, pathOf } from './listeners.js';
import { mqttStreamOf } from './websocket-stream.js';

export class Transports {
  private readonly upgradeTargets: Array<{ server: http.Server; listener: (...args: any[]) => void }> = [];
  private tcpServer: net.Server | undefined;
  private tlsServer: tls.Server | undefined;
  private wss: WebSocketServer | undefined;

  constructor(
    private readonly ctx: BrokerContext,
    private readonly connections: Connections,
  ) {}

  /** Creates the TCP and TLS servers and listens; resolves the bound ports. */
  async listen(): Promise<{ port: number; tlsPort: number }> {
    const { ctx, connections } = this;
    // noDelay here sets it on each accepted socket (a second setNoDelay would be a second syscall).
    const tcpServer = net.createServer({ noDelay: true }, (socket) => {
      connections.track(socket);
      connections.accept(socket, 'tcp', socket.remoteAddress ?? '');
    });
    const tlsServer = tls.createServer(
      {
        ...this.secureContextOptions(),
        requestCert: true,
        // Password clients without a certificate must still connect; a presented certificate
        // is only used when it verified (socket.authorized).
        rejectUnauthorized: false,
        handshakeTimeout: ctx.cfg.connectTimeoutMs,
        minVersion: 'TLSv1.2',
      },
      (socket) => {
        socket.setNoDelay(true);
        connections.accept(socket, 'tls', socket.remoteAddress ?? '');
      },
    );
    tlsServer.on('connection', (socket: net.Socket) => {
      socket.setNoDelay(true);
      connections.track(socket);
    });
    tlsServer.on('tlsClientError', (err, socket) => {
      ctx.log.debug('mqtt tls handshake failed', { remote: socket.remoteAddress, error: err.message });
    });
    this.tcpServer = tcpServer;
    this.tlsServer = tlsServer;
    const port = await listen(tcpServer, ctx.cfg.port, ctx.options.host);
    const tlsPort = await listen(tlsServer, ctx.cfg.tlsPort, ctx.options.host);
    return { port, tlsPort };
  }

  private secureContextOptions(): tls.SecureContextOptions {
    // An explicit (possibly empty) CA list: the system roots must never vouch for a device.
    const { tls: material } = this.ctx.options;
    return { key: material.key, cert: material.cert, ca: material.ca() };
  }

  refreshTls(): void {
    if (!this.tlsServer) return; // listen() reads ca() itself
    try {
      this.tlsServer.setSecureContext(this.secureContextOptions());
      this.ctx.log.info('mqtt tls trusted certificates reloaded');
    } catch (err) {
      // Keep serving with the previous context rather than failing the caller's request.
      this.ctx.log.error('mqtt tls reload failed, previous trusted certificates stay in use', { error: (err as Error).message });
    }
  }

  handleUpgrade(httpServer: http.Server): void {
    if (this.upgradeTargets.some((t) => t.server === httpServer)) return; // already attached
    const { ctx } = this;
    const path = ctx.cfg.websocketPath;
    const listener = (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
      if (pathOf(req.url) !== path) return; // not ours: left to other upgrade listeners
      const wss = this.websocketServer();
      if (!ctx.aedes || ctx.stopping || !wss) {
        socket.end('HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
        return;
      }
      wss.handleUpgrade(req, socket, head, (ws: WebSocket) => {
        if (!ctx.aedes || ctx.stopping) {
          ws.terminate();
          return;
        }
        const stream = mqttStreamOf(ws);
        stream.on('error', () => {}); // reported through the Aedes client
        this.connections.accept(stream, 'ws', req.socket.remoteAddress ?? '', req);
      });
    };
    httpServer.on('upgrade', listener);
    this.upgradeTargets.push({ server: httpServer, listener });
  }

  /** Made, and ws loaded (1.4 MiB of heap), by the first WebSocket upgrade: many gateways never get one. */
  private websocketServer(): WebSocketServer | undefined {
    if (!this.wss && !this.ctx.stopping) {
      const { WebSocketServer: Server } = createRequire(import.meta.url)('ws') as typeof import('ws');
      this.wss = new Server({
        noServer: true,
        // One WebSocket message carries one MQTT packet (mqtt.js, browsers); the parser limit
        // still applies to the byte stream.
        maxPayload: this.ctx.cfg.maxPacketSizeBytes + 16,
        // MQTT over WebSocket uses the "mqtt" subprotocol (some old clients "mqttv3.1").
        handleProtocols: (protocols) => (protocols.has('mqtt') ? 'mqtt' : protocols.has('mqttv3.1') ? 'mqttv3.1' : false),
        perMessageDeflate: false,
      });
    }
    return this.wss;
  }

  /** Detaches from the HTTP servers and closes the listeners; resolves once they are closed. */
  stopListening(): Promise<unknown> {
    for (const { server, listener } of this.upgradeTargets) server.removeListener('upgrade', listener);
    this.upgradeTargets.length = 0;
    const closed: Array<Promise<void>> = [];
    for (const server of [this.tcpServer, this.tlsServer]) {
      if (server?.listening) closed.push(new Promise<void>((resolve) => server.close(() => resolve())));
    }
    const wss = this.wss;
    if (wss) {
      for (const ws of wss.clients) ws.terminate();
      closed.push(new Promise<void>((resolve) => wss.close(() => resolve())));
    }
    return Promise.all(closed);
  }
}
