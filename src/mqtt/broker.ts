// The embedded MQTT broker: Aedes 2 (MQTT 3.1, 3.1.1 and 5) on TCP, TLS and WebSocket, with every authentication and
// authorization decision delegated to one MqttAccess (the permission engine shared with REST).
//
// Decisions (also in src/mqtt/README.md):
// - Anonymous (no username and no verified client certificate): refused with CONNACK 4 unless
//   mqtt.allowAnonymous. An admitted anonymous client has NO permissions at all: every publish
//   is refused (disconnect), every subscription gets 0x80, nothing is forwarded to it. The access
//   port is never asked about it.
// - Keepalive: MQTT 3.1.1 cannot tell a client to use a shorter keepalive, so clamping would make
//   the broker drop well-behaved clients: a keepalive above mqtt.maxKeepaliveSeconds is refused
//   with CONNACK 2 (identifier rejected, as mosquitto does); an MQTT 5 client is told the server
//   keep alive instead. Keepalive 0 ("never time out") is accepted unless mqtt.allowKeepaliveZero
//   is false; maxKeepaliveSeconds = 0 disables the limit.
// - Duplicate client id: the older connection is taken over (closed) as MQTT 3.1.1 §3.1.4
//   requires, so there is at most one connection per client id whatever
//   mqtt.maxConnectionsPerClientId says. Hardening: a client id that is live or has a persistent
//   session owned by ANOTHER user is refused with CONNACK 2, so one user cannot kick another
//   user's device off or take over its session.
// - MQTT 5: refusals carry the MQTT 3.1.1 return code, which aedes 2 turns into the reason code
//   (4 → 0x86, 5 → 0x87); a forbidden QoS 1/2 publish gets PUBACK/PUBREC 0x87 and the client
//   stays. The broker state lives in the store (src/mqtt/persistence) when one is given.
// - Forwarding: while a user's permissions are unchanged since connect, every live subscription
//   was granted because one read permission covers its whole filter, so deliveries need no
//   per-message check (fast path). Offline-queue replay at connect is always checked.
// - Live changes: 'permissions' clears the decision caches of that user's clients and switches
//   them to per-message read checks; existing subscriptions are kept, so a removed read
//   permission stops delivery at once and a re-granted one resumes it without the device having
//   to resubscribe. 'revoked' / 'deleted' close the affected sessions (their will is not
//   published).

import type http from 'node:http';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import tls from 'node:tls';
import { Aedes, type AedesOptions, type Client } from 'aedes';
import { WebSocketServer, type WebSocket } from 'ws';
import type { GatewayConfig } from '../config/config-schema.js';
import type { Logger } from '../log/logger.js';
import { ClientState, stateOf, type GatewayClient, type Transport } from './client-state.js';
import { connackError, returnCodeFor, type ConnackError } from './connack-errors.js';
import { ConcurrencyLimiter, boundOutgoingQueues, limitPacketSize } from './limits.js';
import { listen, pathOf, peerCertificate } from './listeners.js';
import type { AccessChange, MqttAccess, MqttCredentials, MqttPrincipal } from './mqtt-access.js';
import { RevocationLog, tokenSetOf } from './revocation-log.js';
import { createSysTopics, type SysTopics } from './sys-topics.js';
import { mqttStreamOf } from './websocket-stream.js';
import { installSessionPresentFlag, markSessionPresent } from './session-present.js';
import { refusalReasonOf, type BrokerStats, type RefusalReason } from './broker-stats.js';

export { refusalReasonOf, type BrokerStats, type RefusalReason } from './broker-stats.js';
import { acknowledgeWhenDurable, createLmdbPersistence, persistenceLimits, type LmdbPersistence } from './persistence/index.js';
import type { Store } from '../store/index.js';

export interface BrokerOptions {
  config: GatewayConfig['mqtt'];
  /** Bind address of the TCP and TLS listeners. */
  host: string;
  log: Logger;
  access: MqttAccess;
  /** Server key/cert PEM; ca() = trusted CA PEMs for client certificates, read per TLS context. */
  tls: { key: string; cert: string; ca: () => string[] };
  /**
   * The gateway's store: with mqtt.persistence.enabled the broker keeps retained messages,
   * persistent sessions, queues and wills in it (src/mqtt/persistence). Without a store (the
   * benchmark's bare comparisons), aedes' in-memory persistence.
   */
  store?: Store;
  /** gatewayd's version, published in $SYS/broker/version. */
  version?: string;
}

export interface EnhancedAuthInfo {
  result: string;
  modifiers: { max_message_size: string; max_inflight_messages: string; retry_interval: string };
}

export interface Broker {
  /** Listens on TCP and TLS (port 0: any free port) and resolves the bound ports. */
  start(): Promise<{ port: number; tlsPort: number }>;
  /** Serves MQTT over WebSocket at config.websocketPath on this HTTP server; other paths untouched. */
  handleUpgrade(httpServer: http.Server): void;
  /** Re-reads the trusted CA list for new TLS connections. */
  refreshTls(): void;
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
}

/** MQTT 5 properties a data-plane message carries end to end (clients of 3.1.1 do not see them). */
export interface DataPlaneProperties {
  correlationData?: Buffer;
  responseTopic?: string;
  contentType?: string;
  userProperties?: Record<string, string | string[]>;
  messageExpiryInterval?: number;
}

