// Shared subscriptions: `$share/<group>/<filter>` (MQTT 5 §4.8.2; accepted from MQTT 3.1.1
// clients too, as Mosquitto does). Each message matching <filter> goes to ONE member of the
// group. Exists because aedes 2.0.0-beta.1 refuses them (SUBACK 0x9E and
// `sharedSubscriptionAvailable: false` in every CONNACK: an aedes cluster would spread a group
// over its instances; gatewayd's broker is one instance).
//
// Around aedes:
// - `$share/g/f` in a SUBSCRIBE or UNSUBSCRIBE is renamed `$gatewayd-share/g/f` before aedes
//   reads the packet (inbound-packets.ts). aedes then grants, stores, restores and removes it like
//   any subscription: durable in a persistent session (reconnect, restart) like the others. The
//   permission engine decides on <filter> alone (handlers/authorize-subscribe.ts).
// - aedes' subscribe of a renamed filter registers nothing in its emitter (aedes.subscribe and
//   aedes.unsubscribe are wrapped); the subscription joins the group (g, f) instead, with the
//   delivery function aedes made for it (subscription identifier, retain as published, the
//   client's deliverQoS/deliver0: authorizeForward and flow control apply as to any delivery).
//   The group holds ONE emitter subscription on <filter> and hands each message to the next
//   connected member, round robin.
// - A member whose session outlives its connection stays in the group while it is away: a QoS 1/2
//   message that finds no connected member is queued in one such session (round robin too),
//   delivered when it comes back. Members are known from their subscribe since this start: after
//   a restart a persistent member counts again from its reconnect.
// - Retained messages are not sent to shared subscriptions [MQTT-3.8.4-3 note, §4.8.2]: the
//   renamed filter matches no retained topic.
import type { Aedes } from 'aedes';

const SHARE = '$share/';
/** The name aedes knows a shared subscription by (it must not start with `$share/`, which aedes refuses). */
export const SHARED_PREFIX = '$gatewayd-share/';

type Deliver = (packet: SharedDelivery, done: (err?: unknown) => void) => void;

interface SharedDelivery {
  topic: string;
  qos: number;
}

/** The parts of an aedes client a group uses. */
export interface MemberClient {
  id: string;
  clean: boolean;
  closed: boolean;
  subscriptions: Record<string, { qos?: number; func?: unknown } | undefined>;
}

export function isSharedFilter(filter: string): boolean {
  return filter.startsWith(SHARED_PREFIX);
}

