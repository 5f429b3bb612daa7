// The mapping runtime on its own: connection backoff driven by a fake clock against a real
// (dead, then live, then dead again) Modbus TCP port; service-file parsing and its errors.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { expect } from 'chai';
import { createLogger } from '../src/log/index.js';
import { defaultRuleLimits } from '../src/mapping/rules.js';
import { createMappingRuntime, type MappingRuntime } from '../src/mapping/runtime.js';
import { loadServiceDir } from '../src/mapping/service-dir.js';
import { parseServiceFile, serviceJsonToText, serviceTextToJson, type ServiceFileError } from '../src/mapping/service-files.js';
import { parseNamedFilter, topicMatches, varsOf, fillTopic } from '../src/mapping/topics.js';
import { tempDir } from './support/harness.js';
import { FakeClock, deadPort, startModbusServer, until, type ModbusTestServer } from './mapping-support.js';

const quietLog = () => createLogger({ level: 'error', stream: new PassThrough() });

const lineYaml = (port: number) => `
resources:
  plc:
    type: Connection
    properties:
      protocol: Modbus
      configuration: {host: 127.0.0.1, port: ${port}, timeoutMs: 500}
  level:
    type: Endpoint
    properties:
      connection: !ref plc
      operation: read
      address: {table: input, address: 3}
      pollIntervalMs: 1000
`;

describe('mapping runtime: connection backoff (fake clock)', function () {
  this.timeout(30_000);
  let rt: MappingRuntime | undefined;
  let server: ModbusTestServer | undefined;
  afterEach(async () => {
    await rt?.stop();
    await server?.stop();
    rt = undefined;
    server = undefined;
  });

  it('reconnects after 1 s, 2 s, 4 s ... at most 30 s, connects when the device appears, and starts over when it is lost', async () => {
    const port = await deadPort();
    const clock = new FakeClock();
    rt = createMappingRuntime({ services: [parseServiceFile('line', 'line.yaml', lineYaml(port))], dataPlane: undefined, log: quietLog(), limits: defaultRuleLimits, agentName: 'test', timers: clock.timers });
    const r = rt;
    const conn = () => r.getConnection('line.plc');
    r.start();
    expect(conn().currentState).to.equal('connecting');
    expect(r.getEndpoint('line.level').currentState).to.equal('enabling');
    const waitRetry = () => r.waitFor(() => conn().currentState === 'reconnecting' && clock.pending().length === 1);
    for (const delay of [1000, 2000, 4000, 8000, 16000, 30000, 30000]) {
      await waitRetry();
      expect(clock.pending()).to.deep.equal([delay]);
      clock.advance(delay - 1);
      expect(clock.pending()).to.deep.equal([1]); // no attempt before the delay is over
      clock.advance(1); // the attempt runs (real I/O: refused)
      expect(clock.pending()).to.deep.equal([]);
      expect(conn().currentState).to.equal('reconnecting');
    }
    expect(r.getEndpoint('line.level').currentState).to.equal('enabling');

    // The device appears: the next attempt connects and the endpoint starts polling.
    await waitRetry();
    server = await startModbusServer(port);
    server.input[3] = 77;
    clock.advance(30000);
    await r.waitFor(() => conn().currentState === 'connected' && r.getEndpoint('line.level').currentState === 'enabled');
    expect(conn().message).to.equal(undefined);
    const before = server.requests;
    clock.advance(0); // first poll
    await until(() => (clock.pending().includes(1000) ? true : undefined)); // next poll scheduled after the read
    expect(server.requests).to.equal(before + 1);

    // The device goes away: reconnecting, backoff from 1 s again; the endpoint goes back to enabling.
    await server.stop();
    server = undefined;
    await r.waitFor(() => conn().currentState === 'reconnecting' && clock.pending().length === 1);
    expect(clock.pending()).to.deep.equal([1000]);
    expect(r.getEndpoint('line.level').currentState).to.equal('enabling');

    // Disconnect while waiting: no more attempts.
    const view = r.setConnectionOperation('line.plc', 'disconnect');
    expect(view.targetState).to.equal('disconnected');
    expect(view.currentState).to.equal('disconnected');
    expect(clock.pending()).to.deep.equal([]);
    expect(r.getEndpoint('line.level').currentState).to.equal('enabling');
    r.setEndpointOperation('line.level', 'disable');
    expect(r.getEndpoint('line.level').currentState).to.equal('disabled');
  });

  it('goes connected → disconnecting → disconnected on disconnect', async () => {
    server = await startModbusServer();
    const clock = new FakeClock();
    rt = createMappingRuntime({ services: [parseServiceFile('line', 'line.yaml', lineYaml(server.port))], dataPlane: undefined, log: quietLog(), limits: defaultRuleLimits, agentName: 'test', timers: clock.timers });
    const r = rt;
    r.start();
    await r.waitFor(() => r.getConnection('line.plc').currentState === 'connected');
    const seen: string[] = [];
    const off = r.setConnectionOperation('line.plc', 'disconnect');
    seen.push(off.currentState);
    await r.waitFor(() => r.getConnection('line.plc').currentState === 'disconnected');
    expect(seen).to.deep.equal(['disconnecting']);
    expect(r.getEndpoint('line.level').currentState).to.equal('enabling');
  });
});

