// Siemens S7 connections in the real gateway against a real S7 peer: snap7's S7 server in a
// child process of the test kit (support/snap7-server.ts), its memory filled and changed by the
// tests. Every type read and written, the endpoints of a connection read in one request, the
// CPU's refusals as the endpoints' errors, values that do not fit, the write path's permission,
// the API views and /metrics, bad addresses refused with their paths, a CPU that loses power
// and comes back, and S7 endpoints as the metrics of a Sparkplug B device (DBIRTH, DDATA, DCMD).
import { expect } from 'chai';
import type { MqttClient } from 'mqtt';
import { GOOD_PASSWORD, startGateway, type TestGateway } from './support/harness.js';
import { closed, collect, connect, endAllClients, subscribe } from './support/mqtt-test-kit.js';
import { SparkplugHost, valueOfMetric, type SparkplugMessage } from './support/sparkplug-host.js';
import { startSnap7Server, type Snap7Server } from './support/snap7-server.js';
import { until } from './mapping-support.js';
import { edgePermissions, GROUP } from './sparkplug-support.js';

/** DB1 as the tests fill it: one value of every type, then room for the writes. */
function db1(): Buffer {
  const b = Buffer.alloc(256);
  b[0] = 0b0000_1000; // DBX0.3 set
  b[1] = 200; // DBB1
  b.writeUInt16BE(65000, 2); // DBW2
  b.writeUInt32BE(4_000_000_000, 4); // DBD4
  b.writeInt16BE(-215, 8); // DBW8
  b.writeInt32BE(-100_000, 10); // DBD10
  b.writeFloatBE(3.3, 14); // DBD14
  b[18] = 16; // STRING[16] at DBB18: declared length, current length, characters
  b[19] = 5;
  b.write('Bread', 20, 'latin1');
  b.writeUInt16BE(7, 252); // DBW252, next to a DINT that would end beyond the DB
  return b;
}

const lineYaml = (port: number) => `description: S7 line
resources:
  plc:
    type: Connection
    properties: {protocol: S7, configuration: {host: 127.0.0.1, port: ${port}, rack: 0, slot: 1, timeoutMs: 1000}}
  running: {type: Endpoint, properties: {connection: !ref plc, operation: read, address: {area: DB, dbNumber: 1, offset: 0, bit: 3, type: BOOL}, pollIntervalMs: 50}}
  count: {type: Endpoint, properties: {connection: !ref plc, operation: read, address: {area: DB, dbNumber: 1, offset: 1, type: BYTE}, pollIntervalMs: 50}}
  speed: {type: Endpoint, properties: {connection: !ref plc, operation: read, address: {area: DB, dbNumber: 1, offset: 2, type: WORD}, pollIntervalMs: 50}}
  total: {type: Endpoint, properties: {connection: !ref plc, operation: read, address: {area: DB, dbNumber: 1, offset: 4, type: DWORD}, pollIntervalMs: 50}}
  temperature: {type: Endpoint, properties: {connection: !ref plc, operation: read, address: {area: DB, dbNumber: 1, offset: 8, type: INT}, pollIntervalMs: 50}}
  position: {type: Endpoint, properties: {connection: !ref plc, operation: read, address: {area: DB, dbNumber: 1, offset: 10, type: DINT}, pollIntervalMs: 50}}
  pressure: {type: Endpoint, properties: {connection: !ref plc, operation: read, address: {area: DB, dbNumber: 1, offset: 14, type: REAL}, pollIntervalMs: 50}}
  recipe: {type: Endpoint, properties: {connection: !ref plc, operation: read, address: {area: DB, dbNumber: 1, offset: 18, type: STRING, length: 16}, pollIntervalMs: 50}}
  flag: {type: Endpoint, properties: {connection: !ref plc, operation: read, address: {area: M, offset: 0, bit: 1, type: BOOL}, pollIntervalMs: 50}}
  input: {type: Endpoint, properties: {connection: !ref plc, operation: read, address: {area: I, offset: 2, type: BYTE}, pollIntervalMs: 50}}
  output: {type: Endpoint, properties: {connection: !ref plc, operation: read, address: {area: Q, offset: 4, type: WORD}, pollIntervalMs: 50}}
  edge: {type: Endpoint, properties: {connection: !ref plc, operation: read, address: {area: DB, dbNumber: 1, offset: 252, type: WORD}, pollIntervalMs: 50}}
  past: {type: Endpoint, properties: {connection: !ref plc, operation: read, address: {area: DB, dbNumber: 1, offset: 254, type: DINT}, pollIntervalMs: 50}}
  missing: {type: Endpoint, properties: {connection: !ref plc, operation: read, address: {area: DB, dbNumber: 9, offset: 0, type: INT}, pollIntervalMs: 50}}
  setpoint: {type: Endpoint, properties: {connection: !ref plc, operation: write, address: {area: DB, dbNumber: 1, offset: 40, type: INT}}}
  speedSet: {type: Endpoint, properties: {connection: !ref plc, operation: write, address: {area: DB, dbNumber: 1, offset: 44, type: REAL}}}
  lamp: {type: Endpoint, properties: {connection: !ref plc, operation: write, topic: line/lamp, address: {area: Q, offset: 0, bit: 0, type: BOOL}}}
  label: {type: Endpoint, properties: {connection: !ref plc, operation: write, address: {area: DB, dbNumber: 1, offset: 48, type: STRING, length: 8}}}
  counter: {type: Endpoint, properties: {connection: !ref plc, operation: write, address: {area: DB, dbNumber: 1, offset: 60, type: BYTE}}}
  outOfRange: {type: Endpoint, properties: {connection: !ref plc, operation: write, address: {area: DB, dbNumber: 1, offset: 254, type: DINT}}}
  noBlock: {type: Endpoint, properties: {connection: !ref plc, operation: write, address: {area: DB, dbNumber: 9, offset: 0, type: INT}}}
`;

