// Where an edge node's session goes (`via`) and as whom (`runAs`, a gatewayd user):
// - local: the embedded broker, over its own listener on the loopback (or the bind address),
//   as runAs. runAs needs no stored password: at every connect the node mints a session token
//   for runAs (a few minutes; it only has to get through CONNECT) and revokes it when the
//   session ends. The token is never logged or shown; it is listed among runAs's tokens with
//   the label "sparkplug <resource id>" while it lives. The embedded broker then checks every
//   publish and subscription of the node, and every NCMD/DCMD publisher, like any client's.
// - {urls, ...}: an upstream broker (mqtt.js), tried in order; its ACL decides who may send
//   NCMD/DCMD there. runAs's permissions still bound what the node publishes (checked here
//   before the session and before each message) and what it writes to endpoints.
// - a Bridge (!ref <Bridge>): a session of the node's own on the bridge's remote (its URLs,
//   credentials, TLS files, connect timeout), not the bridge's session: Sparkplug 3.0 wants a
//   clean session whose will is this node's NDEATH with a new bdSeq at every CONNECT, and the
//   host rebuilds its state from births, not from replayed DATA (docs/sparkplug.md). While
//   the bridge's target is `disabled` (its uplink held down) the node does not connect.
// Before each session the node's topics are checked against runAs's permissions, so a missing
// one shows as the reason in the edge node's state instead of a silent refusal.
import { readFile } from 'node:fs/promises';
import { isAbsolute, join } from 'node:path';
import type { Logger } from '../log/index.js';
import type { SparkplugDef, SparkplugUpstream } from '../mapping/service-files.js';
import type { UserRecord } from '../store/index.js';
import { openLink, type LinkOptions, type NodeLink } from './node-link.js';
import type { EdgeNodeTopics } from './sparkplug-topics.js';

/** What the node needs of gatewayd's identity and permission parts. */
export interface IdentityPort {
  findUser(username: string): UserRecord | undefined;
  allows(userId: string, operation: 'read' | 'write', topic: string): boolean;
  coversFilter(userId: string, filter: string): boolean;
  /** A session token for the user (the local broker's password), and its revocation. */
  issueToken(userId: string, label: string, lifetimeHours: number): Promise<{ token: string; fingerprint: string }>;
  revokeToken(userId: string, fingerprint: string): Promise<void>;
}

export interface ConnectorDeps {
  identity: IdentityPort;
  /** The embedded broker's plain MQTT listener (undefined when the broker is off). */
  localBroker(): { host: string; port: number } | undefined;
  /** Relative caFile/certFile/keyFile paths are in the data directory. */
  dataDir: string;
  /** The target of a Bridge of the mapping runtime (via: !ref <Bridge>): `disabled` holds the node's session down. */
  bridgeTarget?(bridgeId: string): 'connected' | 'disabled' | undefined;
  log: Logger;
}

export interface NodeConnector {
  /** Throws why the node cannot connect now: runAs lacks a permission, its Bridge is disabled. */
  ready(): void;
  connect(will: { topic: string; payload: Buffer }, attempt: number, signal?: AbortSignal): Promise<NodeLink>;
  /** May runAs (as resolved at the last connect) publish on this topic (a Sparkplug topic, an endpoint's <topic>/set)? */
  mayPublish(topic: string): boolean;
  /** runAs's user id as resolved at the last connect. */
  runAsId(): string | undefined;
}

const TOKEN_LIFETIME_HOURS = 5 / 60;
const CONNECT_TIMEOUT_MS = 10_000;

