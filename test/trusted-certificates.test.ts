import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import { startGateway, type TestGateway } from './support/harness.js';
import { connackCode, endAllClients, makeCerts, type Certs } from './support/mqtt-test-kit.js';

describe('trusted certificates', function () {
  this.timeout(30_000);
  let gw: TestGateway;
  let admin: string;
  let certs: Certs;
  before(async () => {
    gw = await startGateway();
    admin = await gw.login();
    certs = await makeCerts();
  });
  after(async () => {
    await endAllClients();
    await gw.stop();
    await certs.cleanup();
  });

  const tlsOptions = () => ({
    protocol: 'mqtts' as const,
    ca: gw.services.ca!.caCertPem,
    cert: certs.otherClientCert,
    key: certs.otherClientKey,
    servername: 'localhost',
  });

  it('lists the gateway CA first, not removable, with the contract fields', async () => {
    const res = await gw.api('GET', '/api/certificates', { token: admin });
    expect(res.status).to.equal(200);
    const [ca] = res.body;
    expect(ca.removable).to.equal(false);
    expect(ca.basicConstraints.isCA).to.equal(true);
    expect(ca.id).to.equal(ca.fingerprints.sha256).and.match(/^[0-9a-f]{64}$/);
    expect(ca.issuedOn).to.be.a('number').below(Date.now());
    expect(ca.expiresOn).to.be.a('number').above(Date.now());
    const del = await gw.api('DELETE', `/api/certificates?id=${ca.id}`, { token: admin });
    expect(del.status).to.equal(409);
    const content = await gw.api('GET', `/api/certificates/content?id=${ca.id}`, { token: admin });
    expect(content.body).to.equal(gw.services.ca!.caCertPem);
  });

  it('accepts MQTTS client certificates of a CA only while it is trusted', async () => {
    const device = await gw.userWith([{ resource: 'plant/#', operation: 'readWrite', context: 'mqtt' }]);
    // device-02's certificate is signed by a CA the gateway does not know yet.
    const { X509Certificate } = await import('node:crypto');
    const fp = new X509Certificate(certs.otherClientCert).fingerprint256.replace(/:/g, '').toLowerCase();
    expect((await gw.api('POST', `/api/users/${device.id}/certificates`, { token: admin, body: { fingerprint: fp } })).status).to.equal(201);
    expect(await connackCode(gw.ports.mqtts, tlsOptions())).to.not.equal(0);

    const added = await gw.api('POST', '/api/certificates', { token: admin, body: certs.otherCaCert });
    expect(added.status).to.equal(201);
    expect(added.body).to.have.length(1);
    const id = added.body[0].id;
    expect(added.body[0].removable).to.equal(true);
    expect(await connackCode(gw.ports.mqtts, tlsOptions())).to.equal(0);

    const again = await gw.api('POST', '/api/certificates', { token: admin, body: certs.otherCaCert });
    expect(again.status).to.equal(409);
    const content = await gw.api('GET', `/api/certificates/content?id=${id}`, { token: admin });
    expect(content.body.replace(/\s+/g, '')).to.equal(readFileSync(certs.paths.otherCaCert, 'utf8').replace(/\s+/g, ''));

    expect((await gw.api('DELETE', `/api/certificates?id=${id}`, { token: admin })).status).to.equal(200);
    expect(await connackCode(gw.ports.mqtts, tlsOptions())).to.not.equal(0);
    expect((await gw.api('DELETE', `/api/certificates?id=${id}`, { token: admin })).status).to.equal(404);
  });

  it('refuses what is not a certificate and changes nothing', async () => {
    const before = (await gw.api('GET', '/api/certificates', { token: admin })).body.length;
    for (const body of ['hello', '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----', certs.otherClientKey]) {
      const res = await gw.api('POST', '/api/certificates', { token: admin, body });
      expect(res.status, body.slice(0, 30)).to.equal(400);
    }
    expect((await gw.api('GET', '/api/certificates', { token: admin })).body).to.have.length(before);
    expect((await gw.api('GET', `/api/certificates/content?id=${'0'.repeat(64)}`, { token: admin })).status).to.equal(404);
  });

  it('lets only who holds their MQTT permissions trust a CA that could sign in as users with grant type certificate (CN)', async () => {
    // device-02 is the CN of otherClientCert; a CA trusted by a delegate must not make it theirs.
    const plc = await gw.api('POST', '/api/users', {
      token: admin,
      body: { username: 'device-02', identityProvider: 'local', grantTypes: [{ method: 'certificate', isRequired: true }], initialPermissions: [{ resource: '#', operation: 'readWrite', context: 'mqtt' }] },
    });
    expect(plc.status, JSON.stringify(plc.body)).to.equal(201);
    const byCn = () => connackCode(gw.ports.mqtts, { ...tlsOptions(), username: undefined } as never);
    try {
      const delegate = await gw.userWith([{ resource: '/api/certificates', operation: 'readWrite', context: 'http' }, { resource: 'plant/#', operation: 'readWrite', context: 'mqtt' }]);
      const before = (await gw.api('GET', '/api/certificates', { token: admin })).body.length;
      const refused = await gw.api('POST', '/api/certificates', { token: delegate.token, body: certs.otherCaCert });
      expect(refused.status, JSON.stringify(refused.body)).to.equal(403);
      expect(refused.body.message).to.include('mqtt readWrite #');
      expect(gw.logs().filter((l) => l.message === 'grant refused' && l.userId === delegate.id)).to.have.length(1);
      expect((await gw.api('GET', '/api/certificates', { token: admin })).body).to.have.length(before);
      expect(await byCn()).to.not.equal(0);

      // One that holds them: trusted, and the CN signs in.
      const holder = await gw.userWith([{ resource: '/api/certificates', operation: 'readWrite', context: 'http' }, { resource: '#', operation: 'readWrite', context: 'mqtt' }]);
      const added = await gw.api('POST', '/api/certificates', { token: holder.token, body: certs.otherCaCert });
      expect(added.status, JSON.stringify(added.body)).to.equal(201);
      expect(await byCn()).to.equal(0);
      expect((await gw.api('DELETE', `/api/certificates?id=${added.body[0].id}`, { token: admin })).status).to.equal(200);
    } finally {
      await gw.api('DELETE', `/api/users/${plc.body.id}`, { token: admin });
    }
  });
});
