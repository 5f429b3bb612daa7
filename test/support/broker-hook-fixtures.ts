// Request bodies the cluster brokers send to gatewayd's hooks, as their documentation (or, for
// RabbitMQ, the real broker) gives them. VerneMQ and EMQX cannot be installed here, so their hooks
// are tested against these documented bodies and answers; RabbitMQ's are also exercised live by
// test/broker-hooks-rabbitmq.test.ts. Only the values change (the test's user, password, client
// id); the shape is the source's.

/** A login as the fixtures fill it in. */
export interface Who {
  username: string;
  password: string | null;
  clientId: string;
  peerAddr?: string;
}

// ---------------------------------------------------------------------------------------------
// VerneMQ webhooks: vernemq/vmq-docs, plugindevelopment/webhookplugins.md (commit a2d9a7c,
// "Webhook specs"), header `vernemq-hook: <name>`, and the answers documented there:
// {"result": "ok"}, {"result": "next"}, {"result": {"error": "not_allowed"}}, subscribe `topics`
// with qos 128 for a refused filter (_m5: `modifiers.topics`, 135 not authorized), publish
// `modifiers.topic` to rewrite the topic, caching by `cache-control: max-age=<seconds>`.
// `client_cert` (base64 DER, with a listener's forward_connection_opts) is from
// vmq_webhooks_plugin.erl (vernemq/vernemq, encode_payload).
// ---------------------------------------------------------------------------------------------

export const vernemq = {
  /** "auth_on_register" — Webhook example payload. */
  authOnRegister: (w: Who) => ({
    peer_addr: w.peerAddr ?? '127.0.0.1',
    peer_port: 8888,
    username: w.username,
    password: w.password,
    mountpoint: '',
    client_id: w.clientId,
    clean_session: false,
  }),
  /** "auth_on_register_m5" — Webhook example payload. */
  authOnRegisterM5: (w: Who) => ({
    peer_addr: w.peerAddr ?? '127.0.0.1',
    peer_port: 8888,
    mountpoint: '',
    client_id: w.clientId,
    username: w.username,
    password: w.password,
    clean_start: true,
    properties: {},
  }),
  /** "auth_on_subscribe" — Webhook example payload (topics a/b QoS 1 and c/d QoS 2). */
  authOnSubscribe: (w: Pick<Who, 'username' | 'clientId'>, topics = [{ topic: 'a/b', qos: 1 }, { topic: 'c/d', qos: 2 }]) => ({
    client_id: w.clientId,
    mountpoint: '',
    username: w.username,
    topics,
  }),
  /** "auth_on_subscribe_m5" — Webhook example payload. */
  authOnSubscribeM5: (w: Pick<Who, 'username' | 'clientId'>, topics = [{ topic: 'test/topic', qos: 1 }]) => ({
    username: w.username,
    mountpoint: '',
    client_id: w.clientId,
    topics,
    properties: {},
  }),
  /** "auth_on_publish" — Webhook example payload (payload not base64 encoded, as in the docs). */
  authOnPublish: (w: Pick<Who, 'username' | 'clientId'>, topic = 'a/b') => ({
    username: w.username,
    client_id: w.clientId,
    mountpoint: '',
    qos: 1,
    topic,
    payload: 'hello',
    retain: false,
  }),
  /** "auth_on_publish_m5" — Webhook example payload. */
  authOnPublishM5: (w: Pick<Who, 'username' | 'clientId'>, topic = 'some/topic') => ({
    username: w.username,
    mountpoint: '',
    client_id: w.clientId,
    qos: 1,
    topic,
    payload: 'message payload',
    retain: false,
    properties: {},
  }),
  answers: {
    ok: { result: 'ok' },
    next: { result: 'next' },
    notAllowed: { result: { error: 'not_allowed' } },
  },
};

// ---------------------------------------------------------------------------------------------
// EMQX 5: emqx/emqx-docs (commit 9046f8cb). The request bodies are what the operator configures
// (authn/http.md "Configure with Configuration Items": body { username = "${username}",
// password = "${password}" }, plus the placeholders of authn/authn.md "Authentication
// Placeholders" and authz/http.md "Request" that docs/scaling-out.md adds); EMQX renders every
// placeholder as a string. The answers: authn/http.md "HTTP Request and Response" (result
// allow|deny|ignore, is_superuser, acl, expire_at in Unix seconds), authn/acl.md "New Format"
// (permission, action, topic; `eq` for a literal topic) and authz/http.md "Response".
// ---------------------------------------------------------------------------------------------

export const emqx = {
  /** The authn body of docs/scaling-out.md as EMQX renders it. */
  authn: (w: Who & { certCommonName?: string }) => ({
    clientid: w.clientId,
    username: w.username,
    password: w.password ?? '',
    peerhost: w.peerAddr ?? '127.0.0.1',
    cert_common_name: w.certCommonName ?? '',
  }),
  /** The authz body of docs/scaling-out.md (`${qos}`, `${retain}` rendered as strings). */
  authz: (w: Pick<Who, 'username' | 'clientId'>, action: 'publish' | 'subscribe', topic: string) => ({
    clientid: w.clientId,
    username: w.username,
    peerhost: '127.0.0.1',
    action,
    topic,
    qos: '1',
    retain: 'false',
  }),
};

// ---------------------------------------------------------------------------------------------
// RabbitMQ 3.10.8: recorded from the real broker (Debian's rabbitmq-server with
// rabbitmq_auth_backend_http and rabbitmq_mqtt, auth_http.http_method = post) for an MQTT client
// `cid-1` that connected, subscribed a/+/c and published x/y.z. Form bodies (application/x-www-form-urlencoded).
// ---------------------------------------------------------------------------------------------

export const rabbitmq = {
  user: (w: Who) => ({ username: w.username, ...(w.password !== null ? { password: w.password } : {}), vhost: '/', client_id: w.clientId }),
  vhost: (w: Pick<Who, 'username' | 'clientId'>) => ({ username: w.username, vhost: '/', ip: '127.0.0.1', tags: '', client_id: w.clientId }),
  /** resource=queue mqtt-subscription-<client id>qos1 configure|read|write, exchange amq.topic read|write. */
  resource: (w: Pick<Who, 'username' | 'clientId'>, resource: 'queue' | 'exchange', name: string, permission: 'configure' | 'read' | 'write') => ({
    username: w.username,
    vhost: '/',
    resource,
    name,
    permission,
    tags: '',
    client_id: w.clientId,
  }),
  /** A publish (write, the topic as routing key: / → ., + → *) or a subscription (read, the binding key). */
  topic: (w: Pick<Who, 'username' | 'clientId'>, permission: 'read' | 'write', routingKey: string) => ({
    username: w.username,
    vhost: '/',
    resource: 'topic',
    name: 'amq.topic',
    permission,
    tags: '',
    routing_key: routingKey,
    'variable_map.client_id': w.clientId,
    'variable_map.username': w.username,
    'variable_map.vhost': '/',
  }),
};
