// The CA is checked against the real openssl CLI and real TLS handshakes, because
// "forge produced something" is not the same as "OpenSSL-based peers accept it".

import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { promises as fs } from 'node:fs';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { promisify } from 'node:util';
import { BadRequestError } from '../src/errors/errors.js';
import {
  decodeBase64Pem,
  describeCertificate,
  encodeBase64Pem,
  fingerprint,
  loadOrCreateCertificateAuthority,
  splitPemCertificates,
  type CertificateAuthority,
} from '../src/certs/index.js';

const execFileAsync = promisify(execFile);
const OPENSSL = '/usr/bin/openssl';
const DAY_MS = 24 * 60 * 60 * 1000;

async function openssl(args: string[], cwd: string): Promise<string> {
  const { stdout } = await execFileAsync(OPENSSL, args, { cwd });
  return stdout;
}

/** Runs fn and returns what it threw (fails the test if it did not throw). */
function thrown(fn: () => unknown): Error {
  try {
    fn();
  } catch (err) {
    return err as Error;
  }
  expect.fail('expected an error to be thrown');
}

async function thrownAsync(fn: () => Promise<unknown>): Promise<Error> {
  try {
    await fn();
  } catch (err) {
    return err as Error;
  }
  expect.fail('expected an error to be thrown');
}

function normalizeOpensslFingerprint(out: string): string {
  return out.trim().split('=')[1]!.replace(/:/g, '').toLowerCase();
}

async function opensslDate(which: 'startdate' | 'enddate', file: string, cwd: string): Promise<number> {
  const out = await openssl(['x509', '-in', file, '-noout', `-${which}`, '-dateopt', 'iso_8601'], cwd);
  // e.g. "notBefore=2026-11-22 00:58:38Z"
  return Date.parse(out.trim().split('=')[1]!.replace(' ', 'T'));
}

