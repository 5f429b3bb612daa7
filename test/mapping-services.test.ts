// Services managed live (docs/design.md §13): the REST API and the watched services directory against
// the real gateway, real Modbus TCP peers and an MQTT client of the gateway's broker. A steady
// service polls through every change: its connection must never be opened again and the MQTT
// client never dropped.
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import type { MqttClient } from 'mqtt';
import { ADMIN_PASSWORD, startGateway, tempDir, type TestGateway } from './support/harness.js';
import { collect, connect, endAllClients, subscribe } from './support/mqtt-test-kit.js';
import { startModbusServer, until, type ModbusTestServer } from './mapping-support.js';

const steadyYaml = (port: number) => `description: keeps polling
resources:
  plc:
    type: Connection
    properties: {protocol: Modbus, configuration: {host: 127.0.0.1, port: ${port}}}
  level:
    type: Endpoint
    properties: {connection: !ref plc, operation: read, address: {table: holding, address: 0}, pollIntervalMs: 30}
`;

const lineYaml = (port: number, transform: string) => `# the press line (comments stay in the file)
description: press line
resources:
  plc:
    type: Connection
    properties: {protocol: Modbus, configuration: {host: 127.0.0.1, port: ${port}}}
  temp:
    type: Endpoint
    properties:
      connection: !ref plc
      operation: read
      address: {table: holding, address: 5}
      pollIntervalMs: 30
      transform: "${transform}"
  pressure:
    type: Endpoint
    properties: {connection: !ref plc, operation: read, address: {table: input, address: 5}, pollIntervalMs: 30}
`;

/** A service of one mapping from <id>/in to plant/<id>/<to>: what runs shows in GET /api/mappings and on MQTT. */
const routeYaml = (id: string, to: string) => `resources:
  m:
    type: Mapping
    properties: {mappings: [{source: ${id}/in, target: plant/${id}/${to}}]}
`;

