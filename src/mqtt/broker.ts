// The embedded MQTT broker: Aedes 2 (MQTT 3.1, 3.1.1 and 5) on TCP, TLS and WebSocket, with every
// authentication and authorization decision delegated to one MqttAccess (the permission engine
// shared with REST). This file is the table of contents; each concern has its module:
//
// | concern                                   | module                                   |
// |-------------------------------------------|------------------------------------------|
// | options; shared state, common decisions   | broker-options.ts, broker-context.ts     |
// | aedes instance, options, broker state     | aedes-wiring.ts                          |
// | CONNECT checks without credentials        | handlers/pre-connect.ts                  |
// | connection admission (authentication)     | handlers/authenticate.ts                 |
// | refused CONNECTs (counts, audit)          | connect-refusals.ts                      |
// | session owners, live clients per user     | session-registry.ts                      |
// | publish authorization, rate limit         | handlers/authorize-publish.ts            |
// | subscribe authorization                   | handlers/authorize-subscribe.ts          |
// | delivery (forward) authorization          | handlers/authorize-forward.ts            |
// | aedes client events                       | handlers/client-events.ts                |
// | live access changes (revoke, permissions) | access-changes.ts                        |
// | connections (client state, limits)        | connections.ts                           |
// | listeners: TCP, TLS, WebSocket upgrade    | transports.ts                            |
// | in-process publish/subscribe              | data-plane.ts                            |
// | $SYS topics                               | sys-topics.ts                            |
// | clients, sessions, retained for operators | broker-admin.ts                          |
//
// The decisions are described in src/mqtt/README.md.
import type http from 'node:http';
import type { Duplex } from 'node:stream';
import type { Aedes } from 'aedes';
import { createAccessChangeHandler } from './access-changes.js';
import { createAedes } from './aedes-wiring.js';
import { createBrokerAdmin, type BrokerAdmin } from './broker-admin.js';
import { createBrokerContext, type BrokerContext } from './broker-context.js';
import type { BrokerStats } from './broker-stats.js';
import type { BrokerOptions, EnhancedAuthInfo } from './broker-options.js';
import { Connections } from './connections.js';
import { createDataPlane, type DataPlane } from './data-plane.js';
import { createAuthenticate } from './handlers/authenticate.js';
import { createAuthorizeForward } from './handlers/authorize-forward.js';
import { createAuthorizePublish } from './handlers/authorize-publish.js';
import { createAuthorizeSubscribe } from './handlers/authorize-subscribe.js';
import { watchClientEvents } from './handlers/client-events.js';
import { createPreConnect } from './handlers/pre-connect.js';
import { ConcurrencyLimiter } from './limits.js';
import { RevocationLog } from './revocation-log.js';
import { SessionRegistry } from './session-registry.js';
import { createSysTopics, type SysTopics } from './sys-topics.js';
import { Transports } from './transports.js';

export { refusalReasonOf, type BrokerStats, type RefusalReason } from './broker-stats.js';
export type { BrokerOptions, EnhancedAuthInfo } from './broker-options.js';
export type { DataPlane, DataPlaneProperties, MessageOrigin, TappedPublish } from './data-plane.js';
export type { BrokerAdmin, LiveClient, LiveClientDetail, Page, RetainedMessage, StoredSession } from './broker-admin.js';
export { aedesBaseOptions } from './aedes-wiring.js';

export interface Broker {
  /** Listens on TCP and TLS (port 0: any free port) and resolves the bound ports. */
  start(): Promise<{ port: number; tlsPort: number }>;
  /** Serves MQTT over WebSocket at config.websocketPath on this HTTP server; other paths untouched. */
  handleUpgrade(httpServer: http.Server): void;
  /** Re-reads the trusted CA list for new TLS connections. */
  refreshTls(): void;
  /**
   * Serves MQTT on a byte stream the caller made (an in-process transport: the fuzz harness of
   * test/fuzz/, which feeds aedes, mqtt-packet and every hook of this broker without sockets).
   * Treated like a TCP connection from `remote`.
   */
  acceptStream(stream: Duplex, remote: string): void;
  enhancedAuthInfo(): EnhancedAuthInfo;
  stats(): BrokerStats;
  /** Closes listeners, disconnects clients, closes Aedes; bounded in time. */
  stop(): Promise<void>;
  /**
   * The in-process port of trusted system components (the protocol-mapping runtime): publishes
   * and subscribes without a client session, so no client authentication or publish
   * authorization. Delivery to clients is NOT bypassed: every message still reaches a client
   * only through authorizeForward (the client's read permission). Usable once started.
   */
  dataPlane(): DataPlane;
  /** Live clients, stored sessions and retained messages for the operators' API (broker-admin.ts). */
  admin(): BrokerAdmin;
}

const STOP_TIMEOUT_MS = 5000;