describe('certs', function () {
  let tmp: string;
  let caDir: string;
  let ca: CertificateAuthority;
  let deviceDir: string;

  before(async function () {
    tmp = await fs.mkdtemp(path.join(os.tmpdir(), 'gatewayd-certs-'));
    caDir = path.join(tmp, 'ca');
    deviceDir = path.join(tmp, 'device');
    await fs.mkdir(deviceDir);
    ca = await loadOrCreateCertificateAuthority({ dir: caDir, serverHostnames: ['gateway.example', '192.0.2.10'] });
    // The device's key and CSR come from openssl, as on a real device.
    await openssl(
      ['req', '-new', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=device-01', '-keyout', 'device.key.pem', '-out', 'device.csr.pem'],
      deviceDir,
    );
  });

  after(async function () {
    await fs.rm(tmp, { recursive: true, force: true });
  });

  describe('loadOrCreateCertificateAuthority', function () {
    it('creates the CA and a server certificate that openssl verifies', async function () {
      expect((await fs.stat(caDir)).mode & 0o777).to.equal(0o700);
      expect(await fs.readFile(path.join(caDir, 'ca.cert.pem'), 'utf8')).to.equal(ca.caCertPem);
      expect(await fs.readFile(path.join(caDir, 'server.cert.pem'), 'utf8')).to.equal(ca.serverCertPem);
      expect(await fs.readFile(path.join(caDir, 'server.key.pem'), 'utf8')).to.equal(ca.serverKeyPem);
      const out = await openssl(['verify', '-CAfile', 'ca.cert.pem', 'server.cert.pem'], caDir);
      expect(out).to.contain('server.cert.pem: OK');
      const text = await openssl(['x509', '-in', 'server.cert.pem', '-noout', '-text'], caDir);
      expect(text).to.contain('TLS Web Server Authentication');
      expect(text).to.match(/Subject: CN ?= ?gateway\.example/);
    });

    it('loads the existing files on a second call instead of regenerating', async function () {
      const again = await loadOrCreateCertificateAuthority({ dir: caDir, serverHostnames: ['gateway.example', '192.0.2.10'] });
      expect(again.caFingerprint256).to.equal(ca.caFingerprint256);
      expect(again.caCertPem).to.equal(ca.caCertPem);
      expect(again.serverCertPem).to.equal(ca.serverCertPem);
      expect(again.serverKeyPem).to.equal(ca.serverKeyPem);
      for (const key of ['ca.key.pem', 'server.key.pem']) {
        expect((await fs.stat(path.join(caDir, key))).mode & 0o777, key).to.equal(0o600);
      }
      const leftovers = (await fs.readdir(caDir)).filter((f) => f.endsWith('.tmp'));
      expect(leftovers).to.deep.equal([]);
    });

    it('re-issues the server certificate when it expires within 30 days, keeping the CA', async function () {
      const dir = path.join(tmp, 'renew');
      const first = await loadOrCreateCertificateAuthority({ dir });
      const firstExpiry = describeCertificate(first.serverCertPem, true).expiresOn;
      const nearExpiry = new Date(firstExpiry - 10 * DAY_MS);
      const later = await loadOrCreateCertificateAuthority({ dir, now: () => nearExpiry });
      expect(later.caFingerprint256).to.equal(first.caFingerprint256);
      expect(later.serverCertPem).to.not.equal(first.serverCertPem);
      expect(describeCertificate(later.serverCertPem, true).expiresOn).to.be.greaterThan(firstExpiry);
      const at = String(Math.floor(nearExpiry.getTime() / 1000));
      expect(await openssl(['verify', '-attime', at, '-CAfile', 'ca.cert.pem', 'server.cert.pem'], dir)).to.contain('OK');
      // Nothing to do when loaded again at the same time.
      expect(await later.renewServerCertificateIfNeeded()).to.equal(false);
    });

    it('re-issues the server certificate when a configured hostname is missing from it', async function () {
      const dir = path.join(tmp, 'hostnames');
      const first = await loadOrCreateCertificateAuthority({ dir });
      const second = await loadOrCreateCertificateAuthority({ dir, serverHostnames: ['gw.plant.example'] });
      expect(second.serverCertPem).to.not.equal(first.serverCertPem);
      const described = describeCertificate(second.serverCertPem, true);
      expect(described.issuedTo.commonName).to.equal('gw.plant.example');
      expect(described.issuedTo.alternativeNames).to.include.members(['localhost', 'gw.plant.example', '127.0.0.1', '::1']);
    });

    it('re-issues a server key/certificate pair that does not match (power cut between writes)', async function () {
      const dir = path.join(tmp, 'mismatch');
      const first = await loadOrCreateCertificateAuthority({ dir });
      await openssl(['genpkey', '-algorithm', 'RSA', '-pkeyopt', 'rsa_keygen_bits:2048', '-out', 'server.key.pem'], dir);
      const second = await loadOrCreateCertificateAuthority({ dir });
      expect(second.serverCertPem).to.not.equal(first.serverCertPem);
      const modulus = async (args: string[]) => openssl(args, dir);
      expect(await modulus(['x509', '-in', 'server.cert.pem', '-noout', '-modulus'])).to.equal(
        await modulus(['rsa', '-in', 'server.key.pem', '-noout', '-modulus']),
      );
    });

    it('recreates a missing CA certificate from the existing key so issued certificates stay valid', async function () {
      const dir = path.join(tmp, 'recover');
      const first = await loadOrCreateCertificateAuthority({ dir });
      await fs.rm(path.join(dir, 'ca.cert.pem'));
      const second = await loadOrCreateCertificateAuthority({ dir });
      expect(second.serverCertPem).to.equal(first.serverCertPem);
      expect(await openssl(['verify', '-CAfile', 'ca.cert.pem', 'server.cert.pem'], dir)).to.contain('OK');
    });

    it('refuses to replace a CA whose key is missing', async function () {
      const dir = path.join(tmp, 'nokey');
      await loadOrCreateCertificateAuthority({ dir });
      await fs.rm(path.join(dir, 'ca.key.pem'));
      const err = await thrownAsync(() => loadOrCreateCertificateAuthority({ dir }));
      expect(err.message).to.match(/ca\.key\.pem is missing/);
    });
  });

  describe('signCsr', function () {
    it('issues a client certificate that openssl verifies, for clientAuth only', async function () {
      const csrPem = await fs.readFile(path.join(deviceDir, 'device.csr.pem'), 'utf8');
      const certPem = ca.signCsr(csrPem, { expectedCommonName: 'device-01' });
      await fs.writeFile(path.join(deviceDir, 'device.cert.pem'), certPem);
      await fs.writeFile(path.join(deviceDir, 'ca.cert.pem'), ca.caCertPem);
      expect(await openssl(['verify', '-CAfile', 'ca.cert.pem', 'device.cert.pem'], deviceDir)).to.contain('device.cert.pem: OK');
      const eku = await openssl(['x509', '-in', 'device.cert.pem', '-noout', '-ext', 'extendedKeyUsage'], deviceDir);
      expect(eku).to.contain('TLS Web Client Authentication');
      expect(eku).to.not.contain('Server Authentication');
      const text = await openssl(['x509', '-in', 'device.cert.pem', '-noout', '-text'], deviceDir);
      expect(text).to.match(/Subject: CN ?= ?device-01\n/);
      expect(text).to.contain('CA:FALSE');
      expect(text).to.contain('Digital Signature, Key Encipherment');
      expect(text).to.not.contain('Subject Alternative Name');

      const described = describeCertificate(certPem, true);
      expect(described.extendedKeyUsage).to.deep.equal(['clientAuth']);
      expect(described.keyUsage).to.deep.equal(['digitalSignature', 'keyEncipherment']);
      expect(described.basicConstraints).to.deep.equal({ isCA: false, pathLength: -1 });
      expect(described.issuedBy.commonName).to.equal('gatewayd CA');
    });

    it('accepts a Base64-encoded PEM CSR through decodeBase64Pem', async function () {
      const csrPem = await fs.readFile(path.join(deviceDir, 'device.csr.pem'), 'utf8');
      const decoded = decodeBase64Pem(encodeBase64Pem(csrPem));
      expect(decoded.trim()).to.equal(csrPem.trim());
      expect(ca.decodeBase64Pem(csrPem).trim()).to.equal(csrPem.trim());
      const certPem = ca.signCsr(decoded, { expectedCommonName: 'device-01' });
      expect(describeCertificate(certPem, true).issuedTo.commonName).to.equal('device-01');
      for (const bad of ['', 'not base64 at all!', Buffer.from('hello world').toString('base64')]) {
        expect(thrown(() => decodeBase64Pem(bad)), JSON.stringify(bad)).to.be.instanceOf(BadRequestError);
      }
    });

    it('signs EC (P-256) CSRs as well', async function () {
      await openssl(
        ['req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-subj', '/CN=device-ec', '-keyout', 'ec.key.pem', '-out', 'ec.csr.pem'],
        deviceDir,
      );
      const certPem = ca.signCsr(await fs.readFile(path.join(deviceDir, 'ec.csr.pem'), 'utf8'), { expectedCommonName: 'device-ec' });
      await fs.writeFile(path.join(deviceDir, 'ec.cert.pem'), certPem);
      await fs.writeFile(path.join(deviceDir, 'ca.cert.pem'), ca.caCertPem);
      expect(await openssl(['verify', '-CAfile', 'ca.cert.pem', 'ec.cert.pem'], deviceDir)).to.contain('OK');
    });

    it('rejects a CSR whose CN is not the expected username', async function () {
      const csrPem = await fs.readFile(path.join(deviceDir, 'device.csr.pem'), 'utf8');
      const err = thrown(() => ca.signCsr(csrPem, { expectedCommonName: 'device-02' }));
      expect(err).to.be.instanceOf(BadRequestError);
      expect(err.message).to.contain('"device-01"').and.contain('"device-02"');
    });

    it('rejects a tampered CSR', async function () {
      const csrPem = await fs.readFile(path.join(deviceDir, 'device.csr.pem'), 'utf8');
      const lines = csrPem.trim().split('\n');
      // Line 3 of the body lies inside the RSA modulus: the DER stays well-formed, the signature breaks.
      const line = lines[3]!;
      const flipped = line[10] === 'A' ? 'B' : 'A';
      lines[3] = line.slice(0, 10) + flipped + line.slice(11);
      const err = thrown(() => ca.signCsr(lines.join('\n') + '\n', { expectedCommonName: 'device-01' }));
      expect(err).to.be.instanceOf(BadRequestError);
      expect(err.message).to.match(/^invalid CSR/);
      expect(err.message).to.contain('signature');

      // Broken structure is an invalid CSR too, not an internal error.
      const garbled = csrPem.replace(/\n[A-Za-z0-9+/]{64}\n/, '\nAAAA\n');
      expect(thrown(() => ca.signCsr(garbled, { expectedCommonName: 'device-01' }))).to.be.instanceOf(BadRequestError);
      expect(thrown(() => ca.signCsr('hello', { expectedCommonName: 'device-01' }))).to.be.instanceOf(BadRequestError);
      expect(thrown(() => ca.signCsr(ca.caCertPem, { expectedCommonName: 'device-01' }))).to.be.instanceOf(BadRequestError);
    });
    it('rejects a CSR whose signature parameters are no DER NULL, as openssl does (a BOOLEAN of no byte and a constructed NULL passed: fuzz findings)', async function () {
      const csrPem = await fs.readFile(path.join(deviceDir, 'device.csr.pem'), 'utf8');
      const der = Buffer.from(csrPem.replace(/-----[^-]+-----/g, '').replace(/\s+/g, ''), 'base64');
      // The outer sha256WithRSAEncryption identifier (after the signed part, so the signature still holds): NULL 05 00 made BOOLEAN 01 00, then constructed NULL 25 00.
      const at = der.lastIndexOf(Buffer.from('06092a864886f70d01010b0500', 'hex'));
      expect(at).to.be.greaterThan(0);
      for (const [tag, name] of [[0x01, 'boolean'], [0x25, 'constructed-null']] as const) {
        const mutated = Buffer.from(der);
        mutated[at + 11] = tag;
        const mutatedPem = `-----BEGIN CERTIFICATE REQUEST-----\n${mutated.toString('base64').replace(/(.{64})/g, '$1\n')}\n-----END CERTIFICATE REQUEST-----\n`;
        await fs.writeFile(path.join(deviceDir, `${name}-params.csr.pem`), mutatedPem);
        const refusedByOpenssl = await openssl(['req', '-in', `${name}-params.csr.pem`, '-verify', '-noout'], deviceDir).then(() => false, () => true);
        expect(refusedByOpenssl, name).to.equal(true);
        const err = thrown(() => ca.signCsr(mutatedPem, { expectedCommonName: 'device-01' }));
        expect(err, name).to.be.instanceOf(BadRequestError);
        expect(err.message, name).to.equal('invalid CSR: malformed PKCS#10 structure');
      }
    });
  });

  describe('pem helpers', function () {
    it('splits a bundle of two certificates', function () {
      const bundle = `# gateway CA\n${ca.caCertPem}\nsubject=CN = gateway.example\n${ca.serverCertPem}`;
      const parts = splitPemCertificates(bundle);
      expect(parts).to.have.length(2);
      expect(parts[0]).to.equal(ca.caCertPem);
      expect(parts[1]).to.equal(ca.serverCertPem);
    });

    it('rejects garbage, private keys and oversized bundles', function () {
      for (const bad of ['', 'garbage', '-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n',
        '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n', ca.caCertPem.replace('-----END CERTIFICATE-----', '')]) {
        const err = thrown(() => splitPemCertificates(bad));
        expect(err, JSON.stringify(bad)).to.be.instanceOf(BadRequestError);
      }
      expect(thrown(() => splitPemCertificates('garbage')).message).to.contain('no PEM certificate found');
      const withKey = thrown(() => splitPemCertificates(ca.caCertPem + ca.serverKeyPem));
      expect(withKey).to.be.instanceOf(BadRequestError);
      expect(withKey.message).to.contain('private key');
      expect(thrown(() => splitPemCertificates(ca.caCertPem.repeat(101))).message).to.contain('too many');
      expect(splitPemCertificates(ca.caCertPem.repeat(100))).to.have.length(100);
    });

    it('describes the CA certificate consistently with openssl', async function () {
      const d = describeCertificate(ca.caCertPem, false);
      expect(d.basicConstraints).to.deep.equal({ isCA: true, pathLength: 0 });
      expect(d.keyUsage).to.include.members(['keyCertSign', 'cRLSign']);
      expect(d.extendedKeyUsage).to.deep.equal([]);
      expect(d.removable).to.equal(false);
      expect(d.issuedTo).to.deep.equal({ commonName: 'gatewayd CA', organization: 'gatewayd', organizationalUnit: '', alternativeNames: [] });
      expect(d.issuedBy).to.deep.equal({ commonName: 'gatewayd CA', organization: 'gatewayd', organizationalUnit: '' });
      expect(d.issuedOn).to.equal(await opensslDate('startdate', 'ca.cert.pem', caDir));
      expect(d.expiresOn).to.equal(await opensslDate('enddate', 'ca.cert.pem', caDir));
      expect(Number.isInteger(d.issuedOn) && Number.isInteger(d.expiresOn)).to.equal(true);
      const sha256 = normalizeOpensslFingerprint(await openssl(['x509', '-in', 'ca.cert.pem', '-noout', '-fingerprint', '-sha256'], caDir));
      const sha1 = normalizeOpensslFingerprint(await openssl(['x509', '-in', 'ca.cert.pem', '-noout', '-fingerprint', '-sha1'], caDir));
      expect(d.fingerprints).to.deep.equal({ sha1, sha256 });
      expect(d.id).to.equal(sha256);
      expect(ca.caFingerprint256).to.equal(sha256);
      expect(fingerprint(ca.caCertPem, 'sha1')).to.equal(sha1);
    });

    it('describes the server certificate with its alternative names', function () {
      const d = describeCertificate(ca.serverCertPem, true);
      expect(d.issuedTo.commonName).to.equal('gateway.example');
      expect(d.issuedTo.alternativeNames).to.include.members(['localhost', 'gateway.example', '127.0.0.1', '::1', '192.0.2.10']);
      expect(d.extendedKeyUsage).to.deep.equal(['serverAuth']);
      expect(d.basicConstraints).to.deep.equal({ isCA: false, pathLength: -1 });
      expect(d.removable).to.equal(true);
    });
  });

  describe('TLS', function () {
    async function listen(options: tls.TlsOptions): Promise<{ server: tls.Server; port: number }> {
      const server = tls.createServer(options, (socket) => socket.end('hello'));
      server.listen(0, '127.0.0.1');
      await once(server, 'listening');
      return { server, port: (server.address() as AddressInfo).port };
    }

    async function connect(options: tls.ConnectionOptions): Promise<tls.TLSSocket> {
      const socket = tls.connect({ host: '127.0.0.1', ...options });
      await once(socket, 'secureConnect');
      return socket;
    }

    it('completes a handshake that authorizes the server certificate', async function () {
      const { server, port } = await listen({ key: ca.serverKeyPem, cert: ca.serverCertPem });
      try {
        for (const servername of ['localhost', 'gateway.example', undefined]) {
          // undefined: no SNI, so Node checks the 127.0.0.1 IP SAN.
          const socket = await connect({ port, ca: ca.caCertPem, ...(servername ? { servername } : {}) });
          expect(socket.authorized, String(servername)).to.equal(true);
          socket.destroy();
        }
        // Without the gateway CA the same certificate is not trusted.
        const untrusted = tls.connect({ host: '127.0.0.1', port, servername: 'localhost', ca: [] });
        const [err] = (await once(untrusted, 'error')) as [Error & { code?: string }];
        expect(err.code).to.match(/UNABLE_TO_VERIFY_LEAF_SIGNATURE|SELF_SIGNED|UNABLE_TO_GET_ISSUER/);
      } finally {
        server.close();
      }
    });

    it('accepts a client certificate issued by signCsr in mutual TLS', async function () {
      const clientCert = await fs.readFile(path.join(deviceDir, 'device.cert.pem'), 'utf8');
      const clientKey = await fs.readFile(path.join(deviceDir, 'device.key.pem'), 'utf8');
      const { server, port } = await listen({
        key: ca.serverKeyPem,
        cert: ca.serverCertPem,
        requestCert: true,
        rejectUnauthorized: true,
        ca: ca.caCertPem,
      });
      try {
        const accepted = once(server, 'secureConnection') as Promise<[tls.TLSSocket]>;
        const socket = await connect({ port, servername: 'localhost', ca: ca.caCertPem, key: clientKey, cert: clientCert });
        const [serverSide] = await accepted;
        expect(serverSide.authorized).to.equal(true);
        expect(serverSide.getPeerCertificate().subject.CN).to.equal('device-01');
        socket.destroy();

        // A self-signed client certificate with the same CN is refused.
        await openssl(
          ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=device-01', '-days', '1', '-keyout', 'rogue.key.pem', '-out', 'rogue.cert.pem'],
          deviceDir,
        );
        const refused = once(server, 'tlsClientError');
        const rogue = tls.connect({
          host: '127.0.0.1',
          port,
          servername: 'localhost',
          ca: ca.caCertPem,
          key: await fs.readFile(path.join(deviceDir, 'rogue.key.pem')),
          cert: await fs.readFile(path.join(deviceDir, 'rogue.cert.pem')),
        });
        rogue.on('error', () => {});
        await refused;
        rogue.destroy();
      } finally {
        server.close();
      }
    });
  });
});
