// EtherNet/IP (protocol EtherNetIp): the driver against the test kit's CIP server (a Logix
// controller answering Register Session, Forward Open, Read/Write Tag ... on 127.0.0.x), then
// in the gateway: service checks, polls and /req, writes through <topic>/set with
// /set/result, refusals, the permission engine, reconnection, /metrics, the API views and
// forms, Sparkplug metrics, and docs/mapping.md's example (endpoints naming only their tag).
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import type { MqttClient } from 'mqtt';
import { createEtherNetIpDriver, type EtherNetIpConfiguration } from '../src/mapping/drivers/ethernet-ip.js';
import { parseServiceFile, type ConnectionDef, type EndpointDef } from '../src/mapping/service-files.js';
import { DeviceError } from '../src/mapping/drivers/types.js';
import { startCipServer, type CipServerOptions, type CipTestServer } from './support/cip-server.js';
import { ADMIN_PASSWORD, GOOD_PASSWORD, startGateway, tempDir, type TestGateway } from './support/harness.js';
import { closed, connect, endAllClients, subscribe, withTimeout } from './support/mqtt-test-kit.js';
import { SparkplugHost } from './support/sparkplug-host.js';
import { until } from './mapping-support.js';

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));

/** The next message on `client` that `pred` accepts (its payload as text), within `ms`. */
function nextMessage(client: MqttClient, pred: (topic: string, payload: string) => boolean, ms = 5000): Promise<{ topic: string; payload: string }> {
  let on: (topic: string, payload: Buffer) => void = () => {};
  return withTimeout(
    new Promise<{ topic: string; payload: string }>((resolve) => {
      on = (topic, payload) => {
        if (pred(topic, payload.toString())) resolve({ topic, payload: payload.toString() });
      };
      client.on('message', on);
    }),
    ms,
    'message not received',
  ).finally(() => client.removeListener('message', on));
}

const endpoint = (address: Record<string, unknown>): EndpointDef =>
  ({ kind: 'endpoint', id: 't.e', serviceId: 't', name: 'e', connectionId: 't.c', protocol: 'EtherNetIp', operation: 'read', address, topic: 't/e', targetState: 'enabled' }) as EndpointDef;

const plantTags = (): CipServerOptions['tags'] => ({
  Speed: { type: 'DINT', value: 1500 },
  Level: { type: 'INT', value: -12 },
  Mode: { type: 'SINT', value: 3 },
  Running: { type: 'BOOL', value: true },
  Counter: { type: 'LINT', value: 2n ** 60n + 1n },
  Ratio: { type: 'LREAL', value: Math.PI },
  'Program:Main.Temp': { type: 'REAL', value: 21.5 },
  'Line.Motor[2].Current': { type: 'REAL', value: 4.25 },
  Temps: { type: 'DINT', length: 10, value: [10, 11, 12, 13, 14, 15, 16, 17, 18, 19] },
  Flags: { type: 'BOOL', length: 64, value: [true, false, true] },
  Trend: { type: 'LREAL', length: 200, value: Array.from({ length: 200 }, (_, i) => i / 4) },
  Recipe: { type: 'DINT', value: 7, readOnly: true },
});

/** A loopback address of its own (127.0.0.2 .. 127.0.0.254) for a server on the EtherNet/IP port. */
async function startOnStandardPort(options: CipServerOptions): Promise<CipTestServer> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const host = `127.0.0.${2 + Math.floor(Math.random() * 253)}`;
    try {
      return await startCipServer({ ...options, host, port: 44818 });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err;
    }
  }
  throw new Error('no free 127.0.0.x:44818');
}

