// aedes `preConnect` hook: the checks of a CONNECT that need no credentials (client id, keep
// alive). Refusals that need a CONNACK code are only noted here and answered from authenticate
// (authenticate.ts): Aedes sends CONNACK codes only from there, and checks the protocol version
// in between, so MQTT 5 gets 1.
//
// Keepalive: MQTT 3.1.1 cannot tell a client to use a shorter keepalive, so clamping would make
// the broker drop well-behaved clients: a keepalive above mqtt.maxKeepaliveSeconds is refused with
// CONNACK 2 (identifier rejected, as mosquitto does); an MQTT 5 client is told the server keep
// alive instead. Keepalive 0 ("never time out") is accepted unless mqtt.allowKeepaliveZero is
// false; maxKeepaliveSeconds = 0 disables the limit.
import type { Client } from 'aedes';
import type { BrokerContext } from '../broker-context.js';
import { stateOf } from '../client-state.js';
import { deliverOutOfOrder } from '../delivery-order.js';
import { Mqtt5Connection, type ConnectProperties, type Mqtt5Options } from '../mqtt5/mqtt5-connection.js';

export interface ConnectPacket {
  clientId?: string;
  clean?: boolean;
  keepalive?: number;
  protocolVersion?: number;
  properties?: ConnectProperties;
}

export type PreConnectHook = (client: Client, packet: ConnectPacket, callback: (error: Error | null, success: boolean) => void) => void;

/**
 * MQTT 5 Server Keep Alive: the CONNACK tells the client the keepalive to use instead of its
 * own. aedes 2 sets this field itself only from its keepaliveLimit option, which would make it
 * refuse MQTT 3.1.1 clients with a return code 3.1.1 does not define (6).
 */
function setServerKeepAlive(client: Client, seconds: number): void {
  (client as unknown as { _serverKeepAlive?: number })._serverKeepAlive = seconds;
}

export function createPreConnect(ctx: BrokerContext): PreConnectHook {
  const cfg = ctx.cfg;
  const mqtt5: Mqtt5Options = {
    receiveMaximum: cfg.maxInflightMessages,
    topicAliasMaximum: cfg.topicAliasMaximum,
    maxQueuedMessages: cfg.maxQueuedMessages,
    onQueueDrop: () => ctx.counters.queueDrops++,
    onTooLarge: (bytes, limit) => ctx.log.debug('mqtt publish larger than the client accepts, not sent', { bytes, limit }),
  };
  return (client, packet, callback) => {
    const st = stateOf(client);
    if (!st) return callback(new Error('unknown connection'), false);
    // Before aedes restores or adds any subscription, an MQTT 5 client's delivery functions are
    // wrapped: messages that arrive out of their order kept, then its flow control
    // (delivery-order.ts, mqtt5/). The merge of overlapping subscriptions wraps them at the first
    // subscription granted (authorize-subscribe.ts), and keeps an MQTT 3.1.1 client's order
    // itself: a client that never subscribes carries neither.
    if (st.mqtt5 === undefined && packet.protocolVersion === 5) {
      deliverOutOfOrder(client as never);
      st.mqtt5 = new Mqtt5Connection(client, packet.properties ?? {}, mqtt5);
    }
    const clientId = packet.clientId ?? '';
    const maxKeepalive = cfg.maxKeepaliveSeconds;
    const keepalive = packet.keepalive ?? 0;
    if (Buffer.byteLength(clientId, 'utf8') > cfg.maxClientIdLength) {
      st.refuseCode = 2;
      st.refuseReason = `client id longer than ${cfg.maxClientIdLength} bytes`;
    } else if (clientId === '' && packet.clean === false && packet.protocolVersion !== 5) {
      // [MQTT-3.1.3-8] of 3.1.1; MQTT 5 assigns an id instead (a new session) [MQTT-3.1.3-6].
      st.refuseCode = 2;
      st.refuseReason = 'an empty client id needs a clean session';
    } else if (keepalive === 0 && !cfg.allowKeepaliveZero) {
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
  };
}
