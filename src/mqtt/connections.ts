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

export class Connections {
  private readonly sockets = new Set<net.Socket>();
  /** Bytes of connections already closed (live ones are read from their sockets). */
  private readonly closedBytes = { received: 0, sent: 0 };
  private inboundHookMissingLogged = false;

  constructor(
    private readonly ctx: BrokerContext,
    private readonly sessions: SessionRegistry,
  ) {}

  /** Counts a listener's socket (bytes, destroyed at stop). */
  track(socket: net.Socket): void {
    this.sockets.add(socket);
    socket.once('close', () => {
      this.sockets.delete(socket);
      this.closedBytes.received += socket.bytesRead;
      this.closedBytes.sent += socket.bytesWritten;
    });
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
    client.gatewayd = new ClientState(transport, remote, ctx.cfg.maxPublishesPerSecond);
    if (!watchInboundPackets(client) && !this.inboundHookMissingLogged) {
      this.inboundHookMissingLogged = true;
      ctx.log.warn('aedes client parser has an unexpected shape: shared subscriptions and MQTT 5 flow control are off');
    }
    this.answerUnsupportedVersion(client, conn);
    conn.once('close', () => {
      this.sessions.forget(client);
      client.gatewayd?.mqtt5?.closed();
      ctx.shared?.forget(client as never);
    });
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
  private answerUnsupportedVersion(client: GatewayClient, conn: Duplex): void {
    const parser = client._parser as { prependListener?: (event: 'error', fn: (err: Error) => void) => void } | undefined;
    parser?.prependListener?.('error', (err: Error) => {
      if (!/protocol version/i.test(err.message) || client.connected) return;
      const st = stateOf(client);
      if (conn.writable) conn.write(Buffer.from([0x20, 0x02, 0x00, 0x01]));
      if (st && !st.refusalCounted) recordRefusal(this.ctx, st, { returnCode: 1, reason: err.message });
    });
  }
}