export function createBroker(options: BrokerOptions): Broker {
  const ctx = createBrokerContext(options);
  const cfg = ctx.cfg;
  if (cfg.maxConnectionsPerClientId > 1) {
    ctx.log.warn('mqtt.maxConnectionsPerClientId > 1 has no effect: MQTT requires a new connection to take over the session of the same client id', {
      maxConnectionsPerClientId: cfg.maxConnectionsPerClientId,
    });
  }
  const limiter = new ConcurrencyLimiter(cfg.maxConcurrentAuth);
  const revocations = new RevocationLog();
  const sessions = new SessionRegistry(ctx);
  const connections = new Connections(ctx, sessions);
  const transports = new Transports(ctx, connections);
  const onAccessChange = createAccessChangeHandler(ctx, { revocations, sessions });
  const admin = createBrokerAdmin(ctx);
  const startedAt = Date.now();
  let sys: SysTopics | undefined;
  let unsubscribeChanges: (() => void) | undefined;
  let starting: Promise<{ port: number; tlsPort: number }> | undefined;
  let stopping: Promise<void> | undefined;

  const stats = (): BrokerStats => readStats(ctx, limiter, connections, startedAt);

  async function doStart(): Promise<{ port: number; tlsPort: number }> {
    const aedes = await createAedes(ctx, {
      preConnect: createPreConnect(ctx),
      authenticate: createAuthenticate(ctx, { limiter, revocations, sessions }),
      authorizePublish: createAuthorizePublish(ctx),
      authorizeSubscribe: createAuthorizeSubscribe(ctx),
      authorizeForward: createAuthorizeForward(ctx),
    });
    watchClientEvents(ctx, aedes, sessions);
    admin.watch(aedes);
    unsubscribeChanges = ctx.access.onChange(onAccessChange);
    sys = createSysTopics({
      stats,
      publish: (topic, payload) => {
        const packet = { cmd: 'publish', topic, payload: Buffer.from(payload), qos: 0, retain: true, dup: false } as unknown as Parameters<Aedes['publish']>[0];
        if (!aedes.closed) aedes.publish(packet, () => {});
      },
      version: options.version ?? 'unknown',
      intervalSeconds: cfg.sysIntervalSeconds,
      ...(options.sysTopics ? { extra: options.sysTopics } : {}),
    });
    sys.start();
    const ports = await transports.listen();
    ctx.log.info('mqtt broker listening', { host: options.host, port: ports.port, tlsPort: ports.tlsPort, websocketPath: cfg.websocketPath });
    return ports;
  }

  async function doStop(): Promise<void> {
    await starting?.catch(() => undefined);
    sys?.stop();
    unsubscribeChanges?.();
    const listenersClosed = transports.stopListening();
    const aedes = ctx.aedes;
    const aedesClosed = aedes ? new Promise<void>((resolve) => aedes.close(() => resolve())) : Promise.resolve();
    // aedes.close() closes every client; whatever is still open after that (a TLS handshake,
    // a socket still waiting for CONNECT) is destroyed so that server.close() can complete.
    await withTimeout(aedesClosed, STOP_TIMEOUT_MS / 2);
    connections.destroyAll();
    await withTimeout(listenersClosed, STOP_TIMEOUT_MS / 2);
    connections.destroyAll();
    // Flushes what the broker state has issued; the store itself is closed by its own part.
    await ctx.persistence?.destroy();
    sessions.clear();
    ctx.log.info('mqtt broker stopped');
  }

  return {
    start() {
      if (stopping) return Promise.reject(new Error('broker stopped'));
      starting ??= doStart();
      return starting;
    },
    handleUpgrade: (httpServer) => transports.handleUpgrade(httpServer),
    refreshTls: () => transports.refreshTls(),
    acceptStream: (stream, remote) => connections.accept(stream, 'tcp', remote),
    enhancedAuthInfo: () => enhancedAuthInfo(ctx),
    stats,
    stop() {
      ctx.stopping = true;
      stopping ??= doStop();
      return stopping;
    },
    dataPlane: () => createDataPlane(ctx),
    admin: () => admin,
  };
}

function enhancedAuthInfo(ctx: BrokerContext): EnhancedAuthInfo {
  return {
    result: 'enhanced authentication is not supported: MQTT 5 clients log in with a user name and password, a token or a client certificate (no AUTH exchange)',
    modifiers: {
      max_message_size: String(ctx.cfg.maxPacketSizeBytes),
      max_inflight_messages: String(ctx.cfg.maxInflightMessages),
      retry_interval: String(ctx.cfg.retryIntervalSeconds),
    },
  };
}

function readStats(ctx: BrokerContext, limiter: ConcurrencyLimiter, connections: Connections, startedAt: number): BrokerStats {
  const bytes = connections.bytes();
  const persistence = ctx.persistence?.stats();
  const aedes = ctx.aedes;
  return {
    clients: aedes && !aedes.closed ? aedes.connectedClients : 0,
    authRunning: limiter.running,
    authWaiting: limiter.waiting,
    ...ctx.counters,
    bytesReceived: bytes.received,
    bytesSent: bytes.sent,
    connectsRefusedByReason: { ...ctx.refusalsByReason },
    uptimeSeconds: Math.floor((Date.now() - startedAt) / 1000),
    ...(persistence ? { persistence, queueDrops: ctx.counters.queueDrops + persistence.queueDrops } : {}),
  };
}

async function withTimeout(promise: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    promise.then(() => undefined, () => undefined),
    new Promise<void>((resolve) => {
      timer = setTimeout(resolve, ms);
    }),
  ]);
  clearTimeout(timer);
}
