// sessionPresent (issue 12 point 3, MQTT-3.2.2-2 of 3.1.1, §3.2.2.1.1 of MQTT 5): a client that
// asks to resume its session gets 1 whenever that session exists, also when it holds no
// subscriptions; 0 at a first connect, after a clean session, for an expired session and on
// every refusal. The gatewayd broker on a real LMDB store, mqtt.js 3.1.1 and 5, mosquitto_pub
// and mosquitto_sub (their CONNACK read through a loopback relay).
import { rmSync } from 'node:fs';
import { expect } from 'chai';
import { openStore, type Store } from '../src/store/index.js';
import { tempDir } from './support/harness.js';
import { sessionPresent } from './support/broker-crash-kit.js';
import { clientOptions, connackOf, connackRecorder, connect, connectUrl, connectWithInbox, endAllClients, makeCerts, runCli, startBroker, subscribe, type Certs, type TestBroker } from './support/mqtt-test-kit.js';
import { StaticMqttAccess } from './support/static-mqtt-access.js';

describe('sessionPresent for a returning session (MQTT-3.2.2-2)', function () {
  this.timeout(30_000);
  let certs: Certs;
  let dir: string;
  let store: Store;
  let tb: TestBroker;
  let access: StaticMqttAccess;

  before(async () => {
    certs = await makeCerts();
  });
  after(async () => {
    await certs?.cleanup();
  });
  beforeEach(async () => {
    dir = tempDir('gatewayd-session-present-');
    store = openStore({ dir });
    access = new StaticMqttAccess([
      { username: 'device', password: 'device-pw', permissions: [{ resource: 'plant/#', operation: 'readWrite' }] },
      { username: 'other', password: 'other-pw', permissions: [{ resource: 'plant/#', operation: 'readWrite' }] },
      { username: 'banned', password: 'banned-pw', forbidden: true },
    ]);
    tb = await startBroker(access, certs, {}, { store });
  });
  afterEach(async () => {
    await endAllClients();
    await tb.stop();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const device = { username: 'device', password: 'device-pw' };

  it('MQTT 3.1.1 (mqtt.js): 0 at the first connect, 1 when the client comes back to its session without subscriptions, 0 after a clean session', async () => {
    const quiet = { ...device, clientId: 'quiet-4', clean: false };
    expect(await connackOf(tb.port, quiet)).to.deep.equal({ sessionPresent: false, code: 0 });
    expect(await connackOf(tb.port, quiet)).to.deep.equal({ sessionPresent: true, code: 0 });
    // With subscriptions, as aedes answers by itself.
    const busy = await connect(tb.port, { ...device, clientId: 'busy-4', clean: false });
    await subscribe(busy, 'plant/cmd/#', 1);
    await busy.endAsync();
    expect(await connackOf(tb.port, { ...device, clientId: 'busy-4', clean: false })).to.deep.equal({ sessionPresent: true, code: 0 });
    // A clean session ends the stored one [MQTT-3.1.2-6]: nothing to come back to afterwards.
    expect(await connackOf(tb.port, { ...quiet, clean: true })).to.deep.equal({ sessionPresent: false, code: 0 });
    expect(await connackOf(tb.port, quiet)).to.deep.equal({ sessionPresent: false, code: 0 });
  });

  it('MQTT 5 (mqtt.js): clean start 0 finds a session that has not expired, with or without subscriptions; clean start 1 and expiry 0 find none', async () => {
    const quiet = { ...device, protocolVersion: 5 as const, clientId: 'quiet-5', clean: false, properties: { sessionExpiryInterval: 3600 } };
    expect(await connackOf(tb.port, quiet)).to.deep.equal({ sessionPresent: false, code: 0 });
    expect(await connackOf(tb.port, quiet)).to.deep.equal({ sessionPresent: true, code: 0 });
    // Clean start 1 discards the session and starts a new one (that outlives this connection).
    expect(await connackOf(tb.port, { ...quiet, clean: true })).to.deep.equal({ sessionPresent: false, code: 0 });
    expect(await connackOf(tb.port, quiet)).to.deep.equal({ sessionPresent: true, code: 0 });
    // Session expiry 0: the session ends with the connection.
    const brief = { ...device, protocolVersion: 5 as const, clientId: 'brief-5', clean: false, properties: { sessionExpiryInterval: 0 } };
    expect(await connackOf(tb.port, brief)).to.deep.equal({ sessionPresent: false, code: 0 });
    expect(await connackOf(tb.port, brief)).to.deep.equal({ sessionPresent: false, code: 0 });
  });

  it('an expired MQTT 5 session is not resumed: 0, no subscription, no queued message', async () => {
    const gone = { ...device, protocolVersion: 5 as const, clientId: 'gone-5', clean: false, properties: { sessionExpiryInterval: 1 } };
    const first = await connect(tb.port, gone);
    await subscribe(first, 'plant/cmd/#', 1);
    await first.endAsync();
    const publisher = await connect(tb.port, device);
    await publisher.publishAsync('plant/cmd/1', 'stale', { qos: 1 });
    // The interval is one second: let it pass (no event marks it).
    await new Promise((resolve) => setTimeout(resolve, 1200));
    const back = await connectWithInbox(tb.port, gone);
    expect(sessionPresent(back.client)).to.equal(false);
    await publisher.publishAsync('plant/cmd/2', 'fresh', { qos: 1 });
    const ping = await connectWithInbox(tb.port, device);
    await subscribe(ping.client, 'plant/cmd/#', 1);
    await publisher.publishAsync('plant/cmd/3', 'marker', { qos: 1 });
    await ping.inbox.until((m) => m.topic === 'plant/cmd/3');
    expect(back.inbox.messages, 'no restored subscription, no queued message').to.deep.equal([]);
  });

  it('over WebSocket and TLS as over TCP', async () => {
    const { host: _h, port: _p, ...base } = clientOptions(0);
    const ws = { ...base, ...device, clientId: 'ws-quiet', clean: false };
    const viaWs = async () => {
      const c = await connectUrl(`ws://127.0.0.1:${tb.httpPort}/mqtt`, ws);
      const present = sessionPresent(c);
      await c.endAsync();
      return present;
    };
    expect([await viaWs(), await viaWs()]).to.deep.equal([false, true]);
    const tls = { ...device, protocol: 'mqtts' as const, port: tb.tlsPort, ca: certs.caCert, servername: 'localhost', clientId: 'tls-quiet', clean: false };
    expect([await connackOf(tb.tlsPort, tls), await connackOf(tb.tlsPort, tls)]).to.deep.equal([{ sessionPresent: false, code: 0 }, { sessionPresent: true, code: 0 }]);
  });

  it('a takeover of a live persistent session says 1', async () => {
    const quiet = { ...device, clientId: 'live-4', clean: false };
    await connect(tb.port, quiet);
    expect(await connackOf(tb.port, quiet)).to.deep.equal({ sessionPresent: true, code: 0 });
  });

  it('refusals say 0 for an existing session: bad password (4 / 0x86), not authorized (5 / 0x87), another user (2 / 0x85)', async () => {
    for (const protocolVersion of [4, 5] as const) {
      const id = `owned-${protocolVersion}`;
      const v5 = protocolVersion === 5 ? { properties: { sessionExpiryInterval: 3600 } } : {};
      const quiet = { ...device, protocolVersion, clientId: id, clean: false, ...v5 };
      await connackOf(tb.port, quiet);
      expect(await connackOf(tb.port, { ...quiet, password: 'wrong' })).to.deep.equal({ sessionPresent: false, code: protocolVersion === 5 ? 0x86 : 4 });
      expect(await connackOf(tb.port, { ...quiet, username: 'banned', password: 'banned-pw' })).to.deep.equal({ sessionPresent: false, code: protocolVersion === 5 ? 0x87 : 5 });
      expect(await connackOf(tb.port, { ...quiet, username: 'other', password: 'other-pw' })).to.deep.equal({ sessionPresent: false, code: protocolVersion === 5 ? 0x85 : 2 });
      expect(await connackOf(tb.port, quiet), 'the session is still there').to.deep.equal({ sessionPresent: true, code: 0 });
    }
  });

  it('a persistent session stays its owner\'s across a broker restart: another user is refused its client id (2 / 0x85), until the owner is deleted', async () => {
    for (const protocolVersion of [4, 5] as const) {
      const v5 = protocolVersion === 5 ? { properties: { sessionExpiryInterval: 3600 } } : {};
      const mine = { ...device, protocolVersion, clientId: `mine-${protocolVersion}`, clean: false, ...v5 };
      const first = await connect(tb.port, mine);
      await subscribe(first, 'plant/cmd/#', 1);
      await first.endAsync();
    }
    await tb.stop();
    await store.close();
    store = openStore({ dir });
    tb = await startBroker(access, certs, {}, { store });
    for (const protocolVersion of [4, 5] as const) {
      const v5 = protocolVersion === 5 ? { properties: { sessionExpiryInterval: 3600 } } : {};
      const mine = { ...device, protocolVersion, clientId: `mine-${protocolVersion}`, clean: false, ...v5 };
      expect(await connackOf(tb.port, { ...mine, username: 'other', password: 'other-pw' }), 'another user').to.deep.equal({ sessionPresent: false, code: protocolVersion === 5 ? 0x85 : 2 });
      expect(await connackOf(tb.port, { ...mine, username: 'other', password: 'other-pw', clean: true }), 'another user, clean').to.deep.equal({ sessionPresent: false, code: protocolVersion === 5 ? 0x85 : 2 });
      expect(await connackOf(tb.port, mine), 'the owner').to.deep.equal({ sessionPresent: true, code: 0 });
    }
    access.deleteUser('device');
    expect((await connackOf(tb.port, { username: 'other', password: 'other-pw', clientId: 'mine-4', clean: false })).code, 'released by the deletion').to.equal(0);
  });

  it('mosquitto_pub and mosquitto_sub -c (-V mqttv311 and mqttv5) receive 1 when they come back', async () => {
    const relay = await connackRecorder(tb.port);
    try {
      const common = ['-h', '127.0.0.1', '-p', String(relay.port), '-u', 'device', '-P', 'device-pw', '-c'];
      for (const version of ['mqttv311', 'mqttv5']) {
        // mosquitto_pub: a persistent session that never subscribes.
        const pub = [...common, '-V', version, '-i', `pub-${version}`, '-t', 'plant/state', '-m', 'on', '-q', '1'];
        for (let i = 0; i < 2; i++) expect((await runCli('mosquitto_pub', pub)).code).to.equal(0);
        const sub = [...common, '-V', version, '-i', `sub-${version}`, '-t', 'plant/cmd/#', '-q', '1', '-E'];
        for (let i = 0; i < 2; i++) expect((await runCli('mosquitto_sub', sub)).code).to.equal(0);
      }
      expect(relay.connacks).to.deep.equal([false, true, false, true, false, true, false, true].map((sessionPresent) => ({ sessionPresent, code: 0 })));
    } finally {
      await relay.close();
    }
  });
});
