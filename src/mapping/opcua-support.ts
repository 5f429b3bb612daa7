// OPC UA support shared by the client driver and the server (docs/design.md §11), loaded lazily:
// node-opcua is imported only when a service declares an Opcua connection, a Server::Opcua or a
// Node::Opcua, so gateways without OPC UA keep their start-up time and idle memory.
//
// - Logging: node-opcua prints its warnings and errors with console.log — on stdout, which is the
//   daemon's JSON log stream. Its loggers are replaced (once, process-wide) by ones writing to the
//   gateway's logger (its errors at warn, its warnings at debug: they are mostly about peers,
//   which the runtime reports itself); while it loads, only errors (NODEOPCUA_LOG_LEVEL).
// - PKI: node-opcua keeps certificates in ~/.config by default (read-only under systemd with
//   ProtectHome=true). Every certificate manager here lives under `pkiDir`
//   (mapping.opcuaPkiDir, default <dataDir>/opcua-pki, created 0700): `client/` for the
//   connections, `server/` for the gateway's servers, `users/` for their X.509 user tokens. A
//   store that accepts unknown peer certificates (acceptUnknownServerCertificate,
//   acceptUnknownClientCertificates) is a separate one (`client-accept/`, `server-accept/`): a
//   certificate one strict connection rejected stays rejected in its store, and must not block
//   another connection that was told to accept it.
import { chmodSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { format } from 'node:util';
import type { Logger } from '../log/index.js';

export type OpcuaModule = typeof import('node-opcua');
type CertificateManager = InstanceType<OpcuaModule['OPCUACertificateManager']>;

export interface OpcuaSupport {
  /** node-opcua, imported (and its logging redirected) on first use. */
  load(): Promise<OpcuaModule>;
  /** An initialized certificate manager for `side` (client, server, users) and trust policy, one each. */
  certificateManager(side: 'client' | 'server' | 'users', acceptUnknown: boolean): Promise<CertificateManager>;
  readonly pkiDir: string;
  /** Disposes of the certificate managers (file watchers). */
  dispose(): Promise<void>;
}

/**
 * node-opcua-crypto reads private keys with OPENSSL_CONF set to /dev/null and then "restores"
 * it with `process.env.OPENSSL_CONF = backup`: when the variable was unset, it becomes the text
 * "undefined", and every openssl or node process started afterwards fails to open that file.
 * Called after each node-opcua operation that may read a key (initialize, connect, start).
 */
const opensslConfAtStart = process.env.OPENSSL_CONF;
export function repairOpensslConf(): void {
  if (process.env.OPENSSL_CONF === 'undefined' && opensslConfAtStart !== 'undefined') {
    if (opensslConfAtStart === undefined) delete process.env.OPENSSL_CONF;
    else process.env.OPENSSL_CONF = opensslConfAtStart;
  }
}

/** Runs a node-opcua operation, repairing OPENSSL_CONF after it (see repairOpensslConf). */
export async function guarded<T>(p: Promise<T>): Promise<T> {
  try {
    return await p;
  } finally {
    repairOpensslConf();
  }
}

let loaded: Promise<OpcuaModule> | undefined;
/** The logger node-opcua writes to (the latest support created: one daemon per process). */
let sink: Logger | undefined;

async function importOpcua(): Promise<OpcuaModule> {
  // Read once by node-opcua-debug as it loads: errors only, even for what it says while loading.
  process.env.NODEOPCUA_LOG_LEVEL ??= '3';
  const m = await import('node-opcua');
  const forward =
    (level: 'debug' | 'warn') =>
    (context: any, ...args: unknown[]) => {
      const text = format(...args).slice(0, 2000);
      sink?.[level]('node-opcua', { source: (context as { filename?: string } | undefined)?.filename, text });
    };
  // Errors of node-opcua are mostly a peer's misbehaviour: warn; its warnings and debug: debug.
  m.setErrorLogger(forward('warn'));
  m.setWarningLogger(forward('debug'));
  m.setDebugLogger(forward('debug'));
  try {
    const dbg = (await import('node-opcua-debug')) as { setTraceLogger?: (fn: (...a: any[]) => void) => void };
    dbg.setTraceLogger?.(forward('debug'));
  } catch {
    // not a separate module in this install: its trace logger is unused by the client and server
  }
  // Now that they reach the JSON log: warnings too (at debug).
  m.setLogLevel(m.LogLevel.Warning);
  return m;
}

export function createOpcuaSupport(deps: { pkiDir: string; log: Logger }): OpcuaSupport {
  const { pkiDir } = deps;
  sink = deps.log.child({ component: 'opcua' });
  const managers = new Map<string, Promise<CertificateManager>>();
  // Besides the repairs after each operation: a key read somewhere else in node-opcua (a secure
  // channel renewal...) is repaired within a second.
  let repairTimer: NodeJS.Timeout | undefined;
  const ensureDir = (dir: string) => {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    chmodSync(dir, 0o700);
  };
  const support: OpcuaSupport = {
    pkiDir,
    load() {
      repairTimer ??= setInterval(repairOpensslConf, 1000).unref();
      loaded ??= importOpcua().catch((err: unknown) => {
        loaded = undefined;
        throw err;
      });
      return loaded;
    },
    certificateManager(side, acceptUnknown) {
      const name = acceptUnknown ? `${side}-accept` : side;
      let m = managers.get(name);
      if (!m) {
        m = (async () => {
          const opcua = await support.load();
          ensureDir(pkiDir);
          const rootFolder = join(pkiDir, name);
          ensureDir(rootFolder);
          const cm = new opcua.OPCUACertificateManager({ rootFolder, automaticallyAcceptUnknownCertificate: acceptUnknown, name, disableFileWatchers: true });
          await guarded(cm.initialize());
          return cm;
        })();
        m.catch(() => managers.delete(name));
        managers.set(name, m);
      }
      return m;
    },
    async dispose() {
      clearInterval(repairTimer);
      repairTimer = undefined;
      repairOpensslConf();
      const all = [...managers.values()];
      managers.clear();
      await Promise.all(all.map((p) => p.then((cm) => cm.dispose()).catch(() => undefined)));
    },
  };
  return support;
}

// ---------------------------------------------------------------- values

/** A variant's value as JSON: numbers, booleans, strings; dates as ISO text, bytes as base64, 64-bit integers as numbers. */
export function variantToJson(opcua: OpcuaModule, variant: { dataType: number; value: unknown; arrayType?: number } | null | undefined): unknown {
  if (!variant) return null;
  const one = (v: unknown): unknown => {
    if (v === null || v === undefined) return null;
    if (variant.dataType === opcua.DataType.Int64 || variant.dataType === opcua.DataType.UInt64) {
      if (Array.isArray(v) && v.length === 2) {
        const [hi, lo] = v as [number, number];
        const n = variant.dataType === opcua.DataType.Int64 && hi & 0x80000000 ? -((~hi >>> 0) * 2 ** 32 + (~lo >>> 0) + 1) : hi * 2 ** 32 + lo;
        return n;
      }
    }
    if (v instanceof Date) return Number.isNaN(v.getTime()) ? null : v.toISOString();
    if (Buffer.isBuffer(v)) return v.toString('base64');
    if (typeof v === 'number') return Number.isFinite(v) ? v : null;
    if (typeof v === 'bigint') return Number(v);
    if (typeof v === 'object') {
      // LocalizedText, QualifiedName, NodeId, extension objects: their JSON form, else their text.
      const o = v as { toJSON?: () => unknown; text?: unknown; name?: unknown };
      if (typeof o.text === 'string' || o.text === null) return o.text;
      try {
        return JSON.parse(JSON.stringify(v)) as unknown;
      } catch {
        return String(v);
      }
    }
    return v;
  };
  const value = variant.value;
  if (ArrayBuffer.isView(value) && !Buffer.isBuffer(value)) return Array.from(value as unknown as ArrayLike<number>, (x) => one(x));
  if (Array.isArray(value) && variant.arrayType !== undefined && variant.arrayType !== opcua.VariantArrayType.Scalar) return value.map(one);
  return one(value);
}

/** What a read endpoint publishes: the value with its status and timestamps. */
export function dataValueToJson(opcua: OpcuaModule, dv: { value: any; statusCode: { name: string; isGood(): boolean }; sourceTimestamp: Date | null; serverTimestamp?: Date | null }): { value: unknown; status: string; sourceTimestamp: string | null } {
  const good = dv.statusCode.isGood() || dv.statusCode.name.startsWith('Uncertain');
  return {
    value: good ? variantToJson(opcua, dv.value) : null,
    status: dv.statusCode.name,
    sourceTimestamp: dv.sourceTimestamp instanceof Date && !Number.isNaN(dv.sourceTimestamp.getTime()) ? dv.sourceTimestamp.toISOString() : null,
  };
}

/** Data types a node of the gateway's server (Node::Opcua) may declare. */
export const NODE_DATA_TYPES = ['Boolean', 'SByte', 'Byte', 'Int16', 'UInt16', 'Int32', 'UInt32', 'Int64', 'UInt64', 'Float', 'Double', 'String', 'DateTime', 'Variant'] as const;

const INT_RANGES: Record<string, [number, number]> = {
  SByte: [-128, 127],
  Byte: [0, 255],
  Int16: [-32768, 32767],
  UInt16: [0, 65535],
  Int32: [-2147483648, 2147483647],
  UInt32: [0, 4294967295],
  Int64: [Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER],
  UInt64: [0, Number.MAX_SAFE_INTEGER],
};

/** Thrown when a JSON value does not fit a node's data type. */
export class CoercionError extends Error {}

/**
 * A JSON value as a variant of the built-in type `dataType` (a DataType number): numbers,
 * booleans and numeric or boolean text are converted when they fit; anything else throws
 * CoercionError. Arrays make array variants.
 */
export function jsonToVariant(opcua: OpcuaModule, dataType: number, value: unknown): { dataType: number; value: unknown; arrayType?: number } {
  const typeName = opcua.DataType[dataType] as string | undefined;
  if (typeName === undefined) throw new CoercionError(`unknown data type ${dataType}`);
  if (Array.isArray(value)) {
    return { dataType, arrayType: opcua.VariantArrayType.Array, value: value.map((v) => coerceScalar(opcua, typeName, v)) };
  }
  return { dataType, value: coerceScalar(opcua, typeName, value) };
}

function coerceScalar(opcua: OpcuaModule, typeName: string, v: unknown): unknown {
  const fail = (): never => {
    throw new CoercionError(`${JSON.stringify(v)?.slice(0, 100)} does not fit ${typeName}`);
  };
  const num = (): number => {
    const n = typeof v === 'number' ? v : typeof v === 'string' && v.trim() !== '' ? Number(v) : typeof v === 'boolean' ? (v ? 1 : 0) : NaN;
    return Number.isFinite(n) ? n : fail();
  };
  switch (typeName) {
    case 'Boolean':
      if (typeof v === 'boolean') return v;
      if (v === 0 || v === 1) return v === 1;
      if (v === 'true' || v === 'false') return v === 'true';
      return fail();
    case 'Float':
    case 'Double':
      return num();
    case 'String':
      if (typeof v === 'string') return v;
      if (typeof v === 'number' || typeof v === 'boolean') return String(v);
      return fail();
    case 'DateTime': {
      const d = typeof v === 'number' ? new Date(v) : typeof v === 'string' ? new Date(v) : undefined;
      return d && !Number.isNaN(d.getTime()) ? d : fail();
    }
    default: {
      const range = INT_RANGES[typeName];
      if (!range) throw new CoercionError(`data type ${typeName} is not supported for writes`);
      const n = num();
      if (!Number.isInteger(n) || n < range[0] || n > range[1]) return fail();
      if (typeName === 'Int64') return opcua.coerceInt64(n);
      if (typeName === 'UInt64') return opcua.coerceUInt64(n);
      return n;
    }
  }
}

/** A JSON value as a variant when the node's type is open (Variant): inferred from the value. */
export function inferVariant(opcua: OpcuaModule, value: unknown): { dataType: number; value: unknown } {
  if (typeof value === 'boolean') return { dataType: opcua.DataType.Boolean, value };
  if (typeof value === 'number') return { dataType: opcua.DataType.Double, value };
  if (typeof value === 'string') return { dataType: opcua.DataType.String, value };
  if (value === null || value === undefined) return { dataType: opcua.DataType.Null, value: null };
  return { dataType: opcua.DataType.String, value: JSON.stringify(value) };
}
