// Broker-level tests: the real gatewayd broker on 127.0.0.1 (port 0) driven by mqtt.js and by the
// mosquitto command-line clients. Identity and permissions come from StaticMqttAccess, which
// decides with the real PermissionSet.

import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import {
  closed,
  collect,
  connackCode,
  connectWithInbox,
  connect,
  endAllClients,
  makeCerts,
  runCli,
  startBroker,
  startMosquittoSub,
  subscribe,
  type Certs,
  type TestBroker,
} from './support/mqtt-test-kit.js';
import { StaticMqttAccess, tokenFingerprint } from './support/static-mqtt-access.js';

const TOKEN_A = 'tok-A-' + randomUUID();
const TOKEN_B = 'tok-B-' + randomUUID();

function users() {
  return new StaticMqttAccess([
    { username: 'writer', password: 'writer-pw', permissions: [{ resource: 'data/#', operation: 'write' }, { resource: 'ctl/#', operation: 'write' }] },
    { username: 'reader', password: 'reader-pw', permissions: [{ resource: 'data/#', operation: 'read' }, { resource: 'ctl/#', operation: 'read' }] },
    { username: 'wild', password: 'wild-pw', permissions: [{ resource: 'a/+/c', operation: 'read' }] },
    { username: 'prefixed', password: 'prefixed-pw', publishPrefix: 'tenantA/', permissions: [{ resource: 'tenantA/#', operation: 'write' }, { resource: 'x/#', operation: 'readWrite' }] },
    { username: 'tenantReader', password: 'tr-pw', permissions: [{ resource: 'tenantA/#', operation: 'read' }, { resource: 'x/#', operation: 'read' }] },
    { username: 'root', password: 'root-pw', permissions: [{ resource: '#', operation: 'readWrite' }, { resource: '$SYS/#', operation: 'readWrite' }] },
    { username: 'forbidden', password: 'forbidden-pw', forbidden: true },
    { username: 'broken', password: 'broken-pw', broken: true },
    { username: 'device', password: 'device-pw', tokens: [TOKEN_A, TOKEN_B], permissions: [{ resource: 'dev/#', operation: 'readWrite' }] },
    { username: 'victim', password: 'victim-pw', permissions: [{ resource: 'v/#', operation: 'readWrite' }] },
  ]);
}