export interface DataPlane {
  /** QoS 0 or 1 publish from the daemon itself; rejects on $SYS topics or a stopped broker. */
  publish(topic: string, payload: Buffer, opts?: { qos?: 0 | 1; retain?: boolean; properties?: DataPlaneProperties }): Promise<void>;
  /** Every publish matching `filter` (from clients or the data plane), with its MQTT 5 properties; returns the unsubscribe function. */
  subscribe(filter: string, handler: (topic: string, payload: Buffer, properties?: DataPlaneProperties) => void): () => void;
}

const STOP_TIMEOUT_MS = 5000;
/** Persistent-session owners remembered (clientId → userId), oldest dropped beyond this. */
const SESSION_OWNER_LIMIT = 100_000;

function isSysTopic(topic: string): boolean {
  return topic.startsWith('$SYS') && (topic.length === 4 || topic.charCodeAt(4) === 47); // '/'
}

/**
 * MQTT 5 Server Keep Alive: the CONNACK tells the client the keepalive to use instead of its
 * own. aedes 2 sets this field itself only from its keepaliveLimit option, which would make it
 * refuse MQTT 3.1.1 clients with a return code 3.1.1 does not define (6).
 */
function setServerKeepAlive(client: Client, seconds: number): void {
  (client as unknown as { _serverKeepAlive?: number })._serverKeepAlive = seconds;
}

/** Aedes options shared by the gatewayd broker and the bare broker of the benchmark. */
export function aedesBaseOptions(config: GatewayConfig['mqtt']): AedesOptions {
  return {
    connectTimeout: config.connectTimeoutMs,
    // Only applies to MQTT 3.1 (3.1.1 has no limit in Aedes); the general check is in preConnect.
    maxClientsIdLength: config.maxClientIdLength,
    // Parsed packets a client may pipeline before its CONNACK. Memory stays bounded anyway: Aedes
    // stops reading the socket while the CONNECT is being handled.
    queueLimit: config.maxQueuedMessages,
    // A subscriber whose socket stays full this long is disconnected, so one frozen consumer
    // cannot hold every delivery slot (Aedes `concurrency`) for long.
    drainTimeout: config.drainTimeoutMs,
    // Announced to MQTT 5 clients in the CONNACK.
    topicAliasMaximum: config.topicAliasMaximum,
    maximumPacketSize: config.maxPacketSizeBytes,
    receiveMaximum: config.maxInflightMessages,
    sessionExpiryIntervalLimit: config.persistence.sessionExpirySeconds,
    // keepaliveLimit stays 0: Aedes would answer CONNACK 6, which MQTT 3.1.1 does not define.
  };
}

export function createBroker(options: BrokerOptions): Broker {
  return new GatewayBroker(options);
}

class GatewayBroker implements Broker {
  private readonly cfg: GatewayConfig['mqtt'];
  private readonly log: Logger;
  private readonly access: MqttAccess;
  private readonly limiter: ConcurrencyLimiter;
  private readonly revocations = new RevocationLog();
  /** userId → its live (authenticated) clients, for O(clients of that user) live changes. */
  private readonly byUser = new Map<string, Set<GatewayClient>>();
  /** clientId → registered (live) client, from the Aedes 'client'/'clientDisconnect' events. */
  private readonly liveClients = new Map<string, GatewayClient>();
  /** clientId → owner (userId, '' for anonymous) of a persistent (clean=false) session. */
  private readonly sessionOwners = new Map<string, string>();
  private readonly sockets = new Set<net.Socket>();
  private readonly upgradeTargets: Array<{ server: http.Server; listener: (...args: any[]) => void }> = [];
  private aedes: Aedes | undefined;
  private persistence: LmdbPersistence | undefined;
  private sys: SysTopics | undefined;
  private tcpServer: net.Server | undefined;
  private tlsServer: tls.Server | undefined;
  private wss: WebSocketServer | undefined;
  private unsubscribeChanges: (() => void) | undefined;
  private starting: Promise<{ port: number; tlsPort: number }> | undefined;
  private stopping: Promise<void> | undefined;
  private parserHookMissingLogged = false;
  private readonly counters = {
    connectsAccepted: 0,
    connectsRefused: 0,
    publishesRefused: 0,
    subscriptionsRefused: 0,
    forwardsRefused: 0,
    rateLimitDisconnects: 0,
    rateLimitPauses: 0,
    oversizeDisconnects: 0,
    queueDrops: 0,
    revocationDisconnects: 0,
    messagesReceived: 0,
    messagesSent: 0,
  };
  private readonly refusalsByReason: Record<RefusalReason, number> = { bad_credentials: 0, not_authorized: 0, bad_client_id: 0, unsupported_version: 0, other: 0 };
  /** Bytes of connections already closed (live ones are read from their sockets). */
  private closedBytes = { received: 0, sent: 0 };
  private startedAt = Date.now();

  constructor(private readonly options: BrokerOptions) {
    this.cfg = options.config;
    this.log = options.log.child({ component: 'mqtt' });
    this.access = options.access;
    this.limiter = new ConcurrencyLimiter(this.cfg.maxConcurrentAuth);
    if (this.cfg.maxConnectionsPerClientId > 1) {
      this.log.warn('mqtt.maxConnectionsPerClientId > 1 has no effect: MQTT requires a new connection to take over the session of the same client id', {
        maxConnectionsPerClientId: this.cfg.maxConnectionsPerClientId,
      });
    }
  }

  // ---------------------------------------------------------------- lifecycle

