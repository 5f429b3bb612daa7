// The bridge's connection to the upstream broker (mqtt.js): the URLs are tried in order until
// one connects (failover); mqtt, mqtts, ws and wss; MQTT 3.1.1 or 5; always a persistent session
// (clean session 0 / clean start 0 with a session expiry), so what the upstream broker queued
// for the bridge's subscriptions while the gateway was away arrives too. mqtt.js's own
// reconnection is off: each attempt is a new client, and the bridge decides when to try again.
//
// MQTT 3.1.1 and loops: like Mosquitto's `try_private`, the CONNECT announces a bridge (protocol
// level 0x84); Mosquitto then never sends the bridge's own messages back to it (MQTT 5 has
// no-local for that). A broker that answers "unacceptable protocol version" is asked again
// without it, and the link remembers that for its life.
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import type { IClientOptions, IClientPublishOptions, IPublishPacket, ISubscriptionMap, MqttClient } from 'mqtt';
import { corked, storeKeepingNothing, wrapWriter } from './client-writes.js';
import type { MessageProperties } from './queue-record.js';

export interface RemoteOptions {
  urls: string[];
  protocolVersion: 4 | 5;
  clientId: string;
  username?: string;
  password?: string;
  /** Absolute paths (resolved in the data directory). */
  caFile?: string;
  certFile?: string;
  keyFile?: string;
  keepaliveSeconds: number;
  connectTimeoutMs: number;
  /** MQTT 5: the session expiry interval asked for. */
  sessionExpirySeconds: number;
  /** MQTT 3.1.1: announce a bridge (protocol level 0x84), as Mosquitto's try_private. */
  tryPrivate: boolean;
}

export interface IncomingMessage {
  topic: string;
  payload: Buffer;
  qos: 0 | 1 | 2;
  retain: boolean;
  properties?: MessageProperties;
}

export interface LinkHandlers {
  /** A message from upstream; the upstream broker gets its PUBACK once the promise resolves (none when it rejects). */
  message(m: IncomingMessage): Promise<void>;
  /** The connection ended (not called after close()). */
  lost(reason: string): void;
}

export interface OpenLink {
  url: string;
  sessionPresent: boolean;
  /** The upstream broker will not send the bridge's own publications back (MQTT 5 no-local, or a 3.1.1 bridge connection). */
  noEcho: boolean;
  /** How many QoS 1/2 publications upstream takes at once (its receive maximum, MQTT 5). */
  receiveMaximum: number;
  publish(topic: string, payload: Buffer, options: { qos: 0 | 1 | 2; retain: boolean; properties?: MessageProperties }, done: (error?: Error) => void): void;
  /** Runs `send` with the connection corked: the publications it makes leave in one write. */
  batch(send: () => void): void;
  subscribe(subscriptions: { filter: string; qos: 0 | 1 | 2 }[]): Promise<void>;
  close(): Promise<void>;
}

/** The text of an error, without anything that could carry a credential. */
export function linkErrorText(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  return text.replace(/\/\/[^/@\s]*@/g, '//***@');
}

/** Keeps `url` displayable: never with credentials (the schema refuses them anyway). */
export const displayUrl = (url: string) => url.replace(/\/\/[^/@]*@/, '//***@');

type MqttModule = typeof import('mqtt');
const CLOSED_BEFORE_CONNACK = 'connection closed before CONNACK';

