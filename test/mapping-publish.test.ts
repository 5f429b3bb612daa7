// Readings published as configured (issue 29 point 3): a read endpoint's and a mapping item's
// `qos` and `retain` on the gateway's broker, seen by mqtt.js and mosquitto_sub (a subscriber
// that connects after a reading gets the retained value at once), through a bridge to an
// upstream Mosquitto (a rule of QoS 1 forwards QoS 1), what the service check refuses, and QoS 1
// and retained messages that a QoS 0 one overtakes still delivered (src/mqtt/delivery-order.ts).
import { expect } from 'chai';
import type { IPublishPacket, MqttClient } from 'mqtt';
import { ADMIN_PASSWORD, startGateway, type TestGateway } from './support/harness.js';
import { connect, endAllClients, runCli, subscribe } from './support/mqtt-test-kit.js';
import { startMosquitto, type Mosquitto } from './support/mosquitto.js';
import { bridgeService, bridgeState, putService, upstreamClient } from './bridges-support.js';
import { startModbusServer, until, type ModbusTestServer } from './mapping-support.js';

const plantYaml = (port: number) => `resources:
  plc:
    type: Connection
    properties: {protocol: Modbus, configuration: {host: 127.0.0.1, port: ${port}}}
  level:
    type: Endpoint
    properties: {connection: !ref plc, operation: read, topic: plant/tank/level, address: {table: holding, address: 0}, pollIntervalMs: 50, transform: "$[0]", qos: 1, retain: true}
  flow:
    type: Endpoint
    properties: {connection: !ref plc, operation: read, topic: plant/tank/flow, address: {table: holding, address: 1}, pollIntervalMs: 50, transform: "$[0]"}
  dashboard:
    type: Mapping
    properties:
      mappings:
        - {sourceEndpoint: !ref level, target: board/level, transform: "$ * 10", qos: 2, retain: true}
        - {sourceEndpoint: !ref flow, target: board/flow}
`;

/** Messages as mqtt.js received them, with QoS and retain flag. */
function packets(client: MqttClient): IPublishPacket[] {
  const seen: IPublishPacket[] = [];
  client.on('message', (_t, _p, packet) => seen.push(packet));
  return seen;
}
const latest = (seen: IPublishPacket[], topic: string) => until(() => seen.findLast((p) => p.topic === topic), 10_000, `a message on ${topic}`);