  start(): Promise<{ port: number; tlsPort: number }> {
    if (this.stopping) return Promise.reject(new Error('broker stopped'));
    this.starting ??= this.doStart();
    return this.starting;
  }

  private async doStart(): Promise<{ port: number; tlsPort: number }> {
    const { store } = this.options;
    const persistence = store && this.cfg.persistence.enabled ? createLmdbPersistence({ store, limits: persistenceLimits(this.cfg), log: this.log }) : undefined;
    this.persistence = persistence;
    const aedes = await Aedes.createBroker({
      ...aedesBaseOptions(this.cfg),
      ...(persistence ? { persistence } : {}),
      preConnect: (client, packet, callback) => this.preConnect(client, packet, callback),
      authenticate: (client, username, password, done) => this.authenticate(client, username, password, done),
      authorizePublish: (client, packet, callback) => this.authorizePublish(client, packet, callback),
      authorizeSubscribe: (client, sub, callback) => this.authorizeSubscribe(client, sub, callback),
      authorizeForward: (client, packet) => this.authorizeForward(client, packet),
    });
    this.aedes = aedes;
    if (persistence && store) {
      // A QoS 1/2 publisher gets its PUBACK/PUBREC once the message is on disk.
      acknowledgeWhenDurable(aedes, persistence);
      // A restore swapped the store: the broker state is the backup's.
      store.onReopen(() => persistence.reload());
      // sessionPresent 1 for a returning session without subscriptions too (session-present.ts).
      if (!installSessionPresentFlag()) this.log.warn('mqtt-packet has an unexpected shape: a returning session without subscriptions gets sessionPresent 0');
    } else {
      // The LMDB persistence bounds its queues itself (mqtt.maxQueuedMessages); aedes' in-memory one does not.
      const bound = boundOutgoingQueues((aedes as unknown as { persistence: unknown }).persistence, this.cfg.maxQueuedMessages, () => {
        this.counters.queueDrops++;
      });
      if (!bound) this.log.warn('aedes persistence has an unexpected shape: outgoing queues are not bounded');
    }

    aedes.on('client', (client) => {
      this.liveClients.set(client.id, client as GatewayClient);
      // The session's owner is stored with it (the persistence created it in its own 'client'
      // listener, registered first), so that after a restart another user still cannot take it.
      if (persistence && !client.clean) {
        const st = stateOf(client);
        if (st && !st.revoked && (st.principal || st.anonymous)) persistence.setSessionOwner(client.id, st.principal?.userId ?? '');
      }
    });
    aedes.on('clientReady', (client) => {
      const st = stateOf(client);
      this.log.info('mqtt client connected', {
        clientId: client.id,
        username: st?.principal?.username,
        anonymous: st?.anonymous || undefined,
        transport: st?.transport,
        remote: st?.remote,
      });
    });
    aedes.on('clientDisconnect', (client) => {
      if (this.liveClients.get(client.id) === client) this.liveClients.delete(client.id);
      this.log.debug('mqtt client disconnected', { clientId: client.id, username: stateOf(client)?.principal?.username });
    });
    aedes.on('clientError', (client, err) => {
      this.log.debug('mqtt client error', { clientId: client.id, username: stateOf(client)?.principal?.username, error: err.message });
    });
    aedes.on('connectionError', (client, err) => {
      const st = stateOf(client);
      const code = (err as { errorCode?: unknown }).errorCode;
      // Refusals aedes decides itself, before any hook: an unsupported protocol version, a
      // malformed client id. Ours were counted where they were decided.
      if (st && !st.refusalCounted && typeof code === 'number' && code > 0) {
        this.counters.connectsRefused++;
        this.refusalsByReason[refusalReasonOf(code)]++;
        st.refusalCounted = true;
        this.log.audit('mqtt.connect.refused', { clientId: client.id || undefined, returnCode: code, reason: err.message, transport: st.transport, remote: st.remote });
        return;
      }
      this.log.debug('mqtt connection error', { remote: st?.remote, error: err.message });
    });

    this.unsubscribeChanges = this.access.onChange((change) => this.onAccessChange(change));

    const tcpServer = net.createServer({ noDelay: true }, (socket) => {
      socket.setNoDelay(true);
      this.track(socket);
      this.accept(socket, 'tcp', socket.remoteAddress ?? '');
    });
    const tlsServer = tls.createServer(
      {
        ...this.secureContextOptions(),
        requestCert: true,
        // Password clients without a certificate must still connect; a presented certificate
        // is only used when it verified (socket.authorized).
        rejectUnauthorized: false,
        handshakeTimeout: this.cfg.connectTimeoutMs,
        minVersion: 'TLSv1.2',
      },
      (socket) => {
        socket.setNoDelay(true);
        this.accept(socket, 'tls', socket.remoteAddress ?? '');
      },
    );
    tlsServer.on('connection', (socket: net.Socket) => {
      socket.setNoDelay(true);
      this.track(socket);
    });
    tlsServer.on('tlsClientError', (err, socket) => {
      this.log.debug('mqtt tls handshake failed', { remote: socket.remoteAddress, error: err.message });
    });
    this.tcpServer = tcpServer;
    this.tlsServer = tlsServer;

    this.sys = createSysTopics({
      stats: () => this.stats(),
      publish: (topic, payload) => {
        const packet = { cmd: 'publish', topic, payload: Buffer.from(payload), qos: 0, retain: true, dup: false } as unknown as Parameters<Aedes['publish']>[0];
        if (!aedes.closed) aedes.publish(packet, () => {});
      },
      version: this.options.version ?? 'unknown',
      intervalSeconds: this.cfg.sysIntervalSeconds,
    });
    this.sys.start();

    const port = await listen(tcpServer, this.cfg.port, this.options.host);
    const tlsPort = await listen(tlsServer, this.cfg.tlsPort, this.options.host);
    this.log.info('mqtt broker listening', { host: this.options.host, port, tlsPort, websocketPath: this.cfg.websocketPath });
    return { port, tlsPort };
  }

