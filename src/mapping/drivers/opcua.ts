// Opcua connection (node-opcua client, loaded lazily). One secure channel and one session per
// connection. node-opcua's own reconnection is off (connectionStrategy.maxRetry 0): a lost
// channel or session is reported to the runtime, which reconnects with its backoff — the
// runtime's state machine is the single source of truth.
//
// Read endpoints: `address {nodeId}`; a reading is `{value, status, sourceTimestamp}`. They poll
// (pollIntervalMs, by the runtime) or subscribe (`address.samplingIntervalMs`: a monitored item
// of the connection's subscription). Write endpoints write with the node's data type (its
// DataType attribute, read once per session): JSON numbers, booleans and text are converted when
// they fit, anything else is refused (DeviceError, logged by the runtime).
import type { Logger } from '../../log/index.js';
import { CoercionError, dataValueToJson, guarded, jsonToVariant, type OpcuaModule, type OpcuaSupport } from '../opcua-support.js';
import type { EndpointDef } from '../service-files.js';
import { DeviceError, RefusedWriteError, type ConnectionDriver } from './types.js';

export interface OpcuaConfiguration {
  endpointUrl: string;
  securityMode: 'None' | 'Sign' | 'SignAndEncrypt';
  securityPolicy: 'None' | 'Basic256Sha256';
  username?: string;
  password?: string;
  /** Trust a server certificate seen for the first time (Sign, SignAndEncrypt); else put it in <pki>/client/trusted/certs. */
  acceptUnknownServerCertificate: boolean;
  timeoutMs: number;
}

type Client = import('node-opcua').OPCUAClient;
type Session = import('node-opcua').ClientSession;
type Subscription = import('node-opcua').ClientSubscription;

