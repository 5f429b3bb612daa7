// Sparkplug B edge node (DESIGN §14, README "Sparkplug B") against the real gateway: a service
// file with a Modbus TCP peer (the test kit's), a Sparkplug resource publishing through the
// embedded broker as its runAs user, and a Sparkplug host written in the tests
// (support/sparkplug-host.ts) that decodes with Google's protobuf runtime, not the daemon's.
import { expect } from 'chai';
import type { MqttClient } from 'mqtt';
import { startGateway, GOOD_PASSWORD, type TestGateway } from './support/harness.js';
import { SparkplugHost, type SparkplugMessage } from './support/sparkplug-host.js';
import { startModbusServer, type ModbusTestServer } from './mapping-support.js';

const GROUP = 'site-a';
const NODE = 'gw1';
const DEVICE = 'press-7';

/** A press: temperature (holding 5, tenths of a degree) read every 40 ms, a setpoint (holding 10) read and written. */
function pressService(modbusPort: number, options: { runAs?: string; primaryHostId?: string; extraMetric?: boolean; via?: string } = {}): string {
  return `description: press 7 as a Sparkplug device
resources:
  plc:
    type: Connection
    properties: {protocol: Modbus, configuration: {host: 127.0.0.1, port: ${modbusPort}, timeoutMs: 500}}
  temperature:
    type: Endpoint
    properties: {connection: !ref plc, operation: read, address: {table: holding, address: 5}, pollIntervalMs: 40, transform: "$[0] / 10"}
  setpointNow:
    type: Endpoint
    properties: {connection: !ref plc, operation: read, address: {table: holding, address: 10}, pollIntervalMs: 40, transform: "$[0]"}
  setpoint:
    type: Endpoint
    properties: {connection: !ref plc, operation: write, address: {table: holding, address: 10}}
  edge:
    type: Sparkplug
    properties:
      groupId: ${GROUP}
      edgeNodeId: ${NODE}
      runAs: ${options.runAs ?? 'edge-gw1'}
      via: ${options.via ?? 'local'}
      birthWaitMs: 2000
${options.primaryHostId ? `      primaryHostId: ${options.primaryHostId}\n` : ''}      devices:
        - deviceId: ${DEVICE}
          metrics:
            - {name: temperature, endpoint: !ref temperature, datatype: Float}
            - {name: setpoint, endpoint: !ref setpointNow, writeEndpoint: !ref setpoint, datatype: Int32, writable: true}
${options.extraMetric ? '            - {name: raw, endpoint: !ref setpointNow, datatype: UInt16}\n' : ''}`;
}

/** What the edge node's user may do: publish and subscribe its own Sparkplug topics, write the endpoints. */
const EDGE_PERMISSIONS = [
  { context: 'mqtt' as const, operation: 'readWrite' as const, resource: `spBv1.0/${GROUP}/+/${NODE}/#` },
  { context: 'mqtt' as const, operation: 'read' as const, resource: 'spBv1.0/STATE/+' },
  { context: 'mqtt' as const, operation: 'write' as const, resource: 'services/#' },
];
/** A SCADA host: reads everything Sparkplug, sends commands and its STATE. */
const HOST_PERMISSIONS = [
  { context: 'mqtt' as const, operation: 'read' as const, resource: 'spBv1.0/#' },
  { context: 'mqtt' as const, operation: 'write' as const, resource: `spBv1.0/${GROUP}/NCMD/#` },
  { context: 'mqtt' as const, operation: 'write' as const, resource: `spBv1.0/${GROUP}/DCMD/#` },
  { context: 'mqtt' as const, operation: 'write' as const, resource: 'spBv1.0/STATE/#' },
];

const metricNamed = (m: SparkplugMessage, name: string) => m.payload.metrics.find((x) => x.name === name);
const metricAliased = (m: SparkplugMessage, alias: number) => m.payload.metrics.find((x) => x.alias === alias);