describe('EtherNet/IP driver against the test kit\'s CIP server', function () {
  this.timeout(20_000);
  let plc: CipTestServer;
  let cfg: EtherNetIpConfiguration;
  const drivers: Array<ReturnType<typeof createEtherNetIpDriver>> = [];
  const open = async (over: Partial<EtherNetIpConfiguration> = {}) => {
    const d = createEtherNetIpDriver({ ...cfg, ...over });
    drivers.push(d);
    await d.connect();
    return d;
  };
  beforeEach(async () => {
    plc = await startCipServer({ tags: plantTags() });
    cfg = { host: '127.0.0.1', port: plc.port, slot: 0, timeoutMs: 1000 };
  });
  afterEach(async () => {
    for (const d of drivers.splice(0)) await d.disconnect();
    await plc.stop();
  });

  it('reads every atomic type: controller and program tags, members, array elements, arrays and BOOL arrays', async () => {
    const d = await open();
    const read = (address: Record<string, unknown>) => d.read(endpoint(address));
    expect(await read({ tag: 'Speed', type: 'DINT' })).to.equal(1500);
    expect(await read({ tag: 'Level', type: 'INT' })).to.equal(-12);
    expect(await read({ tag: 'Mode', type: 'SINT' })).to.equal(3);
    expect(await read({ tag: 'Running', type: 'BOOL' })).to.equal(true);
    expect(await read({ tag: 'Counter', type: 'LINT' })).to.equal(String(2n ** 60n + 1n)); // beyond 2^53: decimal text, every digit kept
    expect(await read({ tag: 'Ratio', type: 'LREAL' })).to.equal(Math.PI);
    expect(await read({ tag: 'Program:Main.Temp', type: 'REAL' })).to.equal(21.5);
    expect(await read({ tag: 'Line.Motor[2].Current', type: 'REAL' })).to.equal(4.25);
    expect(await read({ tag: 'Temps[3]', type: 'DINT' })).to.equal(13);
    expect(await read({ tag: 'Temps[7]', type: 'DINT', elements: 3 })).to.deep.equal([17, 18, 19]);
    expect(await read({ tag: 'Flags[0]', type: 'BOOL', elements: 4 })).to.deep.equal([true, false, true, false]);
    plc.set('Flags', [...Array(33).fill(false), true]);
    expect(await read({ tag: 'Flags[31]', type: 'BOOL', elements: 3 })).to.deep.equal([false, false, true]); // across two words
    expect(await read({ tag: 'Flags[33]', type: 'BOOL' })).to.equal(true);
    plc.set('Counter', -42n);
    expect(await read({ tag: 'Counter', type: 'LINT' })).to.equal(-42);
  });

  it('writes every atomic type; BOOL array elements by Read Modify Write, leaving the other bits of the word', async () => {
    const d = await open();
    const write = (address: Record<string, unknown>, value: unknown) => d.write(endpoint(address), value);
    await write({ tag: 'Speed', type: 'DINT' }, -2147483648);
    await write({ tag: 'Level', type: 'INT' }, 32767);
    await write({ tag: 'Mode', type: 'SINT' }, -128);
    await write({ tag: 'Running', type: 'BOOL' }, false);
    await write({ tag: 'Counter', type: 'LINT' }, '-9223372036854775808');
    await write({ tag: 'Ratio', type: 'LREAL' }, 1e300);
    await write({ tag: 'Program:Main.Temp', type: 'REAL' }, 0.5);
    await write({ tag: 'Temps[8]', type: 'DINT', elements: 2 }, [80, 90]);
    expect([plc.get('Speed'), plc.get('Level'), plc.get('Mode'), plc.get('Running'), plc.get('Counter'), plc.get('Ratio'), plc.get('Program:Main.Temp')]).to.deep.equal([
      -2147483648, 32767, -128, false, -(2n ** 63n), 1e300, 0.5,
    ]);
    expect((plc.get('Temps') as number[]).slice(7)).to.deep.equal([17, 80, 90]);
    const services: number[] = [];
    plc.events.on('service', (code: number) => services.push(code));
    plc.set('Flags', [true, true, true, true]);
    await write({ tag: 'Flags[1]', type: 'BOOL', elements: 2 }, [false, 1]);
    await write({ tag: 'Flags[32]', type: 'BOOL' }, true);
    expect((plc.get('Flags') as boolean[]).slice(0, 5)).to.deep.equal([true, false, true, true, false]);
    expect((plc.get('Flags') as boolean[])[32]).to.equal(true);
    expect(services).to.deep.equal([0x4e, 0x4e]);
  });

  it('refuses values that do not fit before sending anything, and reports what the controller refuses; the connection goes on', async () => {
    const d = await open();
    const before = plc.counts.services;
    const refusal = async (address: Record<string, unknown>, value: unknown): Promise<string> => {
      const err = await d.write(endpoint(address), value).then(() => undefined, (e: unknown) => e);
      expect(err, JSON.stringify(address)).to.be.instanceOf(DeviceError);
      return (err as Error).message;
    };
    expect(await refusal({ tag: 'Mode', type: 'SINT' }, 300)).to.equal('Mode: 300 does not fit a SINT (integers -128..127)');
    expect(await refusal({ tag: 'Program:Main.Temp', type: 'REAL' }, 'hot')).to.equal('Program:Main.Temp: "hot" does not fit a REAL (a number within ±3.4e38)');
    expect(await refusal({ tag: 'Program:Main.Temp', type: 'REAL' }, 1e39)).to.match(/does not fit a REAL/);
    expect(await refusal({ tag: 'Counter', type: 'LINT' }, '9223372036854775808')).to.match(/does not fit a LINT/);
    expect(await refusal({ tag: 'Speed', type: 'DINT' }, 1.5)).to.match(/does not fit a DINT/);
    expect(await refusal({ tag: 'Temps', type: 'DINT', elements: 3 }, [1, 2])).to.equal('Temps takes an array of 3 DINT values');
    expect(await refusal({ tag: 'Speed', type: 'DINT' }, [1])).to.equal('Speed takes one DINT value, not an array');
    expect(await refusal({ tag: 'Running', type: 'BOOL' }, 'yes')).to.match(/is not a BOOL/);
    expect(plc.counts.services).to.equal(before); // nothing went to the controller

    expect(await refusal({ tag: 'Speed', type: 'REAL' }, 1.5)).to.equal('Speed: data type mismatch (CIP status 0xff/0x2107)');
    expect(await refusal({ tag: 'Recipe', type: 'DINT' }, 8)).to.match(/^Recipe: privilege violation .*\(CIP status 0x0f\)$/);
    expect(await refusal({ tag: 'Nowhere', type: 'DINT' }, 1)).to.match(/^Nowhere: path destination unknown .*\(CIP status 0x05\)$/);
    const unknown = await d.read(endpoint({ tag: 'Nowhere', type: 'DINT' })).catch((e: Error) => e);
    expect(unknown).to.be.instanceOf(DeviceError).with.property('message').match(/no such tag/);
    const beyond = await d.read(endpoint({ tag: 'Temps[8]', type: 'DINT', elements: 5 })).catch((e: Error) => e);
    expect(beyond).to.be.instanceOf(DeviceError).with.property('message', 'Temps[8]: beyond the end of the tag (index or number of elements) (CIP status 0xff/0x2105)');
    const wrongType = await d.read(endpoint({ tag: 'Speed', type: 'REAL' })).catch((e: Error) => e);
    expect(wrongType).to.be.instanceOf(DeviceError).with.property('message', 'Speed is DINT in the controller, the endpoint says REAL');
    expect(await d.read(endpoint({ tag: 'Speed', type: 'DINT' }))).to.equal(1500);
    expect(plc.counts.sessions).to.equal(1);
  });

  it('reads a tag given without a type as the controller types it; a write learns the type with one read per session; a type given is still checked', async () => {
    const d = await open();
    const read = (address: Record<string, unknown>) => d.read(endpoint(address));
    expect(await read({ tag: 'Speed' })).to.equal(1500);
    expect(await read({ tag: 'Level' })).to.equal(-12);
    expect(await read({ tag: 'Mode' })).to.equal(3);
    expect(await read({ tag: 'Running' })).to.equal(true);
    expect(await read({ tag: 'Counter' })).to.equal(String(2n ** 60n + 1n));
    expect(await read({ tag: 'Ratio' })).to.equal(Math.PI);
    expect(await read({ tag: 'Program:Main.Temp' })).to.equal(21.5);
    expect(await read({ tag: 'Line.Motor[2].Current' })).to.equal(4.25);
    expect(await read({ tag: 'Temps[7]', elements: 3 })).to.deep.equal([17, 18, 19]);
    // 1,600 bytes of LREAL: fragments, sized by the type the first answer names.
    const trend = (await read({ tag: 'Trend', elements: 200 })) as number[];
    expect(trend).to.have.length(200);
    expect(trend[199]).to.equal(199 / 4);
    // A BOOL array without type is what Logix keeps: 32-bit words (type BOOL addresses its bits).
    expect(await read({ tag: 'Flags' })).to.equal(0b101);

    const services: number[] = [];
    plc.events.on('service', (code: number) => services.push(code));
    const speed = { ...endpoint({ tag: 'Speed' }), operation: 'write' } as EndpointDef;
    await d.write(speed, -7);
    await d.write(speed, 8);
    expect(plc.get('Speed')).to.equal(8);
    expect(services).to.deep.equal([0x4c, 0x4d, 0x4d]); // the type learned once, then Write Tag
    const tooBig = await d.write({ ...endpoint({ tag: 'Level' }), operation: 'write' } as EndpointDef, 40000).catch((e: Error) => e);
    expect(tooBig).to.be.instanceOf(DeviceError).with.property('message', 'Level: 40000 does not fit a INT (integers -32768..32767)');
    expect(plc.get('Level')).to.equal(-12);
    const wrongType = await read({ tag: 'Speed', type: 'REAL' }).catch((e: Error) => e);
    expect(wrongType).to.be.instanceOf(DeviceError).with.property('message', 'Speed is DINT in the controller, the endpoint says REAL');
  });

  it('reads and writes what does not fit one message in fragments (Read/Write Tag Fragmented)', async () => {
    const d = await open();
    const services: number[] = [];
    plc.events.on('service', (code: number) => services.push(code));
    const trend = (await d.read(endpoint({ tag: 'Trend', type: 'LREAL', elements: 200 }))) as number[];
    expect(trend).to.have.length(200);
    expect(trend[199]).to.equal(199 / 4);
    expect(services[0]).to.equal(0x4c);
    expect(services.slice(1)).to.deep.equal([0x52, 0x52, 0x52]); // 1,600 bytes in answers of at most 498
    services.length = 0;
    await d.write(endpoint({ tag: 'Trend', type: 'LREAL', elements: 200 }), Array.from({ length: 200 }, (_, i) => -i));
    expect(services).to.deep.equal([0x53, 0x53, 0x53, 0x53]);
    expect((plc.get('Trend') as number[]).slice(197)).to.deep.equal([-197, -198, -199]);
  });

  it('sends 100 reads made at once in a few Multiple Service Packets', async () => {
    plc.define('Many', { type: 'DINT', length: 100, value: Array.from({ length: 100 }, (_, i) => i * 3) });
    const d = await open();
    const values = await Promise.all(Array.from({ length: 100 }, (_, i) => d.read(endpoint({ tag: `Many[${i}]`, type: 'DINT' }))));
    expect(values).to.deep.equal(Array.from({ length: 100 }, (_, i) => i * 3));
    expect(plc.counts.services).to.equal(100);
    expect(plc.counts.multipleServicePackets).to.be.within(2, 8);
  });

  it('dials port 44818 by default and routes to the CPU in its slot; a wrong slot is refused with the controller\'s reason; disconnect closes the connection', async () => {
    const standard = await startOnStandardPort({ slot: 3, tags: { Speed: { type: 'DINT', value: 9 } } });
    try {
      const service = parseServiceFile('s', 's.yaml', `resources:\n  plc:\n    type: Connection\n    properties: {protocol: EtherNetIp, configuration: {host: ${standard.host}, slot: 3}}\n`);
      const configuration = (service.resources[0] as ConnectionDef).configuration as EtherNetIpConfiguration;
      expect(configuration).to.deep.equal({ host: standard.host, port: 44818, slot: 3, timeoutMs: 2000 });
      const d = createEtherNetIpDriver(configuration);
      await d.connect();
      expect(await d.read(endpoint({ tag: 'Speed', type: 'DINT' }))).to.equal(9);
      await d.disconnect();
      expect(standard.counts.forwardCloses).to.equal(1);
      const wrong = createEtherNetIpDriver({ host: standard.host, port: 44818, slot: 0, timeoutMs: 1000 });
      const err = await wrong.connect().then(() => undefined, (e: Error) => e);
      expect(err?.message).to.equal('the controller refused the connection (Forward Open): connection failure (CIP status 0x01/0x0312)');
      await wrong.disconnect();
    } finally {
      await standard.stop();
    }
  });

  it('keeps an idle connection alive with a small request (the controller drops silent ones)', async () => {
    const d = createEtherNetIpDriver(cfg, { keepAliveMs: 100 });
    drivers.push(d);
    await d.connect();
    const sent = plc.counts.packets;
    await until(() => (plc.counts.packets >= sent + 2 ? true : undefined), 5000, 'keep-alive requests');
    expect(plc.counts.services).to.equal(plc.counts.packets - sent); // Get Attributes All of the Identity, nothing else
    expect(await d.read(endpoint({ tag: 'Speed', type: 'DINT' }))).to.equal(1500);
  });

  it('loses the connection when the controller stops answering (timeoutMs) or closes it', async () => {
    const d = await open({ timeoutMs: 300 });
    const lost: string[] = [];
    d.onLost((reason) => lost.push(reason));
    plc.silent = true;
    const err = await d.read(endpoint({ tag: 'Speed', type: 'DINT' })).catch((e: Error) => e);
    expect(err).to.be.instanceOf(Error).and.not.instanceOf(DeviceError);
    expect(lost).to.deep.equal(['no answer within 300 ms']);
    plc.silent = false;
    const again = await open();
    again.onLost((reason) => lost.push(reason));
    await plc.stop();
    await until(() => (lost.length === 2 ? true : undefined), 5000, 'lost');
    expect(lost[1]).to.match(/closed by the device|connection error/);
    plc = await startCipServer({ tags: plantTags() }); // for afterEach
  });
});