describe('mapping runtime: applying changed definitions', function () {
  this.timeout(30_000);
  let rt: MappingRuntime | undefined;
  const servers: ModbusTestServer[] = [];
  afterEach(async () => {
    await rt?.stop();
    rt = undefined;
    await Promise.all(servers.splice(0).map((s) => s.stop()));
  });

  const serviceA = (port: number, opts: { transform?: string; levelTarget?: string } = {}) =>
    parseServiceFile(
      'a',
      'a.yaml',
      `
resources:
  plc:
    type: Connection
    properties: {protocol: Modbus, configuration: {host: 127.0.0.1, port: ${port}, timeoutMs: 1000}}
  temp:
    type: Endpoint
    properties: {connection: !ref plc, operation: read, address: {table: holding, address: 0}, pollIntervalMs: 20, transform: "${opts.transform ?? '$[0]'}"}
  level:
    type: Endpoint
    properties: {connection: !ref plc, operation: read, address: {table: input, address: 0}, pollIntervalMs: 20, targetState: ${opts.levelTarget ?? 'enabled'}}
`,
    );
  const serviceB = (port: number) =>
    parseServiceFile('b', 'b.yaml', `resources:\n  plc:\n    type: Connection\n    properties: {protocol: Modbus, configuration: {host: 127.0.0.1, port: ${port}}}\n  x:\n    type: Endpoint\n    properties: {connection: !ref plc, operation: read, address: {table: coil, address: 0}, pollIntervalMs: 20}\n`);

  it('restarts only the resources whose definition (or connection) changed; the others keep polling on their open connections', async () => {
    const [srvA, srvB, srvA2] = await Promise.all([startModbusServer(), startModbusServer(), startModbusServer()]);
    servers.push(srvA!, srvB!, srvA2!);
    rt = createMappingRuntime({ services: [serviceA(srvA!.port), serviceB(srvB!.port)], dataPlane: undefined, log: quietLog(), limits: defaultRuleLimits, agentName: 'test' });
    const r = rt;
    r.start();
    const state = (kind: 'getEndpoint' | 'getConnection', id: string) => r[kind](id).currentState;
    await r.waitFor(() => ['a.temp', 'a.level', 'b.x'].every((id) => state('getEndpoint', id) === 'enabled'));
    const pollsOfB = () => srvB!.requests;

    // A transform and a targetState change: one endpoint restarts, one is retargeted, B is untouched.
    const beforeB = pollsOfB();
    const changes = await r.apply([serviceA(srvA!.port, { transform: '$[0] * 2', levelTarget: 'disabled' }), serviceB(srvB!.port)]);
    expect(changes).to.deep.equal({ added: [], restarted: ['a.temp'], retargeted: ['a.level'], removed: [], unchanged: ['a.plc', 'b.plc', 'b.x'] });
    expect(r.plan([serviceA(srvA!.port, { transform: '$[0] * 2', levelTarget: 'disabled' }), serviceB(srvB!.port)]).unchanged).to.have.length(5);
    await r.waitFor(() => state('getEndpoint', 'a.temp') === 'enabled' && state('getEndpoint', 'a.level') === 'disabled');
    expect(r.getEndpoint('a.level').targetState).to.equal('disabled');
    expect([srvA!.accepted, srvB!.accepted]).to.deep.equal([1, 1]); // no connection was opened again
    await until(() => (pollsOfB() > beforeB + 3 ? true : undefined), 5000, 'B polling on');

    // The connection moves to another device: it and its endpoints restart; a target set by an
    // operation on an endpoint whose own definition did not change is kept.
    r.setEndpointOperation('a.temp', 'disable');
    const moved = await r.apply([serviceA(srvA2!.port, { transform: '$[0] * 2', levelTarget: 'disabled' }), serviceB(srvB!.port)]);
    expect(moved.restarted).to.deep.equal(['a.level', 'a.plc', 'a.temp']);
    expect(moved.unchanged).to.deep.equal(['b.plc', 'b.x']);
    await r.waitFor(() => state('getConnection', 'a.plc') === 'connected');
    expect(r.getEndpoint('a.temp')).to.include({ targetState: 'disabled', currentState: 'disabled' });
    await until(() => (srvA!.open === 0 ? true : undefined), 5000, 'old connection closed');
    expect(srvA2!.accepted).to.equal(1);

    // A service removed: its resources stop and leave the lists; B still polls on its first connection.
    const gone = await r.apply([serviceB(srvB!.port)]);
    expect(gone.removed).to.deep.equal(['a.level', 'a.plc', 'a.temp']);
    expect(r.listConnections().map((c) => c.id)).to.deep.equal(['b.plc']);
    await until(() => (srvA2!.open === 0 ? true : undefined), 5000, 'removed connection closed');
    const polls = pollsOfB();
    await until(() => (pollsOfB() > polls + 3 ? true : undefined), 5000, 'B polling on');
    expect(srvB!.accepted).to.equal(1);
    expect(r.stats()).to.deep.include({ services: 1, resources: 2 });
    expect(r.stats().connections[0]).to.include({ id: 'b.plc', serviceId: 'b', protocol: 'Modbus', state: 'connected', failures: 0 });
    expect(r.stats().connections[0]!.reads).to.be.greaterThan(3);
  });
});

