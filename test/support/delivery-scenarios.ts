// Delivery scenarios run against two brokers (gatewayd and Mosquitto 2) to compare what each
// delivers: a subscriber subscribes, a message is published `delay` ms after the broker has read
// the SUBSCRIBE, and the subscriber's transcript — what it received live, and after a reconnect
// what was still owed — is what the brokers must agree on. Raw MQTT (mqtt-packet on a socket),
// so the test decides every acknowledgement: a subscriber that acknowledges, one that pauses
// (never acknowledges), a publisher that is its own subscriber, and a will.
import net from 'node:net';
import mqttPacket from 'mqtt-packet';

export type Version = 4 | 5;
export type Qos = 0 | 1 | 2;
/**
 * acks: the subscriber acknowledges; pauses: it never does (until it reconnects); self: it
 * publishes to its own subscription; will: a third client's will; retained: a retained message
 * is there before the SUBSCRIBE, and the subscriber publishes a new value of its topic `delay`
 * after it (right behind it at 0: its retained copy must still come first).
 */
export type Variant = 'acks' | 'pauses' | 'self' | 'will' | 'retained';

export interface Scenario {
  id: string;
  version: Version;
  /** false: a persistent session (MQTT 5: clean start 0, session expiry 3600 s). */
  clean: boolean;
  subQos: Qos;
  /** The QoS of the messages (or of the will). */
  msgQos: Qos;
  /** ms between the broker having read the SUBSCRIBE and the PUBLISH (or the will's trigger). */
  delay: number;
  variant: Variant;
}

export interface Delivery {
  topic: string;
  payload: string;
  qos: number;
  dup: boolean;
  retain: boolean;
}

export interface Transcript {
  /** What the subscriber received while connected, in order. */
  live: Delivery[];
  /** sessionPresent of the reconnect. */
  sessionPresent: boolean;
  /** What it received after it reconnected (the same session, or a new clean one), in order. */
  after: Delivery[];
}

export interface Credentials {
  username?: string;
  password?: Buffer;
}

/** Every combination the differential test runs (issue 35 A). */
export function allScenarios(delays: readonly number[]): Scenario[] {
  const out: Scenario[] = [];
  for (const delay of delays)
    for (const version of [4, 5] as const)
      for (const clean of [true, false])
        for (const subQos of [0, 1, 2] as const)
          for (const msgQos of [0, 1, 2] as const)
            for (const variant of ['acks', 'pauses', 'self', 'will', 'retained'] as const) {
              out.push({ id: `${variant}-v${version}-${clean ? 'c' : 'p'}-s${subQos}-m${msgQos}-d${delay}`, version, clean, subQos, msgQos, delay, variant });
            }
  return out;
}

const QUIET_MS = 200;
/** A step that waits longer fails the scenario (a machine running two other test files beside this one is slow). */
const WAIT_MS = 20_000;

/** One raw MQTT connection whose every acknowledgement the scenario decides. */
class Wire {
  readonly received: mqttPacket.Packet[] = [];
  readonly #socket: net.Socket;
  readonly #parser: ReturnType<typeof mqttPacket.parser>;
  readonly #waiters: { match: (p: mqttPacket.Packet) => boolean; resolve: (p: mqttPacket.Packet) => void }[] = [];
  /** Answer incoming QoS 1/2 publishes (PUBACK, PUBREC, PUBCOMP). */
  acknowledge = true;
  #nextId = 1;
  readonly closed: Promise<void>;

