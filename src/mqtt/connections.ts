// Every MQTT connection, whatever its transport: handed to aedes with its per-client state
// (ClientState) and limits, its socket counted for stats and destroyed at stop.
import type http from 'node:http';
import type net from 'node:net';
import type { Duplex } from 'node:stream';
import type { BrokerContext } from './broker-context.js';
import { ClientState, stateOf, type GatewayClient, type Transport } from './client-state.js';
import { recordRefusal } from './connect-refusals.js';
import { watchInboundPackets } from './inbound-packets.js';
import type { SessionRegistry } from './session-registry.js';

/** The Aedes client of a connection, for the one close listener all connections share. */
const CLIENT = Symbol('gatewayd.client');
type Connection = Duplex & { [CLIENT]?: GatewayClient };

// Listeners shared by every connection ('this' is the emitter), not closures made per connection:
// with thousands of idle devices each closure, its context and a once() wrapper count
// (docs/footprint.md, memory per connection). 'close' is emitted once, so on() is enough.

export class Connections {
  private readonly sockets = new Set<net.Socket>();
  /** Bytes of connections already closed (live ones are read from their sockets). */
  private readonly closedBytes = { received: 0, sent: 0 };
  private inboundHookMissingLogged = false;

  constructor(
    private readonly ctx: BrokerContext,
    private readonly sessions: SessionRegistry,
  ) {}

  private readonly onSocketClose = ((connections: Connections) =>
    function socketClosed(this: net.Socket): void {
      connections.sockets.delete(this);
      connections.closedBytes.received += this.bytesRead;
      connections.closedBytes.sent += this.bytesWritten;
    })(this);

  private readonly onConnectionClose = ((connections: Connections) =>
    function connectionClosed(this: Connection): void {
      const client = this[CLIENT];
      if (!client) return;
      connections.sessions.forget(client);
      client.gatewayd?.mqtt5?.closed();
      connections.ctx.shared?.forget(client as never);
    })(this);

  /** Counts a listener's socket (bytes, destroyed at stop). */
  track(socket: net.Socket): void {
    this.sockets.add(socket);
    socket.on('close', this.onSocketClose);
  }

  /** Hands a connection to Aedes and attaches the per-client state and limits. */
  accept(conn: Duplex, transport: Transport, remote: string, req?: http.IncomingMessage): void {
    const { ctx } = this;
    const aedes = ctx.aedes;
    if (!aedes || aedes.closed || ctx.stopping) {
      conn.destroy();
      return;
    }
    const client = aedes.handle(conn, req) as GatewayClient;
    // aedes 2.0.0-beta.1 keeps a client's subscriptions in a plain object: a subscription to the
    // topic `constructor` or `__proto__` found Object's own members there and ended the process
    // (mqemitter asserts on the listener it then removes), and each distinct topic name gave the
    // object a hidden class of its own (about 120 bytes per client). aedes 1.2 used an object
    // without prototype; so does gatewayd, before any subscription is made or restored.
    (client as unknown as { subscriptions: Record<string, unknown> }).subscriptions = Object.create(null) as Record<string, unknown>;
    client.gatewayd = new ClientState(transport, remote, ctx.cfg.maxPublishesPerSecond);
    if (!watchInboundPackets(client, this.onParserError) && !this.inboundHookMissingLogged) {
      this.inboundHookMissingLogged = true;
      ctx.log.warn('aedes client parser has an unexpected shape: shared subscriptions, MQTT 5 flow control and the answer to unknown protocol levels are off');
    }
    (conn as Connection)[CLIENT] = client;
    conn.on('close', this.onConnectionClose);
  }

  /** Bytes received and sent on all connections so far. */
  bytes(): { received: number; sent: number } {
    let received = this.closedBytes.received;
    let sent = this.closedBytes.sent;
    for (const socket of this.sockets) {
      received += socket.bytesRead;
      sent += socket.bytesWritten;
    }
    return { received, sent };
  }

  destroyAll(): void {
    for (const socket of this.sockets) socket.destroy();
  }

  /**
   * [MQTT-3.1.2-2]: a CONNECT of a protocol level the broker does not speak gets CONNACK return
   * code 1 before the connection closes (mosquitto does the same). mqtt-packet's parser rejects
   * it before aedes sees a CONNECT, and aedes then destroys the socket: answer first.
   */
  private readonly onParserError = (client: GatewayClient, err: Error): void => {
    // Only a first CONNECT is answered: a second one is a protocol violation that closes the
    // connection [MQTT-3.1.0-2], and a client already sent its CONNACK must not get another.
    const c = client as GatewayClient & { connecting?: boolean; connackSent?: boolean };
    if (!/protocol version/i.test(err.message) || client.connected || c.connecting || c.connackSent) return;
    const st = stateOf(client);
    const conn = client.conn as Duplex | undefined;
    if (conn?.writable) conn.write(Buffer.from([0x20, 0x02, 0x00, 0x01]));
    if (st && !st.refusalCounted) recordRefusal(this.ctx, st, { returnCode: 1, reason: err.message });
  };
}