  private secureContextOptions(): tls.SecureContextOptions {
    // An explicit (possibly empty) CA list: the system roots must never vouch for a device.
    return { key: this.options.tls.key, cert: this.options.tls.cert, ca: this.options.tls.ca() };
  }

  refreshTls(): void {
    if (!this.tlsServer) return; // start() reads ca() itself
    try {
      this.tlsServer.setSecureContext(this.secureContextOptions());
      this.log.info('mqtt tls trusted certificates reloaded');
    } catch (err) {
      // Keep serving with the previous context rather than failing the caller's request.
      this.log.error('mqtt tls reload failed, previous trusted certificates stay in use', { error: (err as Error).message });
    }
  }

  handleUpgrade(httpServer: http.Server): void {
    if (this.upgradeTargets.some((t) => t.server === httpServer)) return; // already attached
    const path = this.cfg.websocketPath;
    const listener = (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
      if (pathOf(req.url) !== path) return; // not ours: left to other upgrade listeners
      const wss = this.websocketServer();
      if (!this.aedes || this.stopping || !wss) {
        socket.end('HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
        return;
      }
      wss.handleUpgrade(req, socket, head, (ws: WebSocket) => {
        if (!this.aedes || this.stopping) {
          ws.terminate();
          return;
        }
        const stream = mqttStreamOf(ws);
        stream.on('error', () => {}); // reported through the Aedes client
        this.accept(stream, 'ws', req.socket.remoteAddress ?? '', req);
      });
    };
    httpServer.on('upgrade', listener);
    this.upgradeTargets.push({ server: httpServer, listener });
  }

  private websocketServer(): WebSocketServer | undefined {
    if (!this.wss && !this.stopping) {
      this.wss = new WebSocketServer({
        noServer: true,
        // One WebSocket message carries one MQTT packet (mqtt.js, browsers); the parser limit
        // below still applies to the byte stream.
        maxPayload: this.cfg.maxPacketSizeBytes + 16,
        // MQTT over WebSocket uses the "mqtt" subprotocol (some old clients "mqttv3.1").
        handleProtocols: (protocols) => (protocols.has('mqtt') ? 'mqtt' : protocols.has('mqttv3.1') ? 'mqttv3.1' : false),
        perMessageDeflate: false,
      });
    }
    return this.wss;
  }

  enhancedAuthInfo(): EnhancedAuthInfo {
    return {
      result: 'enhanced authentication is not supported: MQTT 5 clients log in with a user name and password, a token or a client certificate (no AUTH exchange)',
      modifiers: {
        max_message_size: String(this.cfg.maxPacketSizeBytes),
        max_inflight_messages: String(this.cfg.maxInflightMessages),
        retry_interval: String(this.cfg.retryIntervalSeconds),
      },
    };
  }

  stats(): BrokerStats {
    let bytesReceived = this.closedBytes.received;
    let bytesSent = this.closedBytes.sent;
    for (const socket of this.sockets) {
      bytesReceived += socket.bytesRead;
      bytesSent += socket.bytesWritten;
    }
    const persistence = this.persistence?.stats();
    return {
      clients: this.aedes && !this.aedes.closed ? this.aedes.connectedClients : 0,
      authRunning: this.limiter.running,
      authWaiting: this.limiter.waiting,
      ...this.counters,
      bytesReceived,
      bytesSent,
      connectsRefusedByReason: { ...this.refusalsByReason },
      uptimeSeconds: Math.floor((Date.now() - this.startedAt) / 1000),
      ...(persistence ? { persistence, queueDrops: this.counters.queueDrops + persistence.queueDrops } : {}),
    };
  }

  stop(): Promise<void> {
    this.stopping ??= this.doStop();
    return this.stopping;
  }

  private async doStop(): Promise<void> {
    await this.starting?.catch(() => undefined);
    this.sys?.stop();
    this.unsubscribeChanges?.();
    for (const { server, listener } of this.upgradeTargets) server.removeListener('upgrade', listener);
    this.upgradeTargets.length = 0;

    const listenersClosed: Array<Promise<void>> = [];
    for (const server of [this.tcpServer, this.tlsServer]) {
      if (server?.listening) listenersClosed.push(new Promise<void>((resolve) => server.close(() => resolve())));
    }
    const wss = this.wss;
    if (wss) {
      for (const ws of wss.clients) ws.terminate();
      listenersClosed.push(new Promise<void>((resolve) => wss.close(() => resolve())));
    }
    const aedes = this.aedes;
    const aedesClosed = aedes ? new Promise<void>((resolve) => aedes.close(() => resolve())) : Promise.resolve();

    // aedes.close() closes every client; whatever is still open after that (a TLS handshake,
    // a socket still waiting for CONNECT) is destroyed so that server.close() can complete.
    await withTimeout(aedesClosed, STOP_TIMEOUT_MS / 2);
    for (const socket of this.sockets) socket.destroy();
    await withTimeout(Promise.all(listenersClosed), STOP_TIMEOUT_MS / 2);
    for (const socket of this.sockets) socket.destroy();
    // Flushes what the broker state has issued; the store itself is closed by its own part.
    await this.persistence?.destroy();
    this.byUser.clear();
    this.liveClients.clear();
    this.log.info('mqtt broker stopped');
  }

  private track(socket: net.Socket): void {
    this.sockets.add(socket);
    socket.once('close', () => {
      this.sockets.delete(socket);
      this.closedBytes.received += socket.bytesRead;
      this.closedBytes.sent += socket.bytesWritten;
    });
  }

  /** Hands a connection to Aedes and attaches the per-client state and limits. */
  private accept(conn: Duplex, transport: Transport, remote: string, req?: http.IncomingMessage): void {
    const aedes = this.aedes;
    if (!aedes || aedes.closed || this.stopping) {
      conn.destroy();
      return;
    }
    const client = aedes.handle(conn, req) as GatewayClient;
    client.gatewayd = new ClientState(transport, remote, this.cfg.maxPublishesPerSecond);
    const limited = limitPacketSize(client._parser, this.cfg.maxPacketSizeBytes, (bytes, cmd) => {
      this.counters.oversizeDisconnects++;
      this.log.info('mqtt packet too large, disconnecting', { clientId: client.id ?? undefined, remote, bytes, cmd, limit: this.cfg.maxPacketSizeBytes });
    });
    if (!limited && !this.parserHookMissingLogged) {
      this.parserHookMissingLogged = true;
      this.log.warn('mqtt-packet parser has an unexpected shape: maxPacketSizeBytes is not enforced');
    }
    this.answerUnsupportedVersion(client, conn);
    conn.once('close', () => this.forget(client));
  }

  /**
   * [MQTT-3.1.2-2]: a CONNECT of a protocol level the broker does not speak gets CONNACK return
   * code 1 before the connection closes (mosquitto does the same). mqtt-packet's parser rejects
   * it before aedes sees a CONNECT, and aedes then destroys the socket: answer first.
   */
  private answerUnsupportedVersion(client: GatewayClient, conn: Duplex): void {
    const parser = client._parser as { prependListener?: (event: 'error', fn: (err: Error) => void) => void } | undefined;
    parser?.prependListener?.('error', (err: Error) => {
      if (!/protocol version/i.test(err.message) || client.connected) return;
      const st = stateOf(client);
      if (conn.writable) conn.write(Buffer.from([0x20, 0x02, 0x00, 0x01]));
      if (st && !st.refusalCounted) {
        st.refusalCounted = true;
        this.counters.connectsRefused++;
        this.refusalsByReason.unsupported_version++;
        this.log.audit('mqtt.connect.refused', { returnCode: 1, reason: err.message, transport: st.transport, remote: st.remote });
      }
    });
  }

  private forget(client: GatewayClient): void {
    if (client.id && this.liveClients.get(client.id) === client) this.liveClients.delete(client.id);
    const userId = client.gatewayd?.principal?.userId;
    if (userId === undefined) return;
    const set = this.byUser.get(userId);
    if (set && set.delete(client) && set.size === 0) this.byUser.delete(userId);
  }

  // ---------------------------------------------------------------- data plane

  dataPlane(): DataPlane {
    return {
      publish: (topic, payload, opts = {}) =>
        new Promise<void>((resolve, reject) => {
          const aedes = this.aedes;
          if (!aedes || this.stopping) return reject(new Error('broker is not running'));
          if (isSysTopic(topic)) return reject(new Error('$SYS topics are reserved'));
          const packet = {
            cmd: 'publish',
            topic,
            payload,
            qos: opts.qos ?? 0,
            retain: opts.retain ?? false,
            dup: false,
            ...(opts.properties ? { properties: opts.properties } : {}),
          } as unknown as Parameters<Aedes['publish']>[0];
          // Delivery goes through each subscriber's deliverQoS → authorizeForward.
          aedes.publish(packet, (err?: Error | null) => (err ? reject(err) : resolve()));
        }),
      subscribe: (filter, handler) => {
        const aedes = this.aedes;
        if (!aedes || this.stopping) throw new Error('broker is not running');
        const explicitSys = filter.startsWith('$');
        const listener = (packet: { topic: string; payload: Buffer | string; properties?: DataPlaneProperties }, cb: () => void) => {
          // `#` and `+` never match $ topics (MQTT 3.1.1 §4.7.2), as for clients.
          if (explicitSys || !packet.topic.startsWith('$')) {
            try {
              handler(packet.topic, Buffer.isBuffer(packet.payload) ? packet.payload : Buffer.from(packet.payload), packet.properties);
            } catch (err) {
              this.log.error('data plane handler failed', { filter, topic: packet.topic, error: (err as Error).message });
            }
          }
          cb();
        };
        aedes.subscribe(filter, listener as never, () => {});
        let active = true;
        return () => {
          if (!active) return;
          active = false;
          if (this.aedes && !this.aedes.closed) this.aedes.unsubscribe(filter, listener as never, () => {});
        };
      },
    };
  }

  // ---------------------------------------------------------------- hooks

  private preConnect(client: Client, packet: { clientId?: string; clean?: boolean; keepalive?: number; protocolVersion?: number }, callback: (error: Error | null, success: boolean) => void): void {
    const st = stateOf(client);
    if (!st) return callback(new Error('unknown connection'), false);
    // Refusals that need a CONNACK code are answered from authenticate(): Aedes sends CONNACK
    // codes only from there (and checks the protocol version in between, so MQTT 5 gets 1).
    const clientId = packet.clientId ?? '';
    const maxKeepalive = this.cfg.maxKeepaliveSeconds;
    const keepalive = packet.keepalive ?? 0;
    if (Buffer.byteLength(clientId, 'utf8') > this.cfg.maxClientIdLength) {
      st.refuseCode = 2;
      st.refuseReason = `client id longer than ${this.cfg.maxClientIdLength} bytes`;
    } else if (clientId === '' && packet.clean === false) {
      st.refuseCode = 2; // [MQTT-3.1.3-8]
      st.refuseReason = 'an empty client id needs a clean session';
    } else if (keepalive === 0 && !this.cfg.allowKeepaliveZero) {
      if (packet.protocolVersion === 5 && maxKeepalive > 0) setServerKeepAlive(client, maxKeepalive);
      else {
        st.refuseCode = 2;
        st.refuseReason = 'keepalive 0 is not allowed (mqtt.allowKeepaliveZero)';
      }
    } else if (maxKeepalive > 0 && keepalive > maxKeepalive) {
      // MQTT 5 can be told the server's keep alive; MQTT 3.1.1 can only be refused (clamping
      // silently would make the broker drop a client that keeps to what it asked for).
      if (packet.protocolVersion === 5) setServerKeepAlive(client, maxKeepalive);
      else {
        st.refuseCode = 2;
        st.refuseReason = `keepalive ${keepalive} s above ${maxKeepalive} s`;
      }
    }
    st.resumeRequested = packet.clean === false;
    callback(null, true);
  }

  private authenticate(
    client: Client,
    username: Readonly<string | undefined>,
    password: Readonly<Buffer | undefined>,
    done: (error: ConnackError | null, success: boolean | null) => void,
  ): void {
    const st = stateOf(client);
    if (!st) return done(connackError(3, 'unknown connection'), null);
    if (st.refuseCode !== 0) {
      this.refused(client, st, st.refuseCode, st.refuseReason, username);
      return done(connackError(st.refuseCode as 2, st.refuseReason), null);
    }
    const certificate = st.transport === 'tls' ? peerCertificate(client.conn as tls.TLSSocket) : undefined;
    if (username === undefined && certificate === undefined) {
      if (!this.cfg.allowAnonymous) {
        this.refused(client, st, 4, 'anonymous connections are not allowed', undefined);
        return done(connackError(4, 'anonymous connections are not allowed'), null);
      }
      if (!this.ownerAllows(client, '')) {
        this.refused(client, st, 2, 'client id is in use by another user', undefined);
        return done(connackError(2, 'client id is in use by another user'), null);
      }
      st.anonymous = true;
      this.recordSession(client, '');
      this.counters.connectsAccepted++;
      return done(null, true);
    }

    const credentials: MqttCredentials = { clientId: client.id };
    if (username !== undefined) credentials.username = username;
    if (password !== undefined) credentials.password = password;
    if (certificate !== undefined) credentials.certificate = certificate;
    if (st.remote) credentials.remoteAddress = st.remote;

    this.limiter.schedule((release) => {
      if (client.closed) {
        release(); // gave up while waiting for a slot
        return;
      }
      const since = this.revocations.seq;
      let settled = false;
      const finish = (err: unknown, principal?: MqttPrincipal) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        release();
        if (client.closed) return;
        if (err !== null || !principal) {
          const code = returnCodeFor(err);
          const reason = code === 4 ? 'bad username or password' : code === 5 ? 'not authorized' : 'authentication failed';
          if (code === 3) {
            this.log.error('mqtt authentication error', { clientId: client.id, username, error: err instanceof Error ? err.message : String(err) });
          }
          this.refused(client, st, code, reason, username ?? certificate?.commonName);
          return done(connackError(code, reason), null);
        }
        const revoked = this.revocations.revokedSince(since, principal);
        if (revoked !== false) {
          const code = revoked === null ? 3 : 4;
          this.refused(client, st, code, 'credentials revoked during authentication', principal.username);
          return done(connackError(code, 'credentials revoked'), null);
        }
        if (!this.ownerAllows(client, principal.userId)) {
          this.refused(client, st, 2, 'client id is in use by another user', principal.username);
          return done(connackError(2, 'client id is in use by another user'), null);
        }
        st.principal = principal;
        let set = this.byUser.get(principal.userId);
        if (!set) this.byUser.set(principal.userId, (set = new Set()));
        set.add(client as GatewayClient);
        this.recordSession(client, principal.userId);
        this.counters.connectsAccepted++;
        done(null, true);
      };
      const timer = setTimeout(() => finish(new Error('authentication timed out')), this.cfg.connectTimeoutMs);
      timer.unref();
      try {
        this.access.authenticate(credentials).then(
          (principal) => finish(null, principal),
          (err: unknown) => finish(err ?? new Error('authentication failed')),
        );
      } catch (err) {
        finish(err ?? new Error('authentication failed'));
      }
    });
  }

