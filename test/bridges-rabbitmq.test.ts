// A bridge to a real RabbitMQ 3.10 node with its MQTT plugin (MQTT 3.1.1 only, no bridge
// protocol level, no no-local): the password comes from a parameter (!ref) and never shows; the
// bridge falls back from the bridge protocol level RabbitMQ refuses; its own messages that
// RabbitMQ sends back are recognised (no duplicates, no loop); its persistent session upstream
// keeps what arrived for its in rules while the uplink was cut (TCP proxy).
import { expect } from 'chai';
import { startRabbitKit, type RabbitKit, type RabbitNode } from './support/rabbitmq.js';
import { ADMIN_PASSWORD, startGateway, type TestGateway } from './support/harness.js';
import { collect, connect, endAllClients, subscribe } from './support/mqtt-test-kit.js';
import { startTcpProxy, type TcpProxy } from './support/tcp-proxy.js';
import { bridgeState, putService } from './bridges-support.js';

describe('bridge to RabbitMQ 3.10 (MQTT plugin, 3.1.1)', function () {
  this.timeout(120_000);
  let kit: RabbitKit;
  let node: RabbitNode;
  let proxy: TcpProxy;
  let gw: TestGateway;

  before(async () => {
    kit = await startRabbitKit();
    node = await kit.startNode();
    await node.addUser('site-a-gw1', 'rabbit-Secret-42');
    await node.addUser('historian', 'historian-pass');
    proxy = await startTcpProxy({ port: node.mqttPort });
    gw = await startGateway();
  });
  after(async () => {
    await endAllClients();
    await gw?.stop();
    await proxy?.close();
    await kit?.destroy();
  });

  it('forwards and brings back with prefixes, recognises its own echoes, and gets what upstream kept for it during an outage', async () => {
    const admin = await gw.login();
    await gw.userWith([{ context: 'mqtt', resource: 'plant/#', operation: 'readWrite' }], 'bridge-rabbit');
    const yaml = [
      'parameters:',
      '  cloudPassword: {type: String, default: rabbit-Secret-42}',
      'resources:',
      '  uplink:',
      '    type: Bridge',
      '    properties:',
      `      remote: {urls: ["mqtt://127.0.0.1:${proxy.port}"], protocolVersion: 4, clientId: site-a-gw1, username: site-a-gw1, password: !ref cloudPassword, keepaliveSeconds: 2, connectTimeoutMs: 3000, reconnectMaxSeconds: 1}`,
      '      runAs: bridge-rabbit',
      '      topics:',
      '        - {pattern: "plant/#", direction: both, qos: 1, remotePrefix: "site-a/"}',
      '',
    ].join('\n');
    await putService(gw, admin, 'rabbit', yaml);
    const view = await bridgeState(gw, 'rabbit.uplink', (v) => v.currentState === 'connected', 30_000);
    expect(JSON.stringify(view)).not.to.include('rabbit-Secret-42');
    // RabbitMQ refused the bridge protocol level (0x84); the bridge asked again at once without it.
    expect(gw.logs().filter((l) => l.message === 'bridge connection failed, retrying')).to.deep.equal([]);
    expect(gw.logs().filter((l) => String(l.message).startsWith('upstream refused the MQTT 3.1.1 bridge protocol level'))).to.have.lengthOf(1);

    const upstream = await connect(node.mqttPort, { username: 'historian', password: 'historian-pass', clientId: 'historian' });
    const upInbox = collect(upstream);
    await subscribe(upstream, 'site-a/#', 1);
    const device = await connect(gw.ports.mqtt, { username: 'admin', password: ADMIN_PASSWORD });
    const local = collect(device);
    await subscribe(device, 'plant/#', 1);

    await device.publishAsync('plant/line-1/temp', '21.5', { qos: 1 });
    await upInbox.until((m) => m.topic === 'site-a/plant/line-1/temp' && m.payload === '21.5', 10_000);
    await upstream.publishAsync('site-a/plant/line-1/setpoint', '40', { qos: 1 });
    await local.until((m) => m.topic === 'plant/line-1/setpoint', 10_000);
    // A marker through both directions: whatever loops or echoes would have arrived before it.
    await upstream.publishAsync('site-a/plant/marker', 'm', { qos: 1 });
    await local.until((m) => m.topic === 'plant/marker', 10_000);
    await upInbox.until((m) => m.topic === 'site-a/plant/marker', 10_000);
    expect(local.messages.filter((m) => m.topic === 'plant/line-1/temp'), 'the echo of its own message is dropped').to.have.lengthOf(1);
    expect(upInbox.messages.filter((m) => m.topic === 'site-a/plant/line-1/setpoint'), 'what came in is not sent back').to.have.lengthOf(1);
    expect((await gw.api('GET', '/api/bridges/rabbit.uplink', { token: admin })).body.counters.echoes).to.equal(1);

    // The uplink goes down: upstream keeps the bridge's messages (persistent session), the gateway its own.
    proxy.cut();
    await bridgeState(gw, 'rabbit.uplink', (v) => v.currentState !== 'connected');
    await upstream.publishAsync('site-a/plant/line-1/setpoint', '41', { qos: 1 });
    for (const n of ['1', '2', '3']) await device.publishAsync('plant/line-1/count', n, { qos: 1 });
    proxy.restore();
    await local.until((m) => m.topic === 'plant/line-1/setpoint' && m.payload === '41', 20_000);
    await upInbox.until((m) => m.topic === 'site-a/plant/line-1/count' && m.payload === '3', 20_000);
    expect(upInbox.messages.filter((m) => m.topic === 'site-a/plant/line-1/count').map((m) => m.payload)).to.deep.equal(['1', '2', '3']);
  });
});