/** The read endpoints of lineYaml that read fine, and the ranges one poll round reads (merged). */
const GOOD_READS = ['running', 'count', 'speed', 'total', 'temperature', 'position', 'pressure', 'recipe', 'flag', 'input', 'output', 'edge'];
/** DB1 0..35 (merged), DB1.DBW252, DB1.DBD254 (kept apart once refused), DB9, M, I, Q. */
const RANGES_PER_ROUND = 7;

describe('Siemens S7 connections against snap7', function () {
  this.timeout(60_000);
  let gw: TestGateway;
  let admin: string;
  let plc: Snap7Server;
  let sub: MqttClient;
  let inbox: ReturnType<typeof collect>;

  const api = (method: string, path: string, body?: unknown) => gw.api(method, path, { token: admin, ...(body === undefined ? {} : { body }) });
  const putYaml = (id: string, text: string) => gw.api('PUT', `/api/services/${id}`, { token: admin, raw: text, headers: { 'content-type': 'application/yaml' } });
  /** A reading of an endpoint of the line that satisfies `pred` (readings repeat every poll), parsed. */
  const reading = async (name: string, pred: (v: unknown) => boolean = () => true) => JSON.parse((await inbox.until((x) => x.topic === `services/line/${name}` && pred(JSON.parse(x.payload)), 10_000)).payload) as unknown;
  /** The first message on `topic` from the `seen`-th on, parsed. */
  const arriving = (topic: string, seen: number) => until(() => inbox.messages.slice(seen).find((m) => m.topic === topic), 10_000, topic).then((m) => JSON.parse(m.payload) as { ok: boolean; value?: unknown; error?: string });
  /** Publishes a value to <topic>/set and answers its /set/result. */
  const write = async (topic: string, payload: string) => {
    const seen = inbox.messages.length;
    await sub.publishAsync(`${topic}/set`, payload, { qos: 1 });
    return arriving(`${topic}/set/result`, seen);
  };
  const endpoint = async (name: string) => (await api('GET', `/api/endpoints/line.${name}`)).body;

  before(async function () {
    this.timeout(300_000); // the first run on a Node builds snap7's addon for it
    plc = await startSnap7Server({ dbs: { 1: 256 }, observe: true });
    await plc.set('DB', 1, 0, db1());
    await plc.set('M', 0, 0, Buffer.from([0b10]));
    await plc.set('I', 0, 2, Buffer.from([0x5a]));
    await plc.set('Q', 0, 4, Buffer.from([0x12, 0x34]));
    gw = await startGateway();
    admin = await gw.login();
    sub = await connect(gw.ports.mqtt, { username: 'admin', password: 'Admin-Passw0rd!' });
    inbox = collect(sub);
    await subscribe(sub, ['services/line/#', 'line/#'], 1);
    const res = await putYaml('line', lineYaml(plc.port));
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    // Every test starts with the line running: connected, every endpoint enabled.
    const rt = gw.mapping.runtime()!;
    await rt.waitFor(() => rt.listEndpoints().filter((e) => e.id.startsWith('line.')).every((e) => e.currentState === 'enabled'), 15_000);
  });
  after(async () => {
    await endAllClients();
    await gw?.stop();
    await plc?.stop();
  });

  it('publishes every type as its JSON value, the endpoints of the connection read in one request per poll round', async () => {
    const values: Record<string, unknown> = {};
    for (const name of GOOD_READS) values[name] = await reading(name);
    expect(values).to.deep.equal({ running: true, count: 200, speed: 65000, total: 4_000_000_000, temperature: -215, position: -100_000, pressure: 3.3, recipe: 'Bread', flag: true, input: 0x5a, output: 0x1234, edge: 7 });
    expect((await api('GET', '/api/connections/line.plc')).body).to.deep.include({ currentState: 'connected', connection: { protocol: 'S7', host: '127.0.0.1', port: plc.port, rack: 0, slot: 1, timeoutMs: 1000 } });

    // Steady polling: count the jobs the CPU gets while the temperature is read 20 times.
    plc.jobs.length = 0;
    const polls = inbox.messages.filter((m) => m.topic === 'services/line/temperature').length;
    await until(() => (inbox.messages.filter((m) => m.topic === 'services/line/temperature').length >= polls + 20 ? true : undefined), 15_000, '20 polls');
    const reads = plc.jobs.filter((j) => j.fn === 'read');
    const rounds = inbox.messages.filter((m) => m.topic === 'services/line/temperature').length - polls;
    // One request per round (the odd round whose timers drifted apart takes two), every range in it.
    expect(reads.length).to.be.within(rounds - 1, Math.ceil(rounds * 1.25) + 1);
    expect(reads.filter((j) => j.items === RANGES_PER_ROUND).length).to.be.at.least(Math.floor(reads.length * 0.75));
    expect(Math.max(...reads.map((j) => j.items))).to.be.at.most(20);
  });

  it('follows the memory of the CPU as it changes', async () => {
    const b = Buffer.alloc(4);
    b.writeFloatBE(-12.75, 0);
    await plc.set('DB', 1, 14, b);
    await plc.set('DB', 1, 0, Buffer.from([0]));
    await plc.set('DB', 1, 18, Buffer.concat([Buffer.from([16, 8]), Buffer.from('Pretzels', 'latin1')]));
    expect(await reading('pressure', (v) => v === -12.75)).to.equal(-12.75);
    expect(await reading('running', (v) => v === false)).to.equal(false);
    expect(await reading('recipe', (v) => v === 'Pretzels')).to.equal('Pretzels');
  });

  it('makes an address the CPU does not have that endpoint\'s error, with the CPU\'s reason; the connection and the other endpoints go on', async () => {
    await until(async () => ((await endpoint('missing')).message ? true : undefined), 10_000, 'the missing endpoint\'s error');
    expect(await endpoint('missing')).to.deep.include({ currentState: 'enabled', message: 'DB9.DBW0: object does not exist (return code 0x0a)' });
    expect(await endpoint('past')).to.deep.include({ currentState: 'enabled', message: 'DB1.DBD254: address out of range (return code 0x05)' });
    // Its neighbour in DB1, first read in one range with it, has its value and no error.
    expect(await endpoint('edge')).not.to.have.property('message');
    await plc.set('DB', 1, 252, Buffer.from([0, 8]));
    expect(await reading('edge', (v) => v === 8)).to.equal(8);
    expect((await api('GET', '/api/connections/line.plc')).body.currentState).to.equal('connected');
    expect(inbox.messages.some((m) => m.topic === 'services/line/missing' || m.topic === 'services/line/past')).to.equal(false);
  });

  it('writes every type through <topic>/set and acknowledges it on /set/result', async () => {
    expect(await write('services/line/setpoint', '-1234')).to.deep.include({ ok: true, value: -1234 });
    expect((await plc.get('DB', 1, 40, 2)).readInt16BE(0)).to.equal(-1234);

    expect(await write('services/line/speedSet', '42.5')).to.deep.include({ ok: true, value: 42.5 });
    expect((await plc.get('DB', 1, 44, 4)).readFloatBE(0)).to.equal(42.5);

    // A bit is written alone: the other bits of its byte stay.
    await plc.set('Q', 0, 0, Buffer.from([0b1000_0000]));
    expect(await write('line/lamp', 'true')).to.deep.include({ ok: true, value: true });
    expect((await plc.get('Q', 0, 0, 1))[0]).to.equal(0b1000_0001);

    expect(await write('services/line/label', '"Rye"')).to.deep.include({ ok: true, value: 'Rye' });
    expect(await plc.get('DB', 1, 48, 5)).to.deep.equal(Buffer.from([8, 3, ...Buffer.from('Rye')]));
  });

  it('answers a write the CPU refuses, and a value that does not fit its type, with ok false and the reason; the connection goes on', async () => {
    const results: Array<[string, string, RegExp]> = [
      ['services/line/outOfRange', '5', /^DB1\.DBD254: the PLC refused the write: address out of range \(return code 0x05\)$/],
      ['services/line/noBlock', '5', /^DB9\.DBW0: the PLC refused the write: object does not exist \(return code 0x0a\)$/],
      ['services/line/counter', '300', /^DB1\.DBB60: a BYTE takes integers from 0 to 255$/],
      ['services/line/setpoint', '40000', /^DB1\.DBW40: an INT takes integers from -32768 to 32767$/],
      ['services/line/speedSet', '"fast"', /^DB1\.DBD44: a REAL takes numbers/],
      ['services/line/label', '"Sourdough loaf"', /^DB1\.DBB48 STRING\[8\]: the text has 14 characters; the STRING holds 8$/],
      ['line/lamp', '2', /^Q0\.0: a BOOL takes true or false/],
    ];
    const before = await plc.get('DB', 1, 40, 24);
    const figures = async () => (await api('GET', '/api/connections/line.plc')).body.figures as { refusedWrites: number; failures: number };
    const refusedBefore = (await figures()).refusedWrites;
    for (const [topic, payload, reason] of results) {
      const result = await write(topic, payload);
      expect(result.ok, topic).to.equal(false);
      expect(result.error).to.match(reason);
    }
    // The five values that do not fit their type never reached the CPU: refused writes, counted
    // apart from the failures of the communication (the CPU's two refusals; issue 38 point 4).
    expect((await figures()).refusedWrites - refusedBefore).to.equal(5);
    expect(await plc.get('DB', 1, 40, 24)).to.deep.equal(before);
    expect((await api('GET', '/api/connections/line.plc')).body.currentState).to.equal('connected');
    const n = inbox.messages.filter((m) => m.topic === 'services/line/temperature').length;
    await until(() => (inbox.messages.filter((m) => m.topic === 'services/line/temperature').length > n + 2 ? true : undefined), 5000, 'more readings');
  });

  it('answers <topic>/req on <topic>/res with a fresh reading', async () => {
    const seen = inbox.messages.length;
    await sub.publishAsync('services/line/output/req', '', { qos: 1 });
    expect(await arriving('services/line/output/res', seen)).to.equal(0x1234);
  });

  it('writes only for users the permission engine lets publish on <topic>/set', async () => {
    const reader = await gw.userWith([{ context: 'mqtt', resource: 'services/line/#', operation: 'read' }]);
    const client = await connect(gw.ports.mqtt, { username: reader.username, password: GOOD_PASSWORD });
    const gone = closed(client, 5000);
    const refusedBefore = gw.services.broker!.stats().publishesRefused;
    client.publish('services/line/setpoint/set', '777', { qos: 1 });
    await gone;
    expect(gw.services.broker!.stats().publishesRefused).to.equal(refusedBefore + 1);
    const writer = await gw.userWith([{ context: 'mqtt', resource: 'services/line/setpoint/#', operation: 'readWrite' }]);
    const allowed = await connect(gw.ports.mqtt, { username: writer.username, password: GOOD_PASSWORD });
    const mine = collect(allowed);
    await subscribe(allowed, 'services/line/setpoint/set/result', 1);
    await allowed.publishAsync('services/line/setpoint/set', '778', { qos: 1 });
    expect(JSON.parse((await mine.until((m) => m.topic === 'services/line/setpoint/set/result')).payload)).to.deep.include({ ok: true, value: 778 });
    // Only the allowed user's value reached the CPU.
    expect((await plc.get('DB', 1, 40, 2)).readInt16BE(0)).to.equal(778);
  });

  it('shows the endpoints in GET /api/endpoints and the connection\'s reads, failures and last reading in /metrics', async () => {
    const list = (await api('GET', '/api/endpoints')).body as Array<{ id: string; address: unknown; operation: string }>;
    expect(list.find((e) => e.id === 'line.recipe')).to.deep.include({ operation: 'read', address: { area: 'DB', dbNumber: 1, offset: 18, type: 'STRING', length: 16 } });
    expect(list.find((e) => e.id === 'line.lamp')).to.deep.include({ operation: 'write', address: { area: 'Q', offset: 0, bit: 0, type: 'BOOL' } });
    const metrics = (await api('GET', '/metrics')).body as string;
    const value = (name: string) => Number(new RegExp(`^${name.replace(/[{}"]/g, '\\$&')} (\\S+)$`, 'm').exec(metrics)?.[1]);
    expect(value('gatewayd_mapping_connection_up{connection="line.plc",service="line",protocol="S7"}')).to.equal(1);
    expect(value('gatewayd_mapping_messages_total{connection="line.plc",kind="read"}')).to.be.above(100);
    expect(value('gatewayd_mapping_messages_total{connection="line.plc",kind="write"}')).to.be.at.least(5);
    // The refused items (read every round) and the writes the CPU refused; the values refused before sending apart.
    expect(value('gatewayd_mapping_messages_total{connection="line.plc",kind="failure"}')).to.be.above(20);
    expect(value('gatewayd_mapping_messages_total{connection="line.plc",kind="refused_write"}')).to.equal(5);
    const last = value('gatewayd_mapping_last_read_timestamp_seconds{connection="line.plc"}');
    expect(Date.now() / 1000 - last).to.be.within(0, 5);
  });

  it('refuses a service with a bad S7 address: every problem with its path, nothing applied', async () => {
    const before = (await api('GET', '/api/services/line', undefined)).body;
    const bad = lineYaml(plc.port)
      .replace('{area: DB, dbNumber: 1, offset: 0, bit: 3, type: BOOL}', '{area: DB, dbNumber: 1, offset: 0, bit: 8, type: BOOL}')
      .replace('{area: DB, dbNumber: 1, offset: 1, type: BYTE}', '{area: X, offset: 1, type: BYTE}')
      .replace('{area: DB, dbNumber: 1, offset: 2, type: WORD}', '{area: DB, dbNumber: 1, offset: 2, type: LREAL}')
      .replace('{area: DB, dbNumber: 1, offset: 4, type: DWORD}', '{area: DB, dbNumber: 1, offset: -4, type: DWORD}')
      .replace('{area: DB, dbNumber: 1, offset: 18, type: STRING, length: 16}', '{area: DB, dbNumber: 1, offset: 18, type: STRING}')
      .replace('{area: DB, dbNumber: 1, offset: 8, type: INT}', '{area: DB, offset: 8, type: INT}')
      .replace('{area: M, offset: 0, bit: 1, type: BOOL}', '{area: M, offset: 0, type: BOOL}')
      .replace('{area: I, offset: 2, type: BYTE}', '{area: I, dbNumber: 3, offset: 2, bit: 1, type: BYTE}');
    const res = await putYaml('line', bad);
    expect(res.status).to.equal(400);
    const problems = (res.body.errors as Array<{ path: string; message: string }>).map((e) => `${e.path}: ${e.message}`);
    const at = (name: string, rest: string) => `resources.${name}.properties.address${rest}`;
    expect(problems).to.have.members([
      `${at('running', '.bit')}: must be <= 7`,
      `${at('count', '.area')}: must be equal to one of the allowed values (DB, I, Q, M)`,
      `${at('speed', '.type')}: must be equal to one of the allowed values (BOOL, BYTE, WORD, DWORD, INT, DINT, REAL, STRING)`,
      `${at('total', '.offset')}: must be >= 0`,
      `${at('recipe', '.length')}: a STRING needs its length (1-254 characters)`,
      `${at('temperature', '.dbNumber')}: area DB needs its dbNumber`,
      `${at('flag', '.bit')}: a BOOL needs its bit (0-7)`,
      `${at('input', '.dbNumber')}: only area DB has a dbNumber (area I)`,
      `${at('input', '.bit')}: only a BOOL has a bit (type BYTE)`,
    ]);
    expect((await api('GET', '/api/services/line')).body).to.deep.equal(before);
    expect((await endpoint('temperature')).currentState).to.equal('enabled');
  });

  it('offers S7 in the resource types the forms are built from', async () => {
    const types = (await api('GET', '/api/resource-types')).body as Array<{ type: string; schema: any }>;
    const connection = types.find((t) => t.type === 'Connection')!.schema;
    const ep = types.find((t) => t.type === 'Endpoint')!.schema;
    expect(connection.properties.protocol.enum).to.include('S7');
    expect(connection.definitions.S7.properties).to.deep.include({ port: { title: 'Port', type: 'integer', minimum: 1, maximum: 65535, default: 102 } });
    expect(connection.definitions.S7.properties.rack.default).to.equal(0);
    expect(connection.definitions.S7.properties.slot.default).to.equal(1);
    expect(ep.definitions.S7.required).to.deep.equal(['area', 'offset', 'type']);
    expect(ep.definitions.S7.properties.type.enum).to.deep.equal(['BOOL', 'BYTE', 'WORD', 'DWORD', 'INT', 'DINT', 'REAL', 'STRING']);
  });
});