  private refused(client: Client, st: ClientState, code: number, reason: string, username: string | undefined): void {
    this.counters.connectsRefused++;
    this.refusalsByReason[refusalReasonOf(code)]++;
    st.refusalCounted = true;
    this.log.audit('mqtt.connect.refused', { clientId: client.id, username, returnCode: code, reason, transport: st.transport, remote: st.remote });
  }

  /** May `owner` use this client id (no other user's live connection or persistent session)? */
  private ownerAllows(client: Client, owner: string): boolean {
    // Remembered since this start, else as stored with the session (earlier runs).
    const sessionOwner = this.sessionOwners.get(client.id) ?? this.persistence?.sessionOwner(client.id);
    if (sessionOwner !== undefined && sessionOwner !== owner) return false;
    const live = this.liveClients.get(client.id);
    if (live && live !== client && !live.closed) {
      const st = live.gatewayd;
      const liveOwner = st?.principal?.userId ?? '';
      if (liveOwner !== owner) return false;
    }
    return true;
  }

  /** An accepted CONNECT: records the session's owner and whether the CONNACK says sessionPresent. */
  private recordSession(client: Client, owner: string): void {
    const st = stateOf(client);
    // Decided once the client is admitted and before aedes reads the session (authenticate is the
    // first step of its connect sequence); session-present.ts puts the flag into the CONNACK.
    if (st?.resumeRequested && this.persistence?.resumeSession(client.id)) markSessionPresent(client.conn);
    if (client.clean) {
      this.sessionOwners.delete(client.id);
      return;
    }
    this.sessionOwners.delete(client.id); // re-insert: most recent last
    this.sessionOwners.set(client.id, owner);
    // Bounded: a client cycling through random ids with clean=false must not grow it forever.
    // The oldest records go first; their sessions lose only the cross-user protection.
    if (this.sessionOwners.size > SESSION_OWNER_LIMIT) this.sessionOwners.delete(this.sessionOwners.keys().next().value!);
  }

