// OPC UA in the gateway (docs/design.md §11), with real node-opcua on 127.0.0.1 port 0 both ways:
// (a) an Opcua connection to a test OPC UA server (poll, subscribe, /req → /res, /set writes with
//     the node's data type, reconnection with the runtime's backoff);
// (b) the gateway's Server::Opcua with a Node::Opcua set (topic → variable, client writes → topic,
//     gatewayd users and permissions);
// (c) the daemon process: stdout stays JSON lines, PKI under the data directory, clean SIGTERM.
import { existsSync, mkdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import type { MqttClient } from 'mqtt';
import {
  AttributeIds,
  DataType,
  OPCUACertificateManager,
  OPCUAClient,
  OPCUAServer,
  RegisterServerMethod,
  StatusCodes,
  UserTokenType,
  makeAccessLevelFlag,
  type ClientSession,
  type UAVariable,
} from 'node-opcua';
import { ADMIN_PASSWORD, GOOD_PASSWORD, startDaemonProcess, startGateway, tempDir, type TestGateway } from './support/harness.js';
import { collect, connect, endAllClients, subscribe } from './support/mqtt-test-kit.js';
import { until } from './mapping-support.js';
import { repairOpensslConf } from '../src/mapping/opcua-support.js';

interface TestServer {
  server: OPCUAServer;
  port: number;
  temperature: UAVariable;
  setpoint: UAVariable;
  flag: UAVariable;
  stop(): Promise<void>;
}

/** Resolves at the variable's next value change. */
const changedOnce = (v: UAVariable) => new Promise<void>((resolve) => v.once('value_changed', () => resolve()));

const pkiRoot = tempDir('gatewayd-opcua-test-pki-');

/** An OPC UA server standing for a PLC: user plc/plc-secret, a few variables. */
async function startTestServer(port = 0): Promise<TestServer> {
  const server = new OPCUAServer({
    port,
    hostname: '127.0.0.1',
    allowAnonymous: false,
    userManager: { isValidUser: (u: string, p: string) => u === 'plc' && p === 'plc-secret' },
    serverCertificateManager: new OPCUACertificateManager({ rootFolder: join(pkiRoot, 'plc'), automaticallyAcceptUnknownCertificate: true, disableFileWatchers: true }),
    userCertificateManager: new OPCUACertificateManager({ rootFolder: join(pkiRoot, 'plc-users'), automaticallyAcceptUnknownCertificate: false, disableFileWatchers: true }),
    registerServerMethod: RegisterServerMethod.HIDDEN,
  });
  await server.initialize();
  const space = server.engine.addressSpace!;
  const ns = space.getOwnNamespace();
  const device = ns.addObject({ organizedBy: space.rootFolder.objects, browseName: 'Device' });
  const rw = makeAccessLevelFlag('CurrentRead | CurrentWrite');
  const temperature = ns.addVariable({ componentOf: device, browseName: 'Temperature', nodeId: 'ns=1;s=Temperature', dataType: 'Double', minimumSamplingInterval: 0, value: { dataType: DataType.Double, value: 21.5 } });
  const setpoint = ns.addVariable({ componentOf: device, browseName: 'Setpoint', nodeId: 'ns=1;s=Setpoint', dataType: 'Int32', accessLevel: rw, userAccessLevel: rw, value: { dataType: DataType.Int32, value: 0 } });
  const flag = ns.addVariable({ componentOf: device, browseName: 'Flag', nodeId: 'ns=1;s=Flag', dataType: 'Boolean', accessLevel: rw, userAccessLevel: rw, value: { dataType: DataType.Boolean, value: false } });
  await server.start();
  return { server, port: server.endpoints[0]!.port, temperature, setpoint, flag, stop: () => server.shutdown(0) };
}

const serviceYaml = (plcPort: number) => `
resources:
  plc:
    type: Connection
    properties:
      protocol: Opcua
      configuration: {endpointUrl: "opc.tcp://127.0.0.1:${plcPort}", username: plc, password: plc-secret, timeoutMs: 2000}
  temperature:
    type: Endpoint
    properties:
      connection: !ref plc
      operation: read
      address: {nodeId: "ns=1;s=Temperature"}
      pollIntervalMs: 100
  tempSub:
    type: Endpoint
    properties:
      connection: !ref plc
      operation: read
      address: {nodeId: "ns=1;s=Temperature", samplingIntervalMs: 20}
      transform: "{'c': value, 'ok': status = 'Good'}"
  setpoint:
    type: Endpoint
    properties:
      connection: !ref plc
      operation: write
      address: {nodeId: "ns=1;s=Setpoint"}
  flag:
    type: Endpoint
    properties:
      connection: !ref plc
      operation: write
      topic: plant/flag
      address: {nodeId: "ns=1;s=Flag"}
  secure:
    type: Connection
    properties:
      protocol: Opcua
      configuration: {endpointUrl: "opc.tcp://127.0.0.1:${plcPort}", securityMode: SignAndEncrypt, securityPolicy: Basic256Sha256, acceptUnknownServerCertificate: true, username: plc, password: plc-secret, timeoutMs: 8000}
  secureTemp:
    type: Endpoint
    properties:
      connection: !ref secure
      operation: read
      address: {nodeId: "ns=1;s=Temperature"}
  distrustful:
    type: Connection
    properties:
      protocol: Opcua
      configuration: {endpointUrl: "opc.tcp://127.0.0.1:${plcPort}", securityMode: Sign, securityPolicy: Basic256Sha256, username: plc, password: plc-secret, timeoutMs: 2000}
  srv:
    type: Server::Opcua
    properties:
      options: {port: 0, securityModes: [None]}
  nodes:
    type: Node::Opcua
    properties:
      server: !ref srv
      nodes:
        - {browseName: Level, dataType: Double, topic: plant/level, transform: "$.v"}
        - {browseName: Valve, dataType: Boolean, topic: plant/valve, access: readWrite}
        - {browseName: Target, nodeId: "ns=1;s=Target", dataType: Int32, topic: plant/target, access: write, setTopic: plant/target/cmd}
        - {browseName: Label, topic: plant/label}
        - {browseName: FlagCommand, nodeId: "ns=1;s=FlagCommand", dataType: Boolean, topic: plant/flag, access: write}
`;

describe('OPC UA in the gateway', function () {
  this.timeout(30_000);
  let plc: TestServer;
  let gw: TestGateway;
  let admin: string;
  let sub: MqttClient;
  const clients: OPCUAClient[] = [];

  const current = async (kind: string, id: string): Promise<Record<string, any>> =>
    kind === 'nodes'
      ? ((await gw.api('GET', '/api/nodes', { token: admin })).body as Array<Record<string, any>>).find((n) => n.id === id)!
      : ((await gw.api('GET', `/api/${kind}/${id}`, { token: admin })).body as Record<string, any>);
  const reach = (kind: string, id: string, wanted: string, ms = 10_000) =>
    until(async () => ((await current(kind, id)).currentState === wanted ? true : undefined), ms, `${id} ${wanted}`).catch(async (err: Error) => {
      throw new Error(`${err.message}: ${JSON.stringify(await current(kind, id))}`);
    });

  /** A node-opcua client session on the gateway's server. */
  async function session(identity: { userName: string; password: string } | undefined): Promise<ClientSession> {
    const srv = await current('servers', 'opc.srv');
    const port = Number(new URL(srv.endpointUrl as string).port);
    const client = OPCUAClient.create({
      endpointMustExist: false,
      connectionStrategy: { maxRetry: 0, initialDelay: 100, maxDelay: 200 },
      clientCertificateManager: new OPCUACertificateManager({ rootFolder: join(pkiRoot, 'client'), automaticallyAcceptUnknownCertificate: true, disableFileWatchers: true }),
    });
    clients.push(client);
    await client.connect(`opc.tcp://127.0.0.1:${port}`);
    return client.createSession(identity ? { type: UserTokenType.UserName, ...identity } : { type: UserTokenType.Anonymous });
  }

  before(async () => {
    plc = await startTestServer();
    const dataDir = tempDir();
    const servicesDir = join(dataDir, 'services');
    mkdirSync(servicesDir);
    writeFileSync(join(servicesDir, 'opc.yaml'), serviceYaml(plc.port));
    gw = await startGateway({ dataDir, overrides: { mapping: { servicesDir } } });
    admin = await gw.login();
    sub = await connect(gw.ports.mqtt, { username: 'admin', password: ADMIN_PASSWORD });
  });
  after(async () => {
    await Promise.all(clients.map((c) => c.disconnect().catch(() => undefined)));
    await endAllClients();
    await gw?.stop();
    await plc?.stop();
    // The test's own node-opcua (test server, clients) has the OPENSSL_CONF bug too: later test
    // files run openssl.
    repairOpensslConf();
  });

  it('connects with the configured user, never returns the password, and keeps PKI files in <dataDir>/opcua-pki (0700)', async () => {
    await reach('connections', 'opc.plc', 'connected');
    const conn = await current('connections', 'opc.plc');
    expect(conn.connection).to.include({ protocol: 'Opcua', endpointUrl: `opc.tcp://127.0.0.1:${plc.port}`, username: 'plc' });
    expect(conn.connection).to.not.have.property('password');
    const pki = join(gw.dataDir, 'opcua-pki');
    expect(statSync(pki).mode & 0o777).to.equal(0o700);
    expect(existsSync(join(pki, 'client'))).to.equal(true);
  });

  it('polls a node and publishes {value, status, sourceTimestamp}; answers /req on /res', async () => {
    await reach('endpoints', 'opc.temperature', 'enabled');
    const inbox = collect(sub);
    await subscribe(sub, ['services/opc/temperature', 'services/opc/temperature/res']);
    const m = await inbox.until((x) => x.topic === 'services/opc/temperature');
    const reading = JSON.parse(m.payload);
    expect(reading).to.include({ value: 21.5, status: 'Good' });
    expect(reading.sourceTimestamp).to.be.a('string');
    plc.temperature.setValueFromSource({ dataType: DataType.Double, value: 22.25 });
    await sub.publishAsync('services/opc/temperature/req', '');
    const res = await inbox.until((x) => x.topic === 'services/opc/temperature/res' && JSON.parse(x.payload).value === 22.25);
    expect(JSON.parse(res.payload).status).to.equal('Good');
  });

  it('subscribes (monitored item) and publishes each change through the transform', async () => {
    await reach('endpoints', 'opc.tempSub', 'enabled');
    const inbox = collect(sub);
    await subscribe(sub, 'services/opc/tempSub');
    plc.temperature.setValueFromSource({ dataType: DataType.Double, value: 30.5 });
    const m = await inbox.until((x) => x.topic === 'services/opc/tempSub' && JSON.parse(x.payload).c === 30.5);
    expect(JSON.parse(m.payload)).to.deep.equal({ c: 30.5, ok: true });
    plc.temperature.setValueFromSource({ dataType: DataType.Double, value: 31 });
    await inbox.until((x) => x.topic === 'services/opc/tempSub' && JSON.parse(x.payload).c === 31);
  });

  it('writes /set values with the node data type and refuses what does not fit (logged)', async () => {
    await reach('endpoints', 'opc.setpoint', 'enabled');
    await reach('endpoints', 'opc.flag', 'enabled');
    const changed = changedOnce(plc.setpoint);
    await sub.publishAsync('services/opc/setpoint/set', '42');
    await changed;
    expect(plc.setpoint.readValue().value.value).to.equal(42);
    const text = changedOnce(plc.setpoint);
    await sub.publishAsync('services/opc/setpoint/set', '"-7"'); // numeric text is converted
    await text;
    expect(plc.setpoint.readValue().value.value).to.equal(-7);

    await sub.publishAsync('services/opc/setpoint/set', '4.5');
    await sub.publishAsync('services/opc/setpoint/set', '3000000000');
    const failedWrite = (l: Record<string, unknown>) => l.message === 'endpoint operation failed' && l.id === 'opc.setpoint';
    await gw.waitForLog((l) => failedWrite(l) && gw.logs().filter(failedWrite).length >= 2);
    const refusals = gw.logs().filter((l) => l.message === 'endpoint operation failed' && l.id === 'opc.setpoint');
    expect(String(refusals[0]!.error)).to.match(/does not fit Int32/);
    expect(plc.setpoint.readValue().value.value).to.equal(-7);

    const flagged = changedOnce(plc.flag);
    await sub.publishAsync('plant/flag/set', 'true');
    await flagged;
    expect(plc.flag.readValue().value.value).to.equal(true);
    expect(JSON.stringify(gw.logs())).to.not.include('plc-secret');
  });

  it('connects with SignAndEncrypt / Basic256Sha256, and refuses an unknown server certificate unless told to accept it', async () => {
    await reach('connections', 'opc.secure', 'connected', 20_000);
    await reach('endpoints', 'opc.secureTemp', 'enabled');
    const inbox = collect(sub);
    await subscribe(sub, 'services/opc/secureTemp/res');
    await sub.publishAsync('services/opc/secureTemp/req', '');
    expect(JSON.parse((await inbox.until((x) => x.topic === 'services/opc/secureTemp/res')).payload)).to.have.property('status', 'Good');
    await reach('connections', 'opc.distrustful', 'reconnecting', 20_000);
    expect((await current('connections', 'opc.distrustful')).message).to.be.a('string');
  });

  it('goes reconnecting with backoff when the server stops, and back to connected when it returns', async () => {
    const port = plc.port;
    await plc.stop();
    await reach('connections', 'opc.plc', 'reconnecting');
    expect((await current('connections', 'opc.plc')).message).to.be.a('string');
    expect((await current('endpoints', 'opc.tempSub')).currentState).to.equal('enabling');
    await gw.waitForLog((l) => l.message === 'connection failed, retrying' && l.id === 'opc.plc');
    expect(gw.logs().find((l) => l.message === 'connection lost' && l.id === 'opc.plc')).to.include({ protocol: 'Opcua' });
    plc = await startTestServer(port);
    await reach('connections', 'opc.plc', 'connected', 15_000);
    await reach('endpoints', 'opc.tempSub', 'enabled');
    const inbox = collect(sub);
    await subscribe(sub, 'services/opc/tempSub');
    plc.temperature.setValueFromSource({ dataType: DataType.Double, value: 44 });
    await inbox.until((x) => x.topic === 'services/opc/tempSub' && JSON.parse(x.payload).c === 44);
  });

  it('runs the Server::Opcua: a topic becomes the variable value, client writes land on the set topic', async () => {
    await reach('servers', 'opc.srv', 'enabled');
    await reach('nodes', 'opc.nodes', 'enabled');
    const s = await session({ userName: 'admin', password: ADMIN_PASSWORD });
    const level = 'ns=1;s=plant/level';
    expect((await s.read({ nodeId: level, attributeId: AttributeIds.Value })).statusCode.name).to.equal('BadWaitingForInitialData');
    await sub.publishAsync('plant/level', JSON.stringify({ v: 3.5 }));
    await until(async () => ((await s.read({ nodeId: level, attributeId: AttributeIds.Value })).value.value === 3.5 ? true : undefined), 5000, 'level 3.5');
    await sub.publishAsync('plant/label', '"line 1"');
    await until(async () => ((await s.read({ nodeId: 'ns=1;s=plant/label', attributeId: AttributeIds.Value })).value.value === 'line 1' ? true : undefined), 5000, 'label');

    const inbox = collect(sub);
    await subscribe(sub, ['plant/valve/set', 'plant/target/cmd']);
    const w1 = await s.write({ nodeId: 'ns=1;s=plant/valve', attributeId: AttributeIds.Value, value: { value: { dataType: DataType.Boolean, value: true } } });
    expect(w1.name).to.equal('Good');
    expect((await inbox.until((x) => x.topic === 'plant/valve/set')).payload).to.equal('true');
    const w2 = await s.write({ nodeId: 'ns=1;s=Target', attributeId: AttributeIds.Value, value: { value: { dataType: DataType.Int32, value: 7 } } });
    expect(w2.name).to.equal('Good');
    expect((await inbox.until((x) => x.topic === 'plant/target/cmd')).payload).to.equal('7');
    // A read-only node refuses writes.
    const w3 = await s.write({ nodeId: level, attributeId: AttributeIds.Value, value: { value: { dataType: DataType.Double, value: 1 } } });
    expect(w3.name).to.match(/^Bad/);
    const topics = (await gw.api('GET', '/api/topics', { token: admin })).body;
    expect(topics.nodes).to.deep.equal([{ id: 'opc.nodes', topics: ['plant/level', 'plant/valve', 'plant/valve/set', 'plant/target/cmd', 'plant/label', 'plant/flag/set'] }]);

    // A write to a node whose set topic is a write endpoint's reaches the device, and the audit
    // trail names the session's user and the OPC UA server that wrote for it.
    await reach('endpoints', 'opc.flag', 'enabled');
    plc.flag.setValueFromSource({ dataType: DataType.Boolean, value: false });
    const flagged = changedOnce(plc.flag);
    expect((await s.write({ nodeId: 'ns=1;s=FlagCommand', attributeId: AttributeIds.Value, value: { value: { dataType: DataType.Boolean, value: true } } })).name).to.equal('Good');
    await flagged;
    expect(plc.flag.readValue().value.value).to.equal(true);
    const audited = await until(async () => (await gw.api('GET', '/api/audit?endpoint=opc.flag&action=endpoint%20written', { token: admin })).body.items.find((e: { details: { via?: string } }) => e.details.via !== undefined));
    expect(audited.actor).to.include({ username: 'admin' });
    expect(audited.details).to.include({ via: 'OPC UA server opc.srv', topic: 'plant/flag/set', value: true });
    // The session's address is the event's source, as a request's is (issue 38 point 9).
    expect(audited.source).to.match(/^(::ffff:)?127\.0\.0\.1$/);
  });

  it('authenticates sessions as gatewayd users and authorizes reads and writes with mqtt permissions', async () => {
    const user = await gw.userWith([{ resource: 'plant/level', operation: 'read', context: 'mqtt' }]);
    const s = await session({ userName: user.username, password: GOOD_PASSWORD });
    expect((await s.read({ nodeId: 'ns=1;s=plant/level', attributeId: AttributeIds.Value })).statusCode.name).to.equal('Good');
    // node-opcua answers a read the user may not do with BadNotReadable.
    expect((await s.read({ nodeId: 'ns=1;s=plant/valve', attributeId: AttributeIds.Value })).statusCode.name).to.be.oneOf(['BadNotReadable', 'BadUserAccessDenied']);
    const w = await s.write({ nodeId: 'ns=1;s=Target', attributeId: AttributeIds.Value, value: { value: { dataType: DataType.Int32, value: 1 } } });
    expect(w).to.equal(StatusCodes.BadUserAccessDenied);

    let refused = 0;
    for (const identity of [{ userName: user.username, password: 'wrong' }, undefined]) {
      try {
        await session(identity);
      } catch {
        refused++;
      }
    }
    expect(refused).to.equal(2);
    expect(gw.logs().some((l) => l.message === 'login failed' && l.via === 'opcua' && l.username === user.username)).to.equal(true);

    // A session token works as the password too (as on MQTT), e.g. for users enrolled in MFA.
    const byToken = await session({ userName: user.username, password: user.token });
    expect((await byToken.read({ nodeId: 'ns=1;s=plant/level', attributeId: AttributeIds.Value })).statusCode.name).to.equal('Good');
  });

  it('disables and enables the server: node sets wait in enabling', async () => {
    const off = await gw.api('PUT', '/api/servers/opc.srv/operation', { token: admin, body: { operation: 'disable' } });
    expect(off.body.targetState).to.equal('disabled');
    await reach('servers', 'opc.srv', 'disabled');
    expect((await current('nodes', 'opc.nodes')).currentState).to.equal('enabling');
    await gw.api('PUT', '/api/servers/opc.srv/operation', { token: admin, body: { operation: 'enable' } });
    await reach('servers', 'opc.srv', 'enabled');
    await reach('nodes', 'opc.nodes', 'enabled');
  });
});

describe('OPC UA in the daemon process', function () {
  this.timeout(30_000);

  it('keeps stdout JSON lines, writes no PKI to $HOME, and stops cleanly', async () => {
    const dataDir = tempDir();
    const home = tempDir('gatewayd-home-');
    const servicesDir = join(dataDir, 'services');
    mkdirSync(servicesDir);
    writeFileSync(
      join(servicesDir, 'opc.yaml'),
      `resources:
  srv: {type: Server::Opcua, properties: {options: {port: 0, allowAnonymous: true}}}
  nodes: {type: Node::Opcua, properties: {server: !ref srv, nodes: [{browseName: X, topic: x/y}]}}
  dead: {type: Connection, properties: {protocol: Opcua, configuration: {endpointUrl: "opc.tcp://127.0.0.1:1", timeoutMs: 500}}}
`,
    );
    const d = await startDaemonProcess(dataDir, { HOME: home, GATEWAYD_SET__MAPPING__SERVICES_DIR: servicesDir });
    try {
      await until(() => (d.lines.some((l) => l.message === 'OPC UA server started') && d.lines.some((l) => l.message === 'connection failed, retrying') ? true : undefined), 20_000, 'opc ua started');
      const started = d.lines.find((l) => l.message === 'OPC UA server started')!;
      // A client session makes the server talk.
      const client = OPCUAClient.create({
        endpointMustExist: false,
        connectionStrategy: { maxRetry: 0 },
        clientCertificateManager: new OPCUACertificateManager({ rootFolder: join(pkiRoot, 'client2'), automaticallyAcceptUnknownCertificate: true, disableFileWatchers: true }),
      });
      await client.connect(`opc.tcp://127.0.0.1:${new URL(started.endpointUrl as string).port}`);
      const s = await client.createSession();
      await s.read({ nodeId: 'ns=1;s=x/y', attributeId: AttributeIds.Value });
      await s.close();
      await client.disconnect();
    } finally {
      d.child.kill('SIGTERM');
    }
    repairOpensslConf();
    expect(await d.exited).to.equal(0);
    expect(d.lines.filter((l) => 'unparsed' in l)).to.deep.equal([]);
    expect(existsSync(join(home, '.config'))).to.equal(false);
    expect(statSync(join(dataDir, 'opcua-pki')).mode & 0o777).to.equal(0o700);
  });
});