describe('Siemens S7: a CPU that loses power and comes back', function () {
  this.timeout(60_000);
  let gw: TestGateway;
  let plc: Snap7Server | undefined;
  after(async () => {
    await endAllClients();
    await gw?.stop();
    await plc?.stop();
  });

  it('goes reconnecting with the backoff, the endpoints enabling, and connects again to the restarted CPU; writes meanwhile are answered', async function () {
    this.timeout(300_000); // may build snap7's addon for this Node
    plc = await startSnap7Server({ dbs: { 1: 16 } });
    await plc.set('DB', 1, 0, Buffer.from([0, 11]));
    const port = plc.port;
    gw = await startGateway();
    const admin = await gw.login();
    const sub = await connect(gw.ports.mqtt, { username: 'admin', password: 'Admin-Passw0rd!' });
    const inbox = collect(sub);
    await subscribe(sub, 'services/cell/#', 1);
    const res = await gw.api('PUT', '/api/services/cell', {
      token: admin,
      headers: { 'content-type': 'application/yaml' },
      raw: `resources:
  plc: {type: Connection, properties: {protocol: S7, configuration: {host: 127.0.0.1, port: ${port}, timeoutMs: 500}}}
  level: {type: Endpoint, properties: {connection: !ref plc, operation: read, address: {area: DB, dbNumber: 1, offset: 0, type: INT}, pollIntervalMs: 50}}
  valve: {type: Endpoint, properties: {connection: !ref plc, operation: write, address: {area: DB, dbNumber: 1, offset: 2, type: INT}}}
`,
    });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    await inbox.until((m) => m.topic === 'services/cell/level' && m.payload === '11', 10_000);
    const rt = gw.mapping.runtime()!;

    await plc.kill();
    await rt.waitFor(() => rt.getConnection('cell.plc').currentState === 'reconnecting', 10_000);
    expect(rt.getConnection('cell.plc').message).to.be.a('string').and.not.equal('');
    await rt.waitFor(() => rt.getEndpoint('cell.level').currentState === 'enabling', 5000);
    await sub.publishAsync('services/cell/valve/set', '1', { qos: 1 });
    const refused = JSON.parse((await inbox.until((m) => m.topic === 'services/cell/valve/set/result', 5000)).payload);
    expect(refused.ok).to.equal(false);
    expect(refused.error).to.match(/^not written: connection cell\.plc is (reconnecting|connecting)/);

    plc = await startSnap7Server({ port, dbs: { 1: 16 } });
    await plc.set('DB', 1, 0, Buffer.from([0, 12]));
    await rt.waitFor(() => rt.getConnection('cell.plc').currentState === 'connected' && rt.getEndpoint('cell.level').currentState === 'enabled', 20_000);
    await inbox.until((m) => m.topic === 'services/cell/level' && m.payload === '12', 10_000);
    const logs = gw.logs().filter((l) => l.message === 'connection failed, retrying' && l.id === 'cell.plc');
    expect(logs.length).to.be.at.least(1);
    expect(logs[0]!.retryInMs).to.equal(1000);
  });
});