  private authorizePublish(client: Client | null, packet: { topic: string; retain?: boolean }, callback: (error?: Error | null) => void): void {
    const st = stateOf(client);
    // client null: a will left by a client of another (dead) broker instance; nobody vouches for it.
    if (!client || !st || st.revoked || st.principal === null) {
      if (client && st && !client.closed) this.publishRefused(client, st, packet.topic, st.revoked ? 'revoked' : 'anonymous');
      return callback(new Error('publish not authorized'));
    }
    if (st.rateDropped) return callback(new Error('publish rate limit exceeded'));
    // The will is published while the client closes: not subject to the rate limit.
    if (!client.closed) {
      const now = Date.now();
      if (!st.bucket.take(now)) {
        st.overLimitSince ??= now;
        if (now - st.overLimitSince >= this.cfg.rateLimitGraceSeconds * 1000) {
          st.rateDropped = true;
          this.counters.rateLimitDisconnects++;
          this.log.warn('mqtt publish rate limit exceeded, disconnecting', {
            clientId: client.id,
            username: st.principal.username,
            limitPerSecond: this.cfg.maxPublishesPerSecond,
            overForSeconds: Math.round((now - st.overLimitSince) / 1000),
          });
          // MQTT 3.1.1: aedes closes the connection on this error. MQTT 5: aedes would only answer
          // 0x87 and keep the client, so it is told why (DISCONNECT 0x96 message rate too high) and closed.
          callback(new Error('publish rate limit exceeded'));
          if ((client as { version?: number }).version === 5 && !client.closed) {
            (client as unknown as { disconnect(opts: { reasonCode: number }, done: () => void): void }).disconnect({ reasonCode: 0x96 }, () => {});
          }
          return;
        }
        // Slowed down, not dropped: this publish goes through, the next ones wait.
        this.slowDown(client, st);
      } else if (st.overLimitSince !== undefined && st.bucket.level(now) >= 0.5) {
        st.overLimitSince = undefined; // calm again: half its burst has refilled
      }
    }
    const raw = packet.topic;
    const prefix = st.principal.publishPrefix;
    const topic = prefix ? prefix + raw : raw;
    if (isSysTopic(raw) || isSysTopic(topic)) {
      this.publishRefused(client, st, topic, '$SYS is reserved');
      return callback(new Error('$SYS topics are reserved'));
    }
    let ok = st.writeCache.lookup(topic);
    if (ok === undefined) {
      ok = this.allows(st.principal, 'write', topic);
      st.writeCache.store(topic, ok);
    }
    if (!ok) {
      this.publishRefused(client, st, topic, 'no write permission');
      return callback(new Error('publish not authorized'));
    }
    // A retained message is state the store must keep: while it cannot write (disk full,
    // read-only, see README "Faults"), refuse it as the protocol allows (MQTT 5: a PUBACK/PUBREC
    // with a reason code, 3.1.1: the connection closes) rather than acknowledge and lose it.
    if (packet.retain && this.storeCannotWrite()) {
      this.publishRefused(client, st, topic, 'the store cannot write');
      return callback(new Error('retained messages cannot be stored now: the store cannot write'));
    }
    if (prefix) packet.topic = topic; // delivery, retained store and QoS 2 dedup use the prefixed topic
    this.counters.messagesReceived++;
    callback(null);
  }