/** The cell's endpoints: name, operation, address (YAML flow), more properties. */
const CELL_ENDPOINTS: Array<[string, 'read' | 'write', string, string?]> = [
  ['speed', 'read', '{tag: Speed, type: DINT}', 'pollIntervalMs: 50'],
  ['temp', 'read', '{tag: Program:Main.Temp, type: REAL}', 'pollIntervalMs: 50, transform: "$round($ * 10) / 10"'],
  ['temps', 'read', '{tag: "Temps[2]", type: DINT, elements: 3}', 'pollIntervalMs: 50'],
  ['ghost', 'read', '{tag: Ghost, type: DINT}', 'pollIntervalMs: 50'],
  ['speedSet', 'write', '{tag: Speed, type: DINT}'],
  ['modeSet', 'write', '{tag: Mode, type: SINT}'],
  ['tempSet', 'write', '{tag: Program:Main.Temp, type: REAL}'],
  ['wrongSet', 'write', '{tag: Speed, type: REAL}'],
  ['recipeSet', 'write', '{tag: Recipe, type: DINT}'],
  ['flagSet', 'write', '{tag: "Flags[5]", type: BOOL}'],
];
const serviceYaml = (host: string, port: number, extra = '') =>
  `resources:
  plc:
    type: Connection
    properties: {protocol: EtherNetIp, configuration: {host: ${host}, port: ${port}, timeoutMs: 1000}}
${CELL_ENDPOINTS.map(([name, operation, address, more]) => `  ${name}:\n    type: Endpoint\n    properties: {connection: !ref plc, operation: ${operation}, address: ${address}${more ? `, ${more}` : ''}}\n`).join('')}${extra}`;