describe('Siemens S7 endpoints as Sparkplug B metrics', function () {
  this.timeout(60_000);
  let gw: TestGateway;
  let plc: Snap7Server;
  let host: SparkplugHost | undefined;
  after(async () => {
    await host?.end().catch(() => undefined);
    await gw?.stop();
    await plc?.stop();
  });

  it('births the device with the S7 values, sends changes as DDATA, and writes a DCMD through the S7 write endpoint', async function () {
    this.timeout(300_000); // may build snap7's addon for this Node
    plc = await startSnap7Server({ dbs: { 1: 64 } });
    const mem = Buffer.alloc(64);
    mem.writeFloatBE(1.5, 0);
    mem[4] = 0b1;
    mem.writeInt16BE(30, 6);
    mem.set([12, 4, ...Buffer.from('Rye1')], 8);
    await plc.set('DB', 1, 0, mem);
    gw = await startGateway();
    const admin = await gw.login();
    await gw.userWith(edgePermissions('gw7'), 'edge-gw7');
    await gw.userWith(
      [
        { context: 'mqtt', operation: 'read', resource: 'spBv1.0/#' },
        { context: 'mqtt', operation: 'write', resource: `spBv1.0/${GROUP}/DCMD/#` },
      ],
      'scada',
    );
    host = await SparkplugHost.connect(`mqtt://127.0.0.1:${gw.ports.mqtt}`, GROUP, { username: 'scada', password: GOOD_PASSWORD, protocolVersion: 4 });
    const res = await gw.api('PUT', '/api/services/oven', {
      token: admin,
      headers: { 'content-type': 'application/yaml' },
      raw: `resources:
  plc: {type: Connection, properties: {protocol: S7, configuration: {host: 127.0.0.1, port: ${plc.port}}}}
  pressure: {type: Endpoint, properties: {connection: !ref plc, operation: read, address: {area: DB, dbNumber: 1, offset: 0, type: REAL}, pollIntervalMs: 40}}
  running: {type: Endpoint, properties: {connection: !ref plc, operation: read, address: {area: DB, dbNumber: 1, offset: 4, bit: 0, type: BOOL}, pollIntervalMs: 40}}
  setpointNow: {type: Endpoint, properties: {connection: !ref plc, operation: read, address: {area: DB, dbNumber: 1, offset: 6, type: INT}, pollIntervalMs: 40}}
  setpoint: {type: Endpoint, properties: {connection: !ref plc, operation: write, address: {area: DB, dbNumber: 1, offset: 6, type: INT}}}
  recipe: {type: Endpoint, properties: {connection: !ref plc, operation: read, address: {area: DB, dbNumber: 1, offset: 8, type: STRING, length: 12}, pollIntervalMs: 40}}
  edge:
    type: Sparkplug
    properties:
      groupId: ${GROUP}
      edgeNodeId: gw7
      runAs: edge-gw7
      birthWaitMs: 2000
      devices:
        - deviceId: oven-1
          metrics:
            - {name: pressure, endpoint: !ref pressure, datatype: Float}
            - {name: running, endpoint: !ref running, datatype: Boolean}
            - {name: setpoint, endpoint: !ref setpointNow, writeEndpoint: !ref setpoint, datatype: Int16, writable: true}
            - {name: recipe, endpoint: !ref recipe, datatype: String}
`,
    });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    const h = host;
    const metric = (m: SparkplugMessage, name: string) => m.payload.metrics.find((x) => x.name === name);
    const dbirth = await h.until((m) => m.type === 'DBIRTH' && m.deviceId === 'oven-1', 15_000);
    expect(Object.fromEntries(['pressure', 'running', 'setpoint', 'recipe'].map((n) => [n, valueOfMetric(metric(dbirth, n)!)]))).to.deep.equal({ pressure: 1.5, running: true, setpoint: 30, recipe: 'Rye1' });
    const alias = (name: string) => metric(dbirth, name)!.alias!;

    const b = Buffer.alloc(4);
    b.writeFloatBE(2.25, 0);
    await plc.set('DB', 1, 0, b);
    const ddata = await h.until((m) => m.type === 'DDATA' && m.deviceId === 'oven-1' && m.payload.metrics.some((x) => x.alias === alias('pressure')), 10_000, dbirth.index);
    expect(ddata.payload.metrics.find((x) => x.alias === alias('pressure'))!.floatValue).to.equal(2.25);

    await h.command(`spBv1.0/${GROUP}/DCMD/gw7/oven-1`, [{ alias: alias('setpoint'), intValue: 55 }]);
    await until(async () => ((await plc.get('DB', 1, 6, 2)).readInt16BE(0) === 55 ? true : undefined), 10_000, 'the DCMD written to the CPU');
    const echoed = await h.until((m) => m.type === 'DDATA' && m.payload.metrics.some((x) => x.alias === alias('setpoint') && x.intValue === 55), 10_000, ddata.index);
    expect(echoed.deviceId).to.equal('oven-1');
  });
});