  /** Stops reading a client's socket until its publish allowance has a token again. */
  private slowDown(client: Client, st: ClientState): void {
    if (st.slowed) return;
    // aedes 2's Client has pause()/resume() (stop and restart reading its socket), untyped.
    const reader = client as unknown as { pause(): void; resume(): void };
    st.slowed = true;
    this.counters.rateLimitPauses++;
    setTimeout(() => {
      st.slowed = false;
      if (!client.closed) reader.resume();
    }, Math.max(1, st.bucket.msUntilToken())).unref();
    reader.pause();
  }

  /** True while the broker's store (when it has one) cannot write. */
  private storeCannotWrite(): boolean {
    return this.options.store !== undefined && this.cfg.persistence.enabled && !this.options.store.writeHealth().writable;
  }

  private publishRefused(client: Client, st: ClientState, topic: string, reason: string): void {
    this.counters.publishesRefused++;
    this.log.info('mqtt publish refused, disconnecting', { clientId: client.id, username: st.principal?.username, topic, reason });
  }

  private authorizeSubscribe(
    client: Client,
    sub: { topic: string; qos: number },
    callback: (error: Error | null, subscription?: any) => void,
  ): void {
    const st = stateOf(client);
    let ok = false;
    if (st && !st.revoked && st.principal !== null) {
      try {
        ok = this.access.coversFilter(st.principal, sub.topic);
      } catch (err) {
        this.log.error('mqtt subscribe decision failed', { clientId: client.id, filter: sub.topic, error: (err as Error).message });
      }
    }
    // A persistent session's subscription is stored (aedes skips the store for clean sessions):
    // while the store cannot write, the SUBACK says 0x80 instead of promising a stored one.
    const unstorable = ok && !client.clean && this.storeCannotWrite();
    if (unstorable) ok = false;
    if (!ok) {
      this.counters.subscriptionsRefused++;
      this.log.info('mqtt subscription refused', { clientId: client.id, username: st?.principal?.username, filter: sub.topic, ...(unstorable ? { reason: 'the store cannot write' } : {}) });
    }
    // null: Aedes answers 0x80 for this filter in the SUBACK and keeps the client connected.
    callback(null, ok ? sub : null);
  }