/** `$share/g/f` → aedes' name for it; anything else (an invalid share name too) unchanged. */
export function renameSharedFilter(filter: string): string {
  if (!filter.startsWith(SHARE)) return filter;
  const slash = filter.indexOf('/', SHARE.length);
  const group = filter.slice(SHARE.length, slash);
  // [MQTT-4.8.2-1/2]: a non-empty share name without wildcards, then a non-empty filter.
  if (slash < 0 || group.length === 0 || /[+#]/.test(group) || slash === filter.length - 1) return filter;
  return SHARED_PREFIX + filter.slice(SHARE.length);
}

/** The share name and topic filter of aedes' name of a shared subscription. */
export function sharedParts(filter: string): { group: string; filter: string } | undefined {
  if (!isSharedFilter(filter)) return undefined;
  const slash = filter.indexOf('/', SHARED_PREFIX.length);
  return { group: filter.slice(SHARED_PREFIX.length, slash), filter: filter.slice(slash + 1) };
}

/** The filter the permission engine decides on: without `$share/<group>/`. */
export function filterToAuthorize(filter: string): string {
  return sharedParts(filter)?.filter ?? filter;
}

/** The filter as the client wrote it (logs). */
export function filterAsWritten(filter: string): string {
  return isSharedFilter(filter) ? SHARE + filter.slice(SHARED_PREFIX.length) : filter;
}

/** Renames the shared filters of a SUBSCRIBE or UNSUBSCRIBE in place. */
export function renameSharedFilters(packet: { cmd: string; subscriptions?: Array<{ topic: string }>; unsubscriptions?: string[] }): void {
  if (packet.subscriptions) {
    for (const sub of packet.subscriptions) {
      if (sub.topic.startsWith(SHARE)) sub.topic = renameSharedFilter(sub.topic);
    }
  } else if (packet.unsubscriptions) {
    const u = packet.unsubscriptions;
    for (let i = 0; i < u.length; i++) if (u[i]!.startsWith(SHARE)) u[i] = renameSharedFilter(u[i]!);
  }
}

interface Member {
  client: MemberClient | undefined;
  deliver: Deliver;
  /** Granted QoS of the member's subscription. */
  qos: number;
}

class Group {
  readonly connected: Member[] = [];
  /** clientId → member whose session outlives its closed connection. */
  readonly away = new Map<string, MemberClient>();
  private turn = 0;
  private awayTurn = 0;
  readonly listener: Deliver;

  constructor(
    readonly filter: string,
    enqueue: (clientId: string, packet: SharedDelivery) => Promise<unknown>,
  ) {
    // `#` and `+` never match `$` topics (MQTT 4.7.2).
    const noDollar = filter.charCodeAt(0) === 43 || filter.charCodeAt(0) === 35;
    this.listener = (packet, done) => {
      if (noDollar && packet.topic.charCodeAt(0) === 36) return done();
      const n = this.connected.length;
      if (n > 0) {
        if (this.turn >= n) this.turn = 0;
        const member = this.connected[this.turn++]!;
        const client = member.client;
        // A persistent session's QoS 1/2 delivery must be in its stored queue (aedes gives it a
        // packet id there): as aedes' own enqueue does for non-shared subscriptions.
        if (packet.qos > 0 && member.qos > 0 && client !== undefined && !client.clean) {
          enqueue(client.id, packet).then(
            () => member.deliver(packet, done),
            () => done(),
          );
          return;
        }
        member.deliver(packet, done);
        return;
      }
      if (packet.qos > 0 && this.away.size > 0) {
        if (this.awayTurn >= this.away.size) this.awayTurn = 0;
        let i = 0;
        for (const clientId of this.away.keys()) {
          if (i++ === this.awayTurn) {
            this.awayTurn++;
            enqueue(clientId, packet).then(() => done(), () => done());
            return;
          }
        }
      }
      done();
    };
  }

  get empty(): boolean {
    return this.connected.length === 0 && this.away.size === 0;
  }
}

type SubscribeFn = (topic: string, func: Deliver, done?: (err?: unknown) => void) => void;

/**
 * The groups of one aedes instance. install() wraps aedes.subscribe/unsubscribe (renamed filters
 * go to groups) and the persistence's cleanSubscriptions (a session that ends leaves its groups).
 */
export class SharedSubscriptions {
  private readonly groups = new Map<string, Group>();
  /** Renamed filter → clients authorized for it whose subscription aedes has not added yet. */
  private readonly expected = new Map<string, Set<MemberClient>>();
  private subscribe!: SubscribeFn;
  private unsubscribe!: SubscribeFn;

  constructor(private readonly aedes: Aedes) {}

  install(): void {
    const aedes = this.aedes as unknown as { subscribe: SubscribeFn; unsubscribe: SubscribeFn };
    this.subscribe = aedes.subscribe.bind(aedes);
    this.unsubscribe = aedes.unsubscribe.bind(aedes);
    aedes.subscribe = (topic, func, done) => (isSharedFilter(topic) ? this.join(topic, func, done) : this.subscribe(topic, func, done));
    aedes.unsubscribe = (topic, func, done) => (isSharedFilter(topic) ? this.leave(topic, func, done) : this.unsubscribe(topic, func, done));
    const persistence = (this.aedes as unknown as { persistence: { cleanSubscriptions(client: { id: string }): Promise<unknown> } }).persistence;
    const clean = persistence.cleanSubscriptions.bind(persistence);
    persistence.cleanSubscriptions = (client) => {
      this.sessionEnded(client.id);
      return clean(client);
    };
  }

  /** authorizeSubscribe granted a shared subscription to this client: aedes adds it next. */
  expect(client: MemberClient, renamed: string): void {
    let set = this.expected.get(renamed);
    if (!set) this.expected.set(renamed, (set = new Set()));
    set.add(client);
  }

  /** The connection closed: it adds no more subscriptions. */
  forget(client: MemberClient): void {
    for (const [renamed, set] of this.expected) if (set.delete(client) && set.size === 0) this.expected.delete(renamed);
  }

  /** Members, connected and away, of a group (tests, stats). */
  members(renamed: string): { connected: number; away: number } {
    const g = this.groups.get(renamed);
    return { connected: g?.connected.length ?? 0, away: g?.away.size ?? 0 };
  }

  private join(renamed: string, deliver: Deliver, done?: (err?: unknown) => void): void {
    const client = this.ownerOf(renamed, deliver);
    const group = this.group(renamed);
    if (client) group.away.delete(client.id);
    const existing = group.connected.findIndex((m) => m.deliver === deliver || (client !== undefined && m.client === client));
    const member: Member = { client, deliver, qos: client?.subscriptions[renamed]?.qos ?? 0 };
    if (existing >= 0) group.connected[existing] = member;
    else group.connected.push(member);
    if (done) setImmediate(done);
  }

  private leave(renamed: string, deliver: Deliver, done?: (err?: unknown) => void): void {
    const group = this.groups.get(renamed);
    if (group) {
      const i = group.connected.findIndex((m) => m.deliver === deliver);
      if (i >= 0) {
        const [member] = group.connected.splice(i, 1);
        const client = member!.client;
        // aedes unsubscribes every subscription of a closing connection; a persistent session keeps them.
        if (client !== undefined && client.closed && !client.clean) group.away.set(client.id, client);
      }
      this.dropIfEmpty(renamed, group);
    }
    if (done) setImmediate(done);
  }

  private sessionEnded(clientId: string): void {
    for (const [renamed, group] of this.groups) {
      if (group.away.delete(clientId)) this.dropIfEmpty(renamed, group);
    }
  }

  private ownerOf(renamed: string, deliver: Deliver): MemberClient | undefined {
    const set = this.expected.get(renamed);
    if (!set) return undefined;
    for (const client of set) {
      // aedes records the subscription on the client right before it subscribes its function.
      if (client.subscriptions[renamed]?.func === deliver) {
        set.delete(client);
        if (set.size === 0) this.expected.delete(renamed);
        return client;
      }
    }
    return undefined;
  }

  private group(renamed: string): Group {
    let group = this.groups.get(renamed);
    if (!group) {
      const parts = sharedParts(renamed)!;
      const persistence = (this.aedes as unknown as { persistence: { outgoingEnqueue(sub: { clientId: string }, packet: unknown): Promise<unknown> } }).persistence;
      group = new Group(parts.filter, (clientId, packet) => persistence.outgoingEnqueue({ clientId }, packet));
      this.groups.set(renamed, group);
      this.subscribe(parts.filter, group.listener);
    }
    return group;
  }

  private dropIfEmpty(renamed: string, group: Group): void {
    if (!group.empty) return;
    this.groups.delete(renamed);
    this.unsubscribe(group.filter, group.listener);
  }
}
