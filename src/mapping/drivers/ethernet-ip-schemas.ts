// The service-file schemas of EtherNet/IP connections and endpoints (src/mapping/schemas.ts
// collects them with the other protocols'), and the checks a schema cannot say.

type Schema = Record<string, unknown>;

export const ETHERNET_IP_TYPES = ['BOOL', 'SINT', 'INT', 'DINT', 'LINT', 'REAL', 'LREAL'] as const;
export type EtherNetIpType = (typeof ETHERNET_IP_TYPES)[number];

const NAME = '[A-Za-z_][A-Za-z0-9_]{0,39}';
const LEVEL = `${NAME}(\\[[0-9]{1,9}(,[0-9]{1,9}){0,2}\\])?`;
/** Controller tags, program tags (Program:<name>.<tag>), array elements and members of structures. */
export const TAG_PATTERN = `^(Program:${NAME}\\.)?${LEVEL}(\\.${LEVEL}){0,15}$`;
export const MAX_ELEMENTS = 1000;

export const etherNetIpConfigurationSchema: Schema = {
  type: 'object',
  additionalProperties: false,
  required: ['host'],
  description: 'A Logix controller (ControlLogix, CompactLogix) over EtherNet/IP: CIP explicit messaging on one class 3 connection.',
  properties: {
    host: { title: 'Host', type: 'string', minLength: 1, maxLength: 255, description: 'The controller or its EtherNet/IP module (e.g. 1756-EN2T).' },
    port: { title: 'Port', type: 'integer', minimum: 1, maximum: 65535, default: 44818 },
    slot: { title: 'Slot', type: 'integer', minimum: 0, maximum: 15, default: 0, description: 'The CPU slot in the chassis, reached through the backplane (0 for CompactLogix).' },
    timeoutMs: { title: 'Timeout (ms)', type: 'integer', minimum: 10, maximum: 60000, default: 2000, description: 'How long to wait for an answer; an unanswered request loses the connection.' },
  },
};

export const etherNetIpAddressSchema: Schema = {
  type: 'object',
  additionalProperties: false,
  required: ['tag'],
  properties: {
    tag: { title: 'Tag', type: 'string', minLength: 1, maxLength: 512, pattern: TAG_PATTERN, description: 'e.g. Speed, Program:Main.Speed, Temps[3], Line.Motor[2].Current; BOOL arrays: Flags[5].' },
    type: {
      title: 'Type',
      type: 'string',
      enum: [...ETHERNET_IP_TYPES],
      description: 'The atomic type of the tag, checked against the controller at every read. Not set: the tag is read as the controller types it (a write learns the type with a read first); BOOL array elements need BOOL.',
    },
    elements: { title: 'Elements', type: 'integer', minimum: 1, maximum: MAX_ELEMENTS, default: 1, description: 'More than 1: an array of this many elements from the one the tag names (a JSON array).' },
  },
};

/** What is wrong with an address that fits the schema (paths relative to the address). */
export function etherNetIpAddressProblems(address: { tag: string; type?: EtherNetIpType; elements?: number }): Array<{ path: string; reason: string }> {
  if (address.type !== 'BOOL') return [];
  const last = /\[([0-9,]+)\]$/.exec(address.tag);
  if ((address.elements ?? 1) > 1 && !last) return [{ path: 'tag', reason: 'a BOOL array endpoint names its first element, e.g. Flags[0]' }];
  if (last?.[1]?.includes(',')) return [{ path: 'tag', reason: 'BOOL arrays have one dimension' }];
  return [];
}
