// The gateway's own OPC UA server (Server::Opcua) and its node sets (Node::Opcua), node-opcua
// loaded lazily (opcua-support.ts).
//
// Each node set is a folder under Objects; each node a variable whose value follows a data-plane
// topic (an optional JSONata transform applies) and whose writes by OPC UA clients are published
// to `<topic>/set` (or `setTopic`). Until the first message a variable answers
// BadWaitingForInitialData.
//
// Sessions: anonymous only with `options.allowAnonymous` (then every node is readable and, per
// its `access`, writable). Otherwise a gatewayd user logs in with its username and, as password,
// its password or a session token (auth.authenticateSecret, as on MQTT: same throttle and audit
// as every login; a password alone is refused for users enrolled in MFA) and reads a node with mqtt read permission on its topic, writes it with mqtt write
// permission on its set topic (the permission engine, checked at every read and write).
import type { Logger } from '../log/index.js';
import { CoercionError, guarded, inferVariant, jsonToVariant, repairOpensslConf, type OpcuaModule, type OpcuaSupport } from './opcua-support.js';

export interface OpcuaUser {
  id: string;
  username: string;
}

/** gatewayd's identity and permissions, as the OPC UA server needs them. */
export interface OpcuaAccess {
  /**
   * Checks a username with a password or a session token (throttled, audited, a password
   * alone refused for users who need MFA); rejects when they do not match.
   */
  authenticate(username: string, secret: string): Promise<OpcuaUser>;
  /** The permission engine in context mqtt. */
  allows(userId: string, operation: 'read' | 'write', topic: string): boolean;
}

export interface ServerOptions {
  port?: number;
  hostname?: string;
  resourcePath?: string;
  allowAnonymous?: boolean;
  securityModes?: Array<'None' | 'Sign' | 'SignAndEncrypt'>;
  acceptUnknownClientCertificates?: boolean;
  maxSessions?: number;
}

export interface NodeDef {
  browseName?: string;
  nodeId?: string;
  dataType?: string;
  topic: string;
  access?: 'read' | 'write' | 'readWrite';
  transform?: string;
  setTopic?: string;
}

/** What a running node needs from the runtime. */
export interface NodeBinding {
  def: NodeDef;
  /** Where client writes go. */
  setTopic: string;
  /** Publishes a client's write for the session's user (resolves once handed to the data plane). */
  publishWrite(value: unknown, session: OpcuaSessionUser): Promise<void>;
}

/** The gatewayd user of an OPC UA session (none: an anonymous session). */
export interface OpcuaSessionUser {
  username?: string;
  userId?: string;
  /** The client's address (the session's secure channel). */
  remote?: string;
}

export interface RunningNode {
  /** A new value from the data plane (after the transform). */
  update(value: unknown): void;
}

export interface OpcuaServerHandle {
  readonly endpointUrl: string;
  readonly port: number;
  /** Adds a node set's folder (browse name `name`, node id ns=1;s=<id>) and variables; returns their handles and a remover. */
  addNodeSet(name: string, id: string, nodes: NodeBinding[]): { nodes: RunningNode[]; remove(): void };
  /** Closes every session and the listener (bounded). */
  stop(timeoutMs: number): Promise<void>;
}

export class OpcuaServerError extends Error {}