describe('EtherNet/IP in the gateway', function () {
  this.timeout(60_000);
  let gw: TestGateway;
  let admin: string;
  let plc: CipTestServer;
  let sub: MqttClient;
  const putYaml = (id: string, text: string) => gw.api('PUT', `/api/services/${id}`, { token: admin, raw: text, headers: { 'content-type': 'application/yaml' } });
  const get = async (path: string) => (await gw.api('GET', path, { token: admin })).body;
  const reach = (kind: string, id: string, wanted: string) => until(async () => ((await get(`/api/${kind}/${id}`)).currentState === wanted ? true : undefined), 15_000, `${id} ${wanted}`);
  /** Publishes a value on an endpoint's /set and answers its /set/result. */
  const setAndResult = async (endpointName: string, value: unknown) => {
    const got = nextMessage(sub, (topic) => topic === `services/cell/${endpointName}/set/result`);
    await sub.publishAsync(`services/cell/${endpointName}/set`, JSON.stringify(value), { qos: 1 });
    return JSON.parse((await got).payload.toString()) as { ok: boolean; value?: unknown; error?: string };
  };

  const metric = async (line: RegExp) => Number(((await gw.api('GET', '/metrics', { token: admin })).body as string).split('\n').find((l) => line.test(l))?.split(' ').at(-1));

  before(async () => {
    plc = await startCipServer({ tags: plantTags() });
    const dataDir = tempDir();
    mkdirSync(join(dataDir, 'services'));
    gw = await startGateway({ dataDir, overrides: { mapping: { servicesDir: join(dataDir, 'services') } } });
    admin = await gw.login();
    sub = await connect(gw.ports.mqtt, { username: 'admin', password: ADMIN_PASSWORD });
    await subscribe(sub, ['services/cell/#', 'services/docs/#']);
    expect((await putYaml('cell', serviceYaml('127.0.0.1', plc.port))).status).to.equal(201);
    await reach('connections', 'cell.plc', 'connected');
  });
  after(async () => {
    await endAllClients();
    await gw?.stop();
    await plc?.stop();
  });

  it('refuses a service whose EtherNet/IP address is wrong, naming each problem\'s path, and applies nothing', async () => {
    const bad = `resources:
  plc:
    type: Connection
    properties: {protocol: EtherNetIp, configuration: {host: 127.0.0.1, slot: 16}}
  a:
    type: Endpoint
    properties: {connection: !ref plc, operation: read, address: {type: DINT}}
  b:
    type: Endpoint
    properties: {connection: !ref plc, operation: read, address: {tag: Speed, type: WORD}}
  c:
    type: Endpoint
    properties: {connection: !ref plc, operation: read, address: {tag: "Flags", type: BOOL, elements: 8}}
  d:
    type: Endpoint
    properties: {connection: !ref plc, operation: write, address: {tag: "Bad Name", type: INT}}
`;
    const res = await putYaml('badplc', bad);
    expect(res.status).to.equal(400);
    expect(res.body.errors.map((e: { path: string }) => e.path)).to.have.members([
      'resources.plc.properties.configuration.slot',
      'resources.a.properties.address',
      'resources.b.properties.address.type',
      'resources.c.properties.address.tag',
      'resources.d.properties.address.tag',
    ]);
    expect(res.body.errors.find((e: { path: string }) => e.path === 'resources.c.properties.address.tag').message).to.equal('a BOOL array endpoint names its first element, e.g. Flags[0]');
    expect((await gw.api('GET', '/api/services/badplc', { token: admin })).status).to.equal(404);
    expect((await gw.api('GET', '/api/connections/badplc.plc', { token: admin })).status).to.equal(404);
  });

  it('accepts the EtherNet/IP example of docs/mapping.md, an endpoint naming only its tag, and publishes the value as the controller types it', async () => {
    const docs = readFileSync(join(repoRoot, 'docs/mapping.md'), 'utf8');
    const section = docs.slice(docs.indexOf('(`protocol: EtherNetIp`)'));
    const block = /```yaml\n([\s\S]*?)```/.exec(section)![1]!;
    const example = block.replace(/^ {2}/gm, '').replace('host: 192.168.1.30', `host: 127.0.0.1, port: ${plc.port}`);
    expect(example).to.match(/address: \{tag: "Line\.Motor\[2\]\.Speed"\}/);
    plc.define('Line.Motor[2].Speed', { type: 'DINT', value: 1450 });
    plc.define('Zone', { type: 'REAL', length: 4, value: [20.5, 21, 21.5, 22] });
    const speed = nextMessage(sub, (topic) => topic === 'services/docs/speed', 10_000);
    const zones = nextMessage(sub, (topic) => topic === 'services/docs/zones', 10_000);
    const res = await putYaml('docs', example);
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    expect(JSON.parse((await speed).payload)).to.equal(1450);
    expect(JSON.parse((await zones).payload)).to.deep.equal([20.5, 21, 21.5, 22]);
    expect((await get('/api/endpoints/docs.speed')).address).to.deep.equal({ tag: 'Line.Motor[2].Speed', elements: 1 }); // no type: none is made up
    expect((await gw.api('DELETE', '/api/services/docs', { token: admin })).status).to.equal(200);
  });

  it('publishes polled tags and answers /req; the API shows the connection and endpoints; the forms have EtherNet/IP', async () => {
    const speed = await nextMessage(sub, (topic) => topic === 'services/cell/speed');
    expect(JSON.parse(speed.payload)).to.equal(1500);
    expect(JSON.parse((await nextMessage(sub, (topic) => topic === 'services/cell/temp')).payload)).to.equal(21.5);
    expect(JSON.parse((await nextMessage(sub, (topic) => topic === 'services/cell/temps')).payload)).to.deep.equal([12, 13, 14]);
    plc.set('Speed', 1501);
    await nextMessage(sub, (topic, payload) => topic === 'services/cell/speed' && payload === '1501');
    const res = nextMessage(sub, (topic) => topic === 'services/cell/temp/res');
    plc.set('Program:Main.Temp', 30.3); // 30.299999... as a REAL; the transform rounds it
    await sub.publishAsync('services/cell/temp/req', '');
    expect(JSON.parse((await res).payload)).to.equal(30.3);

    const conn = await get('/api/connections/cell.plc');
    expect(conn).to.include({ currentState: 'connected', targetState: 'connected' });
    expect(conn.connection).to.deep.equal({ protocol: 'EtherNetIp', host: '127.0.0.1', port: plc.port, slot: 0, timeoutMs: 1000 });
    const ep = await get('/api/endpoints/cell.temps');
    expect(ep).to.include({ currentState: 'enabled', operation: 'read' });
    expect(ep.address).to.deep.equal({ tag: 'Temps[2]', type: 'DINT', elements: 3 });
    const types = (await get('/api/resource-types')) as Array<{ type: string; schema: { definitions?: Record<string, { properties: Record<string, unknown> }>; properties: Record<string, { enum?: string[] }> } }>;
    const connection = types.find((t) => t.type === 'Connection')!.schema;
    expect(connection.properties.protocol!.enum).to.include('EtherNetIp');
    expect(Object.keys(connection.definitions!.EtherNetIp!.properties)).to.deep.equal(['host', 'port', 'slot', 'timeoutMs']);
    expect(Object.keys(types.find((t) => t.type === 'Endpoint')!.schema.definitions!.EtherNetIp!.properties)).to.deep.equal(['tag', 'type', 'elements']);
  });

  it('writes through <topic>/set with /set/result; values that do not fit and the controller\'s refusals are ok: false with the reason, and the rest goes on', async () => {
    expect(await setAndResult('speedSet', 1234)).to.include({ ok: true, value: 1234 });
    expect(plc.get('Speed')).to.equal(1234);
    expect(await setAndResult('tempSet', 18.5)).to.include({ ok: true });
    expect(plc.get('Program:Main.Temp')).to.equal(18.5);
    expect(await setAndResult('flagSet', true)).to.include({ ok: true });
    expect((plc.get('Flags') as boolean[]).slice(0, 6)).to.deep.equal([true, false, true, false, false, true]);

    const refusals = {
      modeSet: [300, 'Mode: 300 does not fit a SINT (integers -128..127)'],
      tempSet: ['warm', 'Program:Main.Temp: "warm" does not fit a REAL (a number within ±3.4e38)'],
      wrongSet: [2.5, 'Speed: data type mismatch (CIP status 0xff/0x2107)'],
      recipeSet: [8, 'Recipe: privilege violation (the tag is read-only for external access) (CIP status 0x0f)'],
    } as const;
    const refused = /^gatewayd_mapping_messages_total\{connection="cell\.plc",kind="refused_write"\}/;
    const refusedBefore = await metric(refused);
    for (const [name, [value, error]] of Object.entries(refusals)) {
      expect(await setAndResult(name, value), name).to.deep.include({ ok: false, error });
    }
    // The two values that do not fit never left the gateway: refused writes, not failures of the
    // communication; the controller's two refusals are failures (issue 38 point 4).
    expect((await metric(refused)) - refusedBefore).to.equal(2);
    expect((await get('/api/connections/cell.plc')).figures.refusedWrites).to.equal(await metric(refused));
    expect([plc.get('Mode'), plc.get('Speed'), plc.get('Recipe')]).to.deep.equal([3, 1234, 7]);
    // The connection and its other endpoints go on; the unknown tag is that endpoint's error, counted as failures.
    expect((await get('/api/connections/cell.plc')).currentState).to.equal('connected');
    const ghost: string[] = [];
    const onGhost = (topic: string) => void (topic === 'services/cell/ghost' && ghost.push(topic));
    sub.on('message', onGhost);
    plc.set('Speed', 77);
    await nextMessage(sub, (topic, payload) => topic === 'services/cell/speed' && payload === '77');
    const failuresBefore = await metric(/^gatewayd_mapping_messages_total\{connection="cell\.plc",kind="failure"\}/);
    // The unknown tag fails at every poll (50 ms), and nothing else does.
    await until(async () => ((await metric(/^gatewayd_mapping_messages_total\{connection="cell\.plc",kind="failure"\}/)) >= failuresBefore + 3 ? true : undefined), 5000, 'failed polls of Ghost');
    sub.removeListener('message', onGhost);
    expect(ghost).to.deep.equal([]);

    const metrics = (await gw.api('GET', '/metrics', { token: admin })).body as string;
    const value = (line: RegExp) => Number(metrics.split('\n').find((l) => line.test(l))?.split(' ').at(-1));
    expect(value(/^gatewayd_mapping_connection_up\{connection="cell\.plc",service="cell",protocol="EtherNetIp"\}/)).to.equal(1);
    expect(value(/^gatewayd_mapping_messages_total\{connection="cell\.plc",kind="read"\}/)).to.be.above(10);
    expect(value(/^gatewayd_mapping_messages_total\{connection="cell\.plc",kind="write"\}/)).to.equal(3);
    expect(value(/^gatewayd_mapping_messages_total\{connection="cell\.plc",kind="failure"\}/)).to.be.above(4);
    expect(value(/^gatewayd_mapping_last_read_timestamp_seconds\{connection="cell\.plc"\}/)).to.be.within(Date.now() / 1000 - 5, Date.now() / 1000 + 1);
  });

  it('writes only what the permission engine lets a client publish on /set', async () => {
    const user = await gw.userWith([{ context: 'mqtt', operation: 'write', resource: 'services/cell/speedSet/set' }]);
    const client = await connect(gw.ports.mqtt, { username: user.username, password: user.token, reconnectPeriod: 0 });
    await client.publishAsync('services/cell/speedSet/set', '4321', { qos: 1 });
    await until(() => (plc.get('Speed') === 4321 ? true : undefined), 5000, 'allowed write');
    const gone = closed(client, 5000);
    client.publish('services/cell/modeSet/set', '9', { qos: 0 });
    await gone; // MQTT 3.1.1: a forbidden publish disconnects, and the broker drops it before the data plane
    expect(await setAndResult('speedSet', 4322)).to.include({ ok: true });
    expect(plc.get('Mode')).to.equal(3);
  });

  it('reconnects with backoff when the controller goes away and comes back; /set meanwhile answers not written', async () => {
    const port = plc.port;
    await plc.stop();
    await reach('connections', 'cell.plc', 'reconnecting');
    await reach('endpoints', 'cell.speed', 'enabling');
    const result = await setAndResult('speedSet', 5);
    expect(result.ok).to.equal(false);
    expect(result.error).to.match(/^not written: connection cell\.plc is reconnecting/);
    plc = await startCipServer({ port, tags: plantTags() });
    plc.set('Speed', 2024);
    await reach('connections', 'cell.plc', 'connected');
    await nextMessage(sub, (topic, payload) => topic === 'services/cell/speed' && payload === '2024', 10_000);
    expect(await setAndResult('speedSet', 6)).to.include({ ok: true });
    expect(plc.get('Speed')).to.equal(6);
  });

  it('feeds Sparkplug metrics from EtherNet/IP endpoints and writes a DCMD through one', async () => {
    await gw.userWith(
      [
        { context: 'mqtt', operation: 'readWrite', resource: 'spBv1.0/plant/+/cellnode/#' },
        { context: 'mqtt', operation: 'write', resource: 'services/#' },
      ],
      'edge-cell',
    );
    await gw.userWith(
      [
        { context: 'mqtt', operation: 'read', resource: 'spBv1.0/#' },
        { context: 'mqtt', operation: 'write', resource: 'spBv1.0/plant/DCMD/#' },
      ],
      'scada-cell',
    );
    const host = await SparkplugHost.connect(`mqtt://127.0.0.1:${gw.ports.mqtt}`, 'plant', { username: 'scada-cell', password: GOOD_PASSWORD, protocolVersion: 4 });
    try {
      plc.set('Speed', 600);
      plc.set('Program:Main.Temp', 19.5);
      const sparkplug = `  edge:
    type: Sparkplug
    properties:
      groupId: plant
      edgeNodeId: cellnode
      runAs: edge-cell
      birthWaitMs: 2000
      devices:
        - deviceId: cell
          metrics:
            - {name: speed, endpoint: !ref speed, writeEndpoint: !ref speedSet, datatype: Int32, writable: true}
            - {name: temp, endpoint: !ref temp, datatype: Float}
`;
      expect((await putYaml('cell', serviceYaml('127.0.0.1', plc.port, sparkplug))).status).to.equal(200);
      const birth = await host.until((m) => m.type === 'DBIRTH' && m.payload.metrics.some((x) => x.name === 'speed' && x.intValue === 600), 15_000);
      expect(birth.payload.metrics.find((x) => x.name === 'temp')?.floatValue).to.equal(19.5);
      const alias = birth.payload.metrics.find((x) => x.name === 'speed')!.alias!;
      await host.command('spBv1.0/plant/DCMD/cellnode/cell', [{ alias, datatype: 3, intValue: 750 }]);
      await until(() => (plc.get('Speed') === 750 ? true : undefined), 10_000, 'DCMD written');
      await host.until((m) => m.type === 'DDATA' && m.payload.metrics.some((x) => x.alias === alias && x.intValue === 750), 10_000);
    } finally {
      await host.end();
    }
  });
});