describe('mapping runtime: other protocols', function () {
  this.timeout(30_000);

  it('retries an unreachable Http connection and an Mqtt broker that refuses, without touching OPC UA', async () => {
    const port = await deadPort();
    const clock = new FakeClock();
    const yaml = `
resources:
  web:
    type: Connection
    properties: {protocol: Http, configuration: {baseUrl: "http://127.0.0.1:${port}", timeoutMs: 500}}
  broker:
    type: Connection
    properties: {protocol: Mqtt, configuration: {url: "mqtt://127.0.0.1:${port}", timeoutMs: 500}}
  opc:
    type: Connection
    properties: {protocol: Opcua, configuration: {endpointUrl: "opc.tcp://127.0.0.1:4840"}}
`;
    const rt = createMappingRuntime({ services: [parseServiceFile('p', 'p.yaml', yaml)], dataPlane: undefined, log: quietLog(), limits: defaultRuleLimits, agentName: 'test', timers: clock.timers });
    try {
      rt.start();
      await rt.waitFor(() => rt.getConnection('p.web').currentState === 'reconnecting' && rt.getConnection('p.broker').currentState === 'reconnecting');
      expect(clock.pending()).to.deep.equal([1000, 1000]);
      expect(rt.getConnection('p.web').message).to.be.a('string');
      expect(rt.getConnection('p.opc')).to.include({ currentState: 'disconnected', message: 'OPC UA is not available in this build' });
      rt.setConnectionOperation('p.opc', 'disconnect');
      expect(rt.getConnection('p.opc')).to.include({ currentState: 'disconnected', targetState: 'disconnected' });
    } finally {
      await rt.stop();
    }
    expect(clock.pending()).to.deep.equal([]);
  });
});