  private constructor(
    socket: net.Socket,
    readonly version: Version,
  ) {
    this.#socket = socket;
    this.#parser = mqttPacket.parser({ protocolVersion: version });
    this.#parser.on('packet', (p: mqttPacket.Packet) => this.#onPacket(p));
    this.#parser.on('error', () => socket.destroy());
    socket.on('data', (chunk: Buffer) => this.#parser.parse(chunk));
    socket.on('error', () => {});
    this.closed = new Promise((resolve) => socket.once('close', () => resolve()));
  }

  static async open(port: number, version: Version, connect: Partial<mqttPacket.IConnectPacket>): Promise<{ wire: Wire; connack: mqttPacket.IConnackPacket }> {
    const socket = net.connect(port, '127.0.0.1');
    socket.setNoDelay(true);
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', resolve);
      socket.once('error', reject);
    });
    const wire = new Wire(socket, version);
    wire.send({ cmd: 'connect', protocolId: 'MQTT', protocolVersion: version, clean: true, keepalive: 0, clientId: '', ...connect } as mqttPacket.IConnectPacket);
    const connack = (await wire.next((p) => p.cmd === 'connack', WAIT_MS, `CONNACK for ${connect.clientId}`)) as mqttPacket.IConnackPacket;
    const code = version === 5 ? connack.reasonCode : connack.returnCode;
    if (code !== 0) throw new Error(`CONNACK ${code} for ${connect.clientId}`);
    return { wire, connack };
  }

  #onPacket(p: mqttPacket.Packet): void {
    this.received.push(p);
    if (this.acknowledge) {
      if (p.cmd === 'publish' && p.qos === 1) this.send({ cmd: 'puback', messageId: p.messageId });
      else if (p.cmd === 'publish' && p.qos === 2) this.send({ cmd: 'pubrec', messageId: p.messageId });
      else if (p.cmd === 'pubrel') this.send({ cmd: 'pubcomp', messageId: p.messageId });
    }
    // The publisher's side of QoS 2.
    if (p.cmd === 'pubrec') this.send({ cmd: 'pubrel', messageId: p.messageId });
    for (let i = 0; i < this.#waiters.length; i++) {
      const w = this.#waiters[i]!;
      if (w.match(p)) {
        this.#waiters.splice(i, 1);
        w.resolve(p);
        return;
      }
    }
  }

  send(packet: mqttPacket.Packet): void {
    if (!this.#socket.destroyed) this.#socket.write(mqttPacket.generate(packet, { protocolVersion: this.version }));
  }

  /** The next packet that matches (one not received yet). */
  next(match: (p: mqttPacket.Packet) => boolean, ms = WAIT_MS, what = 'packet'): Promise<mqttPacket.Packet> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no ${what} within ${ms} ms`)), ms);
      this.#waiters.push({
        match,
        resolve: (p) => {
          clearTimeout(timer);
          resolve(p);
        },
      });
    });
  }

  messageId(): number {
    return this.#nextId++;
  }

  /** Resolves once the broker has answered a PINGREQ sent now: it has read everything sent before. */
  async ping(): Promise<void> {
    const pong = this.next((p) => p.cmd === 'pingresp', WAIT_MS, 'PINGRESP');
    this.send({ cmd: 'pingreq' });
    await pong;
  }

  /** Publishes and waits for the end of the flow (QoS 0: the broker has read it). */
  async publish(topic: string, payload: string, qos: Qos, retain = false): Promise<void> {
    if (qos === 0) {
      this.send({ cmd: 'publish', topic, payload: Buffer.from(payload), qos: 0, retain, dup: false });
      return this.ping();
    }
    const messageId = this.messageId();
    const end = this.next((p) => (p.cmd === (qos === 1 ? 'puback' : 'pubcomp')) && p.messageId === messageId, WAIT_MS, qos === 1 ? 'PUBACK' : 'PUBCOMP');
    this.send({ cmd: 'publish', topic, payload: Buffer.from(payload), qos, retain, dup: false, messageId });
    await end;
  }

  /** The PUBLISH packets received, their topics without `base` (the same for every broker). */
  deliveries(base: string): Delivery[] {
    return this.received.flatMap((p) => (p.cmd === 'publish' ? [{ topic: p.topic.startsWith(`${base}/`) ? p.topic.slice(base.length + 1) : p.topic, payload: p.payload.toString(), qos: p.qos, dup: p.dup, retain: p.retain }] : []));
  }

  get count(): number {
    return this.received.length;
  }

  disconnect(): Promise<void> {
    this.send({ cmd: 'disconnect' });
    this.#socket.end();
    return this.closed;
  }

  /** The connection breaks without a DISCONNECT (its will is published). */
  drop(): Promise<void> {
    this.#socket.destroy();
    return this.closed;
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function sessionConnect(s: Scenario, clientId: string, credentials: Credentials, clean: boolean): Partial<mqttPacket.IConnectPacket> {
  return {
    clientId,
    clean,
    ...credentials,
    ...(s.version === 5 ? { properties: { sessionExpiryInterval: clean ? 0 : 3600 } } : {}),
  } as Partial<mqttPacket.IConnectPacket>;
}

/**
 * Runs one scenario against the broker on `port`; `prefix` keeps client ids and topics apart from
 * every other run on that broker.
 */
export async function runScenario(port: number, s: Scenario, prefix: string, credentials: Credentials = {}): Promise<Transcript> {
  const base = `${prefix}/${s.id}`;
  const filter = `${base}/#`;
  const subId = `${prefix}-${s.id}-sub`;
  const { wire: sub } = await Wire.open(port, s.version, sessionConnect(s, subId, credentials, s.clean));
  sub.acknowledge = s.variant !== 'pauses';
  const publisher = s.variant === 'self' || s.variant === 'retained' ? sub : s.variant === 'will' ? undefined : (await Wire.open(port, s.version, { clientId: `${prefix}-${s.id}-pub`, ...credentials })).wire;
  const willer =
    s.variant === 'will'
      ? (
          await Wire.open(port, s.version, {
            clientId: `${prefix}-${s.id}-will`,
            ...credentials,
            will: { topic: `${base}/will`, payload: Buffer.from('gone'), qos: s.msgQos, retain: false },
          } as Partial<mqttPacket.IConnectPacket>)
        ).wire
      : undefined;

  // The value a retained scenario's subscriber must get first, published before it subscribes.
  if (s.variant === 'retained') await publisher!.publish(`${base}/r`, 'stored', s.msgQos, true);
  const subscribe = { cmd: 'subscribe', messageId: sub.messageId(), subscriptions: [{ topic: filter, qos: s.subQos }] } as mqttPacket.ISubscribePacket;
  if ((s.variant === 'self' || s.variant === 'retained') && s.delay === 0) {
    // One connection, one write: the broker reads the PUBLISH right after the SUBSCRIBE.
    sub.send(subscribe);
  } else {
    sub.send(subscribe);
    // The broker has read the SUBSCRIBE once it answers a PINGREQ sent after it.
    await sub.ping();
    await sleep(s.delay);
  }
  if (s.variant === 'retained') {
    await publisher!.publish(`${base}/r`, 'new', s.msgQos);
    await publisher!.publish(`${base}/m2`, 'two', s.msgQos);
  } else if (publisher) {
    await publisher.publish(`${base}/m1`, 'one', s.msgQos);
    await publisher.publish(`${base}/m2`, 'two', s.msgQos);
  } else {
    await willer!.drop();
    // The will comes when the broker has seen the connection end: wait for it, or give up.
    await sub.next((p) => p.cmd === 'publish' && p.topic === `${base}/will`, 3000).catch(() => undefined);
  }
  // Whatever the publishes routed to the subscriber is on its way: a barrier, then a quiet
  // moment to see that nothing more comes (an absence cannot be awaited).
  await sub.ping();
  await sleep(QUIET_MS);
  const live = sub.deliveries(base);
  // A retained scenario leaves no retained message behind.
  if (s.variant === 'retained') await publisher!.publish(`${base}/r`, '', 0, true);
  if (publisher && publisher !== sub) await publisher.disconnect();
  await sub.disconnect();

  const { wire: again, connack } = await Wire.open(port, s.version, sessionConnect(s, subId, credentials, s.clean));
  await again.ping();
  await sleep(QUIET_MS);
  const after = again.deliveries(base);
  // End the session for good: a clean connect discards it.
  await again.disconnect();
  const { wire: cleanup } = await Wire.open(port, s.version, sessionConnect(s, subId, credentials, true));
  await cleanup.disconnect();
  return { live, sessionPresent: connack.sessionPresent, after };
}
