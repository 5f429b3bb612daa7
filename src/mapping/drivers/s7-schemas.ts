// The service-file schemas of Siemens S7 connections and endpoints (src/mapping/schemas.ts
// collects them with the other protocols'), the checks a schema cannot say (which fields go with
// which area and type), each with the path of the problem, and the address in Siemens notation.

type Schema = Record<string, unknown>;

export const S7_TYPES = ['BOOL', 'BYTE', 'WORD', 'DWORD', 'INT', 'DINT', 'REAL', 'STRING'] as const;
export type S7Type = (typeof S7_TYPES)[number];
export type S7AreaName = 'DB' | 'I' | 'Q' | 'M';

export interface S7Configuration {
  host: string;
  port: number;
  rack: number;
  slot: number;
  timeoutMs: number;
}

export interface S7Address {
  area: S7AreaName;
  /** DB only. */
  dbNumber?: number;
  /** Byte offset in the area. */
  offset: number;
  /** BOOL only: the bit of the byte (0–7). */
  bit?: number;
  type: S7Type;
  /** STRING only: its declared length in characters (STRING[length]). */
  length?: number;
}

/** The largest STRING an S7 CPU declares (STRING[254]). */
export const S7_MAX_STRING = 254;

export const s7ConfigurationSchema: Schema = {
  type: 'object',
  additionalProperties: false,
  required: ['host'],
  description: 'Siemens S7 CPU over ISO-on-TCP (S7comm, PUT/GET): S7-300/400, S7-1200/1500 with PUT/GET access allowed and non-optimized data blocks.',
  properties: {
    host: { title: 'Host', type: 'string', minLength: 1, maxLength: 255 },
    port: { title: 'Port', type: 'integer', minimum: 1, maximum: 65535, default: 102 },
    rack: { title: 'Rack', type: 'integer', minimum: 0, maximum: 7, default: 0 },
    slot: { title: 'Slot', type: 'integer', minimum: 0, maximum: 31, default: 1, description: 'S7-1200/1500: 1 (or 0); S7-300: 2; S7-400: the CPU\'s slot.' },
    timeoutMs: { title: 'Timeout (ms)', type: 'integer', minimum: 10, maximum: 60000, default: 2000, description: 'Connecting, and each request: a CPU that does not answer in time loses the connection.' },
  },
};

export const s7AddressSchema: Schema = {
  type: 'object',
  additionalProperties: false,
  required: ['area', 'offset', 'type'],
  properties: {
    area: { title: 'Area', type: 'string', enum: ['DB', 'I', 'Q', 'M'], description: 'DB: a data block; I: inputs; Q: outputs; M: memory (flags).' },
    dbNumber: { title: 'DB number', type: 'integer', minimum: 1, maximum: 65535, description: 'area DB: the data block number (DB1 → 1).' },
    offset: { title: 'Byte offset', type: 'integer', minimum: 0, maximum: 65535, description: 'Byte offset in the area (DB1.DBW4 → 4).' },
    bit: { title: 'Bit', type: 'integer', minimum: 0, maximum: 7, description: 'type BOOL: the bit of the byte (DB1.DBX4.3 → 3).' },
    type: { title: 'Type', type: 'string', enum: [...S7_TYPES], description: 'BOOL (true/false), BYTE/WORD/DWORD (unsigned 8/16/32 bit), INT/DINT (signed 16/32 bit), REAL (32-bit float), STRING (S7 STRING[length]).' },
    length: { title: 'Length (characters)', type: 'integer', minimum: 1, maximum: S7_MAX_STRING, description: 'type STRING: its declared length in characters (STRING[20] → 20).' },
  },
};

/** What is wrong with an address that fits the schema: each field belongs to its area or type (paths relative to the address). */
export function s7AddressProblems(a: S7Address): Array<{ path: string; reason: string }> {
  const out: Array<{ path: string; reason: string }> = [];
  const problem = (path: string, reason: string) => out.push({ path, reason });
  if (a.area === 'DB' && a.dbNumber === undefined) problem('dbNumber', 'area DB needs its dbNumber');
  if (a.area !== 'DB' && a.dbNumber !== undefined) problem('dbNumber', `only area DB has a dbNumber (area ${a.area})`);
  if (a.type === 'BOOL' && a.bit === undefined) problem('bit', 'a BOOL needs its bit (0-7)');
  if (a.type !== 'BOOL' && a.bit !== undefined) problem('bit', `only a BOOL has a bit (type ${a.type})`);
  if (a.type === 'STRING' && a.length === undefined) problem('length', `a STRING needs its length (1-${S7_MAX_STRING} characters)`);
  if (a.type !== 'STRING' && a.length !== undefined) problem('length', `only a STRING has a length (type ${a.type})`);
  if (a.offset + s7ByteLength(a) > 65536) problem('offset', 'the value ends beyond byte 65535');
  return out;
}

/** Bytes the value takes in the CPU's memory (a STRING: its two header bytes and its characters). */
export function s7ByteLength(a: Pick<S7Address, 'type' | 'length'>): number {
  switch (a.type) {
    case 'BOOL':
    case 'BYTE':
      return 1;
    case 'WORD':
    case 'INT':
      return 2;
    case 'STRING':
      return (a.length ?? 0) + 2;
    default:
      return 4;
  }
}

/** The address in Siemens notation (DB1.DBX4.3, DB1.DBW4, MD8, I0.1, DB2.DBB10 STRING[20]): what errors name. */
export function s7AddressText(a: S7Address): string {
  const size = a.type === 'BOOL' ? 'X' : s7ByteLength(a) === 2 ? 'W' : s7ByteLength(a) === 4 ? 'D' : 'B';
  const at = a.type === 'BOOL' ? `${a.offset}.${a.bit ?? 0}` : String(a.offset);
  const where = a.area === 'DB' ? `DB${a.dbNumber ?? '?'}.DB${size}${at}` : `${a.area}${a.type === 'BOOL' ? '' : size}${at}`;
  return a.type === 'STRING' ? `${where} STRING[${a.length ?? '?'}]` : where;
}