describe('protocol-mapping services through the API and the watched directory', function () {
  this.timeout(60_000);
  let gw: TestGateway;
  let admin: string;
  let servicesDir: string;
  let steady: ModbusTestServer;
  let plc: ModbusTestServer;
  let client: MqttClient;
  let clientCloses = 0;
  let inbox: ReturnType<typeof collect>;

  const api = (method: string, path: string, options: Parameters<TestGateway['api']>[2] = {}) => gw.api(method, path, { token: admin, ...options });
  const putYaml = (id: string, text: string, token = admin) => gw.api('PUT', `/api/services/${id}`, { token, raw: text, headers: { 'content-type': 'application/yaml' } });
  const connectionIds = async () => ((await api('GET', '/api/connections')).body as Array<{ id: string }>).map((c) => c.id);
  const steadyValues = () => inbox.messages.filter((m) => m.topic === 'services/steady/level').length;
  /** The steady service still polls: more values arrive. */
  const steadyPolls = async () => {
    const n = steadyValues();
    await until(() => (steadyValues() > n + 2 ? true : undefined), 10_000, 'steady values');
  };
  const logsOf = (message: string) => gw.logs().filter((l) => l.message === message);

  before(async () => {
    steady = await startModbusServer();
    plc = await startModbusServer();
    steady.holding[0] = 7;
    plc.holding[5] = 215;
    plc.input[5] = 3;
    const dataDir = tempDir();
    servicesDir = join(dataDir, 'services');
    mkdirSync(servicesDir);
    writeFileSync(join(servicesDir, 'steady.yaml'), steadyYaml(steady.port));
    gw = await startGateway({ dataDir, overrides: { mapping: { servicesDir, watchDebounceMs: 50 } } });
    admin = await gw.login();
    client = await connect(gw.ports.mqtt, { username: 'admin', password: ADMIN_PASSWORD });
    client.on('close', () => clientCloses++);
    inbox = collect(client);
    await subscribe(client, ['services/#', 'plant/#']);
    await steadyPolls();
  });
  after(async () => {
    await endAllClients();
    await gw?.stop();
    await steady?.stop();
    await plc?.stop();
  });

  it('lists services and answers a service file as YAML (as on disk) or as JSON (tags as objects)', async () => {
    const list = await api('GET', '/api/services');
    expect(list.status).to.equal(200);
    expect(list.body).to.have.length(1);
    expect(list.body[0]).to.deep.include({ id: 'steady', description: 'keeps polling', file: 'steady.yaml', state: 'applied', problems: [], running: true });
    expect(list.body[0].resources).to.deep.equal({ connections: 1, endpoints: 1, mappings: 0, servers: 0, nodes: 0, sparkplug: 0, bridges: 0 });
    const yaml = await api('GET', '/api/services/steady', { headers: { accept: 'application/yaml' } });
    expect(yaml.status).to.equal(200);
    expect(yaml.headers.get('content-type')).to.match(/^application\/yaml/);
    expect(yaml.body).to.equal(steadyYaml(steady.port));
    const json = await api('GET', '/api/services/steady');
    expect(json.headers.get('x-service-state')).to.equal('applied');
    expect(json.body.resources.level.properties.connection).to.deep.equal({ '!ref': 'plc' });
    expect((await api('GET', '/api/services/nope')).status).to.equal(404);
  });

  it('creates a service (JSON body): written atomically as YAML and running when the answer comes', async () => {
    const res = await api('PUT', '/api/services/plant', {
      body: {
        description: 'created through the API',
        resources: {
          plc: { type: 'Connection', properties: { protocol: 'Modbus', configuration: { host: '127.0.0.1', port: plc.port } } },
          pressure: { type: 'Endpoint', properties: { connection: { '!ref': 'plc' }, operation: 'read', topic: 'plant/pressure', address: { table: 'input', address: 5 }, pollIntervalMs: 30 } },
        },
      },
    });
    expect(res.status).to.equal(201);
    expect(res.body.changes.added).to.deep.equal(['plant.plc', 'plant.pressure']);
    expect(res.body.changes.unchanged).to.deep.equal(['steady.level', 'steady.plc']);
    expect(res.body.service).to.deep.include({ id: 'plant', state: 'applied', running: true, file: 'plant.yaml' });
    const text = readFileSync(join(servicesDir, 'plant.yaml'), 'utf8');
    expect(text).to.include('connection: !ref plc');
    // Applied before the answer: the resources exist at once.
    expect(await connectionIds()).to.deep.equal(['plant.plc', 'steady.plc']);
    const value = await inbox.until((m) => m.topic === 'plant/pressure', 10_000);
    expect(JSON.parse(value.payload)).to.deep.equal([3]);
    expect((await api('DELETE', '/api/services/plant')).body.changes.removed).to.deep.equal(['plant.plc', 'plant.pressure']);
    expect(existsSync(join(servicesDir, 'plant.yaml'))).to.equal(false);
  });

  it('replaces a service (YAML body): only the changed endpoint restarts; its connection and the other services stay', async () => {
    const created = await putYaml('line', lineYaml(plc.port, "$[0] / 10"));
    expect(created.status).to.equal(201);
    await until(() => inbox.messages.find((m) => m.topic === 'services/line/temp'), 10_000, 'first temp');
    expect(JSON.parse(inbox.messages.find((m) => m.topic === 'services/line/temp')!.payload)).to.equal(21.5);
    const accepted = plc.accepted;
    const steadyAccepted = steady.accepted;

    const replaced = await putYaml('line', lineYaml(plc.port, "{'celsius': $[0] / 10}"));
    expect(replaced.status).to.equal(200);
    expect(replaced.body.changes).to.deep.equal({ added: [], restarted: ['line.temp'], retargeted: [], removed: [], unchanged: ['line.plc', 'line.pressure', 'steady.level', 'steady.plc'] });
    const m = await inbox.until((x) => x.topic === 'services/line/temp' && x.payload.startsWith('{'), 10_000);
    expect(JSON.parse(m.payload)).to.deep.equal({ celsius: 21.5 });
    expect(readFileSync(join(servicesDir, 'line.yaml'), 'utf8')).to.equal(lineYaml(plc.port, "{'celsius': $[0] / 10}"));
    await steadyPolls();
    expect([plc.accepted, steady.accepted]).to.deep.equal([accepted, steadyAccepted]);
    expect(clientCloses).to.equal(0);
  });

  it('refuses a document that does not validate (400, every problem with its path) and changes nothing', async () => {
    const before = readFileSync(join(servicesDir, 'line.yaml'), 'utf8');
    const bad = before.replace('table: holding', 'table: register').replace("{'celsius': $[0] / 10}", "$[0] /").replace('pollIntervalMs: 30}', 'pollIntervalMs: 1}');
    const res = await putYaml('line', bad);
    expect(res.status).to.equal(400);
    expect(res.body.message).to.match(/^service line is not valid: 3 problem/);
    expect(res.body.errors.map((e: { path: string }) => e.path)).to.have.members(['resources.temp.properties.address.table', 'resources.temp.properties.transform', 'resources.pressure.properties.pollIntervalMs']);
    expect(readFileSync(join(servicesDir, 'line.yaml'), 'utf8')).to.equal(before);
    expect((await api('GET', '/api/endpoints/line.temp')).body.currentState).to.equal('enabled');
    const garbage = await putYaml('line', 'resources: [unclosed\n');
    expect(garbage.status).to.equal(400);
    expect(garbage.body.errors[0].path).to.match(/^line \d+, column \d+$/);
    const noResources = await api('PUT', '/api/services/line', { body: { description: 'x' } });
    expect(noResources.status).to.equal(400);
    expect(readFileSync(join(servicesDir, 'line.yaml'), 'utf8')).to.equal(before);
  });

  it('validates without applying (dry run): problems with paths, or what would change', async () => {
    const bad = await api('POST', '/api/services/line/validate', { raw: 'resources:\n  c: {type: Connection, properties: {protocol: Modbus, configuration: {host: h, port: 0}}}\n', headers: { 'content-type': 'application/yaml' } });
    expect(bad.status).to.equal(200);
    expect(bad.body).to.deep.equal({ valid: false, problems: [{ path: 'resources.c.properties.configuration.port', message: 'must be >= 1' }] });
    // Every problem of a document, each with its path, as a PUT would refuse it.
    const line = readFileSync(join(servicesDir, 'line.yaml'), 'utf8');
    const three = line.replace('table: holding', 'table: register').replace("{'celsius': $[0] / 10}", '$[0] /').replace('pollIntervalMs: 30}', 'pollIntervalMs: 1}');
    const all = await api('POST', '/api/services/line/validate', { raw: three, headers: { 'content-type': 'application/yaml' } });
    expect(all.body.valid).to.equal(false);
    expect(all.body.problems.map((p: { path: string }) => p.path)).to.have.members(['resources.temp.properties.address.table', 'resources.temp.properties.transform', 'resources.pressure.properties.pollIntervalMs']);
    expect(all.body.problems.every((p: { message: string }) => p.message.length > 0)).to.equal(true);
    expect(readFileSync(join(servicesDir, 'line.yaml'), 'utf8')).to.equal(line);
    const good = await api('POST', '/api/services/fresh/validate', { raw: steadyYaml(steady.port), headers: { 'content-type': 'application/yaml' } });
    expect(good.body.valid).to.equal(true);
    expect(good.body.changes.added).to.deep.equal(['fresh.level', 'fresh.plc']);
    expect(existsSync(join(servicesDir, 'fresh.yaml'))).to.equal(false);
    expect(await connectionIds()).to.not.include('fresh.plc');
  });

  it('accepts only file-name-safe service ids', async () => {
    for (const id of ['..%2F..%2Fevil', '%2e%2e%2fevil', 'a.b', '-x', 'a%20b', 'x'.repeat(129)]) {
      const res = await putYaml(id, steadyYaml(steady.port));
      expect(res.status, id).to.equal(400);
      expect((await api('GET', `/api/services/${id}`)).status, id).to.equal(400);
    }
    expect(existsSync(join(servicesDir, '..', 'evil.yaml'))).to.equal(false);
    expect((await api('GET', '/api/services')).body.map((s: { id: string }) => s.id)).to.deep.equal(['line', 'steady']);
  });

  it('guards every services call by the permission on its path', async () => {
    const reader = await gw.userWith([{ resource: '/api/services/#', operation: 'read', context: 'http' }]);
    expect((await gw.api('GET', '/api/services', { token: reader.token })).status).to.equal(200);
    expect((await gw.api('GET', '/api/services/line', { token: reader.token })).status).to.equal(200);
    const refused = await putYaml('line', lineYaml(plc.port, '$'), reader.token);
    expect(refused.status).to.equal(403);
    expect(refused.body.message).to.equal('no write permission on /api/services/line');
    expect((await gw.api('DELETE', '/api/services/line', { token: reader.token })).status).to.equal(403);
    expect((await gw.api('POST', '/api/services/line/validate', { token: reader.token, raw: 'x', headers: { 'content-type': 'application/yaml' } })).status).to.equal(403);
    const lineOnly = await gw.userWith([{ resource: '/api/services/line', operation: 'readWrite', context: 'http' }]);
    const same = await putYaml('line', readFileSync(join(servicesDir, 'line.yaml'), 'utf8'), lineOnly.token);
    expect(same.status).to.equal(200);
    expect(same.body.changes.restarted).to.deep.equal([]);
    expect((await putYaml('other', steadyYaml(steady.port), lineOnly.token)).status).to.equal(403);
    expect((await gw.api('GET', '/api/services', { token: lineOnly.token })).status).to.equal(403);
    expect(existsSync(join(servicesDir, 'other.yaml'))).to.equal(false);
  });

  it('applies a file written by hand, refuses a broken edit (the running version stays), and takes a rename-on-save', async () => {
    const file = join(servicesDir, 'hand.yaml');
    writeFileSync(file, lineYaml(plc.port, '$[0]'));
    await until(async () => ((await connectionIds()).includes('hand.plc') ? true : undefined), 10_000, 'hand.plc applied');
    const first = await inbox.until((m) => m.topic === 'services/hand/temp', 10_000);
    expect(JSON.parse(first.payload)).to.equal(215);
    await until(async () => ((await api('GET', '/api/connections/hand.plc')).body.currentState === 'connected' ? true : undefined), 10_000, 'hand.plc connected');
    const accepted = plc.accepted;

    // An edit that breaks the file: refused as a whole, logged with the path, the old version runs on.
    const refusedBefore = logsOf('service file refused').length;
    writeFileSync(file, lineYaml(plc.port, '$[0]').replace('operation: read\n', 'operation: reed\n'));
    await until(() => (logsOf('service file refused').length > refusedBefore ? true : undefined), 10_000, 'refusal logged');
    const refusal = logsOf('service file refused').at(-1)!;
    expect(refusal).to.include({ level: 'error', file, path: 'resources.temp.properties.operation', keptRunning: true });
    const listed = ((await api('GET', '/api/services')).body as Array<{ id: string }>).find((s) => s.id === 'hand')!;
    expect(listed).to.deep.include({ state: 'refused', running: true });
    expect((await api('GET', '/api/services/hand')).headers.get('x-service-state')).to.equal('refused');
    const n = inbox.messages.filter((m) => m.topic === 'services/hand/temp').length;
    await until(() => (inbox.messages.filter((m) => m.topic === 'services/hand/temp').length > n + 2 ? true : undefined), 10_000, 'old version polling');

    // A file that is not even YAML: refused the same way, and readable only as it is (YAML).
    const garbled = 'resources: [unclosed\n';
    const refusedNow = logsOf('service file refused').length;
    writeFileSync(file, garbled);
    await until(() => (logsOf('service file refused').length > refusedNow ? true : undefined), 10_000, 'garbled file refused');
    const asJson = await api('GET', '/api/services/hand');
    expect(asJson.status).to.equal(409);
    expect(asJson.body.message).to.match(/^the file of service hand is not valid YAML \(line \d+, column \d+: .+\); ask for application\/yaml$/);
    const asYaml = await api('GET', '/api/services/hand', { headers: { accept: 'application/yaml' } });
    expect([asYaml.status, asYaml.body]).to.deep.equal([200, garbled]);
    expect((await api('GET', '/api/endpoints/hand.temp')).body.currentState).to.equal('enabled');

    // An editor saving by rename: a new file under another name, renamed over the old one.
    const tmp = join(servicesDir, '.hand.yaml.swp');
    writeFileSync(tmp, lineYaml(plc.port, "$[0] + 1"));
    renameSync(tmp, file);
    const next = await inbox.until((m) => m.topic === 'services/hand/temp' && m.payload === '216', 10_000);
    expect(next.payload).to.equal('216');
    // Applied from the directory, too, only the changed endpoint restarted: its connection (and
    // the line service's on the same PLC) stayed open, the PLC saw no new TCP connection.
    expect(logsOf('mapping applied').at(-1)).to.deep.include({ added: [], restarted: ['hand.temp'], removed: [] });
    expect(plc.accepted).to.equal(accepted);
    await until(async () => (((await api('GET', '/api/services')).body as Array<{ id: string; state: string }>).find((s) => s.id === 'hand')!.state === 'applied' ? true : undefined), 10_000, 'hand applied');
  });

  it('keeps the running version while a file is half written, then applies it once complete', async () => {
    const file = join(servicesDir, 'hand.yaml');
    const full = lineYaml(plc.port, "$[0] + 2");
    const refusedBefore = logsOf('service file refused').length;
    writeFileSync(file, full.slice(0, full.indexOf('  pressure:') - 20)); // cut in the middle of a line
    await until(() => (logsOf('service file refused').length > refusedBefore ? true : undefined), 10_000, 'partial file refused');
    expect((await api('GET', '/api/endpoints/hand.pressure')).body.currentState).to.equal('enabled');
    writeFileSync(file, full);
    await inbox.until((m) => m.topic === 'services/hand/temp' && m.payload === '217', 10_000);
  });

  it('writes a new file private (0600) and an existing one with its mode kept, by rename (a new inode), leaving no temporary file', async () => {
    const file = join(servicesDir, 'modes.yaml');
    expect((await putYaml('modes', routeYaml('modes', 'a'))).status).to.equal(201);
    expect(statSync(file).mode & 0o777).to.equal(0o600);
    chmodSync(file, 0o640);
    const inode = statSync(file).ino;
    expect((await putYaml('modes', routeYaml('modes', 'b'))).status).to.equal(200);
    // Written beside and renamed over: a reader (the watcher, an editor) never sees half a file.
    expect(statSync(file).ino).to.not.equal(inode);
    expect(statSync(file).mode & 0o777).to.equal(0o640);
    expect(readFileSync(file, 'utf8')).to.equal(routeYaml('modes', 'b'));
    expect(readdirSync(servicesDir).filter((f) => f.includes('.tmp'))).to.deep.equal([]);
    expect((await api('DELETE', '/api/services/modes')).status).to.equal(200);
  });

  /** The file on disk, the API's answers and the running mapping are the same version of service `id`. */
  const agree = async (id: string): Promise<string> => {
    const disk = readFileSync(join(servicesDir, `${id}.yaml`), 'utf8');
    const target = /target: ([^}\s]+)/.exec(disk)![1]!;
    const yaml = await api('GET', `/api/services/${id}`, { headers: { accept: 'application/yaml' } });
    expect(yaml.body).to.equal(disk);
    expect(yaml.headers.get('x-service-state')).to.equal('applied');
    const running = await api('GET', `/api/mappings/${id}.m`);
    expect(running.body.mappings[0].target).to.equal(target);
    return target;
  };
  /** The running version really runs: a message on <id>/in comes out on `target`. */
  const routesTo = async (id: string, target: string, payload: string) => {
    await client.publishAsync(`${id}/in`, payload);
    await inbox.until((m) => m.topic === target && m.payload === payload, 10_000);
  };

  it('applies concurrent PUTs of one service one at a time: the file, the API and the running version agree', async () => {
    const N = 6;
    const answers = await Promise.all(Array.from({ length: N }, (_, i) => putYaml('conc', routeYaml('conc', `v${i}`))));
    // One created it; every other one replaced a whole, applied version (never a mix of two).
    expect(answers.map((a) => a.status).sort()).to.deep.equal([200, 200, 200, 200, 200, 201]);
    expect(answers.find((a) => a.status === 201)!.body.changes.added).to.deep.equal(['conc.m']);
    for (const a of answers.filter((x) => x.status === 200)) expect(a.body.changes.restarted).to.deep.equal(['conc.m']);
    const target = await agree('conc');
    expect(target).to.match(/^plant\/conc\/v[0-5]$/);
    await routesTo('conc', target, '41');
    expect(logsOf('service file refused').filter((l) => String(l.file).endsWith('conc.yaml'))).to.deep.equal([]);
    expect((await api('DELETE', '/api/services/conc')).status).to.equal(200);
  });

  it('converges when a hand edit lands while a PUT of the same service is applied: what is on disk is what the API shows and what runs', async () => {
    const file = join(servicesDir, 'race.yaml');
    // The hand edit lands before, during and after the PUT's write and apply.
    for (const [round, delayMs] of [0, 2, 5, 10, 25, 60].entries()) {
      const handDone = new Promise<void>((resolve) => setTimeout(() => resolve(writeFileSync(file, routeYaml('race', `hand${round}`))), delayMs));
      const put = await putYaml('race', routeYaml('race', `api${round}`));
      expect(put.status).to.be.oneOf([200, 201]);
      await handDone;
      // Once the watcher has read the directory again, all three hold the same version.
      const target = await until(async () => {
        try {
          return await agree('race');
        } catch {
          return undefined;
        }
      }, 10_000, `round ${round}: file, API and runtime agree`);
      expect(target).to.be.oneOf([`plant/race/hand${round}`, `plant/race/api${round}`]);
      await routesTo('race', target, String(100 + round));
    }
    expect((await api('DELETE', '/api/services/race')).status).to.equal(200);
    expect(clientCloses).to.equal(0);
  });

  it('stops the resources of a file deleted by hand, and of a service deleted through the API', async () => {
    unlinkSync(join(servicesDir, 'hand.yaml'));
    await until(async () => (!(await connectionIds()).includes('hand.plc') ? true : undefined), 10_000, 'hand removed');
    expect((await api('GET', '/api/services/hand')).status).to.equal(404);
    const del = await api('DELETE', '/api/services/line');
    expect(del.status).to.equal(200);
    expect(del.body).to.deep.equal({ id: 'line', changes: { added: [], restarted: [], retargeted: [], removed: ['line.plc', 'line.pressure', 'line.temp'], unchanged: ['steady.level', 'steady.plc'] } });
    expect(existsSync(join(servicesDir, 'line.yaml'))).to.equal(false);
    expect(await connectionIds()).to.deep.equal(['steady.plc']);
    expect((await api('DELETE', '/api/services/line')).status).to.equal(404);
    await until(() => (plc.open === 0 ? true : undefined), 10_000, 'line connections closed');
    // Through all of it the steady service kept its one connection and the MQTT client stayed.
    await steadyPolls();
    expect(steady.accepted).to.equal(1);
    expect(clientCloses).to.equal(0);
  });

  it('follows the directory being removed and created again', async () => {
    rmSync(servicesDir, { recursive: true });
    await until(async () => ((await connectionIds()).length === 0 ? true : undefined), 10_000, 'services gone with the directory');
    // The API creates the directory again.
    expect((await putYaml('steady', steadyYaml(steady.port))).status).to.equal(201);
    expect(readFileSync(join(servicesDir, 'steady.yaml'), 'utf8')).to.equal(steadyYaml(steady.port));
    await steadyPolls();
  });
});