describe('readings published with their QoS and retain flag', function () {
  this.timeout(60_000);
  let gw: TestGateway;
  let admin: string;
  let plc: ModbusTestServer;
  const login = { username: 'admin', password: ADMIN_PASSWORD };

  before(async () => {
    plc = await startModbusServer();
    plc.holding[0] = 42;
    plc.holding[1] = 7;
    gw = await startGateway();
    admin = await gw.login();
  });
  after(async () => {
    await endAllClients();
    await gw?.stop();
    await plc?.stop();
  });

  it('publishes an endpoint\'s readings and a mapping item\'s output with their qos, retained when configured; the others QoS 0, not retained', async () => {
    const live = await connect(gw.ports.mqtt, login);
    const seen = packets(live);
    await subscribe(live, ['plant/#', 'board/#'], 2);
    await putService(gw, admin, 'plant', plantYaml(plc.port));
    expect(await latest(seen, 'plant/tank/level')).to.deep.include({ qos: 1, payload: Buffer.from('42') });
    expect(await latest(seen, 'board/level')).to.deep.include({ qos: 2, payload: Buffer.from('420') });
    expect((await latest(seen, 'plant/tank/flow')).qos).to.equal(0);
    expect((await latest(seen, 'board/flow')).qos).to.equal(0);
    // The API says how each endpoint publishes, defaults filled in (the service page shows it).
    expect((await gw.api('GET', '/api/endpoints/plant.level', { token: admin })).body.publish).to.deep.equal({ topic: 'plant/tank/level', qos: 1, retain: true });
    expect((await gw.api('GET', '/api/endpoints/plant.flow', { token: admin })).body.publish).to.deep.equal({ topic: 'plant/tank/flow', qos: 0, retain: false });

    // A subscriber that comes after the readings gets the retained ones at once, and only those.
    const late = await connect(gw.ports.mqtt, login);
    const retained = packets(late);
    await subscribe(late, ['plant/#', 'board/#'], 1);
    // Waiting for the retained copies themselves: a live reading (polled every 50 ms) may come first.
    await until(() => (retained.some((p) => p.topic === 'plant/tank/level' && p.retain) && retained.some((p) => p.topic === 'board/level' && p.retain) ? true : undefined), 5000, 'the retained readings');
    const first = retained.filter((p) => p.retain);
    expect(first.map((p) => p.topic).sort()).to.deep.equal(['board/level', 'plant/tank/level']);
    expect(first.find((p) => p.topic === 'plant/tank/level')!.payload.toString()).to.equal('42');

    // mosquitto_sub, connecting now: the retained value (retain flag 1, QoS 1), before any new reading.
    plc.holding[0] = 43;
    await until(() => seen.find((p) => p.topic === 'plant/tank/level' && p.payload.toString() === '43'), 10_000, 'the new level');
    const sub = await runCli('mosquitto_sub', ['-h', '127.0.0.1', '-p', String(gw.ports.mqtt), '-u', 'admin', '-P', ADMIN_PASSWORD, '-q', '1', '-t', 'plant/tank/level', '-C', '1', '-W', '5', '-F', '%r %q %p']);
    expect(sub.stdout.trim()).to.equal('1 1 43');
  });

  it('delivers every QoS 1 and retained message though a QoS 0 one published just after overtakes it (aedes numbers them first)', async () => {
    // A QoS 1 message waits for the offline queues and a retained one for the store; the QoS 0
    // one goes out at once. aedes alone drops the older two at a client that got the newer.
    const dp = gw.services.broker!.dataPlane();
    for (const protocolVersion of [4, 5] as const) {
      const client = await connect(gw.ports.mqtt, { ...login, protocolVersion });
      const seen = packets(client);
      await subscribe(client, `order${protocolVersion}/#`, 1);
      for (let i = 0; i < 20; i++) {
        void dp.publish(`order${protocolVersion}/qos1`, Buffer.from(String(i)), { qos: 1 });
        void dp.publish(`order${protocolVersion}/retained`, Buffer.from(String(i)), { retain: true });
        await dp.publish(`order${protocolVersion}/qos0`, Buffer.from(String(i)));
      }
      const count = (topic: string) => seen.filter((p) => p.topic === topic).length;
      await until(() => (count(`order${protocolVersion}/qos1`) === 20 && count(`order${protocolVersion}/retained`) === 20 ? true : undefined), 10_000, `all messages at an MQTT ${protocolVersion === 4 ? '3.1.1' : '5'} client`);
      expect(count(`order${protocolVersion}/qos0`)).to.equal(20);
      await client.endAsync();
    }
  });

  it('refuses qos and retain on a write endpoint and retain on a mapping item that writes, with their paths', async () => {
    const res = await gw.api('PUT', '/api/services/bad', {
      token: admin,
      headers: { 'content-type': 'application/yaml' },
      raw: `resources:
  plc: {type: Connection, properties: {protocol: Modbus, configuration: {host: 127.0.0.1, port: ${plc.port}}}}
  valve: {type: Endpoint, properties: {connection: !ref plc, operation: write, address: {table: holding, address: 3}, qos: 1, retain: true}}
  route: {type: Mapping, properties: {mappings: [{source: in/valve, targetEndpoint: !ref valve, retain: true, qos: 3}]}}
`,
    });
    expect(res.status).to.equal(400);
    expect((res.body.errors as Array<{ path: string; message: string }>).map((e) => `${e.path}: ${e.message}`)).to.have.members([
      'resources.valve.properties.qos: a write endpoint publishes no readings (qos is for read endpoints)',
      'resources.route.properties.mappings[0].qos: must be equal to one of the allowed values (0, 1, 2)',
    ]);
    const fixed = await gw.api('PUT', '/api/services/bad', {
      token: admin,
      headers: { 'content-type': 'application/yaml' },
      raw: `resources:
  plc: {type: Connection, properties: {protocol: Modbus, configuration: {host: 127.0.0.1, port: ${plc.port}}}}
  valve: {type: Endpoint, properties: {connection: !ref plc, operation: write, address: {table: holding, address: 3}}}
  route: {type: Mapping, properties: {mappings: [{source: in/valve, targetEndpoint: !ref valve, retain: true}]}}
`,
    });
    expect(fixed.status).to.equal(400);
    expect(fixed.body.errors).to.deep.equal([{ path: 'resources.route.properties.mappings[0].retain', message: "a write endpoint's <topic>/set is never retained" }]);
    expect((await gw.api('GET', '/api/services/bad', { token: admin })).status).to.equal(404);
  });
});

describe('readings through a bridge keep their QoS', function () {
  this.timeout(60_000);
  let mosquitto: Mosquitto;
  let gw: TestGateway;
  let plc: ModbusTestServer;
  before(async () => {
    mosquitto = await startMosquitto();
    plc = await startModbusServer();
    plc.holding[0] = 42;
    plc.holding[1] = 7;
    gw = await startGateway();
  });
  after(async () => {
    await endAllClients();
    await gw?.stop();
    await plc?.stop();
    await mosquitto?.close();
  });

  it('forwards the readings of a qos 1 endpoint at QoS 1 under a QoS 1 rule, and those of a qos 0 endpoint at QoS 0', async () => {
    const admin = await gw.login();
    await gw.userWith([{ context: 'mqtt', resource: 'plant/#', operation: 'read' }], 'bridge-up');
    const up = await upstreamClient(mosquitto.port);
    const seen = packets(up.client);
    await subscribe(up.client, 'site/#', 1);
    await putService(gw, admin, 'uplink', bridgeService('cloud', { urls: [mosquitto.url], runAs: 'bridge-up', topics: [{ pattern: 'plant/#', direction: 'out', qos: 1, remotePrefix: 'site/' }] }));
    await bridgeState(gw, 'uplink.cloud');
    await putService(gw, admin, 'plant', plantYaml(plc.port));
    expect(await latest(seen, 'site/plant/tank/level')).to.deep.include({ qos: 1, payload: Buffer.from('42') });
    expect((await latest(seen, 'site/plant/tank/flow')).qos).to.equal(0);
    // Retained as published: a late upstream subscriber gets the level at once.
    const late = await upstreamClient(mosquitto.port);
    const retained = packets(late.client);
    await subscribe(late.client, 'site/plant/tank/level', 1);
    expect(await until(() => retained[0], 5000, 'the retained level')).to.deep.include({ topic: 'site/plant/tank/level', retain: true, qos: 1 });
  });
});