export function createUpstream(options: RemoteOptions, onPrivateRefused?: () => void) {
  /** The remote refused the 3.1.1 bridge protocol level once: not asked again. */
  let privateRefused = false;
  let refusalSeen = false;

  const clientOptions = (): IClientOptions => {
    const o: IClientOptions = {
      clientId: options.clientId,
      reconnectPeriod: 0,
      connectTimeout: options.connectTimeoutMs,
      keepalive: options.keepaliveSeconds,
      clean: false,
      resubscribe: false,
      protocolVersion: options.protocolVersion,
      // Connected below, once the CONNECT can be marked as a bridge's.
      manualConnect: true,
      // mqtt.js logs through `debug` several times per packet; the bridge logs what matters itself.
      log: () => {},
      // Not a timer reset per acknowledgement: a PINGREQ every keepalive is as good for a busy link.
      reschedulePings: false,
      ...(options.username !== undefined ? { username: options.username } : {}),
      ...(options.password !== undefined ? { password: options.password } : {}),
      ...(options.protocolVersion === 5 ? { properties: { sessionExpiryInterval: options.sessionExpirySeconds } } : {}),
    };
    // Read at every attempt: a renewed certificate is used without a restart.
    const file = (path: string, what: string) => {
      try {
        return readFileSync(path);
      } catch (err) {
        throw new Error(`cannot read ${what} ${basename(path)}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
      }
    };
    if (options.caFile) o.ca = file(options.caFile, 'caFile');
    if (options.certFile) o.cert = file(options.certFile, 'certFile');
    if (options.keyFile) o.key = file(options.keyFile, 'keyFile');
    return o;
  };

  function attempt(mqtt: MqttModule, url: string, handlers: LinkHandlers): Promise<OpenLink> {
    return new Promise<OpenLink>((resolve, reject) => {
      let opts: IClientOptions;
      try {
        opts = clientOptions();
      } catch (err) {
        reject(err);
        return;
      }
      const askedPrivate = options.protocolVersion === 4 && options.tryPrivate && !privateRefused;
      const c: MqttClient = mqtt.connect(url, { ...opts, outgoingStore: storeKeepingNothing(mqtt) });
      wrapWriter(c, askedPrivate, options.protocolVersion);
      let settled = false;
      let closed = false;
      // A broker that accepts TCP and then says nothing (a stalled link) is given up after the connect timeout.
      const timer = setTimeout(() => fail(new Error(`no CONNACK within ${options.connectTimeoutMs} ms`)), options.connectTimeoutMs + 1000);
      function fail(err: Error & { code?: number }) {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        // Refused with "unacceptable protocol version" (Mosquitto's answer) or closed without a
        // word (RabbitMQ's): asked again at once as a plain 3.1.1 client.
        if (askedPrivate && (err.code === 1 || err.message === CLOSED_BEFORE_CONNACK)) privateRefused = true;
        c.end(true);
        reject(err);
      }
      c.on('error', (err) => fail(err));
      c.once('close', () => fail(new Error(CLOSED_BEFORE_CONNACK)));
      c.handleMessage = (packet, callback) => {
        const p = packet as IPublishPacket;
        const m: IncomingMessage = { topic: p.topic, payload: Buffer.isBuffer(p.payload) ? p.payload : Buffer.from(p.payload), qos: p.qos, retain: p.retain };
        if (p.properties) m.properties = p.properties as MessageProperties;
        // Not taken (the broker stopping): no acknowledgement; the connection ends and upstream
        // sends it again on the next one (persistent session).
        handlers.message(m).then(
          () => callback(),
          (err: Error) => callback(err),
        );
      };
      c.once('connect', (connack) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        c.on('close', () => {
          if (closed) return;
          closed = true;
          c.end(true);
          handlers.lost('connection to the upstream broker closed');
        });
        const receiveMaximum = options.protocolVersion === 5 ? (connack.properties?.receiveMaximum ?? 65535) : 65535;
        resolve({
          url,
          sessionPresent: connack.sessionPresent,
          noEcho: options.protocolVersion === 5 || (askedPrivate && !privateRefused),
          receiveMaximum,
          publish(topic, payload, o, done) {
            const po: IClientPublishOptions = { qos: o.qos, retain: o.retain };
            if (o.properties && options.protocolVersion === 5) po.properties = o.properties as IClientPublishOptions['properties'];
            c.publish(topic, payload, po, (err?: Error, packet?: unknown) => {
              // MQTT 5: a PUBACK/PUBREC with a reason code of 0x80 or more refuses the message
              // (mqtt.js calls back with an error whose code is the reason code, and the ack).
              const rc = (err as { code?: unknown } | undefined)?.code ?? (packet as { reasonCode?: number } | undefined)?.reasonCode;
              if (typeof rc === 'number' && rc >= 0x80) done(Object.assign(new Error(`refused upstream (reason code 0x${rc.toString(16)})`), { refused: true }));
              else done(err);
            });
          },
          batch: (send) => corked(c, send),
          subscribe(subscriptions) {
            if (subscriptions.length === 0) return Promise.resolve();
            const map: ISubscriptionMap = {};
            // no local: the bridge's own publications do not come back; retain as published: the
            // retained flag reaches the rule (MQTT 5; 3.1.1 brokers keep it only for retained copies).
            for (const s of subscriptions) map[s.filter] = options.protocolVersion === 5 ? { qos: s.qos, nl: true, rap: true } : { qos: s.qos };
            return new Promise<void>((ok, ko) =>
              c.subscribe(map, (err, granted) => {
                if (err) return ko(err);
                const refused = (granted ?? []).filter((g) => g.qos === 128 || (g as { reasonCode?: number }).reasonCode! >= 0x80);
                if (refused.length) return ko(new Error(`upstream refused the subscription to ${refused.map((g) => g.topic).join(', ')}`));
                ok();
              }),
            );
          },
          close() {
            closed = true;
            return new Promise<void>((done) => {
              // Bounded: a stalled upstream must not hold up a stop.
              const t = setTimeout(() => {
                c.end(true);
                done();
              }, 2000);
              c.end(false, {}, () => {
                clearTimeout(t);
                done();
              });
            });
          },
        });
      });
      c.connect();
    });
  }

  return {
    /**
     * Connects to the first URL that answers, in order; rejects with every URL's reason when
     * none does. `handlers` serve the connection that opens.
     */
    async open(handlers: LinkHandlers): Promise<OpenLink> {
      // mqtt.js is loaded by the first bridge (gateways without bridges keep the memory).
      const mqtt = await import('mqtt');
      const reasons: string[] = [];
      for (const url of options.urls) {
        try {
          return await attempt(mqtt, url, handlers);
        } catch (err) {
          // A 3.1.1 broker that refused the bridge protocol level: at once again without it.
          if (privateRefused && !refusalSeen) {
            refusalSeen = true;
            onPrivateRefused?.();
            try {
              return await attempt(mqtt, url, handlers);
            } catch (again) {
              reasons.push(`${displayUrl(url)}: ${linkErrorText(again)}`);
              continue;
            }
          }
          reasons.push(`${displayUrl(url)}: ${linkErrorText(err)}`);
        }
      }
      throw new Error(reasons.join('; '));
    },
  };
}
export type Upstream = ReturnType<typeof createUpstream>;
