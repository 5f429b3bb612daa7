// Control actions audited (issue 30, docs/security.md "Audit trail"): every write to a field
// device is an audit event — who asked (the MQTT client and its user, or a mapping acting for the
// publisher of its source), which endpoint, the value and the result (written, the device's
// refusal, the endpoint's filter) — in GET /api/audit (category control, endpoint filter) and in
// the endpoint's view (lastWrite). A real Modbus peer, the real broker, mqtt.js clients.
import { expect } from 'chai';
import type { MqttClient } from 'mqtt';
import { startModbusServer, until, type ModbusTestServer } from './mapping-support.js';
import { GOOD_PASSWORD, startGateway, type TestGateway } from './support/harness.js';
import { collect, connect, endAllClients, subscribe } from './support/mqtt-test-kit.js';

interface AuditItem {
  action: string;
  category: string;
  outcome: 'success' | 'failure';
  actor?: { userId: string; username: string };
  source?: string;
  details: Record<string, unknown>;
}

const serviceYaml = (port: number) => `
resources:
  plc:
    type: Connection
    properties:
      protocol: Modbus
      configuration: {host: 127.0.0.1, port: ${port}, timeoutMs: 1000}
  setpoint:
    type: Endpoint
    properties:
      connection: !ref plc
      operation: write
      address: {table: holding, address: 3}
  limited:
    type: Endpoint
    properties:
      connection: !ref plc
      operation: write
      address: {table: holding, address: 4}
      filter: "$ < 1000"
  copy:
    type: Mapping
    properties:
      mappings:
        - {source: cmd/setpoint, targetEndpoint: !ref setpoint}
`;

const mqtt = (resource: string, operation: 'read' | 'write' | 'readWrite') => ({ context: 'mqtt' as const, resource, operation });
const http = (resource: string) => ({ context: 'http' as const, resource, operation: 'read' as const });

