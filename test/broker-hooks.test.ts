// The cluster hooks (src/broker-hooks, docs/scaling-out.md) against the real gateway, called
// with the brokers' documented request bodies (test/support/broker-hook-fixtures.ts says where
// each comes from): VerneMQ webhooks, EMQX 5 HTTP authn/authz, and RabbitMQ's auth backend as
// recorded from RabbitMQ 3.10. Then who may call them (allowFrom, secret, rate limits), what a
// refused caller learns (nothing), and the audit trail naming the cluster.
import { createHash, randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { ConfigError, loadConfig } from '../src/config/index.js';
import { GOOD_PASSWORD, startGateway, type TestGateway } from './support/harness.js';
import { connackCode, makeCerts, type Certs } from './support/mqtt-test-kit.js';
import { emqx, rabbitmq, vernemq } from './support/broker-hook-fixtures.js';

type Grant = { resource: string; operation: 'read' | 'write' | 'readWrite'; context: 'mqtt' | 'http' };
const mqttGrant = (resource: string, operation: Grant['operation'] = 'readWrite'): Grant => ({ resource, operation, context: 'mqtt' });

interface HookAnswer {
  status: number;
  body: any;
  text: string;
  cacheControl: string | null;
}

/** POSTs to a hook: JSON, or a form body for RabbitMQ's. */
async function hook(gw: TestGateway, path: string, body: Record<string, unknown>, headers: Record<string, string> = {}): Promise<HookAnswer> {
  const form = path.startsWith('rabbitmq/');
  const res = await fetch(`${gw.baseUrl}/api/broker/hooks/${path}`, {
    method: 'POST',
    headers: { 'content-type': form ? 'application/x-www-form-urlencoded' : 'application/json', ...headers },
    body: form ? new URLSearchParams(Object.entries(body).map(([k, v]): [string, string] => [k, String(v)])).toString() : JSON.stringify(body),
  });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {}
  return { status: res.status, body: parsed, text, cacheControl: res.headers.get('cache-control') };
}
const verne = (gw: TestGateway, name: string, body: Record<string, unknown>, headers: Record<string, string> = {}) => hook(gw, 'vernemq', body, { 'vernemq-hook': name, ...headers });

let serial = 0;
const clientId = () => `c-${process.pid}-${++serial}`;

describe('broker hooks for clusters', function () {
  this.timeout(30_000);

  describe('with the hooks enabled', () => {
    let gw: TestGateway;
    let admin: string;
    before(async () => {
      gw = await startGateway({ overrides: { brokerHooks: { enabled: true, certificateLogins: true } } });
      admin = await gw.login();
    });
    after(() => gw.stop());

    describe('VerneMQ webhooks (documented payloads)', () => {
      it('auth_on_register and _m5: ok for the password or a session token; one answer for a wrong password and an unknown user', async () => {
        const u = await gw.userWith([mqttGrant('a/#')]);
        for (const [name, payload] of [['auth_on_register', vernemq.authOnRegister], ['auth_on_register_m5', vernemq.authOnRegisterM5]] as const) {
          const byPassword = await verne(gw, name, payload({ username: u.username, password: GOOD_PASSWORD, clientId: clientId() }));
          expect(byPassword.status).to.equal(200);
          expect(byPassword.body).to.deep.equal(vernemq.answers.ok);
          expect(byPassword.cacheControl, 'a login is never cached').to.equal(null);
          expect((await verne(gw, name, payload({ username: u.username, password: u.token, clientId: clientId() }))).body).to.deep.equal(vernemq.answers.ok);
          const wrong = await verne(gw, name, payload({ username: u.username, password: 'Wrong-Passw0rd', clientId: clientId() }));
          const unknown = await verne(gw, name, payload({ username: `nobody-${serial}`, password: GOOD_PASSWORD, clientId: clientId() }));
          expect(wrong.body).to.deep.equal(vernemq.answers.notAllowed);
          expect(unknown.text, 'an unknown user and a wrong password look the same').to.equal(wrong.text);
          expect((await verne(gw, name, payload({ username: u.username, password: null, clientId: clientId() }))).body).to.deep.equal(vernemq.answers.notAllowed);
        }
      });

      it('auth_on_subscribe: the granted filters with their QoS, 128 for the others; cached only when all were granted', async () => {
        const u = await gw.userWith([mqttGrant('a/#', 'read')]);
        const id = clientId();
        expect((await verne(gw, 'auth_on_register', vernemq.authOnRegister({ username: u.username, password: GOOD_PASSWORD, clientId: id }))).body).to.deep.equal(vernemq.answers.ok);
        const mixed = await verne(gw, 'auth_on_subscribe', vernemq.authOnSubscribe({ username: u.username, clientId: id }));
        expect(mixed.body).to.deep.equal({ result: 'ok', topics: [{ topic: 'a/b', qos: 1 }, { topic: 'c/d', qos: 128 }] });
        expect(mixed.cacheControl).to.equal(null);
        const granted = await verne(gw, 'auth_on_subscribe', vernemq.authOnSubscribe({ username: u.username, clientId: id }, [{ topic: 'a/+', qos: 2 }]));
        expect(granted.body).to.deep.equal({ result: 'ok', topics: [{ topic: 'a/+', qos: 2 }] });
        expect(granted.cacheControl).to.equal('max-age=30');
      });

      it('auth_on_subscribe_m5: modifiers.topics, 135 (not authorized) for a refused filter', async () => {
        const u = await gw.userWith([mqttGrant('test/#', 'read')]);
        const id = clientId();
        await verne(gw, 'auth_on_register_m5', vernemq.authOnRegisterM5({ username: u.username, password: u.token, clientId: id }));
        const res = await verne(gw, 'auth_on_subscribe_m5', vernemq.authOnSubscribeM5({ username: u.username, clientId: id }, [{ topic: 'test/topic', qos: 1 }, { topic: '#', qos: 0 }]));
        expect(res.body).to.deep.equal({ result: 'ok', modifiers: { topics: [{ topic: 'test/topic', qos: 1 }, { topic: '#', qos: 135 }] } });
      });

      it('auth_on_publish and _m5: ok (cached) inside the write grant, not_allowed outside it and on $SYS', async () => {
        const u = await gw.userWith([mqttGrant('a/#', 'write'), mqttGrant('some/+', 'write'), mqttGrant('#', 'read')]);
        const id = clientId();
        await verne(gw, 'auth_on_register', vernemq.authOnRegister({ username: u.username, password: GOOD_PASSWORD, clientId: id }));
        const ok = await verne(gw, 'auth_on_publish', vernemq.authOnPublish({ username: u.username, clientId: id }));
        expect(ok.body).to.deep.equal(vernemq.answers.ok);
        expect(ok.cacheControl).to.equal('max-age=30');
        expect((await verne(gw, 'auth_on_publish_m5', vernemq.authOnPublishM5({ username: u.username, clientId: id }))).body).to.deep.equal(vernemq.answers.ok);
        const refused = await verne(gw, 'auth_on_publish', vernemq.authOnPublish({ username: u.username, clientId: id }, 'c/d'));
        expect(refused.body).to.deep.equal(vernemq.answers.notAllowed);
        expect(refused.cacheControl, 'a refusal is never cached').to.equal(null);
        expect((await verne(gw, 'auth_on_publish_m5', vernemq.authOnPublishM5({ username: u.username, clientId: id }, '$SYS/x'))).body).to.deep.equal(vernemq.answers.notAllowed);
      });

      it('auth_on_publish of a prefixed user: rewritten under the prefix (modifiers.topic), as the embedded broker delivers it', async () => {
        const username = `prefixed-${process.pid}-${++serial}`;
        const created = await gw.api('POST', '/api/users', { token: admin, body: { username, password: GOOD_PASSWORD, identityProvider: 'local', mqttPublishPrefix: 'site-7/', initialPermissions: [mqttGrant('site-7/#', 'write')] } });
        expect(created.status).to.equal(201);
        const id = clientId();
        await verne(gw, 'auth_on_register', vernemq.authOnRegister({ username, password: GOOD_PASSWORD, clientId: id }));
        expect((await verne(gw, 'auth_on_publish', vernemq.authOnPublish({ username, clientId: id }, 'pump/state'))).body).to.deep.equal({ result: 'ok', modifiers: { topic: 'site-7/pump/state' } });
      });

      it('answers next for another mountpoint, and 400 for a hook it does not serve', async () => {
        const u = await gw.userWith([mqttGrant('a/#')]);
        expect((await verne(gw, 'auth_on_register', { ...vernemq.authOnRegister({ username: u.username, password: GOOD_PASSWORD, clientId: clientId() }), mountpoint: 'tenant-b' })).body).to.deep.equal(vernemq.answers.next);
        expect((await verne(gw, 'on_register', vernemq.authOnRegister({ username: u.username, password: GOOD_PASSWORD, clientId: clientId() }))).status).to.equal(400);
        expect((await hook(gw, 'vernemq', vernemq.authOnRegister({ username: u.username, password: GOOD_PASSWORD, clientId: clientId() }))).status, 'no vernemq-hook header').to.equal(400);
      });

      it('a session of a deleted user is refused on its next publish', async () => {
        const u = await gw.userWith([mqttGrant('a/#')]);
        const id = clientId();
        await verne(gw, 'auth_on_register', vernemq.authOnRegister({ username: u.username, password: GOOD_PASSWORD, clientId: id }));
        expect((await verne(gw, 'auth_on_publish', vernemq.authOnPublish({ username: u.username, clientId: id }))).body).to.deep.equal(vernemq.answers.ok);
        expect((await gw.api('DELETE', `/api/users/${u.id}`, { token: admin })).status).to.equal(200);
        expect((await verne(gw, 'auth_on_publish', vernemq.authOnPublish({ username: u.username, clientId: id }))).body).to.deep.equal(vernemq.answers.notAllowed);
      });
    });

    describe('EMQX 5 HTTP authentication and authorization (documented answers)', () => {
      it('authn: allow with is_superuser false, the publish grants as acl, expire_at from the token; deny otherwise', async () => {
        const u = await gw.userWith([mqttGrant('plant/+/temp', 'write'), mqttGrant('plant/#', 'read'), mqttGrant('$SYS/#', 'read')]);
        const byToken = await hook(gw, 'emqx/authn', emqx.authn({ username: u.username, password: u.token, clientId: clientId() }));
        expect(byToken.status).to.equal(200);
        const tokens = await gw.api('GET', `/api/users/${u.id}/tokens`, { token: admin });
        const fp = createHash('sha256').update(u.token).digest('hex');
        const record = (tokens.body as { fingerprint?: string; tokenId?: string; expiresAt: string }[]).find((t) => (t.fingerprint ?? t.tokenId) === fp);
        expect(byToken.body).to.deep.equal({
          result: 'allow',
          is_superuser: false,
          // Read grants stay with the authz hook: EMQX matches a filter against a rule differently.
          acl: [{ permission: 'allow', action: 'publish', topic: 'plant/+/temp' }],
          expire_at: Math.floor(Date.parse(record!.expiresAt) / 1000),
        });
        const byPassword = await hook(gw, 'emqx/authn', emqx.authn({ username: u.username, password: GOOD_PASSWORD, clientId: clientId() }));
        expect(byPassword.body.result).to.equal('allow');
        expect(byPassword.body).to.not.have.property('expire_at');
        const wrong = await hook(gw, 'emqx/authn', emqx.authn({ username: u.username, password: 'Wrong-Passw0rd', clientId: clientId() }));
        const unknown = await hook(gw, 'emqx/authn', emqx.authn({ username: `nobody-${serial}`, password: GOOD_PASSWORD, clientId: clientId() }));
        expect(wrong.body).to.deep.equal({ result: 'deny' });
        expect(unknown.text).to.equal(wrong.text);
      });

      it('authn of a prefixed user: only rules under its prefix, the prefix parent denied first', async () => {
        const username = `prefixed-${process.pid}-${++serial}`;
        await gw.api('POST', '/api/users', { token: admin, body: { username, password: GOOD_PASSWORD, identityProvider: 'local', mqttPublishPrefix: 'site-7/', initialPermissions: [mqttGrant('site-7/#', 'write'), mqttGrant('other/#', 'write')] } });
        const res = await hook(gw, 'emqx/authn', emqx.authn({ username, password: GOOD_PASSWORD, clientId: clientId() }));
        expect(res.body.acl).to.deep.equal([
          { permission: 'deny', action: 'publish', topic: 'eq site-7' },
          { permission: 'allow', action: 'publish', topic: 'site-7/#' },
        ]);
      });

      it('authz: publish and subscribe decided by the permission engine; a prefixed user publishes only under its prefix', async () => {
        const u = await gw.userWith([mqttGrant('plant/+/temp', 'write'), mqttGrant('plant/+/+', 'read')]);
        const id = clientId();
        await hook(gw, 'emqx/authn', emqx.authn({ username: u.username, password: GOOD_PASSWORD, clientId: id }));
        const w = { username: u.username, clientId: id };
        expect((await hook(gw, 'emqx/authz', emqx.authz(w, 'publish', 'plant/1/temp'))).body).to.deep.equal({ result: 'allow' });
        expect((await hook(gw, 'emqx/authz', emqx.authz(w, 'publish', 'plant/1/hum'))).body).to.deep.equal({ result: 'deny' });
        expect((await hook(gw, 'emqx/authz', emqx.authz(w, 'subscribe', 'plant/+/+'))).body).to.deep.equal({ result: 'allow' });
        // EMQX's own acl matching would let a/+ admit a/#; the engine does not.
        expect((await hook(gw, 'emqx/authz', emqx.authz(w, 'subscribe', 'plant/#'))).body).to.deep.equal({ result: 'deny' });
        const username = `prefixed-${process.pid}-${++serial}`;
        await gw.api('POST', '/api/users', { token: admin, body: { username, password: GOOD_PASSWORD, identityProvider: 'local', mqttPublishPrefix: 'site-7/', initialPermissions: [mqttGrant('#', 'write')] } });
        const p = { username, clientId: clientId() };
        await hook(gw, 'emqx/authn', emqx.authn({ ...p, password: GOOD_PASSWORD }));
        expect((await hook(gw, 'emqx/authz', emqx.authz(p, 'publish', 'site-7/pump'))).body).to.deep.equal({ result: 'allow' });
        expect((await hook(gw, 'emqx/authz', emqx.authz(p, 'publish', 'pump'))).body, 'EMQX cannot rewrite: outside the prefix is refused').to.deep.equal({ result: 'deny' });
      });

      it('an MFA-enrolled user: the bare password is denied, the token of its MFA login allowed', async () => {
        const u = await gw.userWith([mqttGrant('m/#')]);
        const enable = await gw.api('POST', '/api/mfa/enable', { token: u.token });
        const secret = new URL(enable.body.uri).searchParams.get('secret')!;
        const { execFileSync } = await import('node:child_process');
        const otp = execFileSync('oathtool', ['--totp', '-b', secret]).toString().trim();
        const validate = await gw.api('POST', '/api/mfa/validate', { token: u.token, body: { otp } });
        expect(validate.status).to.equal(200);
        expect((await hook(gw, 'emqx/authn', emqx.authn({ username: u.username, password: GOOD_PASSWORD, clientId: clientId() }))).body).to.deep.equal({ result: 'deny' });
        expect((await verne(gw, 'auth_on_register', vernemq.authOnRegister({ username: u.username, password: GOOD_PASSWORD, clientId: clientId() }))).body).to.deep.equal(vernemq.answers.notAllowed);
        expect((await hook(gw, 'rabbitmq/user', rabbitmq.user({ username: u.username, password: GOOD_PASSWORD, clientId: clientId() }))).text).to.equal('deny');
        const first = await gw.api('POST', '/api/login', { body: { username: u.username, password: GOOD_PASSWORD } });
        const second = await gw.api('POST', '/api/mfa/login', { body: { username: u.username, secret: first.body.secret, backupCode: validate.body.backupCodes[0] } });
        expect(second.status).to.equal(200);
        expect((await hook(gw, 'emqx/authn', emqx.authn({ username: u.username, password: second.body.token, clientId: clientId() }))).body.result).to.equal('allow');
        expect((await hook(gw, 'rabbitmq/user', rabbitmq.user({ username: u.username, password: second.body.token, clientId: clientId() }))).text).to.equal('allow');
      });
    });

    describe('certificate logins the broker vouches for (certificateLogins: true)', () => {
      let certs: Certs;
      before(async () => {
        certs = await makeCerts();
        // CN=device-01, grant type certificate.
        const created = await gw.api('POST', '/api/users', { token: admin, body: { username: 'device-01', identityProvider: 'local', grantTypes: [{ method: 'certificate', isRequired: true }], initialPermissions: [mqttGrant('devices/device-01/#')] } });
        expect(created.status).to.equal(201);
      });
      after(() => certs?.cleanup());

      it('RabbitMQ: a login without a password (mqtt.ssl_cert_login: the CN as username)', async () => {
        expect((await hook(gw, 'rabbitmq/user', rabbitmq.user({ username: 'device-01', password: null, clientId: clientId() }))).text).to.equal('allow');
        expect((await hook(gw, 'rabbitmq/user', rabbitmq.user({ username: 'device-02', password: null, clientId: clientId() }))).text).to.equal('deny');
      });

      it('EMQX: ${cert_common_name} without a password', async () => {
        const res = await hook(gw, 'emqx/authn', emqx.authn({ username: 'device-01', password: '', clientId: clientId(), certCommonName: 'device-01' }));
        expect(res.body.result).to.equal('allow');
        expect((await hook(gw, 'emqx/authn', emqx.authn({ username: 'device-01', password: '', clientId: clientId() }))).body.result, 'no certificate, no password').to.equal('deny');
      });

      it('VerneMQ: only with the certificate itself in the payload (client_cert), its CN the username', async () => {
        const der = Buffer.from(certs.clientCert.replace(/-----[^-]+-----|\s/g, ''), 'base64').toString('base64');
        const withCert = { ...vernemq.authOnRegister({ username: 'device-01', password: null, clientId: clientId() }), client_cert: der };
        expect((await verne(gw, 'auth_on_register', withCert)).body).to.deep.equal(vernemq.answers.ok);
        expect((await verne(gw, 'auth_on_register', vernemq.authOnRegister({ username: 'device-01', password: null, clientId: clientId() }))).body, 'no certificate').to.deep.equal(vernemq.answers.notAllowed);
        expect((await verne(gw, 'auth_on_register', { ...withCert, username: 'someone-else' })).body, 'CN is not the username').to.deep.equal(vernemq.answers.notAllowed);
      });
    });

    describe('RabbitMQ auth backend (bodies recorded from RabbitMQ 3.10.8)', () => {
      it('user, vhost, resource and topic: allow only what the MQTT plugin needs and the grants say', async () => {
        const u = await gw.userWith([mqttGrant('x/+/temp', 'write'), mqttGrant('a/#', 'read')]);
        const id = clientId();
        const w = { username: u.username, clientId: id };
        const ask = async (path: string, body: Record<string, unknown>) => (await hook(gw, path, body)).text;
        expect(await ask('rabbitmq/user', rabbitmq.user({ ...w, password: GOOD_PASSWORD }))).to.equal('allow');
        expect(await ask('rabbitmq/vhost', rabbitmq.vhost(w))).to.equal('allow');
        expect(await ask('rabbitmq/vhost', { ...rabbitmq.vhost(w), vhost: 'other' })).to.equal('deny');
        for (const permission of ['configure', 'read', 'write'] as const) {
          expect(await ask('rabbitmq/resource', rabbitmq.resource(w, 'queue', `mqtt-subscription-${id}qos1`, permission))).to.equal('allow');
        }
        expect(await ask('rabbitmq/resource', rabbitmq.resource(w, 'queue', 'mqtt-subscription-someone-elseqos0', 'read')), "another client's queue").to.equal('deny');
        expect(await ask('rabbitmq/resource', rabbitmq.resource(w, 'queue', 'orders', 'read'))).to.equal('deny');
        expect(await ask('rabbitmq/resource', rabbitmq.resource(w, 'exchange', 'amq.topic', 'write'))).to.equal('allow');
        expect(await ask('rabbitmq/resource', rabbitmq.resource(w, 'exchange', 'amq.direct', 'write'))).to.equal('deny');
        expect(await ask('rabbitmq/topic', rabbitmq.topic(w, 'write', 'x.7.temp'))).to.equal('allow');
        expect(await ask('rabbitmq/topic', rabbitmq.topic(w, 'write', 'x.7.hum'))).to.equal('deny');
        expect(await ask('rabbitmq/topic', rabbitmq.topic(w, 'read', 'a.*.c'))).to.equal('allow');
        expect(await ask('rabbitmq/topic', rabbitmq.topic(w, 'read', '#'))).to.equal('deny');
        expect(await ask('rabbitmq/topic', { ...rabbitmq.topic(w, 'write', 'x.7.temp'), name: 'amq.direct' })).to.equal('deny');
        // A user without any MQTT permission uses nothing.
        const httpOnly = await gw.userWith([{ resource: '/api/session', operation: 'read', context: 'http' }]);
        expect(await ask('rabbitmq/user', rabbitmq.user({ username: httpOnly.username, password: GOOD_PASSWORD, clientId: clientId() }))).to.equal('deny');
        expect(await ask('rabbitmq/vhost', rabbitmq.vhost({ username: httpOnly.username, clientId: id }))).to.equal('deny');
      });

      it('answers 400 for a body that is not RabbitMQ\'s, 415 for another content type, 413 beyond the body limit', async () => {
        const bad = await hook(gw, 'rabbitmq/topic', { username: 'x', vhost: '/', resource: 'topic', name: 'amq.topic', permission: 'configure', routing_key: 'a' });
        expect(bad.status).to.equal(400);
        expect(bad.body.errors[0].path).to.equal('/body/permission');
        expect((await hook(gw, 'rabbitmq/user', { password: 'x' })).status).to.equal(400);
        const json = await fetch(`${gw.baseUrl}/api/broker/hooks/rabbitmq/user`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"username":"x"}' });
        expect(json.status).to.equal(415);
        expect((await hook(gw, 'emqx/authz', { clientid: 'x', action: 'publish', topic: 'a'.repeat(gw.config.http.bodyLimitBytes + 1) })).status).to.equal(413);
        expect((await fetch(`${gw.baseUrl}/api/broker/hooks/emqx/authz`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{not json' })).status).to.equal(400);
      });
    });

    describe('audit and the login throttle', () => {
      it('names the cluster in the audit lines of refused logins, and never logs a password or token', async () => {
        const u = await gw.userWith([mqttGrant('q/#')]);
        await hook(gw, 'rabbitmq/user', rabbitmq.user({ username: u.username, password: 'Wrong-1-Passw0rd', clientId: clientId() }));
        await verne(gw, 'auth_on_register', vernemq.authOnRegister({ username: u.username, password: 'Wrong-2-Passw0rd', clientId: clientId() }));
        await hook(gw, 'emqx/authn', emqx.authn({ username: u.username, password: 'Wrong-3-Passw0rd', clientId: clientId() }));
        await hook(gw, 'emqx/authn', emqx.authn({ username: u.username, password: u.token, clientId: clientId() }));
        const lines = gw.logs().filter((l) => l.audit && l.username === u.username);
        for (const via of ['rabbitmq', 'vernemq', 'emqx']) {
          expect(lines.some((l) => l.message === 'login failed' && l.via === via), `login failed via ${via}`).to.equal(true);
          expect(lines.some((l) => l.message === 'mqtt.connect.refused' && l.via === via && l.reason === 'bad username or password'), `refused via ${via}`).to.equal(true);
        }
        const all = JSON.stringify(gw.logs());
        for (const secret of ['Wrong-1-Passw0rd', 'Wrong-2-Passw0rd', 'Wrong-3-Passw0rd', GOOD_PASSWORD, u.token]) expect(all).to.not.include(secret);
      });

      it('the embedded broker keeps working beside the hooks', async () => {
        const u = await gw.userWith([mqttGrant('e/#')]);
        expect(await connackCode(gw.ports.mqtt, { username: u.username, password: u.token })).to.equal(0);
      });
    });
  });

  it('refuses to start with an allowFrom entry that is not a CIDR, naming the key', () => {
    expect(() => loadConfig({ env: {}, overrides: { brokerHooks: { allowFrom: ['127.0.0.1/33'] } } })).to.throw(ConfigError, /brokerHooks\.allowFrom/);
    expect(() => loadConfig({ env: {}, overrides: { brokerHooks: { allowFrom: ['gateway/8'] } } })).to.throw(ConfigError, /brokerHooks\.allowFrom/);
    expect(loadConfig({ env: {}, overrides: { brokerHooks: { allowFrom: ['10.0.0.0/8', 'fd00::/8'] } } }).brokerHooks.allowFrom).to.have.length(2);
  });

  describe('who may call', () => {
    const calls = (gwAny: TestGateway, username: string, password: string, headers: Record<string, string> = {}) => [
      hook(gwAny, 'rabbitmq/user', rabbitmq.user({ username, password, clientId: clientId() }), headers),
      verne(gwAny, 'auth_on_register', vernemq.authOnRegister({ username, password, clientId: clientId() }), headers),
      hook(gwAny, 'emqx/authn', emqx.authn({ username, password, clientId: clientId() }), headers),
      hook(gwAny, 'emqx/authz', emqx.authz({ username, clientId: clientId() }, 'publish', 'a'), headers),
    ];
    /** A 403 that says nothing about the user: not its name, not allow/deny, no hook answer. */
    const refusedBlind = (res: HookAnswer, username: string) => {
      expect(res.status).to.equal(403);
      expect(res.body.statusCode).to.equal(403);
      expect(res.text).to.not.include(username);
      expect(res.text).to.not.match(/"result"|^allow|^deny|password/);
    };

    it('nobody while the hooks are off (the default)', async () => {
      const gw = await startGateway();
      try {
        const u = await gw.userWith([mqttGrant('a/#')]);
        for (const res of await Promise.all(calls(gw, u.username, GOOD_PASSWORD))) refusedBlind(res, u.username);
        // Refused before validation: a caller learns nothing about the bodies either.
        refusedBlind(await hook(gw, 'emqx/authz', { bogus: true }), u.username);
      } finally {
        await gw.stop();
      }
    });

    it('only addresses in allowFrom', async () => {
      const gw = await startGateway({ overrides: { brokerHooks: { enabled: true, allowFrom: ['10.0.0.0/8', 'fd00::/8'] } } });
      try {
        const u = await gw.userWith([mqttGrant('a/#')]);
        for (const res of await Promise.all(calls(gw, u.username, GOOD_PASSWORD))) refusedBlind(res, u.username);
        expect(gw.logs().some((l) => l.message === 'broker hook call refused' && l.remote === '127.0.0.1')).to.equal(true);
        // Forwarded-for headers are not the caller.
        refusedBlind(await hook(gw, 'emqx/authz', emqx.authz({ username: u.username, clientId: 'x' }, 'publish', 'a'), { 'x-forwarded-for': '10.1.2.3' }), u.username);
      } finally {
        await gw.stop();
      }
    });

    it('with the shared secret, when one is set: in X-Gatewayd-Hook-Secret or as the Basic password', async () => {
      const secret = randomBytes(16).toString('hex');
      const gw = await startGateway({ overrides: { brokerHooks: { enabled: true, secret } } });
      try {
        const u = await gw.userWith([mqttGrant('a/#')]);
        for (const res of await Promise.all(calls(gw, u.username, GOOD_PASSWORD))) refusedBlind(res, u.username);
        for (const res of await Promise.all(calls(gw, u.username, GOOD_PASSWORD, { 'x-gatewayd-hook-secret': `${secret}x` }))) refusedBlind(res, u.username);
        const [r1, v1, e1, z1] = await Promise.all(calls(gw, u.username, GOOD_PASSWORD, { 'x-gatewayd-hook-secret': secret }));
        expect([r1!.text, v1!.body, e1!.body.result, z1!.body]).to.deep.equal(['allow', vernemq.answers.ok, 'allow', { result: 'allow' }]);
        const basic = `Basic ${Buffer.from(`vernemq:${secret}`).toString('base64')}`;
        expect((await verne(gw, 'auth_on_register', vernemq.authOnRegister({ username: u.username, password: GOOD_PASSWORD, clientId: clientId() }), { authorization: basic })).body).to.deep.equal(vernemq.answers.ok);
        expect(JSON.stringify(gw.logs()), 'the secret is never logged').to.not.include(secret);
      } finally {
        await gw.stop();
      }
    });

    it('not so often that the REST API starves: over maxRequestsPerSecond, 429 while the API answers', async () => {
      const gw = await startGateway({ overrides: { brokerHooks: { enabled: true, maxRequestsPerSecond: 5 } } });
      try {
        const u = await gw.userWith([mqttGrant('a/#')]);
        const started = performance.now();
        const burst = await Promise.all(Array.from({ length: 30 }, () => hook(gw, 'emqx/authz', emqx.authz({ username: u.username, clientId: 'x' }, 'publish', 'a'))));
        const seconds = (performance.now() - started) / 1000;
        const limited = burst.filter((r) => r.status === 429);
        expect(limited.length).to.be.greaterThan(0);
        // 5 a second: the first second's 5 (and one at its edge), plus 5 for every further second
        // the burst took on a busy machine.
        expect(burst.filter((r) => r.status === 200).length).to.be.at.most(6 + Math.floor(seconds * 5));
        expect(limited[0]!.text).to.not.include(u.username);
        expect((await gw.api('GET', '/api/session', { token: u.token })).status).to.equal(200);
      } finally {
        await gw.stop();
      }
    });

    it('no login on a certificate the broker vouches for unless certificateLogins is on (off by default)', async () => {
      const gw = await startGateway({ overrides: { brokerHooks: { enabled: true } } });
      try {
        const admin = await gw.login();
        const created = await gw.api('POST', '/api/users', { token: admin, body: { username: 'device-01', identityProvider: 'local', grantTypes: [{ method: 'certificate', isRequired: true }], initialPermissions: [mqttGrant('devices/device-01/#')] } });
        expect(created.status).to.equal(201);
        expect((await hook(gw, 'rabbitmq/user', rabbitmq.user({ username: 'device-01', password: null, clientId: clientId() }))).text).to.equal('deny');
        expect((await hook(gw, 'emqx/authn', emqx.authn({ username: 'device-01', password: '', clientId: clientId(), certCommonName: 'device-01' }))).body).to.deep.equal({ result: 'deny' });
        expect(gw.logs().some((l) => l.message === 'mqtt.connect.refused' && l.username === 'device-01' && /certificate logins/.test(String(l.reason)))).to.equal(true);
      } finally {
        await gw.stop();
      }
    });

    it('throttles logins by the client address in the payload, never the cluster node\'s', async () => {
      const gw = await startGateway({ overrides: { brokerHooks: { enabled: true }, auth: { loginThrottle: { maxFailuresPerAddress: 3 } } } });
      try {
        const u = await gw.userWith([mqttGrant('t/#')]);
        // maxFailuresPerAddress is 3: a client at 127.9.9.9 spraying usernames is refused even for a good password next ...
        for (let i = 0; i < 3; i++) await verne(gw, 'auth_on_register', vernemq.authOnRegister({ username: `spray-${serial}-${i}`, password: 'Wrong-Passw0rd', clientId: clientId(), peerAddr: '127.9.9.9' }));
        expect((await verne(gw, 'auth_on_register', vernemq.authOnRegister({ username: u.username, password: GOOD_PASSWORD, clientId: clientId(), peerAddr: '127.9.9.9' }))).body).to.deep.equal(vernemq.answers.notAllowed);
        expect((await hook(gw, 'emqx/authn', emqx.authn({ username: u.username, password: GOOD_PASSWORD, clientId: clientId(), peerAddr: '127.9.9.9' }))).body).to.deep.equal({ result: 'deny' });
        // ... while another client behind the same node (all these calls come from 127.0.0.1) gets in.
        expect((await verne(gw, 'auth_on_register', vernemq.authOnRegister({ username: u.username, password: GOOD_PASSWORD, clientId: clientId(), peerAddr: '127.9.9.10' }))).body).to.deep.equal(vernemq.answers.ok);
        expect(gw.logs().some((l) => l.message === 'mqtt.connect.refused' && l.remote === '127.9.9.9' && l.reason === 'too many failed logins')).to.equal(true);
      } finally {
        await gw.stop();
      }
    });

    it('logins wait for a slot, and beyond maxQueuedLogins they are refused with 429', async () => {
      const gw = await startGateway({ overrides: { brokerHooks: { enabled: true, maxConcurrentLogins: 1, maxQueuedLogins: 1 } } });
      try {
        const u = await gw.userWith([mqttGrant('a/#')]);
        const answers = await Promise.all(Array.from({ length: 8 }, () => hook(gw, 'emqx/authn', emqx.authn({ username: u.username, password: `Wrong-${serial}-Passw0rd`, clientId: clientId() }))));
        expect(answers.filter((r) => r.status === 429).length).to.be.greaterThan(0);
        expect(answers.filter((r) => r.status === 200).length).to.be.greaterThan(0);
      } finally {
        await gw.stop();
      }
    });
  });
});
