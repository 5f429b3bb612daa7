// Protocol mapping in the real gateway (docs/design.md §11): service files in a temp servicesDir, a
// Modbus TCP server, an HTTP server and an external MQTT broker on 127.0.0.1 port 0, MQTT
// clients on the gateway's broker seeing the data plane.
import { once } from 'node:events';
import { mkdirSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { join } from 'node:path';
import { Aedes } from 'aedes';
import { expect } from 'chai';
import type { MqttClient } from 'mqtt';
import { ADMIN_PASSWORD, startGateway, tempDir, type TestGateway } from './support/harness.js';
import { collect, connect, endAllClients, subscribe, withTimeout } from './support/mqtt-test-kit.js';
import { deadPort, startModbusServer, until, type ModbusTestServer } from './mapping-support.js';

const plantYaml = `
description: A test plant
metadata: {site: test}
parameters:
  modbusPort: {type: Number, default: 0}
  deadPort: {type: Number, default: 0}
  httpBase: {type: String, default: ""}
  extUrl: {type: String, default: ""}
resources:
  plc:
    type: Connection
    properties:
      protocol: Modbus
      configuration: {host: 127.0.0.1, port: !ref modbusPort, timeoutMs: 1000}
  temperature:
    type: Endpoint
    properties:
      connection: !ref plc
      operation: read
      address: {table: holding, address: 0, quantity: 2}
      pollIntervalMs: 50
      filter: "$[0] > 0"
      transform: "{'t': $[0] / 10, 'raw': $, 'label': $context.label}"
  setpoint:
    type: Endpoint
    properties:
      connection: !ref plc
      operation: write
      address: {table: holding, address: 10}
  lamp:
    type: Endpoint
    properties:
      connection: !ref plc
      operation: write
      topic: plant/lamp
      address: {table: coil, address: 5}
  web:
    type: Connection
    properties:
      protocol: Http
      configuration: {baseUrl: !ref httpBase, headers: {x-api-key: secret-key}}
  weather:
    type: Endpoint
    properties:
      connection: !ref web
      operation: read
      address: {path: /data}
      pollIntervalMs: 50
      transform: "$.temperature"
  ext:
    type: Connection
    properties:
      protocol: Mqtt
      configuration: {url: !ref extUrl, username: bridge, password: bridge-secret}
  extIn:
    type: Endpoint
    properties:
      connection: !ref ext
      operation: read
      topic: plant/ext
      address: {topic: machines/+/temp}
      transform: "{'v': $, 'from': $context.topic}"
  extOut:
    type: Endpoint
    properties:
      connection: !ref ext
      operation: write
      address: {topic: commands/out}
  routes:
    type: Mapping
    properties:
      mappings:
        - label: factory
          source: factory/+machine/+sensor
          target: dashboard/{machine}/{sensor}
          filter: "$.v >= 0"
          transform: "{'machine': $context.vars.machine, 'sensor': $context.vars.sensor, 'value': $.v, 'label': $context.label}"
        - source: ops/setpoint
          targetEndpoint: !ref setpoint
          transform: "$ * 2"
        - sourceEndpoint: !ref temperature
          target: !sub "copies/\${temperature}"
        - source: loop/#
          target: loop/again
  dead:
    type: Connection
    properties:
      protocol: Modbus
      configuration: {host: 127.0.0.1, port: !ref deadPort, timeoutMs: 500}
  deadEp:
    type: Endpoint
    properties:
      connection: !ref dead
      operation: read
      address: {table: input, address: 0}
  opc:
    type: Connection
    properties:
      protocol: Opcua
      configuration: {endpointUrl: !sub "opc.tcp://127.0.0.1:\${deadPort}", timeoutMs: 500}
  opcEp:
    type: Endpoint
    properties:
      connection: !ref opc
      operation: read
      address: {nodeId: "ns=1;s=x"}
  srv:
    type: Server::Opcua
    properties:
      options: {port: 4840}
      targetState: disabled
  nodes:
    type: Node::Opcua
    properties:
      server: !ref srv
      nodes:
        - {nodeId: "ns=1;s=temp", topic: opc/temp}
`;

function withParams(yaml: string, params: Record<string, string | number>): string {
  let out = yaml;
  for (const [k, v] of Object.entries(params)) out = out.replace(new RegExp(`(${k}: \\{type: \\w+, default: )[^}]*\\}`), `$1${typeof v === 'string' ? JSON.stringify(v) : v}}`);
  return out;
}

describe('protocol mapping in the gateway', function () {
  this.timeout(30_000);
  let gw: TestGateway;
  let admin: string;
  let modbus: ModbusTestServer;
  let httpServer: http.Server;
  let ext: Aedes;
  let extServer: net.Server;
  let extPort: number;
  let servicesDir: string;
  let sub: MqttClient;

  const state = async (kind: string, id: string) => (await gw.api('GET', `/api/${kind}/${id}/state`, { token: admin })).body as string;
  const current = async (kind: string, id: string) => (await gw.api('GET', `/api/${kind}/${id}`, { token: admin })).body as Record<string, any>;
  const reach = (kind: string, id: string, wanted: string) =>
    until(async () => ((await current(kind, id)).currentState === wanted ? true : undefined), 10_000, `${id} ${wanted}`);

  before(async () => {
    modbus = await startModbusServer();
    httpServer = http.createServer((req, res) => {
      if (req.url === '/data' && req.headers['x-api-key'] === 'secret-key') {
        res.setHeader('content-type', 'application/json');
        return void res.end(JSON.stringify({ temperature: 21.5, unit: 'C' }));
      }
      res.statusCode = 404;
      res.end('{}');
    });
    httpServer.listen(0, '127.0.0.1');
    await once(httpServer, 'listening');
    ext = await Aedes.createBroker();
    extServer = net.createServer(ext.handle);
    extServer.listen(0, '127.0.0.1');
    await once(extServer, 'listening');
    extPort = (extServer.address() as net.AddressInfo).port;

    const dataDir = tempDir();
    servicesDir = join(dataDir, 'services');
    mkdirSync(servicesDir);
    writeFileSync(
      join(servicesDir, 'plant.yaml'),
      withParams(plantYaml, {
        modbusPort: modbus.port,
        deadPort: await deadPort(),
        httpBase: `http://127.0.0.1:${(httpServer.address() as net.AddressInfo).port}`,
        extUrl: `mqtt://127.0.0.1:${extPort}`,
      }),
    );
    writeFileSync(join(servicesDir, 'broken.yaml'), 'resources:\n  x:\n    type: Endpoint\n    properties:\n      connection: !ref nowhere\n      operation: read\n      address: {}\n');
    writeFileSync(join(servicesDir, 'garbage.yml'), 'resources: [unclosed\n');
    writeFileSync(join(servicesDir, 'badrule.yaml'), 'resources:\n  m:\n    type: Mapping\n    properties:\n      mappings:\n        - {source: a/b, target: c/d, transform: "$foo("}\n');
    writeFileSync(join(servicesDir, 'notes.txt'), 'not a service');
    // ruleTimeoutMs 1.5 s: the deep recursion below must reach ruleMaxDepth (500 levels, 24-32 ms
    // on a quiet machine) before the time limit, also while the suite's other files load the
    // machine (once, at 500 ms, the time limit came first).
    gw = await startGateway({ dataDir, overrides: { mapping: { servicesDir, ruleTimeoutMs: 1500 } } });
    admin = await gw.login();
    sub = await connect(gw.ports.mqtt, { username: 'admin', password: ADMIN_PASSWORD });
  });
  after(async () => {
    await endAllClients();
    await gw?.stop();
    await modbus?.stop();
    httpServer?.close();
    extServer?.close();
    await new Promise<void>((resolve) => (ext ? ext.close(() => resolve()) : resolve()));
  });

  it('loads the good service file and reports each bad one with file, path and reason', async () => {
    const skipped = gw.logs().filter((l) => l.message === 'service file skipped');
    expect(skipped.map((l) => String(l.file).split('/').pop()).sort()).to.deep.equal(['badrule.yaml', 'broken.yaml', 'garbage.yml']);
    const broken = skipped.find((l) => String(l.file).endsWith('broken.yaml'))!;
    expect(broken.path).to.equal('resources.x.properties.connection');
    expect(broken.reason).to.match(/!ref nowhere/);
    const badrule = skipped.find((l) => String(l.file).endsWith('badrule.yaml'))!;
    expect(badrule.path).to.equal('resources.m.properties.mappings[0].transform');
    expect(badrule.reason).to.match(/invalid JSONata/);
    const garbage = skipped.find((l) => String(l.file).endsWith('garbage.yml'))!;
    expect(garbage.path).to.match(/^line \d+/);

    const list = await gw.api('GET', '/api/connections', { token: admin });
    expect(list.status).to.equal(200);
    expect(list.body.map((c: { id: string }) => c.id)).to.deep.equal(['plant.dead', 'plant.ext', 'plant.opc', 'plant.plc', 'plant.web']);
    const plc = list.body.find((c: { id: string }) => c.id === 'plant.plc');
    expect(plc.targetState).to.equal('connected');
    expect(plc.agentName).to.be.a('string').and.not.equal('');
    expect(plc.connection).to.include({ protocol: 'Modbus', host: '127.0.0.1', port: modbus.port, unitId: 1 });
    const extConn = list.body.find((c: { id: string }) => c.id === 'plant.ext');
    expect(extConn.connection).to.not.have.property('password');
    expect(JSON.stringify(list.body)).to.not.include('secret-key');
  });

  it('publishes Modbus polls (filter, transform, $context.label) on services/<service>/<endpoint>', async () => {
    await reach('endpoints', 'plant.temperature', 'enabled');
    const inbox = collect(sub);
    expect(await subscribe(sub, 'services/plant/temperature')).to.deep.equal([0]);
    modbus.holding[0] = 0; // filtered out
    modbus.holding[1] = 7;
    const before = modbus.requests;
    await until(() => (modbus.requests > before + 2 ? true : undefined));
    modbus.holding[0] = 215;
    const m = await inbox.until((x) => x.topic === 'services/plant/temperature');
    expect(JSON.parse(m.payload)).to.deep.equal({ t: 21.5, raw: [215, 7], label: 'temperature' });
    expect(inbox.messages.filter((x) => x.topic === 'services/plant/temperature').every((x) => JSON.parse(x.payload).raw[0] === 215)).to.equal(true);
    await new Promise<void>((resolve) => sub.unsubscribe('services/plant/temperature', () => resolve()));
  });

  it('answers <topic>/req on <topic>/res with a fresh reading', async () => {
    modbus.holding[0] = 300;
    const inbox = collect(sub);
    await subscribe(sub, 'services/plant/temperature/res');
    await sub.publishAsync('services/plant/temperature/req', '');
    const m = await inbox.until((x) => x.topic === 'services/plant/temperature/res');
    expect(JSON.parse(m.payload)).to.deep.include({ t: 30, raw: [300, 7] });
  });

  it('writes what arrives on <topic>/set to the Modbus registers and coils', async () => {
    const wrote = once(modbus.events, 'write');
    await sub.publishAsync('services/plant/setpoint/set', '[1234, 5]');
    const [w] = (await withTimeout(wrote, 5000, 'no modbus write')) as [{ fc: number; address: number; values: number[] }];
    expect(w).to.deep.equal({ fc: 16, address: 10, values: [1234, 5] });
    expect([...modbus.holding.slice(10, 12)]).to.deep.equal([1234, 5]);

    const coil = once(modbus.events, 'write');
    await sub.publishAsync('plant/lamp/set', 'true');
    const [c] = (await withTimeout(coil, 5000, 'no coil write')) as [{ fc: number; address: number; values: boolean[] }];
    expect(c).to.deep.equal({ fc: 15, address: 5, values: [true] });
    expect(modbus.coils[5]).to.equal(true);
  });

  it('acknowledges each write on <topic>/set/result: ok with the value written, or the error', async () => {
    const inbox = collect(sub);
    await subscribe(sub, ['plant/lamp/set/result', 'services/plant/setpoint/set/result']);
    const sent = Date.now();
    await sub.publishAsync('plant/lamp/set', 'false');
    const ok = JSON.parse((await inbox.until((m) => m.topic === 'plant/lamp/set/result')).payload);
    expect(ok).to.include({ ok: true, value: false });
    expect(ok.timestamp).to.be.within(sent - 1000, Date.now());
    expect(modbus.coils[5]).to.equal(false);
    await sub.publishAsync('plant/lamp/set', '"maybe"');
    const refused = JSON.parse((await inbox.until((m) => m.topic === 'plant/lamp/set/result' && JSON.parse(m.payload).ok === false)).payload);
    expect(refused).to.include({ ok: false, value: 'maybe', error: 'coils take booleans (or 0/1)' });
    // Through a mapping (ops/setpoint → setpoint, transform $ * 2) the result names the value written.
    await sub.publishAsync('ops/setpoint', '50');
    const mapped = JSON.parse((await inbox.until((m) => m.topic === 'services/plant/setpoint/set/result')).payload);
    expect(mapped).to.include({ ok: true, value: 100 });
  });

  it('maps with named wildcards into $context.vars, applies filter and transform, and writes through endpoints', async () => {
    const inbox = collect(sub);
    await subscribe(sub, 'dashboard/#');
    await sub.publishAsync('factory/press-7/temp', JSON.stringify({ v: -1 }));
    await sub.publishAsync('factory/press-7/temp', JSON.stringify({ v: 42 }));
    const m = await inbox.until((x) => x.topic === 'dashboard/press-7/temp');
    expect(JSON.parse(m.payload)).to.deep.equal({ machine: 'press-7', sensor: 'temp', value: 42, label: 'factory' });
    expect(inbox.messages.filter((x) => x.topic.startsWith('dashboard/'))).to.have.length(1);

    const wrote = once(modbus.events, 'write');
    await sub.publishAsync('ops/setpoint', '21');
    const [w] = (await withTimeout(wrote, 5000, 'no modbus write')) as [{ address: number; values: number[] }];
    expect(w).to.deep.include({ address: 10, values: [42] });

    const copies = collect(sub);
    await subscribe(sub, 'copies/#');
    const copy = await copies.until((x) => x.topic === 'copies/plant.temperature');
    expect(JSON.parse(copy.payload)).to.have.property('t');
  });

  it('stops a mapping loop after a bounded number of hops', async () => {
    const inbox = collect(sub);
    await subscribe(sub, 'loop/#');
    await sub.publishAsync('loop/start', '1');
    let last = -1;
    let stable = 0;
    await until(() => {
      const n = inbox.messages.filter((m) => m.topic.startsWith('loop/')).length;
      stable = n === last ? stable + 1 : 0;
      last = n;
      return stable >= 10 ? true : undefined;
    });
    // loop/start, then loop/again once per hop.
    expect(inbox.messages.filter((m) => m.topic.startsWith('loop/'))).to.have.length(1 + 8);
    expect(gw.logs().some((l) => l.message === 'mapping loop stopped')).to.equal(true);
  });

  it('polls Http endpoints and bridges an external MQTT broker both ways', async () => {
    const inbox = collect(sub);
    await subscribe(sub, 'services/plant/weather');
    expect((await inbox.until((x) => x.topic === 'services/plant/weather')).payload).to.equal('21.5');

    await reach('endpoints', 'plant.extIn', 'enabled');
    await reach('endpoints', 'plant.extOut', 'enabled');
    await subscribe(sub, 'plant/ext');
    const device = await connect(extPort);
    await device.publishAsync('machines/m9/temp', '5');
    const bridged = await inbox.until((x) => x.topic === 'plant/ext');
    expect(JSON.parse(bridged.payload)).to.deep.equal({ v: 5, from: 'machines/m9/temp' });

    const outInbox = collect(device);
    await subscribe(device, 'commands/out');
    await sub.publishAsync('services/plant/extOut/set', JSON.stringify({ go: true }));
    const out = await outInbox.until((x) => x.topic === 'commands/out');
    expect(JSON.parse(out.payload)).to.deep.equal({ go: true });
  });

  it('delivers data-plane messages only to clients allowed to read them (authorizeForward)', async () => {
    const user = await gw.userWith([{ resource: 'services/plant/#', operation: 'read', context: 'mqtt' }]);
    const client = await connect(gw.ports.mqtt, { username: user.username, password: user.token });
    const inbox = collect(client);
    expect(await subscribe(client, 'services/plant/weather')).to.deep.equal([0]);
    expect(await subscribe(client, 'dashboard/#')).to.deep.equal([128]);
    await inbox.until((x) => x.topic === 'services/plant/weather');
    // Take the read permission away: the existing subscription no longer delivers.
    const u = await gw.api('GET', `/api/users/${user.id}`, { token: admin });
    const role = (u.body.roles as Array<{ id: string; permissions: Array<{ id: string }> }>).find((r) => r.permissions.length)!;
    const del = await gw.api('DELETE', `/api/roles/${role.id}/permissions/${role.permissions[0]!.id}`, { token: admin });
    expect(del.status).to.be.oneOf([200, 204]);
    const refused = gw.services.broker!.stats().forwardsRefused;
    await until(() => (gw.services.broker!.stats().forwardsRefused > refused + 1 ? true : undefined));
    const count = inbox.messages.length;
    await until(() => (gw.services.broker!.stats().forwardsRefused > refused + 3 ? true : undefined));
    expect(inbox.messages.length).to.equal(count);
  });

  it('drives states through operations: targetState at once, currentState follows', async () => {
    const res = await gw.api('PUT', '/api/endpoints/plant.temperature/operation', { token: admin, body: { operation: 'disable' } });
    expect(res.status).to.equal(200);
    expect(res.body).to.include({ id: 'plant.temperature', targetState: 'disabled', connectionId: 'plant.plc', operation: 'read' });
    expect(res.body.address).to.deep.equal({ table: 'holding', address: 0, quantity: 2 });
    await until(async () => ((await state('endpoints', 'plant.temperature')) === 'disabled' ? true : undefined));
    expect((await gw.api('PUT', '/api/endpoints/plant.temperature/operation', { token: admin, body: { operation: 'enable' } })).body.targetState).to.equal('enabled');
    await reach('endpoints', 'plant.temperature', 'enabled');

    const off = await gw.api('PUT', '/api/connections/plant.plc/operation', { token: admin, body: { operation: 'disconnect' } });
    expect(off.status).to.equal(200);
    expect(off.body.targetState).to.equal('disconnected');
    expect(['connected', 'disconnecting', 'disconnected']).to.include(off.body.currentState);
    await reach('connections', 'plant.plc', 'disconnected');
    // An endpoint whose connection is not connected stays enabling.
    expect(await state('endpoints', 'plant.temperature')).to.equal('enabling');
    // A write meanwhile is not lost silently: the writer is told.
    const results = collect(sub);
    await subscribe(sub, 'services/plant/setpoint/set/result');
    await sub.publishAsync('services/plant/setpoint/set', '5');
    const refused = JSON.parse((await results.until((x) => x.topic === 'services/plant/setpoint/set/result')).payload);
    expect(refused).to.include({ ok: false, error: 'not written: connection plant.plc is disconnected' });
    await gw.api('PUT', '/api/connections/plant.plc/operation', { token: admin, body: { operation: 'connect' } });
    await reach('connections', 'plant.plc', 'connected');
    await reach('endpoints', 'plant.temperature', 'enabled');

    const m = await gw.api('PUT', '/api/mappings/plant.routes/operation', { token: admin, body: { operation: 'disable' } });
    expect(m.body).to.include({ targetState: 'disabled', currentState: 'disabled' });
    expect(await state('mappings', 'plant.routes')).to.equal('disabled');
    await gw.api('PUT', '/api/mappings/plant.routes/operation', { token: admin, body: { operation: 'enable' } });
    expect(await state('mappings', 'plant.routes')).to.equal('enabled');

    const bad = await gw.api('PUT', '/api/connections/plant.plc/operation', { token: admin, body: { operation: 'enable' } });
    expect(bad.status).to.equal(400);
  });

  it('retries a dead Modbus connection (reconnecting) and keeps its endpoints enabling', async () => {
    await reach('connections', 'plant.dead', 'reconnecting');
    const dead = await current('connections', 'plant.dead');
    expect(dead.message).to.match(/ECONNREFUSED|refused|timed out/i);
    expect(await state('endpoints', 'plant.deadEp')).to.equal('enabling');
    expect(gw.logs().some((l) => l.message === 'connection failed, retrying' && l.id === 'plant.dead' && l.retryInMs === 1000)).to.equal(true);
  });

  it('lists OPC UA resources with their states (details: mapping-opcua.test.ts)', async () => {
    await reach('connections', 'plant.opc', 'reconnecting');
    const opc = await current('connections', 'plant.opc');
    expect(opc).to.include({ targetState: 'connected' });
    expect(opc.message).to.be.a('string');
    expect(opc.connection).to.include({ protocol: 'Opcua' });
    expect(await state('endpoints', 'plant.opcEp')).to.equal('enabling');
    const servers = await gw.api('GET', '/api/servers', { token: admin });
    expect(servers.body).to.have.length(1);
    expect(servers.body[0]).to.include({ id: 'plant.srv', protocol: 'Opcua', currentState: 'disabled', targetState: 'disabled' });
    expect(servers.body[0].options).to.deep.equal({ port: 4840 });
    expect((await gw.api('GET', '/api/servers/plant.srv', { token: admin })).body.id).to.equal('plant.srv');
    expect(await state('servers', 'plant.srv')).to.equal('disabled');
    const op = await gw.api('PUT', '/api/servers/plant.srv/operation', { token: admin, body: { operation: 'disable' } });
    expect(op.body).to.include({ targetState: 'disabled', currentState: 'disabled' });
    const nodes = await gw.api('GET', '/api/nodes', { token: admin });
    // A node set whose server is not enabled waits in enabling.
    expect(nodes.body[0]).to.include({ id: 'plant.nodes', currentState: 'enabling', message: 'server plant.srv is not enabled' });
    expect(nodes.body[0].nodes).to.deep.equal([{ nodeId: 'ns=1;s=temp', topic: 'opc/temp' }]);
    expect(await state('nodes', 'plant.nodes')).to.equal('enabling');
  });

  it('answers topics, endpoint topics, mapping endpoint topics and schemas', async () => {
    expect((await gw.api('GET', '/api/endpoints/plant.temperature/topics', { token: admin })).body).to.deep.equal([
      'services/plant/temperature',
      'services/plant/temperature/req',
      'services/plant/temperature/res',
    ]);
    expect((await gw.api('GET', '/api/endpoints/plant.lamp/topics', { token: admin })).body).to.deep.equal(['plant/lamp/set', 'plant/lamp/set/result']);
    expect((await gw.api('GET', '/api/mappings/plant.routes/endpoint-topics', { token: admin })).body).to.deep.equal({
      'plant.setpoint': ['services/plant/setpoint/set', 'services/plant/setpoint/set/result'],
      'plant.temperature': ['services/plant/temperature', 'services/plant/temperature/req', 'services/plant/temperature/res'],
    });
    const topics = (await gw.api('GET', '/api/topics', { token: admin })).body;
    expect(topics.nodes).to.deep.equal([{ id: 'plant.nodes', topics: ['opc/temp'] }]);
    expect(topics.mappings[0].topics).to.include.members(['factory/+/+', 'dashboard/{machine}/{sensor}', 'services/plant/setpoint/set']);
    expect(topics.endpoints.map((e: { id: string }) => e.id)).to.include('plant.weather');
    const mapping = await current('mappings', 'plant.routes');
    expect(mapping.mappings).to.have.length(4);
    for (const kind of ['connections', 'endpoints', 'mappings', 'servers']) {
      const s = await gw.api('GET', `/api/${kind}/schema`, { token: admin });
      expect(s.status).to.equal(200);
      expect(s.body).to.have.property('title');
      expect(s.body.type).to.equal('object');
    }
  });

  it('answers 404 for unknown ids', async () => {
    const cases: Array<[string, string, string]> = [
      ['GET', '/api/servers/nope', 'Server not found'],
      ['GET', '/api/servers/nope/state', 'Server not found'],
      ['GET', '/api/connections/nope', 'Connection not found'],
      ['PUT', '/api/connections/nope/operation', 'Connection not found'],
      ['GET', '/api/endpoints/nope/state', 'Endpoint not found'],
      ['GET', '/api/endpoints/nope/topics', 'Endpoint not found'],
      ['GET', '/api/mappings/nope', 'Mapping not found'],
      ['GET', '/api/mappings/nope/endpoint-topics', 'Mapping not found'],
      ['GET', '/api/nodes/nope/state', 'Node set not found'],
    ];
    for (const [method, path, message] of cases) {
      const body = method === 'PUT' ? { operation: 'connect' } : undefined;
      const res = await gw.api(method, path, { token: admin, body });
      expect(res.status, path).to.equal(404);
      expect(res.body.message, path).to.equal(message);
    }
  });

  it('evaluates rule-engine transforms, refuses bad expressions and stops runaway ones', async () => {
    const t = (input: unknown, transformation: string) => gw.api('POST', '/api/rule-engine/transform', { token: admin, body: { input, transformation } });
    expect((await t({ a: 1, b: [1, 2, 3] }, '{"sum": $sum(b) + a}')).body).to.deep.equal({ sum: 7 });
    expect((await t(null, '$ = null')).body).to.equal(true);
    expect((await t([1, 2], '$count($)')).body).to.equal(2);
    const none = await t({ a: 1 }, 'nothing');
    expect(none.status).to.equal(200);
    expect(none.body).to.equal(null);

    const bad = await t({}, '$foo(');
    expect(bad.status).to.equal(400);
    expect(bad.body.message).to.match(/^invalid transformation: .*position/);
    const typeErr = await t({}, '"a" + 1');
    expect(typeErr.status).to.equal(400);

    const started = Date.now();
    const loop = await t({}, '($f := function($n){ $f($n + 1) }; $f(0))');
    expect(loop.status).to.equal(422);
    expect(loop.body.message).to.match(/mapping\.ruleTimeoutMs/);
    expect(Date.now() - started).to.be.lessThan(5000);
    const deep = await t({}, '($f := function($n){ 1 + $f($n + 1) }; $f(0))');
    expect(deep.status).to.equal(422);
    expect(deep.body.message, deep.body.message).to.match(/mapping\.ruleMaxDepth/);
    const huge = await t({}, '[1..5000000]');
    expect(huge.status).to.equal(422);
    const evalLoop = await t({}, '$eval("($f := function($n){ 1 + $f($n + 1) }; $f(0))")');
    expect(evalLoop.status).to.equal(422);
    // Regular expressions cannot backtrack without bound.
    const regexStarted = Date.now();
    const catastrophic = await t({ s: `${'a'.repeat(40)}!` }, '$match(s, /(a+)+$/)');
    expect(catastrophic.status).to.equal(200);
    expect(Date.now() - regexStarted).to.be.lessThan(2000);
    const backref = await t({ s: 'aa' }, '$match(s, /(a)\\1/)');
    expect(backref.status).to.equal(400);
    expect(backref.body.message).to.match(/backreferences or lookaround/);
    expect((await t({ s: 'hello' }, '$replace(s, /l+/, "L")')).body).to.equal('heLo');
    // The daemon is still responsive.
    expect((await gw.api('GET', '/api/connections', { token: admin })).status).to.equal(200);
  });
});

describe('protocol mapping switched off or without service files', function () {
  this.timeout(30_000);

  it('starts with a missing services directory (logged at info) and with mapping disabled', async () => {
    const gw = await startGateway();
    try {
      const line = gw.logs().find((l) => l.message === 'no service files: the services directory does not exist');
      expect(line).to.include({ level: 'info', servicesDir: gw.config.mapping.servicesDir });
      const admin = await gw.login();
      expect((await gw.api('GET', '/api/connections', { token: admin })).body).to.deep.equal([]);
    } finally {
      await gw.stop();
    }
    const off = await startGateway({ overrides: { mapping: { enabled: false } } });
    try {
      const admin = await off.login();
      expect((await off.api('GET', '/api/endpoints', { token: admin })).body).to.deep.equal([]);
      expect((await off.api('GET', '/api/topics', { token: admin })).body).to.deep.equal({ endpoints: [], mappings: [], nodes: [] });
      expect((await off.api('GET', '/api/servers/x', { token: admin })).status).to.equal(404);
      expect((await off.api('POST', '/api/rule-engine/transform', { token: admin, body: { input: 2, transformation: '$ * 3' } })).body).to.equal(6);
      expect((await off.api('GET', '/api/services', { token: admin })).body).to.deep.equal([]);
      const put = await off.api('PUT', '/api/services/x', { token: admin, body: { resources: {} } });
      expect(put.status).to.equal(409);
      expect(put.body.message).to.equal('protocol mapping is not running (mapping.enabled is false)');
      expect((await off.api('GET', '/api/services/x', { token: admin })).status).to.equal(404);
    } finally {
      await off.stop();
    }
  });
});