export async function startOpcuaServer(deps: { support: OpcuaSupport; log: Logger; serverId: string; options: ServerOptions; defaultHost: string; access: OpcuaAccess | undefined }): Promise<OpcuaServerHandle> {
  const { support, log, options, access } = deps;
  const allowAnonymous = options.allowAnonymous ?? false;
  if (!allowAnonymous && !access) throw new OpcuaServerError('no user authentication available: set options.allowAnonymous');
  const o = await support.load();
  const modes = options.securityModes ?? ['None', 'SignAndEncrypt'];
  const hostname = options.hostname ?? (deps.defaultHost === '0.0.0.0' || deps.defaultHost === '::' ? undefined : deps.defaultHost);
  /** Username → user id of sessions that logged in (for the per-read/write checks). */
  const userIds = new Map<string, string>();

  const userManager = {
    isValidUserAsync(username: string, password: string, callback: (err: Error | null, ok?: boolean) => void) {
      repairOpensslConf(); // the password was just decrypted with the server key
      if (!access) return callback(null, false);
      access.authenticate(username, password).then(
        (user) => {
          userIds.set(user.username, user.id);
          log.info('OPC UA session user', { server: deps.serverId, username: user.username });
          callback(null, true);
        },
        () => callback(null, false),
      );
    },
  };

  const server = new o.OPCUAServer({
    port: options.port ?? 4840,
    ...(hostname !== undefined ? { hostname } : {}),
    ...(options.resourcePath ? { resourcePath: options.resourcePath } : {}),
    allowAnonymous,
    securityModes: modes.map((m) => o.MessageSecurityMode[m]),
    // Basic256Sha256 is listed even with mode None only: node-opcua then offers username tokens on
    // None endpoints with the password encrypted for the server certificate (never in clear).
    securityPolicies: [...(modes.includes('None') ? [o.SecurityPolicy.None] : []), o.SecurityPolicy.Basic256Sha256],
    serverCertificateManager: await support.certificateManager('server', options.acceptUnknownClientCertificates ?? false),
    userCertificateManager: await support.certificateManager('users', false),
    userManager: userManager as never,
    maxAllowedSessionNumber: options.maxSessions ?? 20,
    maxConnectionsPerEndpoint: options.maxSessions ?? 20,
    registerServerMethod: o.RegisterServerMethod.HIDDEN,
    buildInfo: { productName: 'gatewayd', manufacturerName: 'gatewayd', softwareVersion: '1' },
    serverInfo: { applicationUri: `urn:gatewayd:server:${deps.serverId}`, productUri: 'urn:gatewayd', applicationName: { text: `gatewayd ${deps.serverId}` } },
  } as ConstructorParameters<OpcuaModule['OPCUAServer']>[0]);
  try {
    await guarded(server.initialize());
    await guarded(server.start());
  } catch (err) {
    await server.shutdown(0).catch(() => undefined);
    repairOpensslConf();
    throw new OpcuaServerError(((err as Error).message ?? String(err)).split('\n')[0]!);
  }
  const endpoint = server.endpoints[0];
  const port = (endpoint as unknown as { port: number }).port;
  const endpointUrl = server.getEndpointUrl();
  const addressSpace = server.engine.addressSpace!;
  const ns = addressSpace.getOwnNamespace();

  type Ctx = { session?: { userIdentityToken?: unknown; channel?: { remoteAddress?: string } } } | null | undefined;
  const userOf = (ctx: Ctx): string | undefined | null => {
    const token = ctx?.session?.userIdentityToken as { userName?: string } | undefined;
    if (!ctx?.session) return null; // internal access (no session)
    return typeof token?.userName === 'string' ? token.userName : undefined;
  };
  const permitted = (ctx: Ctx, operation: 'read' | 'write', topic: string): boolean => {
    const user = userOf(ctx);
    if (user === null) return true;
    if (user === undefined) return allowAnonymous;
    const id = userIds.get(user);
    return !!id && !!access && access.allows(id, operation, topic);
  };

  return {
    endpointUrl,
    port,
    addNodeSet(name, id, bindings) {
      const folder = ns.addFolder(addressSpace.rootFolder.objects, { browseName: name, nodeId: `ns=${ns.index};s=${id}` });
      const variables: Array<{ deleteNode?: () => void }> = [];
      const nodes: RunningNode[] = [];
      try {
        for (const b of bindings) {
          const def = b.def;
          const typeName = def.dataType ?? 'Variant';
          const dataType = typeName === 'Variant' ? o.DataType.Variant : o.DataType[typeName as keyof typeof o.DataType];
          const access = def.access ?? 'read';
          const canRead = access !== 'write';
          const canWrite = access !== 'read';
          const accessLevel = o.makeAccessLevelFlag(`${canRead ? 'CurrentRead' : ''}${canRead && canWrite ? ' | ' : ''}${canWrite ? 'CurrentWrite' : ''}` as never);
          const v = ns.addVariable({
            componentOf: folder,
            browseName: def.browseName ?? def.topic,
            nodeId: def.nodeId ?? `ns=${ns.index};s=${def.topic}`,
            dataType: typeName === 'Variant' ? 'BaseDataType' : typeName,
            accessLevel,
            userAccessLevel: accessLevel,
            minimumSamplingInterval: 0,
          });
          v.setValueFromSource({ dataType: o.DataType.Null, value: null }, o.StatusCodes.BadWaitingForInitialData);
          const isUserReadable = v.isUserReadable.bind(v);
          const isUserWritable = v.isUserWritable.bind(v);
          v.isUserReadable = (ctx) => isUserReadable(ctx) && permitted(ctx as Ctx, 'read', def.topic);
          // node-opcua asks this right before it calls the setter below, in the same synchronous
          // step of the write: the session asked last is the writer (the setter gets no context).
          let writer: OpcuaSessionUser = {};
          v.isUserWritable = (ctx) => {
            const user = userOf(ctx as Ctx);
            const id = typeof user === 'string' ? userIds.get(user) : undefined;
            const remote = (ctx as Ctx)?.session?.channel?.remoteAddress;
            writer = { ...(typeof user === 'string' ? { username: user, ...(id ? { userId: id } : {}) } : {}), ...(remote ? { remote } : {}) };
            return isUserWritable(ctx) && permitted(ctx as Ctx, 'write', b.setTopic);
          };
          // A client's write goes to the data plane; the variable keeps the written value until
          // the topic says otherwise. (node-opcua's write path calls this setter when bound.)
          (v as unknown as { _timestamped_set_func: unknown })._timestamped_set_func = (dv: { value: { value: unknown; dataType: number; arrayType?: number } }, callback: (err: Error | null, status?: unknown, dv?: unknown) => void) => {
            const json = dv.value.value instanceof Date ? dv.value.value.toISOString() : Array.isArray(dv.value.value) || ArrayBuffer.isView(dv.value.value) ? Array.from(dv.value.value as ArrayLike<unknown>) : dv.value.value;
            b.publishWrite(json, writer).then(
              () => callback(null, o.StatusCodes.Good, dv),
              (err: unknown) => {
                log.warn('OPC UA write not published', { server: deps.serverId, topic: b.setTopic, error: (err as Error).message });
                callback(null, o.StatusCodes.BadInternalError, dv);
              },
            );
          };
          variables.push(v as never);
          let lastProblem: string | undefined;
          nodes.push({
            update(value) {
              try {
                const variant = typeName === 'Variant' ? inferVariant(o, value) : jsonToVariant(o, dataType as number, value);
                v.setValueFromSource(variant as never, o.StatusCodes.Good, new Date());
                lastProblem = undefined;
              } catch (err) {
                const text = err instanceof CoercionError ? err.message : (err as Error).message;
                if (text !== lastProblem) log.info('OPC UA node value refused', { server: deps.serverId, topic: def.topic, reason: text });
                lastProblem = text;
              }
            },
          });
        }
      } catch (err) {
        for (const v of variables) addressSpace.deleteNode(v as never);
        addressSpace.deleteNode(folder);
        throw err;
      }
      return {
        nodes,
        remove() {
          for (const v of variables) {
            try {
              addressSpace.deleteNode(v as never);
            } catch {
              // gone with the server
            }
          }
          try {
            addressSpace.deleteNode(folder);
          } catch {
            // gone with the server
          }
        },
      };
    },
    async stop(timeoutMs) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        server.shutdown(Math.min(timeoutMs, 1000)).catch(() => undefined),
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, timeoutMs);
        }),
      ]);
      clearTimeout(timer);
    },
  };
}
