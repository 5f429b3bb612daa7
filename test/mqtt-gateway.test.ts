// The broker inside the real gateway: users, roles, tokens and certificates managed over
// REST decide what MQTT clients may do, through the same permission engine.
import { execFile } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { X509Certificate } from 'node:crypto';
import { GOOD_PASSWORD, startGateway, tempDir, type TestGateway } from './support/harness.js';
import type { MqttClient } from 'mqtt';
import { closed, collect, connackCode, connect, connectUrl, endAllClients, runCli, subscribe, clientOptions } from './support/mqtt-test-kit.js';

const run = promisify(execFile);
type Grant = { resource: string; operation: 'read' | 'write' | 'readWrite'; context: 'mqtt' | 'http' };
const mqttGrant = (resource: string, operation: Grant['operation'] = 'readWrite'): Grant => ({ resource, operation, context: 'mqtt' });

describe('MQTT broker in the gateway', function () {
  this.timeout(30_000);
  let gw: TestGateway;
  let admin: string;
  before(async () => {
    gw = await startGateway();
    admin = await gw.login();
  });
  after(() => gw.stop());
  afterEach(() => endAllClients());

  it('states the MQTT ports it bound and serves enhanced-auth info with the real limits', async () => {
    expect(gw.ports.mqtt).to.be.a('number').greaterThan(0);
    expect(gw.ports.mqtts).to.be.a('number').greaterThan(0);
    const res = await gw.api('POST', '/api/broker/auth/enhanced', { body: { client_id: 'x', properties: { p_authentication_method: 'SCRAM-SHA-1' } } });
    expect(res.status).to.equal(200);
    expect(res.body.result).to.match(/not supported/);
    expect(res.body.modifiers).to.deep.equal({
      max_message_size: String(gw.config.mqtt.maxPacketSizeBytes),
      max_inflight_messages: String(gw.config.mqtt.maxInflightMessages),
      retry_interval: String(gw.config.mqtt.retryIntervalSeconds),
    });
  });

  for (const protocolVersion of [4, 5] as const) {
    const v5 = protocolVersion === 5;
    /** mqtt.js options of this protocol version. */
    const as = <T extends object>(options: T) => ({ protocolVersion, ...options });
    /** mosquitto_pub/sub arguments of this protocol version. */
    const cliVersion = ['-V', v5 ? 'mqttv5' : 'mqttv311'];
    /** A forbidden publish: MQTT 3.1.1 is disconnected; MQTT 5 gets PUBACK / PUBREC 0x87 and stays. */
    const expectPublishRefused = async (client: MqttClient, topic: string, qos: 1 | 2) => {
      if (!v5) {
        const gone = closed(client, 2000);
        client.publish(topic, 'refused', { qos });
        await gone;
        return;
      }
      const err = await client.publishAsync(topic, 'refused', { qos }).then(
        () => undefined,
        (e: { code?: number }) => e,
      );
      expect(err?.code, `${qos === 1 ? 'PUBACK' : 'PUBREC'} reason code`).to.equal(0x87);
      expect(client.connected, 'an MQTT 5 client stays connected').to.equal(true);
    };

    describe(`MQTT ${v5 ? '5' : '3.1.1'} clients`, () => {
      const bad = v5 ? 0x86 : 4; // bad user name or password
      const notAuthorized = v5 ? 0x87 : 5;
      const refusedFilter = v5 ? 0x87 : 0x80;

      it('authenticates REST users by password and by session token, and refuses the rest', async () => {
        const u = await gw.userWith([mqttGrant('plant/#')]);
        const port = gw.ports.mqtt;
        expect(await connackCode(port, as({ username: u.username, password: GOOD_PASSWORD }))).to.equal(0);
        expect(await connackCode(port, as({ username: u.username, password: u.token }))).to.equal(0);
        expect(await connackCode(port, as({ username: u.username, password: 'Wrong-Passw0rd' }))).to.equal(bad);
        expect(await connackCode(port, as({ username: 'nobody-at-all', password: GOOD_PASSWORD }))).to.equal(bad);
        expect(await connackCode(port, as({}))).to.equal(bad);
        // Another user's token is no password of this one.
        const other = await gw.userWith([mqttGrant('x/#')]);
        expect(await connackCode(port, as({ username: u.username, password: other.token }))).to.equal(bad);
      });

      it('refuses a known user without any MQTT permission as not authorized', async () => {
        const u = await gw.userWith([{ resource: '/api/session', operation: 'read', context: 'http' }]);
        expect(await connackCode(gw.ports.mqtt, as({ username: u.username, password: GOOD_PASSWORD }))).to.equal(notAuthorized);
      });

      it('admits that user once an MQTT permission is granted over REST, and refuses it again once removed', async () => {
        // The check asks the user's compiled (cached) permission set: a change must reach it at once.
        const sessionRead = { resource: '/api/session', operation: 'read', context: 'http' } as const;
        const u = await gw.userWith([sessionRead]);
        const login = as({ username: u.username, password: GOOD_PASSWORD });
        expect(await connackCode(gw.ports.mqtt, login)).to.equal(notAuthorized);
        const grant = await gw.api('PUT', `/api/users/${u.id}`, { token: admin, body: { permissions: [mqttGrant('plant/#')] } });
        expect(grant.status).to.equal(200);
        expect(await connackCode(gw.ports.mqtt, login)).to.equal(0);
        const revoke = await gw.api('PUT', `/api/users/${u.id}`, { token: admin, body: { permissions: [sessionRead] } });
        expect(revoke.status).to.equal(200);
        expect(await connackCode(gw.ports.mqtt, login)).to.equal(notAuthorized);
      });

      it('lets publish and subscribe exactly as the REST permissions say', async () => {
        const writer = await gw.userWith([mqttGrant('plant/line1/+/temp', 'write')]);
        const reader = await gw.userWith([mqttGrant('plant/+/+/temp', 'read')]);
        const sub = await connect(gw.ports.mqtt, as({ username: reader.username, password: reader.token }));
        expect(await subscribe(sub, 'plant/+/+/temp')).to.deep.equal([0]);
        expect(await subscribe(sub, 'plant/#')).to.deep.equal([refusedFilter]);
        expect(sub.connected, 'a refused subscription keeps the client').to.equal(true);
        const inbox = collect(sub);
        const pub = await connect(gw.ports.mqtt, as({ username: writer.username, password: writer.token }));
        await pub.publishAsync('plant/line1/m1/temp', '21.5', { qos: 1 });
        expect((await inbox.until((m) => m.topic === 'plant/line1/m1/temp')).payload).to.equal('21.5');
        if (v5) {
          // Outside the grant: QoS 0 is dropped, QoS 1 and 2 are answered 0x87; the client stays.
          pub.publish('plant/line2/m1/temp', 'nope', { qos: 0 });
          await expectPublishRefused(pub, 'plant/line2/m1/temp', 1);
          await expectPublishRefused(pub, 'plant/line2/m1/temp', 2);
          await pub.publishAsync('plant/line1/m1/temp', '22.0', { qos: 2 });
          await inbox.until((m) => m.payload === '22.0');
          expect(inbox.messages.map((m) => m.payload)).to.deep.equal(['21.5', '22.0']);
        } else {
          // Outside the grant: the broker disconnects the publisher (MQTT 3.1.1 cannot refuse one publish).
          const gone = closed(pub, 2000);
          pub.publish('plant/line2/m1/temp', 'nope', { qos: 0 });
          await gone;
        }
      });

      it('applies the mqttPublishPrefix set over REST before the check and delivery', async () => {
        const username = `prefixed-device-${protocolVersion}`;
        const created = await gw.api('POST', '/api/users', {
          token: admin,
          body: { username, password: GOOD_PASSWORD, identityProvider: 'local', mqttPublishPrefix: 'site-7/', initialPermissions: [mqttGrant('site-7/#', 'write')] },
        });
        expect(created.status).to.equal(201);
        expect(created.body.mqttPublishPrefix).to.equal('site-7/');
        const reader = await gw.userWith([mqttGrant('#', 'read')]);
        const sub = await connect(gw.ports.mqtt, as({ username: reader.username, password: reader.token }));
        await subscribe(sub, '#');
        const inbox = collect(sub);
        const { code, stderr } = await runCli('mosquitto_pub', [...cliVersion, '-h', '127.0.0.1', '-p', String(gw.ports.mqtt), '-u', username, '-P', GOOD_PASSWORD, '-t', `pump/state-${protocolVersion}`, '-m', 'on', '-q', '1']);
        expect(code, stderr).to.equal(0);
        expect((await inbox.until((m) => m.payload === 'on')).topic).to.equal(`site-7/pump/state-${protocolVersion}`);
        // The prefixed topic is what is checked: a write on the bare topic would not be enough.
        const pub = await connect(gw.ports.mqtt, as({ username, password: GOOD_PASSWORD }));
        await pub.publishAsync('valve/state', 'shut', { qos: 1 });
        expect((await inbox.until((m) => m.payload === 'shut')).topic).to.equal('site-7/valve/state');
      });

      it('stops the next publish when a permission is removed over REST', async () => {
        const u = await gw.userWith([mqttGrant('cell/+/cmd', 'write'), mqttGrant('cell/+/status', 'readWrite')]);
        const pub = await connect(gw.ports.mqtt, as({ username: u.username, password: u.token }));
        await pub.publishAsync('cell/1/cmd', 'go', { qos: 1 });
        const updated = await gw.api('PUT', `/api/users/${u.id}`, { token: admin, body: { permissions: [mqttGrant('cell/+/status', 'readWrite')] } });
        expect(updated.status).to.equal(200);
        await expectPublishRefused(pub, 'cell/1/cmd', 1);
        if (v5) await pub.publishAsync('cell/1/status', 'still allowed', { qos: 1 });
      });

      it('stops delivery on a subscription when a shared role loses the permission', async () => {
        const role = await gw.api('POST', '/api/roles', { token: admin, body: { name: `line-readers-${protocolVersion}`, isShared: true, permissions: [mqttGrant('line/#', 'read')] } });
        const reader = await gw.userWith([mqttGrant('other/#', 'read')]);
        expect((await gw.api('POST', `/api/users/${reader.id}/roles`, { token: admin, body: { roleId: role.body.id } })).status).to.equal(201);
        const writer = await gw.userWith([mqttGrant('line/#', 'write')]);
        const sub = await connect(gw.ports.mqtt, as({ username: reader.username, password: reader.token }));
        expect(await subscribe(sub, 'line/#')).to.deep.equal([0]);
        const inbox = collect(sub);
        const pub = await connect(gw.ports.mqtt, as({ username: writer.username, password: writer.token }));
        await pub.publishAsync('line/a', 'first', { qos: 1 });
        await inbox.until((m) => m.payload === 'first');
        const permId = role.body.permissions[0].id;
        expect((await gw.api('DELETE', `/api/roles/${role.body.id}/permissions/${permId}`, { token: admin })).status).to.equal(200);
        await pub.publishAsync('line/a', 'second', { qos: 1 });
        // A marker on a topic the reader still may read proves delivery went on after 'second'.
        const marker = await gw.userWith([mqttGrant('other/#', 'write')]);
        const mpub = await connect(gw.ports.mqtt, as({ username: marker.username, password: marker.token }));
        await subscribe(sub, 'other/#');
        await mpub.publishAsync('other/marker', 'marker', { qos: 1 });
        await inbox.until((m) => m.payload === 'marker');
        expect(inbox.messages.map((m) => m.payload)).to.not.include('second');
      });

      it('disconnects the sessions of a deleted user within a second', async () => {
        const u = await gw.userWith([mqttGrant('d/#')]);
        const a = await connect(gw.ports.mqtt, as({ username: u.username, password: GOOD_PASSWORD }));
        const b = await connect(gw.ports.mqtt, as({ username: u.username, password: u.token }));
        const both = Promise.all([closed(a, 1000), closed(b, 1000)]);
        expect((await gw.api('DELETE', `/api/users/${u.id}`, { token: admin })).status).to.equal(200);
        await both;
      });

      it('revoking a token closes only the sessions that used it', async () => {
        const u = await gw.userWith([mqttGrant('t/#')]);
        const byToken = await connect(gw.ports.mqtt, as({ username: u.username, password: u.token }));
        const byPassword = await connect(gw.ports.mqtt, as({ username: u.username, password: GOOD_PASSWORD }));
        const { createHash } = await import('node:crypto');
        const fp = createHash('sha256').update(u.token).digest('hex');
        const gone = closed(byToken, 1000);
        expect((await gw.api('DELETE', `/api/users/${u.id}/tokens?tokenId=${fp}`, { token: admin })).status).to.equal(200);
        await gone;
        await byPassword.publishAsync('t/still-here', 'yes', { qos: 1 });
        expect(byPassword.connected).to.equal(true);
        expect(await connackCode(gw.ports.mqtt, as({ username: u.username, password: u.token }))).to.equal(bad);
      });

      it('a password changed by an administrator closes the user\'s sessions', async () => {
        const u = await gw.userWith([mqttGrant('p/#')]);
        const c = await connect(gw.ports.mqtt, as({ username: u.username, password: GOOD_PASSWORD }));
        const gone = closed(c, 1000);
        expect((await gw.api('PUT', `/api/users/${u.id}`, { token: admin, body: { password: 'An0ther-Passw0rd' } })).status).to.equal(200);
        await gone;
        expect(await connackCode(gw.ports.mqtt, as({ username: u.username, password: GOOD_PASSWORD }))).to.equal(bad);
      });

      it('serves MQTT over WebSocket at /mqtt on the HTTP port', async () => {
        const u = await gw.userWith([mqttGrant('ws/#')]);
        const { host: _h, port: _p, ...options } = clientOptions(0);
        const client = await connectUrl(`ws://127.0.0.1:${gw.ports.http}/mqtt`, { ...options, protocolVersion, username: u.username, password: u.token });
        expect(await subscribe(client, 'ws/#')).to.deep.equal([0]);
        const inbox = collect(client);
        await client.publishAsync('ws/ping', 'pong', { qos: 1 });
        expect((await inbox.until((m) => m.topic === 'ws/ping')).payload).to.equal('pong');
      });

      describe('MQTTS with client certificates from the gateway CA', () => {
        let dir: string;
        let caFile: string;
        const issue = async (cn: string) => {
          const key = join(dir, `${cn}.key`);
          const csr = join(dir, `${cn}.csr`);
          await run('openssl', ['req', '-new', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', csr, '-subj', `/CN=${cn}`]);
          const certPem = gw.services.ca!.signCsr(readFileSync(csr, 'utf8'), { expectedCommonName: cn });
          const cert = join(dir, `${cn}.crt`);
          writeFileSync(cert, certPem);
          return { key, cert, certPem, fingerprint: new X509Certificate(certPem).fingerprint256.replace(/:/g, '').toLowerCase() };
        };
        before(() => {
          dir = tempDir();
          caFile = join(dir, 'ca.crt');
          writeFileSync(caFile, gw.services.ca!.caCertPem);
        });
        after(() => rmSync(dir, { recursive: true, force: true }));

        it('identifies a device by a certificate fingerprint registered over REST', async () => {
          const u = await gw.userWith([mqttGrant(`devices/dev-fp-${protocolVersion}/#`)]);
          const c = await issue(`dev-fp-${protocolVersion}`);
          expect((await gw.api('POST', `/api/users/${u.id}/certificates`, { token: admin, body: { fingerprint: c.fingerprint } })).status).to.equal(201);
          // mosquitto_pub over TLS, verifying the gateway's server certificate with its CA.
          const res = await runCli('mosquitto_pub', [...cliVersion, '-h', '127.0.0.1', '-p', String(gw.ports.mqtts), '--cafile', caFile, '--cert', c.cert, '--key', c.key, '-t', `devices/dev-fp-${protocolVersion}/hello`, '-m', 'hi', '-q', '1']);
          expect(res.code, res.stderr).to.equal(0);
          // Without the registration the same kind of certificate gets nowhere.
          const stranger = await issue(`dev-unknown-${protocolVersion}`);
          const refused = await runCli('mosquitto_pub', [...cliVersion, '-h', '127.0.0.1', '-p', String(gw.ports.mqtts), '--cafile', caFile, '--cert', stranger.cert, '--key', stranger.key, '-t', 'devices/x', '-m', 'x', '-q', '1']);
          expect(refused.code).to.not.equal(0);
          expect(refused.stderr).to.match(/bad user name or password/i);
        });

        it('identifies a user with grant type certificate by CN = username', async () => {
          const username = `dev-cn-${protocolVersion}`;
          const created = await gw.api('POST', '/api/users', {
            token: admin,
            body: { username, identityProvider: 'local', grantTypes: [{ method: 'certificate', isRequired: true }], initialPermissions: [mqttGrant(`devices/${username}/#`)] },
          });
          expect(created.status).to.equal(201);
          const c = await issue(username);
          const client = await connect(gw.ports.mqtts, as({ protocol: 'mqtts', ca: gw.services.ca!.caCertPem, cert: c.certPem, key: readFileSync(c.key, 'utf8'), servername: 'localhost' }) as never);
          await client.publishAsync(`devices/${username}/boot`, '1', { qos: 1 });
          expect(client.connected).to.equal(true);
          await expectPublishRefused(client, 'devices/someone-else/boot', 1);
        });
      });
    });
  }
});