/** Bounded promise: rejects after `ms`. */
function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p,
    new Promise<never>((_r, reject) => {
      timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

export function createOpcuaDriver(cfg: OpcuaConfiguration, deps: { support: OpcuaSupport; log: Logger; id: string }): ConnectionDriver {
  const { support, log } = deps;
  let opcua: OpcuaModule | undefined;
  let client: Client | undefined;
  let session: Session | undefined;
  /** The connection's one subscription, created by the first subscribing endpoint. */
  let subscription: Promise<Subscription> | undefined;
  let lostListener: (reason: string) => void = () => {};
  /** Built-in data type of each written node, for this session. */
  const dataTypes = new Map<string, number>();

  /** Closes everything of the current session and channel (bounded); never rejects. */
  async function close(): Promise<void> {
    const c = client;
    const s = session;
    const sub = subscription;
    client = undefined;
    session = undefined;
    subscription = undefined;
    dataTypes.clear();
    if (!c) return;
    c.removeAllListeners('connection_lost');
    c.removeAllListeners('close');
    s?.removeAllListeners('keepalive_failure');
    s?.removeAllListeners('session_closed');
    const bound = Math.min(cfg.timeoutMs, 2000);
    await within(
      (async () => {
        if (sub) await sub.then((x) => x.terminate()).catch(() => undefined);
        if (s) await s.close(true).catch(() => undefined);
      })(),
      bound,
      'closing the session',
    ).catch(() => undefined);
    await within(c.disconnect(), bound, 'disconnecting').catch(() => undefined);
  }

  function lose(from: Client, reason: string) {
    if (client !== from) return;
    void close();
    lostListener(reason);
  }

  function current(): { o: OpcuaModule; s: Session } {
    if (!opcua || !session) throw new Error('not connected');
    return { o: opcua, s: session };
  }

  async function readNode(nodeId: string) {
    const { o, s } = current();
    const dv = await s.read({ nodeId, attributeId: o.AttributeIds.Value });
    return dataValueToJson(o, dv);
  }

  async function dataTypeOf(nodeId: string): Promise<number> {
    const known = dataTypes.get(nodeId);
    if (known !== undefined) return known;
    const { o, s } = current();
    const dv = await s.read({ nodeId, attributeId: o.AttributeIds.DataType });
    if (!dv.statusCode.isGood()) throw new DeviceError(`cannot read the data type of ${nodeId}: ${dv.statusCode.name}`);
    const builtIn = await s.getBuiltInDataType(o.resolveNodeId(nodeId));
    dataTypes.set(nodeId, builtIn);
    return builtIn;
  }

  return {
    async connect() {
      const o = (opcua = await support.load());
      const secure = cfg.securityMode !== 'None';
      const client0 = o.OPCUAClient.create({
        applicationName: 'gatewayd',
        applicationUri: `urn:gatewayd:client:${deps.id}`,
        endpointMustExist: false,
        securityMode: o.MessageSecurityMode[cfg.securityMode],
        securityPolicy: o.SecurityPolicy[cfg.securityPolicy],
        connectionStrategy: { maxRetry: 0, initialDelay: 100, maxDelay: 200 },
        clientCertificateManager: await support.certificateManager('client', cfg.acceptUnknownServerCertificate),
        keepSessionAlive: true,
        requestedSessionTimeout: 60_000,
        transportTimeout: cfg.timeoutMs,
      } as Parameters<OpcuaModule['OPCUAClient']['create']>[0]);
      let s: Session | undefined;
      try {
        await guarded(within(client0.connect(cfg.endpointUrl), cfg.timeoutMs + (secure ? 10_000 : 0), 'connect'));
        const identity =
          cfg.username !== undefined
            ? { type: o.UserTokenType.UserName, userName: cfg.username, password: cfg.password ?? '' }
            : { type: o.UserTokenType.Anonymous };
        s = (await guarded(within(client0.createSession(identity as never), cfg.timeoutMs, 'create session'))) as Session;
      } catch (err) {
        await within(client0.disconnect(), 2000, 'disconnect').catch(() => undefined);
        // node-opcua's messages may carry a multi-line dump: keep the first line.
        throw new Error(((err as Error).message ?? String(err)).split('\n')[0]!.slice(0, 500));
      }
      client = client0;
      session = s!;
      client0.on('connection_lost', () => lose(client0, 'connection to the OPC UA server lost'));
      client0.on('close', () => lose(client0, 'connection to the OPC UA server closed'));
      s!.on('keepalive_failure', () => lose(client0, 'OPC UA session keep-alive failed'));
      s!.on('session_closed', () => lose(client0, 'OPC UA session closed by the server'));
    },
    async disconnect() {
      await close();
    },
    onLost(listener) {
      lostListener = listener;
    },
    read(ep: EndpointDef) {
      return readNode(ep.address.nodeId as string);
    },
    async write(ep: EndpointDef, value: unknown) {
      const nodeId = ep.address.nodeId as string;
      const dataType = await dataTypeOf(nodeId);
      const { o, s } = current();
      let variant;
      try {
        variant = jsonToVariant(o, dataType, value);
      } catch (err) {
        if (err instanceof CoercionError) throw new RefusedWriteError(`write to ${nodeId} refused: ${err.message}`);
        throw err;
      }
      const status = await s.write({ nodeId, attributeId: o.AttributeIds.Value, value: { value: variant as never } });
      if (!status.isGood()) throw new DeviceError(`write to ${nodeId} refused by the server: ${status.name}`);
    },
    async subscribe(ep: EndpointDef, handler) {
      const { o, s } = current();
      const samplingInterval = (ep.address.samplingIntervalMs as number | undefined) ?? 1000;
      if (!subscription) {
        const created = s.createSubscription2({
          requestedPublishingInterval: Math.min(Math.max(samplingInterval, 50), 1000),
          requestedLifetimeCount: 600,
          requestedMaxKeepAliveCount: 20,
          maxNotificationsPerPublish: 1000,
          publishingEnabled: true,
          priority: 1,
        });
        subscription = created;
        created.catch(() => {
          if (subscription === created) subscription = undefined;
        });
      }
      const pending = subscription;
      const sub = await pending;
      const item = await sub.monitor(
        { nodeId: ep.address.nodeId as string, attributeId: o.AttributeIds.Value },
        { samplingInterval, discardOldest: true, queueSize: 10 },
        o.TimestampsToReturn.Both,
      );
      item.on('changed', (dv) => handler(ep.topic, dataValueToJson(o, dv)));
      item.on('err', (message: string) => log.info('OPC UA monitored item failed', { id: ep.id, error: String(message).split('\n')[0] }));
      return () => {
        item.removeAllListeners();
        if (subscription === pending) void item.terminate().catch(() => undefined);
      };
    },
  };
}