export function createNodeConnector(def: SparkplugDef, topics: EdgeNodeTopics, deps: ConnectorDeps): NodeConnector {
  const { identity } = deps;
  let userId: string | undefined;

  /** runAs as it is now, with every permission the node's topics need; throws the first thing missing. */
  const runAs = (): UserRecord => {
    const user = identity.findUser(def.runAs);
    userId = user?.id;
    if (!user) throw new Error(`runAs user ${def.runAs} does not exist`);
    if (user.mqttPublishPrefix) throw new Error(`runAs user ${def.runAs} has an MQTT publish prefix: Sparkplug topics must not be prefixed`);
    const publishes = [topics.node('NBIRTH'), topics.node('NDEATH'), ...def.devices.flatMap((d) => (['DBIRTH', 'DDATA', 'DDEATH'] as const).map((t) => topics.device(t, d.deviceId)))];
    const missing = publishes.find((t) => !identity.allows(user.id, 'write', t));
    if (missing) throw new Error(`runAs user ${def.runAs} may not publish ${missing}`);
    const subscriptions = [topics.node('NCMD'), topics.deviceCommands, ...(topics.hostState ? [topics.hostState] : [])];
    const unread = subscriptions.find((f) => !identity.coversFilter(user.id, f));
    if (unread) throw new Error(`runAs user ${def.runAs} may not subscribe to ${unread}`);
    return user;
  };

  const common = (will: LinkOptions['will'], connectTimeoutMs = CONNECT_TIMEOUT_MS) => ({
    clientId: def.clientId ?? `gatewayd-${def.groupId}-${def.edgeNodeId}`,
    protocolVersion: def.protocolVersion,
    keepaliveSeconds: def.keepaliveSeconds,
    connectTimeoutMs,
    will,
  });

  const viaLocal = async (user: UserRecord, will: LinkOptions['will'], signal?: AbortSignal): Promise<NodeLink> => {
    const broker = deps.localBroker();
    if (!broker) throw new Error('the embedded broker is off (mqtt.enabled is false): use an upstream broker');
    const { token, fingerprint } = await identity.issueToken(user.id, `sparkplug ${def.id}`, TOKEN_LIFETIME_HOURS);
    const revoke = () => identity.revokeToken(user.id, fingerprint).catch((err: unknown) => deps.log.warn('sparkplug session token not revoked', { id: def.id, error: String(err) }));
    let link: NodeLink;
    try {
      const host = broker.host.includes(':') ? `[${broker.host}]` : broker.host;
      link = await openLink({ ...common(will), url: `mqtt://${host}:${broker.port}`, username: user.username, password: token }, signal);
    } catch (err) {
      await revoke();
      throw err;
    }
    void link.closed.then(revoke);
    return link;
  };

  const viaRemote = async (via: SparkplugUpstream, will: LinkOptions['will'], attempt: number, signal?: AbortSignal): Promise<NodeLink> => {
    const url = via.urls[attempt % via.urls.length]!;
    const file = (path: string | undefined) => (path === undefined ? undefined : readFile(isAbsolute(path) ? path : join(deps.dataDir, path)));
    const [ca, cert, key] = await Promise.all([file(via.caFile), file(via.certFile), file(via.keyFile)]);
    const tls = /^(mqtts|wss):/.test(url) ? { tls: { rejectUnauthorized: true, ...(ca ? { ca } : {}), ...(cert ? { cert } : {}), ...(key ? { key } : {}) } } : {};
    return openLink({
      ...common(will, via.connectTimeoutMs),
      url,
      ...(via.username !== undefined ? { username: via.username } : {}),
      ...(via.password !== undefined ? { password: via.password } : {}),
      ...tls,
    }, signal);
  };

  const ready = (): UserRecord => {
    const user = runAs();
    const via = def.via;
    if (via.kind === 'bridge' && deps.bridgeTarget?.(via.bridgeId) === 'disabled') throw new Error(`bridge ${via.bridgeId} is disabled: its uplink is held down`);
    return user;
  };

  return {
    ready: () => void ready(),
    async connect(will, attempt, signal) {
      const user = ready();
      const via = def.via;
      switch (via.kind) {
        case 'local':
          return viaLocal(user, will, signal);
        case 'remote':
          return viaRemote(via, will, attempt, signal);
        case 'bridge':
          return viaRemote(via.upstream, will, attempt, signal);
      }
    },
    mayPublish: (topic) => userId !== undefined && identity.allows(userId, 'write', topic),
    runAsId: () => userId,
  };
}