describe('mqtt broker', function () {
  let certs: Certs;
  let access: StaticMqttAccess;
  let tb: TestBroker;

  before(async function () {
    certs = await makeCerts();
  });
  after(async function () {
    await certs?.cleanup();
  });
  beforeEach(async function () {
    access = users();
    tb = await startBroker(access, certs);
  });
  afterEach(async function () {
    await endAllClients();
    await tb?.stop();
  });

  const login = (username: string, password: string, extra: object = {}) => ({ username, password, ...extra });

  describe('connect', function () {
    it('accepts a user with the right password and counts the client', async function () {
      const c = await connect(tb.port, login('writer', 'writer-pw'));
      expect(c.connected).to.equal(true);
      expect(tb.broker.stats().clients).to.equal(1);
      expect(access.credentialsSeen.at(-1)).to.include({ username: 'writer' });
    });

    it('refuses a bad password and an unknown user with CONNACK 4', async function () {
      expect(await connackCode(tb.port, login('writer', 'wrong'))).to.equal(4);
      expect(await connackCode(tb.port, login('nobody', 'x'))).to.equal(4);
      expect(tb.broker.stats().connectsRefused).to.equal(2);
    });

    it('answers ForbiddenError with CONNACK 5 (not authorized)', async function () {
      expect(await connackCode(tb.port, login('forbidden', 'forbidden-pw'))).to.equal(5);
    });

    it('answers an unexpected access failure with CONNACK 3 and logs it', async function () {
      expect(await connackCode(tb.port, login('broken', 'broken-pw'))).to.equal(3);
      expect(tb.logs.some((l) => l.level === 'error' && l.message === 'mqtt authentication error')).to.equal(true);
    });

    it('refuses an anonymous client with CONNACK 4 without asking the access port', async function () {
      expect(await connackCode(tb.port, {})).to.equal(4);
      expect(access.authCalls).to.equal(0);
    });

    it('never logs passwords or tokens', async function () {
      await connackCode(tb.port, login('writer', 'secret-wrong-pw'));
      await connackCode(tb.port, login('device', TOKEN_A));
      const text = tb.logText();
      expect(text).to.include('mqtt.connect.refused');
      expect(text).not.to.include('secret-wrong-pw');
      expect(text).not.to.include(TOKEN_A);
      expect(text).not.to.include(tokenFingerprint(TOKEN_A));
    });

    it('refuses a client id longer than maxClientIdLength with CONNACK 2', async function () {
      expect(await connackCode(tb.port, login('writer', 'writer-pw', { clientId: 'c'.repeat(129) }))).to.equal(2);
      expect(await connackCode(tb.port, login('writer', 'writer-pw', { clientId: 'c'.repeat(128) }))).to.equal(0);
    });

    it('accepts keepalive 0 (as MQTT allows); refuses an MQTT 3.1.1 keepalive above maxKeepaliveSeconds with CONNACK 2; tells an MQTT 5 client the server keep alive', async function () {
      expect(await connackCode(tb.port, login('writer', 'writer-pw', { keepalive: 3601 }))).to.equal(2);
      expect(await connackCode(tb.port, login('writer', 'writer-pw', { keepalive: 0 }))).to.equal(0);
      const zero5 = await connect(tb.port, login('writer', 'writer-pw', { keepalive: 0, protocolVersion: 5 }));
      expect((zero5 as unknown as { connackPacket: { properties?: { serverKeepAlive?: number } } }).connackPacket.properties?.serverKeepAlive, 'MQTT 5 keepalive 0 kept').to.equal(undefined);
      expect(await connackCode(tb.port, login('writer', 'writer-pw', { keepalive: 3600 }))).to.equal(0);
      const v5 = await connect(tb.port, login('writer', 'writer-pw', { keepalive: 7200, protocolVersion: 5 }));
      const props = (v5 as unknown as { connackPacket?: { properties?: Record<string, unknown> } }).connackPacket?.properties ?? {};
      expect(props.serverKeepAlive).to.equal(3600);
    });

    it('refuses keepalive 0 with CONNACK 2 when mqtt.allowKeepaliveZero is false', async function () {
      const strict = await startBroker(access, certs, { allowKeepaliveZero: false });
      try {
        expect(await connackCode(strict.port, login('writer', 'writer-pw', { keepalive: 0 }))).to.equal(2);
        expect(await connackCode(strict.port, login('writer', 'writer-pw', { keepalive: 60 }))).to.equal(0);
        // MQTT 5 is told to ping instead of being refused.
        const v5 = await connect(strict.port, login('writer', 'writer-pw', { keepalive: 0, protocolVersion: 5 }));
        expect((v5 as unknown as { connackPacket: { properties?: { serverKeepAlive?: number } } }).connackPacket.properties?.serverKeepAlive).to.equal(3600);
      } finally {
        await strict.stop();
      }
    });

    it('lets a new connection of the same user take over a client id (MQTT-3.1.4-2)', async function () {
      const first = await connect(tb.port, login('writer', 'writer-pw', { clientId: 'same-id' }));
      const firstClosed = closed(first);
      await connect(tb.port, login('writer', 'writer-pw', { clientId: 'same-id' }));
      await firstClosed;
    });

    it("refuses a client id held by another user's connection with CONNACK 2", async function () {
      const victim = await connect(tb.port, login('victim', 'victim-pw', { clientId: 'victim-device' }));
      expect(await connackCode(tb.port, login('writer', 'writer-pw', { clientId: 'victim-device' }))).to.equal(2);
      expect(victim.connected).to.equal(true);
      // ... and a persistent session of another user, even when it is offline
      const persistent = await connect(tb.port, login('victim', 'victim-pw', { clientId: 'victim-session', clean: false }));
      await persistent.endAsync();
      expect(await connackCode(tb.port, login('writer', 'writer-pw', { clientId: 'victim-session', clean: false }))).to.equal(2);
      expect(await connackCode(tb.port, login('victim', 'victim-pw', { clientId: 'victim-session', clean: false }))).to.equal(0);
    });

    it('refuses a client whose credentials are revoked while its authentication runs', async function () {
      let open!: () => void;
      access.authGate = new Promise<void>((resolve) => (open = resolve));
      const started = new Promise<void>((resolve) => (access.onAuthenticate = resolve));
      const attempt = connackCode(tb.port, login('device', TOKEN_A));
      await started;
      access.revoke('device', [TOKEN_A]);
      open();
      expect(await attempt).to.equal(4);
    });

    it('admits anonymous clients when allowAnonymous, with no permissions at all', async function () {
      await tb.stop();
      tb = await startBroker(access, certs, { allowAnonymous: true });
      const anon = await connect(tb.port, {});
      expect(await subscribe(anon, 'data/#')).to.deep.equal([128]);
      expect(anon.connected).to.equal(true);
      const gone = closed(anon);
      anon.publish('data/x', 'hello');
      await gone;
    });

    it('describes enhanced authentication as unsupported with the real limits as strings', function () {
      const info = tb.broker.enhancedAuthInfo();
      expect(info.result).to.match(/not supported/);
      expect(info.modifiers).to.deep.equal({ max_message_size: '262144', max_inflight_messages: '100', retry_interval: '30' });
    });
  });

  describe('publish and subscribe', function () {
    it('delivers an allowed publish to an allowed subscriber', async function () {
      const sub = await connect(tb.port, login('reader', 'reader-pw'));
      const inbox = collect(sub);
      expect(await subscribe(sub, 'data/#', 1)).to.deep.equal([1]);
      const pub = await connect(tb.port, login('writer', 'writer-pw'));
      await pub.publishAsync('data/t1', 'v1', { qos: 1 });
      expect(await inbox.until((m) => m.topic === 'data/t1')).to.deep.equal({ topic: 'data/t1', payload: 'v1' });
    });

    it('disconnects a client that publishes without write permission', async function () {
      const pub = await connect(tb.port, login('writer', 'writer-pw'));
      const gone = closed(pub);
      pub.publish('secret/x', 'nope');
      await gone;
      expect(tb.broker.stats().publishesRefused).to.equal(1);
    });

    it('refuses $SYS publishes even to a user granted $SYS/#', async function () {
      const root = await connect(tb.port, login('root', 'root-pw'));
      const gone = closed(root);
      root.publish('$SYS/fake/heartbeat', 'x');
      await gone;
    });

    it('applies the publish prefix before the check and delivery', async function () {
      const sub = await connect(tb.port, login('tenantReader', 'tr-pw'));
      const inbox = collect(sub);
      await subscribe(sub, ['tenantA/#', 'x/#']);
      const pub = await connect(tb.port, login('prefixed', 'prefixed-pw'));
      await pub.publishAsync('x/y', 'prefixed', { qos: 1 });
      const m = await inbox.until(() => true);
      expect(m).to.deep.equal({ topic: 'tenantA/x/y', payload: 'prefixed' });
      expect(inbox.messages.filter((x) => x.topic === 'x/y')).to.have.length(0);
    });

    it('checks the prefixed topic: write on the bare topic is not enough', async function () {
      access.setPermissions('prefixed', [{ resource: 'x/#', operation: 'readWrite' }]);
      const pub = await connect(tb.port, login('prefixed', 'prefixed-pw'));
      const gone = closed(pub);
      pub.publish('x/y', 'no');
      await gone;
    });

    it('refuses a forbidden subscription with 0x80 and keeps the client connected', async function () {
      const sub = await connect(tb.port, login('reader', 'reader-pw'));
      const inbox = collect(sub);
      expect(await subscribe(sub, ['secret/#', 'data/ok'], 1)).to.deep.equal([128, 1]);
      expect(sub.connected).to.equal(true);
      const pub = await connect(tb.port, login('writer', 'writer-pw'));
      await pub.publishAsync('data/ok', 'still here', { qos: 1 });
      expect((await inbox.until(() => true)).payload).to.equal('still here');
    });

    it('grants a subscription only when one read permission covers the whole filter', async function () {
      const c = await connect(tb.port, login('wild', 'wild-pw'));
      expect(await subscribe(c, 'a/x/c')).to.deep.equal([0]);
      expect(await subscribe(c, 'a/+/c')).to.deep.equal([0]);
      expect(await subscribe(c, 'a/#')).to.deep.equal([128]);
      expect(await subscribe(c, 'a/x/d')).to.deep.equal([128]);
      expect(await subscribe(c, '#')).to.deep.equal([128]);
      expect(c.connected).to.equal(true);
    });

    it('stops forwarding at once when a read permission is removed, and resumes when re-granted', async function () {
      const sub = await connect(tb.port, login('reader', 'reader-pw'));
      const inbox = collect(sub);
      await subscribe(sub, ['data/#', 'ctl/#'], 1);
      const pub = await connect(tb.port, login('writer', 'writer-pw'));
      await pub.publishAsync('data/1', 'before', { qos: 1 });
      await inbox.until((m) => m.payload === 'before');

      access.setPermissions('reader', [{ resource: 'ctl/#', operation: 'read' }]);
      await pub.publishAsync('data/2', 'after', { qos: 1 });
      // Same publisher, same subscriber: the sentinel is delivered after data/2 would have been.
      await pub.publishAsync('ctl/sentinel', 's1', { qos: 1 });
      await inbox.until((m) => m.payload === 's1');
      expect(inbox.messages.map((m) => m.payload)).to.deep.equal(['before', 's1']);
      expect(sub.connected).to.equal(true);

      access.setPermissions('reader', [{ resource: 'ctl/#', operation: 'read' }, { resource: 'data/#', operation: 'read' }]);
      await pub.publishAsync('data/3', 'again', { qos: 1 });
      await inbox.until((m) => m.payload === 'again');
    });

    it('does not replay queued messages of a persistent session whose permission was removed offline', async function () {
      const first = await connect(tb.port, login('reader', 'reader-pw', { clientId: 'reader-persistent', clean: false }));
      await subscribe(first, ['data/#', 'ctl/#'], 1);
      await first.endAsync();
      access.setPermissions('reader', [{ resource: 'ctl/#', operation: 'read' }]);
      const pub = await connect(tb.port, login('writer', 'writer-pw'));
      await pub.publishAsync('data/secret', 'must not arrive', { qos: 1 });
      await pub.publishAsync('ctl/after', 'queued sentinel', { qos: 1 });
      // Queued in this order: when the sentinel arrives, data/secret would have come before it.
      const back = await connectWithInbox(tb.port, login('reader', 'reader-pw', { clientId: 'reader-persistent', clean: false }));
      await back.inbox.until((m) => m.topic === 'ctl/after');
      expect(back.inbox.messages.map((m) => m.topic)).to.deep.equal(['ctl/after']);
    });

    it('drops cached publish decisions when permissions change', async function () {
      const pub = await connect(tb.port, login('writer', 'writer-pw'));
      await pub.publishAsync('data/x', '1', { qos: 1 });
      access.setPermissions('writer', [{ resource: 'ctl/#', operation: 'write' }]);
      const gone = closed(pub);
      pub.publish('data/x', '2', { qos: 1 });
      await gone;
    });
  });

  describe('live credential changes', function () {
    it("closes only the sessions of revoked tokens within 1 s ('revoked' with fingerprints)", async function () {
      const a = await connect(tb.port, login('device', TOKEN_A));
      const b = await connect(tb.port, login('device', TOKEN_B));
      const p = await connect(tb.port, login('device', 'device-pw'));
      const aClosed = closed(a, 1000);
      access.revoke('device', [TOKEN_A]);
      await aClosed;
      // the others still work
      const inbox = collect(b);
      await subscribe(b, 'dev/#');
      await p.publishAsync('dev/1', 'alive', { qos: 1 });
      await inbox.until((m) => m.payload === 'alive');
      expect(tb.broker.stats().revocationDisconnects).to.equal(1);
    });

    it("closes every session of the user within 1 s ('revoked' without a list)", async function () {
      const a = await connect(tb.port, login('device', TOKEN_A));
      const p = await connect(tb.port, login('device', 'device-pw'));
      const other = await connect(tb.port, login('writer', 'writer-pw'));
      const all = Promise.all([closed(a, 1000), closed(p, 1000)]);
      access.revoke('device');
      await all;
      expect(other.connected).to.equal(true);
    });

    it("closes every session of a deleted user within 1 s and does not publish its will", async function () {
      const watcher = await connect(tb.port, login('root', 'root-pw'));
      const inbox = collect(watcher);
      await subscribe(watcher, ['dev/#', 'ctl/#'], 1);
      const d = await connect(tb.port, login('device', 'device-pw', { will: { topic: 'dev/will', payload: Buffer.from('died'), qos: 1, retain: false } }));
      const gone = closed(d, 1000);
      access.deleteUser('device');
      await gone;
      expect(await connackCode(tb.port, login('device', 'device-pw'))).to.equal(4);
      await watcher.publishAsync('ctl/sentinel', 'x', { qos: 1 });
      await inbox.until((m) => m.topic === 'ctl/sentinel');
      expect(inbox.messages.map((m) => m.topic)).to.deep.equal(['ctl/sentinel']);
    });

    it('publishes the will (prefixed and checked) when a client drops', async function () {
      const watcher = await connect(tb.port, login('tenantReader', 'tr-pw'));
      const inbox = collect(watcher);
      await subscribe(watcher, 'tenantA/#', 1);
      const p = await connect(tb.port, login('prefixed', 'prefixed-pw', { will: { topic: 'status', payload: Buffer.from('offline'), qos: 1, retain: false } }));
      (p as unknown as { stream: { destroy(): void } }).stream.destroy();
      expect(await inbox.until(() => true)).to.deep.equal({ topic: 'tenantA/status', payload: 'offline' });
    });
  });

  describe('mosquitto command-line clients', function () {
    it('mosquitto_sub receives what mosquitto_pub publishes (MQTT 3.1.1 and 3.1)', async function () {
      const sub = await startMosquittoSub(['-h', '127.0.0.1', '-p', String(tb.port), '-u', 'reader', '-P', 'reader-pw', '-t', 'data/#', '-C', '2', '-F', '%t %p', '-q', '1']);
      try {
        const p1 = await runCli('mosquitto_pub', ['-h', '127.0.0.1', '-p', String(tb.port), '-u', 'writer', '-P', 'writer-pw', '-t', 'data/cli', '-m', 'from-cli', '-q', '1']);
        expect(p1.code, p1.stderr).to.equal(0);
        const p2 = await runCli('mosquitto_pub', ['-V', 'mqttv31', '-h', '127.0.0.1', '-p', String(tb.port), '-u', 'writer', '-P', 'writer-pw', '-t', 'data/v31', '-m', 'from-3.1', '-q', '1']);
        expect(p2.code, p2.stderr).to.equal(0);
        const out = await sub.result;
        expect(out.code).to.equal(0);
        const lines = out.stdout.split('\n').filter((l) => l.startsWith('data/'));
        expect(lines).to.deep.equal(['data/cli from-cli', 'data/v31 from-3.1']);
      } finally {
        sub.kill();
      }
    });

    it('mosquitto_pub is refused: bad password (4), not authorized (5), anonymous (4); the same as MQTT 5 reason codes', async function () {
      const base = ['-h', '127.0.0.1', '-p', String(tb.port), '-t', 'data/x', '-m', 'x'];
      const bad = await runCli('mosquitto_pub', [...base, '-u', 'writer', '-P', 'wrong']);
      expect(bad.code).to.not.equal(0);
      expect(bad.stderr).to.match(/bad user name or password/i);
      const forbidden = await runCli('mosquitto_pub', [...base, '-u', 'forbidden', '-P', 'forbidden-pw']);
      expect(forbidden.code).to.not.equal(0);
      expect(forbidden.stderr).to.match(/not authori[sz]ed/i);
      const anon = await runCli('mosquitto_pub', base);
      expect(anon.code).to.not.equal(0);
      expect(anon.stderr).to.match(/bad user name or password/i);
      const v5 = ['-V', 'mqttv5'];
      const v5bad = await runCli('mosquitto_pub', [...base, ...v5, '-u', 'writer', '-P', 'wrong'], 5000);
      expect(v5bad.code).to.not.equal(0);
      expect(v5bad.stderr).to.match(/bad user name or password/i);
      const v5forbidden = await runCli('mosquitto_pub', [...base, ...v5, '-u', 'forbidden', '-P', 'forbidden-pw'], 5000);
      expect(v5forbidden.code).to.not.equal(0);
      expect(v5forbidden.stderr).to.match(/not authori[sz]ed/i);
      const v5ok = await runCli('mosquitto_pub', [...base, ...v5, '-u', 'writer', '-P', 'writer-pw', '-q', '1'], 5000);
      expect(v5ok.code, v5ok.stderr).to.equal(0);
    });

    it('mosquitto_pub -V mqttv5 gets PUBACK and PUBREC 0x87 for a forbidden topic and ends normally; -V mqttv311 loses the connection', async function () {
      const base = ['-h', '127.0.0.1', '-p', String(tb.port), '-u', 'writer', '-P', 'writer-pw', '-t', 'elsewhere/x', '-m', 'x', '-d'];
      for (const qos of ['1', '2']) {
        const v5 = await runCli('mosquitto_pub', [...base, '-V', 'mqttv5', '-q', qos]);
        expect(v5.stderr, `QoS ${qos}`).to.match(/Publish 1 failed: Not authori[sz]ed/i);
        expect(v5.stdout, `QoS ${qos}: it ends the session itself`).to.include('sending DISCONNECT');
        if (qos === '1') expect(v5.stdout).to.include('received PUBACK (Mid: 1, RC:135)');
        const v4 = await runCli('mosquitto_pub', [...base, '-V', 'mqttv311', '-q', qos]);
        expect(v4.code, `QoS ${qos}`).to.not.equal(0);
        expect(v4.stderr).to.match(/connection was lost/i);
      }
    });

    it('mosquitto_sub -V mqttv5 gets 0x87 (not authorized) for a forbidden filter, mqttv311 0x80', async function () {
      const v5 = await startMosquittoSub(['-h', '127.0.0.1', '-p', String(tb.port), '-V', 'mqttv5', '-u', 'wild', '-P', 'wild-pw', '-t', 'a/#', '-t', 'a/+/c']);
      v5.kill();
      expect((await v5.result).stdout).to.match(/Subscribed \(mid: \d+\): 135, 0/);
    });

    it('mosquitto_sub gets 0x80 for a forbidden filter', async function () {
      const sub = await startMosquittoSub(['-h', '127.0.0.1', '-p', String(tb.port), '-u', 'wild', '-P', 'wild-pw', '-t', 'a/#', '-t', 'a/+/c']);
      sub.kill();
      const out = await sub.result;
      expect(out.stdout).to.match(/Subscribed \(mid: \d+\): 128, 0/);
    });
  });
});
