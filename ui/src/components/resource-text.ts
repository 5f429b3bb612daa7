// Mapping resources in words, for the pages an operator reads (mapping, a service's page): an
// endpoint's address as the device's own notation ("holding 0–1", "DB1.DBW4", "tag Speed"), a
// connection's peer, a write's result ("written 4321 at 10:02:03 by admin").

type Obj = Record<string, unknown>;

const str = (v: unknown) => (v === undefined || v === null ? '' : typeof v === 'string' ? v : JSON.stringify(v));

/** An S7 address in Siemens notation: DB1.DBX4.3, DB1.DBW4, MW8, I0.1, DB2.DBB10 STRING[20]. */
function s7Text(a: Obj): string {
  const type = str(a.type);
  const size = type === 'BOOL' ? 'X' : type === 'BYTE' || type === 'STRING' ? 'B' : type === 'WORD' || type === 'INT' ? 'W' : 'D';
  const bit = type === 'BOOL' ? `.${str(a.bit ?? 0)}` : '';
  const text = str(a.area) === 'DB' ? `DB${str(a.dbNumber)}.DB${size}${str(a.offset)}${bit}` : type === 'BOOL' ? `${str(a.area)}${str(a.offset)}${bit}` : `${str(a.area)}${size}${str(a.offset)}`;
  return type === 'STRING' ? `${text} STRING[${str(a.length)}]` : `${text} (${type})`;
}

/** An endpoint's address in words: the device's notation where there is one, else its fields. */
export function addressText(address: unknown): string {
  if (!address || typeof address !== 'object') return str(address) || '—';
  const a = address as Obj;
  if (typeof a.table === 'string' && typeof a.address === 'number') {
    const n = typeof a.quantity === 'number' ? a.quantity : 1;
    return n > 1 ? `${a.table} ${a.address}–${a.address + n - 1}` : `${a.table} ${a.address}`;
  }
  if (typeof a.area === 'string' && a.offset !== undefined) return s7Text(a);
  if (typeof a.tag === 'string') {
    const n = typeof a.elements === 'number' && a.elements > 1 ? ` ×${a.elements}` : '';
    return `tag ${a.tag}${a.type ? ` (${str(a.type)}${n})` : ''}`;
  }
  if (typeof a.nodeId === 'string') return `node ${a.nodeId}${typeof a.samplingIntervalMs === 'number' ? `, sampled every ${a.samplingIntervalMs} ms` : ''}`;
  if (typeof a.topic === 'string') return `topic ${a.topic}${a.qos !== undefined ? ` (QoS ${str(a.qos)})` : ''}`;
  if (typeof a.path === 'string') return `path ${a.path}`;
  return Object.entries(a)
    .map(([k, v]) => `${k} ${str(v)}`)
    .join(', ');
}

/** Where a connection goes: host:port, a serial line, a URL. */
export function peerText(connection: unknown): string {
  const c = (connection ?? {}) as Obj;
  if (c.host !== undefined) return `${str(c.host)}${c.port !== undefined ? `:${str(c.port)}` : ''}`;
  if (typeof c.path === 'string') return `${c.path}${c.baudRate !== undefined ? ` at ${str(c.baudRate)} baud` : ''}`;
  return str(c.url ?? c.baseUrl ?? c.endpointUrl ?? '') || '—';
}

/** A clock time: 10:02:03 (the date too when it is not today). */
export function clockTime(at: string | number): string {
  const d = new Date(at);
  if (Number.isNaN(d.getTime())) return String(at);
  const time = d.toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23' });
  return d.toDateString() === new Date().toDateString() ? time : `${d.toLocaleDateString(undefined, { month: 'short', day: 'numeric' })} ${time}`;
}

export interface WriteOutcome {
  ok: boolean;
  value?: unknown;
  error?: string;
  at: string | number;
  by?: string;
  clientId?: string;
  via?: string;
}

/** "written 4321 at 10:02:03 by admin (client hmi-1)", "not written (Modbus exception 2…): 12 at … by …". */
export function writeText(w: WriteOutcome): string {
  const value = w.value === undefined ? '' : ` ${str(w.value)}`;
  const who = [w.by ? `by ${w.by}` : '', w.via ? `via ${w.via}` : '', w.clientId ? `(client ${w.clientId})` : ''].filter(Boolean).join(' ');
  const head = w.ok ? `written${value}` : `not written${w.error ? ` (${w.error})` : ''}:${value || ' —'}`;
  return `${head} at ${clockTime(w.at)}${who ? ` ${who}` : ''}`;
}

/** A count with its unit word: "1 read", "3 reads". */
export const count = (n: number, word: string) => `${n.toLocaleString('en')} ${word}${n === 1 ? '' : 's'}`;

/**
 * A connection's values refused before anything was sent ("3 values refused before sending"),
 * apart from its failures: a value out of range is the writer's mistake, not a sign of trouble
 * on the line. Empty when there are none.
 */
export const refusedText = (refusedWrites: number | undefined) => (refusedWrites ? `${count(refusedWrites, 'value')} refused before sending` : '');

/** How long ago, in a few words (the polled pages refresh it). */
export function ago(at: string | number | undefined, now = Date.now()): string {
  if (at === undefined) return 'never';
  const s = Math.max(0, Math.round((now - new Date(at).getTime()) / 1000));
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  return clockTime(at);
}

/** The name a `!ref` value points at (or the value as text). */
const refText = (v: unknown) => (v && typeof v === 'object' && typeof (v as Obj)['!ref'] === 'string' ? String((v as Obj)['!ref']) : str(v));

/** One line on what a resource of a service file is, from its properties (the folded editor panel's summary). */
export function resourceSummary(type: string, p: Obj): string {
  switch (type) {
    case 'Connection':
      return [str(p.protocol), peerText(p.configuration)].filter((x) => x && x !== '—').join(' · ');
    case 'Endpoint':
      return [str(p.operation), p.address ? addressText(p.address) : '', p.connection !== undefined ? `on ${refText(p.connection)}` : '', p.pollIntervalMs !== undefined && p.operation !== 'write' ? `every ${str(p.pollIntervalMs)} ms` : ''].filter(Boolean).join(' · ');
    case 'Mapping':
      return count(Array.isArray(p.mappings) ? p.mappings.length : 0, 'route');
    case 'Bridge': {
      const urls = ((p.remote as Obj | undefined)?.urls as unknown[] | undefined) ?? [];
      return [urls.map(str).join(', '), p.runAs !== undefined ? `as ${str(p.runAs)}` : ''].filter(Boolean).join(' · ');
    }
    case 'Sparkplug':
      return [p.groupId !== undefined && p.edgeNodeId !== undefined ? `${str(p.groupId)}/${str(p.edgeNodeId)}` : '', Array.isArray(p.devices) ? count(p.devices.length, 'device') : ''].filter(Boolean).join(' · ');
    case 'Server::Opcua':
      return `OPC UA server${(p.options as Obj | undefined)?.port !== undefined ? ` on port ${str((p.options as Obj).port)}` : ''}`;
    case 'Node::Opcua':
      return [Array.isArray(p.nodes) ? count(p.nodes.length, 'node') : '', p.server !== undefined ? `on ${refText(p.server)}` : ''].filter(Boolean).join(' · ');
    default:
      return '';
  }
}