  private authorizeForward<P extends { topic: string }>(client: Client, packet: P): P | null {
    const st = (client as GatewayClient).gatewayd;
    if (st === undefined || st.principal === null || st.revoked) return null;
    // Fast path (see ClientState.subscriptionsTrusted). Only once the session is established:
    // while connecting, Aedes replays the offline queue, whose messages may have been queued
    // for subscriptions that are no longer granted.
    const topic = packet.topic;
    // `$` topics are checked per message: aedes delivers them to `#` subscriptions too, which
    // MQTT (§4.7.2) and the permission engine do not count as covering them.
    if (st.subscriptionsTrusted && client.connected && topic.charCodeAt(0) !== 36) {
      this.counters.messagesSent++;
      return packet;
    }
    let ok = st.readCache.lookup(topic);
    if (ok === undefined) {
      ok = this.allows(st.principal, 'read', topic);
      st.readCache.store(topic, ok);
    }
    if (!ok) {
      this.counters.forwardsRefused++;
      return null;
    }
    this.counters.messagesSent++;
    return packet;
  }

  private allows(principal: MqttPrincipal, operation: 'read' | 'write', topic: string): boolean {
    try {
      return this.access.allows(principal, operation, topic) === true;
    } catch (err) {
      this.log.error('mqtt permission decision failed', { username: principal.username, operation, topic, error: (err as Error).message });
      return false;
    }
  }

  // ---------------------------------------------------------------- live changes

  private onAccessChange(change: AccessChange): void {
    try {
      if (change.kind !== 'permissions') this.revocations.record(change.userId, change.tokenFingerprints, change.passwordSessions);
      if (change.kind === 'deleted') {
        for (const [clientId, owner] of this.sessionOwners) if (owner === change.userId) this.sessionOwners.delete(clientId);
        this.persistence?.releaseSessionsOf(change.userId);
      }
      const clients = this.byUser.get(change.userId);
      if (!clients) return;
      if (change.kind === 'permissions') {
        for (const client of clients) {
          const st = client.gatewayd!;
          st.subscriptionsTrusted = false;
          st.readCache.clear();
          st.writeCache.clear();
        }
        return;
      }
      const tokens = change.kind === 'revoked' ? tokenSetOf(change) : null;
      for (const client of [...clients]) {
        const principal = client.gatewayd!.principal;
        const fp = principal?.tokenFingerprint;
        const byPassword = change.passwordSessions === true && principal?.method === 'password';
        if (tokens !== null && !byPassword && (fp === undefined || !tokens.has(fp))) continue;
        this.disconnect(client, change.kind === 'deleted' ? 'user deleted' : 'credentials revoked');
      }
    } catch (err) {
      this.log.error('mqtt access change handling failed', { userId: change.userId, kind: change.kind, error: (err as Error).message });
    }
  }

  private disconnect(client: GatewayClient, reason: string): void {
    const st = client.gatewayd!;
    if (st.revoked) return;
    st.revoked = true;
    this.forget(client);
    this.counters.revocationDisconnects++;
    this.log.audit('mqtt.session.closed', { clientId: client.id, username: st.principal?.username, reason });
    // No will: the session ends because its credentials are gone. _disconnected is what Aedes
    // checks to skip the will (set by a DISCONNECT packet); authorizePublish refuses it anyway.
    (client as unknown as { _disconnected: boolean })._disconnected = true;
    if (client.connected || client.closed) {
      client.close();
    } else {
      // Still inside the CONNECT sequence: closing now could race Aedes' registration of the
      // client; close as soon as the session is established.
      client.once('connected', () => client.close());
    }
  }
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