describe('Sparkplug B edge node', function () {
  this.timeout(60_000);
  let gw: TestGateway;
  let admin: string;
  let plc: ModbusTestServer;
  let host: SparkplugHost;
  const hosts: SparkplugHost[] = [];
  const clients: MqttClient[] = [];

  const putService = async (id: string, text: string) => {
    const res = await gw.api('PUT', `/api/services/${id}`, { token: admin, raw: text, headers: { 'content-type': 'application/yaml' } });
    expect(res.status, JSON.stringify(res.body)).to.be.oneOf([200, 201]);
    return res.body;
  };
  const connectHost = async (username = 'scada') => {
    const h = await SparkplugHost.connect(`mqtt://127.0.0.1:${gw.ports.mqtt}`, GROUP, { username, password: GOOD_PASSWORD, protocolVersion: 4 });
    hosts.push(h);
    return h;
  };

  before(async () => {
    plc = await startModbusServer();
    plc.holding[5] = 215;
    plc.holding[10] = 50;
    gw = await startGateway();
    admin = await gw.login();
    await gw.userWith(EDGE_PERMISSIONS, 'edge-gw1');
    await gw.userWith(HOST_PERMISSIONS, 'scada');
    host = await connectHost();
    await putService('press', pressService(plc.port));
  });

  after(async () => {
    for (const h of hosts) await h.end().catch(() => undefined);
    for (const c of clients) await c.endAsync(true).catch(() => undefined);
    await gw?.stop();
    await plc?.stop();
  });

  it('births: NBIRTH (seq 0, bdSeq Int64, Node Control/Rebirth false without alias), then DBIRTH with every metric, its type and value', async () => {
    const nbirth = await host.until((m) => m.type === 'NBIRTH');
    expect(nbirth.topic).to.equal(`spBv1.0/${GROUP}/NBIRTH/${NODE}`);
    expect(nbirth.qos).to.equal(0);
    expect(nbirth.retain).to.equal(false);
    expect(nbirth.payload.seq).to.equal(0);
    expect(nbirth.payload.timestamp).to.be.closeTo(Date.now(), 60_000);
    const bdSeq = metricNamed(nbirth, 'bdSeq')!;
    expect(bdSeq.datatype).to.equal(4); // Int64
    expect(bdSeq.longValue).to.match(/^\d+$/);
    const rebirth = metricNamed(nbirth, 'Node Control/Rebirth')!;
    expect(rebirth).to.include({ datatype: 11, booleanValue: false });
    expect(rebirth.alias).to.equal(undefined);

    const dbirth = await host.until((m) => m.type === 'DBIRTH');
    expect(dbirth.topic).to.equal(`spBv1.0/${GROUP}/DBIRTH/${NODE}/${DEVICE}`);
    expect(dbirth.payload.seq).to.equal(1);
    expect(dbirth.index).to.be.greaterThan(nbirth.index);
    const temperature = metricNamed(dbirth, 'temperature')!;
    expect(temperature.datatype).to.equal(9); // Float
    expect(temperature.floatValue).to.be.closeTo(21.5, 1e-5);
    expect(temperature.alias).to.be.a('number');
    expect(temperature.timestamp).to.be.closeTo(Date.now(), 60_000);
    const setpoint = metricNamed(dbirth, 'setpoint')!;
    expect(setpoint).to.include({ datatype: 3, intValue: 50 }); // Int32
    expect(setpoint.alias).to.not.equal(temperature.alias);
    // Nothing of the device before its birth.
    expect(host.messages.filter((m) => m.type === 'DDATA' && m.index < dbirth.index)).to.deep.equal([]);
  });

  it('reports by exception: a DDATA with only the metric that changed, by alias', async () => {
    const dbirth = await host.until((m) => m.type === 'DBIRTH');
    const temperatureAlias = metricNamed(dbirth, 'temperature')!.alias!;
    const from = host.messages.length;
    plc.holding[5] = 230;
    const ddata = await host.until((m) => m.type === 'DDATA' && metricAliased(m, temperatureAlias) !== undefined, 10_000, from);
    const sent = metricAliased(ddata, temperatureAlias)!;
    expect(sent.floatValue).to.be.closeTo(23, 1e-5);
    expect(sent.name).to.equal(undefined);
    expect(sent.datatype).to.equal(undefined);
    expect(ddata.payload.metrics).to.have.lengthOf(1);
    // The value stays: no more DDATA for it while it does not change (several polls).
    await new Promise((r) => setTimeout(r, 300));
    expect(host.messages.slice(ddata.index + 1).filter((m) => m.type === 'DDATA' && metricAliased(m, temperatureAlias))).to.deep.equal([]);
  });
});