describe('Siemens S7: a small PDU, many items, answers cut into pieces', function () {
  this.timeout(60_000);
  let gw: TestGateway;
  let plc: Snap7Server;
  after(async () => {
    await endAllClients();
    await gw?.stop();
    await plc?.stop();
  });

  it('reads 25 items apart and a STRING[254] longer than the PDU in requests that fit 240 bytes, from answers that arrive a few bytes at a time', async function () {
    this.timeout(300_000); // may build snap7's addon for this Node
    plc = await startSnap7Server({ dbs: { 2: 256, 3: 300 }, pduLength: 240, fragment: true });
    const bytes = Buffer.alloc(256);
    for (let i = 0; i < 25; i++) bytes[i * 10] = i + 100;
    await plc.set('DB', 2, 0, bytes);
    const text = Array.from({ length: 254 }, (_v, i) => String.fromCharCode(0x41 + (i % 26))).join('');
    await plc.set('DB', 3, 20, Buffer.concat([Buffer.from([254, 254]), Buffer.from(text, 'latin1')]));
    gw = await startGateway();
    const admin = await gw.login();
    const sub = await connect(gw.ports.mqtt, { username: 'admin', password: 'Admin-Passw0rd!' });
    const inbox = collect(sub);
    await subscribe(sub, 'services/many/#');
    const items = Array.from({ length: 25 }, (_v, i) => `  b${i}: {type: Endpoint, properties: {connection: !ref plc, operation: read, address: {area: DB, dbNumber: 2, offset: ${i * 10}, type: BYTE}, pollIntervalMs: 100}}`);
    const res = await gw.api('PUT', '/api/services/many', {
      token: admin,
      headers: { 'content-type': 'application/yaml' },
      raw: `resources:
  plc: {type: Connection, properties: {protocol: S7, configuration: {host: 127.0.0.1, port: ${plc.port}}}}
${items.join('\n')}
  note: {type: Endpoint, properties: {connection: !ref plc, operation: read, address: {area: DB, dbNumber: 3, offset: 20, type: STRING, length: 254}, pollIntervalMs: 100}}
`,
    });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    expect(JSON.parse((await inbox.until((m) => m.topic === 'services/many/note', 10_000)).payload)).to.equal(text);
    for (let i = 0; i < 25; i++) expect(JSON.parse((await inbox.until((m) => m.topic === `services/many/b${i}`, 10_000)).payload)).to.equal(i + 100);
    const reads = plc.jobs.filter((j) => j.fn === 'read');
    // 240 bytes hold 19 item addresses; the STRING's 256 bytes come in two parts.
    expect(Math.max(...reads.map((j) => j.items))).to.equal(19);
    expect((await gw.api('GET', '/api/connections/many.plc', { token: admin })).body.currentState).to.equal('connected');
  });
});