describe('mapping service files', () => {
  const parse = (text: string) => parseServiceFile('svc', 'svc.yaml', text);
  const fails = (text: string): { path: string; message: string } => {
    try {
      parse(text);
    } catch (err) {
      return { path: (err as { path: string }).path, message: (err as Error).message };
    }
    throw new Error('expected a failure');
  };

  it('resolves !ref to resource ids and parameter values, !sub in text, and applies defaults', () => {
    const svc = parse(`
description: d
metadata: {owner: ops}
parameters:
  host: {type: String, default: plc.local}
  port: {type: Number, default: 1502}
resources:
  plc:
    type: Connection
    properties: {protocol: Modbus, configuration: {host: !ref host, port: !ref port}}
  ep:
    type: Endpoint
    properties:
      connection: !ref plc
      operation: read
      topic: !sub "lines/\${host}/\${ep}"
      address: {table: coil, address: 1}
      targetState: disabled
`);
    expect(svc.metadata).to.deep.equal({ owner: 'ops' });
    const [conn, ep] = svc.resources;
    expect(conn).to.deep.include({ id: 'svc.plc', protocol: 'Modbus', targetState: 'connected' });
    expect((conn as { configuration: unknown }).configuration).to.deep.equal({ host: 'plc.local', port: 1502, unitId: 1, timeoutMs: 2000 });
    expect(ep).to.deep.include({ id: 'svc.ep', connectionId: 'svc.plc', topic: 'lines/plc.local/svc.ep', targetState: 'disabled' });
    expect((ep as { address: unknown }).address).to.deep.equal({ table: 'coil', address: 1, quantity: 1 });
  });

  it('reports the path and reason of what is wrong', () => {
    expect(fails('resources:\n  x: {type: Gadget, properties: {}}\n').path).to.equal('resources.x.type');
    expect(fails('resources:\n  c: {type: Connection, properties: {protocol: Modbus, configuration: {host: h, port: 99999}}}\n')).to.deep.include({ path: 'resources.c.properties.configuration.port' });
    const conn = 'resources:\n  c: {type: Connection, properties: {protocol: Modbus, configuration: {host: h}}}\n';
    expect(fails(conn + '  e: {type: Endpoint, properties: {connection: !ref c, operation: write, address: {table: input, address: 1}}}\n').path).to.equal('resources.e.properties.address.table');
    expect(fails(conn + '  e: {type: Endpoint, properties: {connection: c, operation: read, address: {table: input, address: 1}}}\n').path).to.equal('resources.e.properties.connection');
    expect(fails(conn + '  e: {type: Endpoint, properties: {connection: !ref c, operation: read, address: {path: /x}}}\n').path).to.match(/^resources\.e\.properties\.address/);
    expect(fails('resources:\n  m: {type: Mapping, properties: {mappings: [{source: "a/#/b", target: t}]}}\n').path).to.equal('resources.m.properties.mappings[0].source');
    expect(fails('parameters:\n  p: {type: String}\nresources: {}\n').path).to.equal('parameters.p');
    expect(fails('resources:\n  a: {type: Server::Opcua, properties: {}}\n  a: {type: Server::Opcua, properties: {}}\n').message).to.match(/unique|duplicate/i);
  });

  it('reports every problem of a file, each with its path, without follow-up errors', () => {
    let problems: Array<{ path: string; reason: string }> = [];
    try {
      parse(`
resources:
  c: {type: Connection, properties: {protocol: Modbus, configuration: {host: h, port: 0, extra: 1}}}
  e: {type: Endpoint, properties: {connection: !ref c, operation: write, address: {table: input, address: 1}, transform: "$x("}}
  f: {type: Endpoint, properties: {connection: !ref nowhere, operation: read, address: {table: coil, address: 1}}}
  m: {type: Mapping, properties: {mappings: [{sourceEndpoint: !ref f, target: "a/+"}, {source: x, targetEndpoint: !ref e}]}}
`);
    } catch (err) {
      problems = (err as ServiceFileError).problems;
    }
    expect(problems.map((p) => p.path)).to.deep.equal([
      'resources.f.properties.connection',
      'resources.c.properties.configuration',
      'resources.c.properties.configuration.port',
      'resources.e.properties.transform',
      'resources.e.properties.address.table',
      'resources.m.properties.mappings[0].target',
    ]);
    expect(problems[0]!.reason).to.match(/!ref nowhere/);
    expect(problems[1]!.reason).to.match(/additional properties \(extra\)/);
  });

  it('reads and writes service files as JSON, tags as {"!ref": name} and {"!sub": text}', () => {
    const text = 'parameters:\n  host: {default: plc}\nresources:\n  c:\n    type: Connection\n    properties: {protocol: Modbus, configuration: {host: !ref host}}\n  e:\n    type: Endpoint\n    properties: {connection: !ref c, operation: read, topic: !sub "x/${host}", address: {table: coil, address: 1}}\n';
    const json = serviceTextToJson(text) as { resources: Record<string, { properties: Record<string, unknown> }> };
    expect(json.resources.e!.properties).to.deep.include({ connection: { '!ref': 'c' }, topic: { '!sub': 'x/${host}' } });
    const back = serviceJsonToText(json);
    expect(back).to.include('connection: !ref c').and.include('!sub "x/${host}"');
    expect(parse(back).resources).to.deep.equal(parse(text).resources);
  });

  it('treats a missing directory as no services and skips bad files only', () => {
    expect(loadServiceDir(join(tempDir(), 'none'))).to.deep.equal({ files: [], missing: true });
    const dir = tempDir();
    mkdirSync(join(dir, 's'));
    writeFileSync(join(dir, 's', 'good.yaml'), 'resources:\n  srv: {type: Server::Opcua, properties: {}}\n');
    writeFileSync(join(dir, 's', 'bad name.yaml'), 'resources: {}\n');
    const out = loadServiceDir(join(dir, 's'));
    expect(out.files.filter((f) => f.service).map((f) => f.id)).to.deep.equal(['good']);
    const bad = out.files.find((f) => f.id === 'bad name')!;
    expect(bad.service).to.equal(undefined);
    expect(bad.problems).to.have.length(1);
    expect(bad.problems[0]!.reason).to.match(/service id/);
  });

  it('matches topics with named wildcards', () => {
    const nf = parseNamedFilter('factory/+machine/+/#');
    expect(nf.filter).to.equal('factory/+/+/#');
    expect(topicMatches(nf.filter, 'factory/m1/temp/a/b')).to.equal(true);
    expect(topicMatches(nf.filter, 'factory/m1')).to.equal(false);
    expect(topicMatches('#', '$SYS/x')).to.equal(false);
    expect(varsOf(nf, 'factory/m1/temp/a')).to.deep.equal({ machine: 'm1' });
    expect(fillTopic('out/{machine}/{nope}', { machine: 'm1' })).to.equal('out/m1/{nope}');
  });
});
