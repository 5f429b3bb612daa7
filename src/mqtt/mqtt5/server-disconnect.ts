// Server DISCONNECT with a reason code (MQTT 5 §3.14) from the moment the CONNACK is sent.
// Exists because aedes 2.0.0-beta.1 writes the DISCONNECT only once `client.connected` is set,
// which happens after it has replayed the session's queue; a packet it handles in between (sent
// right after the CONNACK: an invalid topic alias, a packet too large, a rate limit) closed the
// connection without telling the client why (Paho test_client_topic_alias, now and then).
import type { Client } from 'aedes';
import { writePacket } from '../outbound-packets.js';

interface DisconnectOptions {
  reasonCode?: number;
  properties?: Record<string, unknown>;
}

interface AedesClient {
  version?: number | null;
  connected: boolean;
  connackSent?: boolean;
  closed: boolean;
  errored?: boolean;
  conn: object;
  disconnectReasonCode?: number | null;
  close(done?: () => void): void;
  disconnect(opts?: DisconnectOptions | (() => void), done?: () => void): void;
}

/** Installs the early DISCONNECT on one MQTT 5 connection (before its CONNECT is handled). */
export function disconnectFromConnack(client: Client): void {
  const c = client as unknown as AedesClient;
  const disconnect = c.disconnect;
  c.disconnect = function (this: AedesClient, opts?: DisconnectOptions | (() => void), done?: () => void): void {
    if (typeof opts === 'function') {
      done = opts;
      opts = {};
    }
    if (this.version === 5 && !this.connected && this.connackSent && !this.closed && !this.errored) {
      const reasonCode = opts?.reasonCode ?? 0;
      this.disconnectReasonCode = reasonCode;
      writePacket({ cmd: 'disconnect', reasonCode, ...(opts?.properties ? { properties: opts.properties } : {}) }, this.conn, 5);
      // As aedes' own write: the close (which destroys the socket) comes a turn later, once written.
      setImmediate(() => this.close(done));
      return;
    }
    disconnect.call(this, opts, done);
  };
}

/** Disconnects an MQTT 5 client with a reason code (through aedes, or as above). */
export function disconnectWith(client: Client, reasonCode: number): void {
  const c = client as unknown as AedesClient;
  if (!c.closed) c.disconnect({ reasonCode }, () => {});
}