describe('control actions in the audit trail', function () {
  this.timeout(60_000);
  let gw: TestGateway;
  let plc: ModbusTestServer;
  let admin: string;
  let operator: { id: string; username: string; token: string };
  let hmi: MqttClient;

  before(async () => {
    plc = await startModbusServer();
    gw = await startGateway({ overrides: { audit: { maxEventsPerSecond: 40 } } });
    admin = await gw.login();
    const put = await gw.api('PUT', '/api/services/valve', { token: admin, raw: serviceYaml(plc.port), headers: { 'content-type': 'application/yaml' } });
    expect(put.status, JSON.stringify(put.body)).to.be.oneOf([200, 201]);
    operator = await gw.userWith([mqtt('services/valve/#', 'readWrite'), mqtt('cmd/#', 'write'), http('/api/endpoints/#')], 'operator');
    await gw.mapping.runtime()!.waitFor(() => ['valve.setpoint', 'valve.limited'].every((id) => gw.mapping.runtime()!.getEndpoint(id).currentState === 'enabled') && gw.mapping.runtime()!.getMapping('valve.copy').currentState === 'enabled');
    hmi = await connect(gw.ports.mqtt, { clientId: 'hmi-1', username: 'operator', password: GOOD_PASSWORD });
  });
  after(async () => {
    await endAllClients();
    await gw?.stop();
    await plc?.stop();
  });

  const audit = async (query: Record<string, string>) => {
    await gw.services.audit.settled();
    const res = await gw.api<{ items: AuditItem[] }>('GET', `/api/audit?${new URLSearchParams(query).toString()}`, { token: admin });
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    return res.body.items;
  };
  /** Publishes on <topic>/set and waits for its acknowledgement on <topic>/set/result. */
  const write = async (client: MqttClient, endpoint: string, value: string) => {
    const inbox = collect(client);
    await subscribe(client, `services/valve/${endpoint}/set/result`, 1);
    await client.publishAsync(`services/valve/${endpoint}/set`, value, { qos: 1 });
    const result = await inbox.until((m) => m.topic === `services/valve/${endpoint}/set/result`);
    return JSON.parse(result.payload) as { ok: boolean; error?: string };
  };

  it('records a write over MQTT <topic>/set: the user, the client id, the endpoint, the value, written', async () => {
    expect(await write(hmi, 'setpoint', '4321')).to.include({ ok: true });
    expect(plc.holding[3]).to.equal(4321);
    const [event] = await audit({ category: 'control', endpoint: 'valve.setpoint' });
    expect(event).to.deep.include({ action: 'endpoint written', category: 'control', outcome: 'success', actor: { userId: operator.id, username: 'operator' } });
    expect(event!.details).to.deep.include({ endpoint: 'valve.setpoint', topic: 'services/valve/setpoint/set', value: 4321, clientId: 'hmi-1' });
    // The MQTT client's address is the event's source, as a request's is (issue 38 point 9).
    expect(event!.source).to.match(/^(::ffff:)?127\.0\.0\.1$/);
    // The endpoint's view says the same, in words the UI shows.
    const view = await gw.api('GET', '/api/endpoints/valve.setpoint', { token: operator.token });
    expect(view.status).to.equal(200);
    expect(view.body.lastWrite, JSON.stringify(view.body)).to.deep.include({ ok: true, value: 4321, by: 'operator', clientId: 'hmi-1' });
    expect(Date.parse(view.body.lastWrite.at)).to.be.closeTo(Date.now(), 30_000);
    // The journal has the event too (the trail is its bounded, queryable copy).
    expect(gw.logs().some((l) => l.message === 'endpoint written' && l.audit === true && l.endpoint === 'valve.setpoint')).to.equal(true);
  });

  it("records the device's refusal and the endpoint filter's as failed control actions, with the reason", async () => {
    plc.exception = 2;
    try {
      expect(await write(hmi, 'setpoint', '12')).to.include({ ok: false });
    } finally {
      plc.exception = undefined;
    }
    const [refused] = await audit({ endpoint: 'valve.setpoint', outcome: 'failure' });
    expect(refused).to.deep.include({ action: 'endpoint write failed', outcome: 'failure' });
    expect(refused!.details).to.include({ value: 12, clientId: 'hmi-1' });
    expect(String(refused!.details.error)).to.match(/exception|illegal/i);
    expect(plc.holding[3]).to.equal(4321);

    expect(await write(hmi, 'limited', '5000')).to.include({ ok: false, error: 'dropped by the endpoint filter' });
    const [filtered] = await audit({ endpoint: 'valve.limited' });
    expect(filtered).to.deep.include({ action: 'endpoint write failed', actor: { userId: operator.id, username: 'operator' } });
    expect(filtered!.details).to.include({ value: 5000, error: 'dropped by the endpoint filter' });
    expect((await gw.api('GET', '/api/endpoints/valve.limited', { token: admin })).body.lastWrite).to.deep.include({ ok: false, value: 5000, error: 'dropped by the endpoint filter', by: 'operator' });
  });

  it('records a write a mapping makes for the publisher of its source, through the mapping', async () => {
    const written = new Promise<{ values: number[] }>((resolve) => plc.events.once('write', resolve));
    await hmi.publishAsync('cmd/setpoint', '77', { qos: 1 });
    expect((await written).values).to.deep.equal([77]);
    const event = await until(async () => (await audit({ endpoint: 'valve.setpoint', action: 'endpoint written' })).find((e) => e.details.value === 77));
    expect(event).to.deep.include({ actor: { userId: operator.id, username: 'operator' } });
    expect(event.details).to.include({ via: 'mapping valve.copy', clientId: 'hmi-1' });
    expect(event.source).to.match(/^(::ffff:)?127\.0\.0\.1$/);
  });

  it('records a write by a user who may not see the endpoint; only readers of the audit trail see the event', async () => {
    const blind = await gw.userWith([mqtt('services/valve/setpoint/set', 'write')], 'blind-writer');
    const client = await connect(gw.ports.mqtt, { clientId: 'blind-1', username: 'blind-writer', password: GOOD_PASSWORD });
    const written = new Promise<{ values: number[] }>((resolve) => plc.events.once('write', resolve));
    await client.publishAsync('services/valve/setpoint/set', '55', { qos: 1 });
    expect((await written).values).to.deep.equal([55]);
    const event = await until(async () => (await audit({ user: 'blind-writer', category: 'control' }))[0]);
    expect(event.details).to.include({ endpoint: 'valve.setpoint', value: 55, clientId: 'blind-1' });
    // The writer sees neither the endpoint nor the trail; the operator sees the endpoint, not the trail.
    expect((await gw.api('GET', '/api/endpoints/valve.setpoint', { token: blind.token })).status).to.equal(403);
    expect((await gw.api('GET', '/api/audit?category=control', { token: blind.token })).status).to.equal(403);
    expect((await gw.api('GET', '/api/audit?endpoint=valve.setpoint', { token: operator.token })).status).to.equal(403);
  });

  it('answers 400 to an unknown category, filter or an empty endpoint, and filters by category alone', async () => {
    for (const query of ['category=writes', 'endpoint=', 'device=valve.setpoint']) {
      const res = await gw.api('GET', `/api/audit?${query}`, { token: admin });
      expect(res.status, query).to.equal(400);
    }
    const control = await audit({ category: 'control', limit: '500' });
    expect(control.length).to.be.greaterThanOrEqual(4);
    expect(control.every((e) => e.category === 'control' && e.action.startsWith('endpoint writ'))).to.equal(true);
    const signIns = await audit({ category: 'sign-in', limit: '500' });
    expect(signIns.map((e) => e.action)).to.include('login');
  });

  it('keeps a write storm off the trail: beyond audit.maxEventsPerSecond the events are counted in one record', async () => {
    await until(async () => ((await audit({ endpoint: 'valve.setpoint', action: 'endpoint written' })).length > 0 ? true : undefined));
    const before = (await audit({ endpoint: 'valve.setpoint', action: 'endpoint written', limit: '500' })).length;
    const storm = 200;
    let seen = 0;
    const done = new Promise<void>((resolve) => {
      const onWrite = () => {
        if (++seen < storm) return;
        plc.events.off('write', onWrite);
        resolve();
      };
      plc.events.on('write', onWrite);
    });
    const from = new Date().toISOString();
    for (let i = 0; i < storm; i++) hmi.publish('services/valve/setpoint/set', String(1000 + i), { qos: 0 });
    await done;
    const stored = (await audit({ endpoint: 'valve.setpoint', action: 'endpoint written', limit: '500' })).length - before;
    expect(stored).to.be.lessThan(storm);
    expect(stored).to.be.greaterThan(0);
    // Once the rate allows again, a record says how many the trail lacks (one per burst kept out).
    // (A write that itself finds no token yet is counted in the next record: one more per attempt at most.)
    let attempts = 0;
    const counted = await until(async () => {
      attempts++;
      await write(hmi, 'setpoint', '1');
      const n = (await audit({ action: 'audit events not stored', from, limit: '500' })).reduce((sum, e) => sum + Number(e.details.count), 0);
      return n >= storm - stored ? n : undefined;
    }, 10_000, 'the records of what the trail lacks');
    expect(counted).to.be.within(storm - stored, storm - stored + attempts - 1);
  });
});
