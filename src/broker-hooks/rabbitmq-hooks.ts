import type { MqttPrincipal } from '../mqtt/index.js';
import type { HookService } from './hook-service.js';

// rabbitmq_auth_backend_http (RabbitMQ 3.10) with the MQTT plugin: four POSTs with form bodies,
// answered `allow` or `deny` as text. What RabbitMQ 3.10.8 sends (recorded from the real broker,
// test/broker-hooks-rabbitmq.test.ts runs against it):
//   user      username, password (absent for a certificate login), vhost, client_id
//   vhost     username, vhost, ip (the MQTT client's), tags, client_id
//   resource  username, vhost, resource (queue|exchange), name, permission (configure|write|read), tags, client_id
//   topic     username, vhost, resource=topic, name (the exchange), permission (write|read), tags,
//             routing_key, variable_map.client_id, variable_map.username, variable_map.vhost

export interface RabbitUserRequest {
  username: string;
  password?: string;
  vhost?: string;
  client_id?: string;
}
export interface RabbitVhostRequest {
  username: string;
  vhost: string;
  ip?: string;
  client_id?: string;
}
export interface RabbitResourceRequest {
  username: string;
  vhost: string;
  resource: string;
  name: string;
  permission: string;
  client_id?: string;
}
export interface RabbitTopicRequest extends RabbitResourceRequest {
  routing_key: string;
  'variable_map.client_id'?: string;
}

export type RabbitAnswer = 'allow' | 'deny';

/** The exchange the MQTT plugin publishes to and binds subscriptions on (mqtt.exchange). */
const MQTT_EXCHANGE = 'amq.topic';
/** The queues the MQTT plugin declares for a client's subscriptions (QoS 0 and QoS 1). */
const SUBSCRIPTION_QUEUE = /^mqtt-subscription-(.*)qos[01]$/s;

/** An AMQP routing key (or binding key) of the MQTT plugin back to the MQTT topic (filter). */
export function mqttTopicOf(routingKey: string): string {
  return routingKey.replaceAll('.', '/').replaceAll('*', '+');
}

export function createRabbitHooks(deps: { service: HookService; vhost: () => string }) {
  const { service } = deps;
  const answer = (ok: boolean): RabbitAnswer => (ok ? 'allow' : 'deny');
  const principalOf = (username: string, clientId: string | undefined, vhost: string | undefined): MqttPrincipal | undefined =>
    vhost === deps.vhost() ? service.principal('rabbitmq', clientId, username) : undefined;

  return {
    /** No tags: a gatewayd user is never a management user of the cluster. */
    async user(req: RabbitUserRequest): Promise<RabbitAnswer> {
      const decision = await service.login({
        via: 'rabbitmq',
        clientId: req.client_id ?? '',
        username: req.username,
        // Only a certificate login (mqtt.ssl_cert_login, the CN as username) comes without a password.
        ...(req.password !== undefined ? { password: req.password } : { certificate: { commonName: req.username } }),
      });
      return answer(decision.allowed);
    },

    vhost: (req: RabbitVhostRequest): RabbitAnswer => answer(principalOf(req.username, req.client_id, req.vhost) !== undefined),

    /**
     * The queues and the exchange the MQTT plugin uses for a client, for a user who may use MQTT
     * at all (what flows through them is decided on the topic hook). Anything else: deny.
     */
    resource(req: RabbitResourceRequest): RabbitAnswer {
      if (!principalOf(req.username, req.client_id, req.vhost)) return 'deny';
      if (req.resource === 'exchange') return answer(req.name === MQTT_EXCHANGE && (req.permission === 'read' || req.permission === 'write'));
      if (req.resource === 'queue') {
        const owner = SUBSCRIPTION_QUEUE.exec(req.name)?.[1];
        return answer(owner !== undefined && (req.client_id === undefined || owner === req.client_id));
      }
      return 'deny';
    },

    /** write: a publish to the routing key's topic; read: a subscription with the binding key's filter. */
    topic(req: RabbitTopicRequest): RabbitAnswer {
      if (req.resource !== 'topic' || req.name !== MQTT_EXCHANGE) return 'deny';
      const principal = principalOf(req.username, req['variable_map.client_id'] ?? req.client_id, req.vhost);
      if (!principal) return 'deny';
      const topic = mqttTopicOf(req.routing_key);
      if (req.permission === 'write') return answer(service.publish(principal, topic, false).allowed);
      if (req.permission === 'read') return answer(service.subscribe(principal, topic));
      return 'deny';
    },
  };
}
export type RabbitHooks = ReturnType<typeof createRabbitHooks>;
