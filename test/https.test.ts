// HTTPS for the API and the web UI (issue 23): the real daemon's TLS listener checked with the
// tools an operator and a plant network's clients use — curl trusting only the gateway CA,
// openssl s_client for the protocol versions and suites, mqtt.js over wss — a certificate pair
// replaced on disk while a client stays connected, and the plain port as a client outside
// http.plainAllowedFrom meets it (a redirect for the web UI, a 403 for the API before any
// password is looked at).
import { rename, writeFile } from 'node:fs/promises';
import { connect as tcpConnect, type Socket } from 'node:net';
import { join } from 'node:path';
import { request, Agent } from 'node:https';
import { connect as tlsConnect, type PeerCertificate, type TLSSocket } from 'node:tls';
import { readFileSync, rmSync } from 'node:fs';
import { expect } from 'chai';
import express from 'express';
import { WebSocket, WebSocketServer } from 'ws';
import { createHttpServerPart } from '../src/http/http-server.js';
import { createHttpsServerPart } from '../src/http/https-server.js';
import { createSilentLogger } from '../src/log/index.js';
import { gatewaydVersion } from '../src/maintenance/version.js';
import { ADMIN_PASSWORD, startDaemonProcess, startGateway, tempDir, type TestGateway } from './support/harness.js';
import { fetchTrusting, type FetchLike } from './support/https-fetch.js';
import { collect, connectUrl, endAllClients, makeCerts, runCli, subscribe, type Certs } from './support/mqtt-test-kit.js';

const curl = (...args: string[]) => runCli('curl', ['-sS', '--max-time', '10', ...args]);

/** The certificate a fresh TLS handshake with 127.0.0.1:port presents (checked against `ca`). */
function peerCertificate(port: number, ca: string | string[]): Promise<PeerCertificate> {
  return new Promise((resolve, reject) => {
    const socket = tlsConnect({ host: '127.0.0.1', port, ca, servername: 'localhost' }, () => {
      const cert = socket.getPeerCertificate();
      socket.end();
      resolve(cert);
    });
    socket.once('error', reject);
  });
}

/** openssl s_client against the port with these flags; stdin closed, so it ends after the handshake. */
function sClient(port: number, ...flags: string[]) {
  return runCli('openssl', ['s_client', '-connect', `127.0.0.1:${port}`, '-servername', 'localhost', ...flags]);
}

/** A GET over TLS to 127.0.0.1:port on `agent`; the answer's status, Connection header and body. */
function tlsGet(port: number, path: string, agent: Agent): Promise<{ status: number; connection: string | undefined; hsts: string | undefined; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, agent }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, connection: res.headers.connection, hsts: res.headers['strict-transport-security'], body }));
    });
    req.once('error', reject);
    req.end();
  });
}

/** A TCP client that connects and sends nothing: when it connected, and when it was closed with how many bytes it received. */
function silentClient(port: number) {
  const socket: Socket = tcpConnect(port, '127.0.0.1');
  let received = 0;
  socket.on('data', (d: Buffer) => (received += d.length));
  socket.on('error', () => {});
  const connected = new Promise<number>((resolve) => socket.once('connect', () => resolve(Date.now())));
  const closed = new Promise<{ at: number; received: number }>((resolve) => socket.once('close', () => resolve({ at: Date.now(), received })));
  return { socket, connected, closed };
}

/** An open WebSocket to `url`, trusting `ca` for wss. */
function openWebSocket(url: string, ca: string): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { ca });
    ws.once('open', () => resolve(ws));
    ws.once('error', reject);
  });
}

describe('HTTPS', function () {
  this.timeout(30_000);
  afterEach(() => endAllClients());

  describe("with the gateway CA's server certificate (the default)", () => {
    let gw: TestGateway;
    let ca: string;
    before(async () => {
      gw = await startGateway();
      ca = readFileSync(gw.caFile, 'utf8');
    });
    after(() => gw?.stop());

    it('serves the API, the web UI, /health and /metrics to curl trusting only the gateway CA, with HSTS', async () => {
      const health = await curl('-i', '--cacert', gw.caFile, `${gw.httpsUrl}/health`);
      expect(health.code, health.stderr).to.equal(0);
      expect(health.stdout).to.match(/^HTTP\/1\.1 200 /);
      expect(health.stdout).to.match(/\r\nStrict-Transport-Security: max-age=31536000\r\n/i);
      expect(health.stdout).to.include(`{"status":"ok","version":"${gatewaydVersion()}"}`);

      const login = await curl('--cacert', gw.caFile, '-X', 'POST', `${gw.httpsUrl}/api/login`, '-H', 'content-type: application/json', '-d', JSON.stringify({ username: 'admin', password: ADMIN_PASSWORD }));
      expect(login.code, login.stderr).to.equal(0);
      const { token } = JSON.parse(login.stdout) as { token: string };
      const session = await curl('--cacert', gw.caFile, '-H', `authorization: Bearer ${token}`, `${gw.httpsUrl}/api/session`);
      expect(JSON.parse(session.stdout).username).to.equal('admin');
      const metrics = await curl('--cacert', gw.caFile, '-H', `authorization: Bearer ${token}`, `${gw.httpsUrl}/metrics`);
      expect(metrics.stdout).to.match(/^# HELP /m);

      const ui = await curl('-i', '--cacert', gw.caFile, `${gw.httpsUrl}/users`);
      expect(ui.stdout).to.match(/^HTTP\/1\.1 200 /);
      expect(ui.stdout).to.match(/\r\nContent-Security-Policy: default-src 'self'/i);
      expect(ui.stdout).to.include('<!doctype html>');

      // The negative control: without the gateway CA, curl's system roots do not vouch for it.
      const untrusted = await curl(`${gw.httpsUrl}/health`);
      expect(untrusted.code, untrusted.stderr).to.equal(60);
      // Plain answers (loopback: served as before) carry no HSTS.
      const plain = await curl('-i', `${gw.baseUrl}/health`);
      expect(plain.stdout).to.match(/^HTTP\/1\.1 200 /);
      expect(plain.stdout).to.not.match(/Strict-Transport-Security/i);
    });

    it('answers a TLS handshake on the plain port as the HTTPS port does (where HSTS sends a browser), and plain HTTP there as before', async () => {
      const plainPortTls = `https://localhost:${gw.ports.http}`;
      const health = await curl('-i', '--cacert', gw.caFile, `${plainPortTls}/health`);
      expect(health.code, health.stderr).to.equal(0);
      expect(health.stdout).to.match(/^HTTP\/1\.1 200 /);
      expect(health.stdout).to.match(/\r\nStrict-Transport-Security: max-age=31536000\r\n/i);
      const login = await curl('--cacert', gw.caFile, '-X', 'POST', `${plainPortTls}/api/login`, '-H', 'content-type: application/json', '-d', JSON.stringify({ username: 'admin', password: ADMIN_PASSWORD }));
      const { token } = JSON.parse(login.stdout) as { token: string };
      const session = await curl('--cacert', gw.caFile, '-H', `authorization: Bearer ${token}`, `${plainPortTls}/api/session`);
      expect(JSON.parse(session.stdout).username).to.equal('admin');
      const ui = await curl('-i', '--cacert', gw.caFile, `${plainPortTls}/users`);
      expect(ui.stdout).to.match(/^HTTP\/1\.1 200 /);
      expect(ui.stdout).to.include('<!doctype html>');
      // The same certificate and protocol settings as the HTTPS port.
      expect((await peerCertificate(gw.ports.http, ca)).fingerprint256).to.equal((await peerCertificate(gw.ports.https, ca)).fingerprint256);
      const old = await sClient(gw.ports.http, '-tls1_1', '-cipher', 'DEFAULT@SECLEVEL=0');
      expect(old.stdout + old.stderr).to.match(/alert protocol version.*SSL alert number 70/);
      // MQTT over wss on the plain port, and over ws there for a loopback client, as before.
      const wss = await connectUrl(`wss://localhost:${gw.ports.http}/mqtt`, { ca, username: 'admin', password: ADMIN_PASSWORD, protocolVersion: 4, reconnectPeriod: 0 });
      expect(wss.connected).to.equal(true);
      const ws = await connectUrl(`ws://127.0.0.1:${gw.ports.http}/mqtt`, { username: 'admin', password: ADMIN_PASSWORD, protocolVersion: 4, reconnectPeriod: 0 });
      expect(ws.connected).to.equal(true);
      // Plain HTTP on the same port: served, without HSTS; a request with a body too.
      const plain = await curl('-i', `http://127.0.0.1:${gw.ports.http}/health`);
      expect(plain.stdout).to.match(/^HTTP\/1\.1 200 /);
      expect(plain.stdout).to.not.match(/Strict-Transport-Security/i);
      const plainLogin = await gw.api('POST', '/api/login', { body: { username: 'admin', password: ADMIN_PASSWORD } });
      expect(plainLogin.status).to.equal(200);
    });

    it('presents the certificate MQTTS presents (the gateway CA issued it for mqtt.serverHostnames)', async () => {
      const https = await peerCertificate(gw.ports.https, ca);
      const mqtts = await peerCertificate(gw.ports.mqtts, ca);
      expect(https.fingerprint256).to.equal(mqtts.fingerprint256);
      expect(https.subjectaltname).to.include('IP Address:127.0.0.1').and.include('DNS:localhost');
    });

    it('speaks TLS 1.2 and 1.3 only, and only forward-secret AEAD suites in 1.2', async () => {
      // Debian's OpenSSL offers TLS 1.0/1.1 only at security level 0: the client does try, and
      // the alert it reads (70, protocol version) is the server's refusal.
      for (const version of ['-tls1', '-tls1_1']) {
        const old = await sClient(gw.ports.https, version, '-cipher', 'DEFAULT@SECLEVEL=0');
        expect(old.code, version).to.not.equal(0);
        expect(old.stdout + old.stderr, version).to.match(/alert protocol version.*SSL alert number 70/);
        expect(old.stdout, version).to.match(/^CONNECTED/m);
      }
      const v12 = await sClient(gw.ports.https, '-tls1_2', '-CAfile', gw.caFile, '-verify_return_error');
      expect(v12.code, v12.stderr).to.equal(0);
      expect(v12.stdout).to.match(/Protocol\s*: TLSv1\.2/);
      expect(v12.stdout).to.match(/Cipher\s*: ECDHE-RSA-AES(128|256)-GCM-SHA(256|384)|Cipher\s*: ECDHE-RSA-CHACHA20-POLY1305/);
      expect(v12.stdout).to.match(/Verify return code: 0 \(ok\)/);
      const v13 = await sClient(gw.ports.https, '-tls1_3', '-CAfile', gw.caFile, '-verify_return_error');
      expect(v13.code, v13.stderr).to.equal(0);
      expect(v13.stdout).to.match(/New, TLSv1\.3, Cipher is TLS_/);
      // A TLS 1.2 suite without forward secrecy or AEAD: refused by the server (alert 40).
      const cbc = await sClient(gw.ports.https, '-tls1_2', '-cipher', 'AES128-SHA');
      expect(cbc.code).to.not.equal(0);
      expect(cbc.stdout + cbc.stderr).to.match(/alert handshake failure.*SSL alert number 40/);
    });

    it('carries MQTT over wss for mqtt.js trusting the CA file; a client that does not trust it gets no connection', async () => {
      const user = await gw.userWith([{ resource: 'plant/#', operation: 'readWrite', context: 'mqtt' }]);
      const url = `wss://127.0.0.1:${gw.ports.https}/mqtt`;
      const client = await connectUrl(url, { ca: readFileSync(gw.caFile), rejectUnauthorized: true, username: user.username, password: user.token, protocolVersion: 4, reconnectPeriod: 0 });
      const inbox = collect(client);
      expect(await subscribe(client, 'plant/#', 1)).to.deep.equal([1]);
      await client.publishAsync('plant/line-1/state', 'running', { qos: 1 });
      expect((await inbox.until((m) => m.topic === 'plant/line-1/state')).payload).to.equal('running');
      let refused: Error | undefined;
      try {
        await connectUrl(url, { rejectUnauthorized: true, username: user.username, password: user.token, reconnectPeriod: 0, connectTimeout: 5000 });
      } catch (err) {
        refused = err as Error;
      }
      expect(refused?.message).to.match(/unable to verify the first certificate|self[- ]signed certificate in certificate chain|unable to get local issuer/);
    });
  });

  describe("with the operator's certificate files (http.tlsCertFile, http.tlsKeyFile)", () => {
    let first: Certs;
    let second: Certs;
    let dir: string;
    let gw: TestGateway;
    const certFile = () => join(dir, 'gateway.crt');
    const keyFile = () => join(dir, 'gateway.key');
    /** Replaces a file as certbot and most tools do: a new file renamed over the old one. */
    const replace = async (file: string, content: string) => {
      await writeFile(`${file}.new`, content, { mode: 0o600 });
      await rename(`${file}.new`, file);
    };

    before(async () => {
      first = await makeCerts();
      second = await makeCerts();
      dir = tempDir('gatewayd-operator-pki-');
      await writeFile(certFile(), first.serverCert);
      await writeFile(keyFile(), first.serverKey, { mode: 0o600 });
      gw = await startGateway({ overrides: { http: { tlsCertFile: certFile(), tlsKeyFile: keyFile() } } });
    });
    after(async () => {
      await gw?.stop();
      await first?.cleanup();
      await second?.cleanup();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    it('uses a replaced pair from the next handshake on, while an open connection keeps working', async () => {
      const both = [first.caCert, second.caCert];
      const firstFingerprint = (await peerCertificate(gw.ports.https, both)).fingerprint256;
      expect(firstFingerprint).to.not.equal(undefined);
      expect((await peerCertificate(gw.ports.https, first.caCert)).issuer.CN).to.equal('test ca');

      // One keep-alive connection, used before, during and after the change.
      const agent = new Agent({ keepAlive: true, maxSockets: 1, ca: both });
      const onOpenConnection = () =>
        new Promise<{ status: number; reused: boolean; fingerprint: string }>((resolve, reject) => {
          const req = request({ host: '127.0.0.1', port: gw.ports.https, servername: 'localhost', path: '/health', agent }, (res) => {
            const fingerprint = (res.socket as TLSSocket).getPeerCertificate().fingerprint256;
            res.resume();
            res.on('end', () => resolve({ status: res.statusCode ?? 0, reused: req.reusedSocket, fingerprint }));
          });
          req.once('error', reject);
          req.end();
        });
      const opened = await onOpenConnection();
      expect(opened).to.include({ status: 200, reused: false, fingerprint: firstFingerprint });

      // The key first, then the certificate: in between the pair does not fit (kept: the old one).
      await replace(keyFile(), second.serverKey);
      await replace(certFile(), second.serverCert);
      // The daemon reports reloads by log only.
      await gw.waitForLog((l) => l.message === 'HTTPS certificate reloaded');
      const fresh = await peerCertificate(gw.ports.https, both);
      expect(fresh.fingerprint256).to.not.equal(firstFingerprint);
      expect(fresh.issuer.CN).to.equal('test ca');
      expect((await peerCertificate(gw.ports.https, second.caCert)).fingerprint256).to.equal(fresh.fingerprint256);
      // TLS on the plain port is the same server: the new pair there too.
      expect((await peerCertificate(gw.ports.http, second.caCert)).fingerprint256).to.equal(fresh.fingerprint256);
      // The connection opened before the change is the same TLS session with the old certificate.
      const later = await onOpenConnection();
      expect(later).to.include({ status: 200, reused: true, fingerprint: firstFingerprint });
      agent.destroy();
    });

    it('keeps the certificate in use when the new files do not belong together', async () => {
      const before = (await peerCertificate(gw.ports.https, [first.caCert, second.caCert])).fingerprint256;
      const warned = gw.logs().length;
      // A certificate whose key is neither of the server keys on disk (whichever it holds now).
      await replace(certFile(), first.clientCert);
      const warning = await gw.waitForLog((l) => gw.logs().indexOf(l) >= warned && l.message === 'HTTPS certificate files changed but cannot be used yet: the previous certificate stays in use');
      expect(String(warning.error)).to.match(/cannot be used together/);
      expect(JSON.stringify(warning)).to.not.include('PRIVATE KEY');
      expect((await peerCertificate(gw.ports.https, [first.caCert, second.caCert])).fingerprint256).to.equal(before);
    });

    it('refuses to start with a certificate file that cannot be read, naming it', async () => {
      let failure: Error | undefined;
      const dataDir = tempDir();
      try {
        const broken = await startGateway({ dataDir, overrides: { http: { tlsCertFile: join(dir, 'missing.crt'), tlsKeyFile: keyFile() } } });
        await broken.stop();
      } catch (err) {
        failure = err as Error;
      } finally {
        rmSync(dataDir, { recursive: true, force: true });
      }
      expect(failure?.message).to.match(/cannot read the HTTPS certificate \(http\.tlsCertFile\) .*missing\.crt: ENOENT/);
    });
  });

  describe('the plain port, for a client outside http.plainAllowedFrom', () => {
    let gw: TestGateway;
    let secure: FetchLike;
    before(async () => {
      // An empty list: even 127.0.0.1 stands for a remote client on the plant network.
      gw = await startGateway({ overrides: { http: { plainAllowedFrom: [] }, auth: { loginThrottle: { freeAttempts: 1, maxAttempts: 3, maxFailuresPerAddress: 3 } } } });
      secure = fetchTrusting(gw.caFile);
    });
    after(() => gw?.stop());

    it('redirects the web UI to the HTTPS port, keeps /health, refuses /metrics', async () => {
      // The host name the browser used (curl: fetch may not set Host), the HTTPS port.
      const page = await curl('-i', '-H', 'host: gw-hall-b.plant.local:8080', `${gw.baseUrl}/users?tab=roles`);
      expect(page.stdout).to.match(/^HTTP\/1\.1 302 /);
      expect(page.stdout).to.include(`\r\nLocation: https://gw-hall-b.plant.local:${gw.ports.https}/users?tab=roles\r\n`);
      expect(page.stdout).to.match(/\r\nCache-Control: no-store\r\n/i);
      const root = await gw.api('GET', '/');
      expect(root.status).to.equal(302);
      expect(root.headers.get('location')).to.equal(`https://127.0.0.1:${gw.ports.https}/`);
      // Following it lands on the web UI over HTTPS.
      expect((await secure(root.headers.get('location')!)).status).to.equal(200);
      expect((await gw.api('GET', '/health')).status).to.equal(200);
      expect((await gw.api('GET', '/health/ready')).status).to.equal(200);
      const metrics = await gw.api('GET', '/metrics');
      expect(metrics.status).to.equal(403);
      expect(metrics.body.message).to.equal(`plain HTTP is served only to the addresses of http.plainAllowedFrom: use https://127.0.0.1:${gw.ports.https}`);
    });

    it('refuses API calls without reading their password: no failed-login audit, no throttle count', async () => {
      const failedBefore = gw.services.auth.loginCounts().failed;
      for (let i = 0; i < 5; i++) {
        const refused = await gw.api('POST', '/api/login', { body: { username: 'admin', password: `wrong-${i}` } });
        expect(refused.status).to.equal(403);
        expect(refused.body).to.deep.equal({ statusCode: 403, error: 'Forbidden', message: `plain HTTP is served only to the addresses of http.plainAllowedFrom: use https://127.0.0.1:${gw.ports.https}` });
        const basic = await gw.api('GET', '/api/session', { headers: { authorization: `Basic ${Buffer.from(`admin:wrong-${i}`).toString('base64')}` } });
        expect(basic.status).to.equal(403);
      }
      expect(gw.services.auth.loginCounts().failed).to.equal(failedBefore);
      expect(gw.logs().filter((l) => l.message === 'login failed')).to.deep.equal([]);
      // Ten refused guesses, three allowed before a lock: HTTPS still signs admin in at once.
      const login = await secure(`${gw.httpsUrl}/api/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: 'admin', password: ADMIN_PASSWORD }) });
      expect(login.status).to.equal(200);
      expect(login.headers.get('strict-transport-security')).to.equal('max-age=31536000');
      // The negative control: the same wrong password over HTTPS is a failed login, audited and counted.
      const wrong = await secure(`${gw.httpsUrl}/api/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: 'admin', password: 'wrong-again' }) });
      expect(wrong.status).to.equal(401);
      expect(gw.services.auth.loginCounts().failed).to.equal(failedBefore + 1);
      expect(gw.logs().filter((l) => l.message === 'login failed')).to.have.length(1);
    });

    it('serves TLS on the plain port in full (it is HTTPS), while the same calls in clear are redirected or refused', async () => {
      const plainPortTls = `https://127.0.0.1:${gw.ports.http}`;
      const login = await secure(`${plainPortTls}/api/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: 'admin', password: ADMIN_PASSWORD }) });
      expect(login.status).to.equal(200);
      expect(login.headers.get('strict-transport-security')).to.equal('max-age=31536000');
      const page = await secure(`${plainPortTls}/users`);
      expect(page.status).to.equal(200);
      expect(await page.text()).to.include('<!doctype html>');
      const wss = await connectUrl(`wss://127.0.0.1:${gw.ports.http}/mqtt`, { ca: readFileSync(gw.caFile), username: 'admin', password: ADMIN_PASSWORD, protocolVersion: 4, reconnectPeriod: 0 });
      expect(wss.connected).to.equal(true);
      // The same port in clear: the policy as before.
      expect((await gw.api('POST', '/api/login', { body: { username: 'admin', password: ADMIN_PASSWORD } })).status).to.equal(403);
      const redirect = await gw.api('GET', '/users');
      expect(redirect.status).to.equal(302);
      expect(redirect.headers.get('location')).to.equal(`https://127.0.0.1:${gw.ports.https}/users`);
    });

    it('refuses a WebSocket upgrade to /mqtt before any CONNECT is read', async () => {
      const upgrade = new WebSocket(`ws://127.0.0.1:${gw.ports.http}/mqtt`, 'mqtt');
      const status = await new Promise<number>((resolve) => {
        upgrade.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
        upgrade.on('open', () => resolve(101));
        upgrade.on('error', () => resolve(-1));
      });
      upgrade.terminate();
      expect(status).to.equal(403);
      let refused: Error | undefined;
      try {
        await connectUrl(`ws://127.0.0.1:${gw.ports.http}/mqtt`, { username: 'admin', password: 'wrong', protocolVersion: 4, reconnectPeriod: 0, connectTimeout: 5000 });
      } catch (err) {
        refused = err as Error;
      }
      expect(refused, 'mqtt.js over plain ws').to.be.instanceOf(Error);
      expect(gw.logs().some((l) => l.message === 'mqtt.connect.refused' || (l.message === 'login failed' && l.via === 'mqtt'))).to.equal(false);
      const raw = await curl('-i', '-H', 'Connection: Upgrade', '-H', 'Upgrade: websocket', '-H', 'Sec-WebSocket-Version: 13', '-H', 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==', `${gw.baseUrl}/mqtt`);
      expect(raw.stdout).to.match(/^HTTP\/1\.1 403 Forbidden/);
      expect(raw.stdout).to.include(`use https://127.0.0.1:${gw.ports.https}`);
      // wss on the HTTPS port is the way in.
      const client = await connectUrl(`wss://127.0.0.1:${gw.ports.https}/mqtt`, { ca: readFileSync(gw.caFile), username: 'admin', password: ADMIN_PASSWORD, protocolVersion: 4, reconnectPeriod: 0 });
      expect(client.connected).to.equal(true);
    });
  });

  describe('behind a TLS-terminating proxy (http.trustProxy)', () => {
    let gw: TestGateway;
    before(async () => {
      gw = await startGateway({ overrides: { http: { trustProxy: true } } });
    });
    after(() => gw?.stop());

    it("serves what the proxy received over TLS, and refuses what it forwarded from a remote client in clear", async () => {
      const viaTls = await gw.api('GET', '/api/session', { headers: { 'x-forwarded-for': '10.20.30.40', 'x-forwarded-proto': 'https' } });
      expect(viaTls.status).to.equal(401); // served: an API answer, not the plain port's refusal
      const inClear = await gw.api('GET', '/api/session', { headers: { 'x-forwarded-for': '10.20.30.40', 'x-forwarded-proto': 'http' } });
      expect(inClear.status).to.equal(403);
      expect(inClear.body.message).to.match(/use https:\/\//);
      // The proxy's own (loopback) requests are unchanged.
      expect((await gw.api('GET', '/api/session')).status).to.equal(401);
    });
  });

  describe("the plain port's first byte (the two listeners alone, with short timeouts)", () => {
    let certs: Certs;
    before(async () => {
      certs = await makeCerts();
    });
    after(() => certs?.cleanup());

    /** Both listeners on 127.0.0.1 port 0 over one app, and a WebSocket echo endpoint on both (as the broker's /mqtt). */
    async function listeners(options: { firstByteTimeoutMs: number; shutdownTimeoutMs: number }) {
      const app = express();
      app.get('/', (_req, res) => void res.send('ok'));
      const pair = { cert: certs.serverCert, key: certs.serverKey };
      const common = { app, host: '127.0.0.1', port: 0, shutdownTimeoutMs: options.shutdownTimeoutMs };
      const https = createHttpsServerPart({ ...common, log: createSilentLogger(), certificate: { load: async () => pair, watch: () => {}, close: () => {} } });
      const http = createHttpServerPart({ ...common, tls: https, firstByteTimeoutMs: options.firstByteTimeoutMs });
      const echo = new WebSocketServer({ noServer: true });
      echo.on('connection', (ws) => ws.on('message', (m) => ws.send(m)));
      for (const server of [http.upgrades, https.server]) server.on('upgrade', (req, socket, head) => echo.handleUpgrade(req, socket, head, (ws) => echo.emit('connection', ws, req)));
      await https.start();
      await http.start();
      return { http, https };
    }

    it('closes a connection that sends nothing within the first-byte timeout; HTTP and TLS on the same port are served', async () => {
      const { http } = await listeners({ firstByteTimeoutMs: 500, shutdownTimeoutMs: 5000 });
      const agent = new Agent({ ca: certs.caCert });
      try {
        const silent = silentClient(http.port());
        const connectedAt = await silent.connected;
        const { at, received } = await silent.closed;
        expect(received, 'nothing written to a client of unknown protocol').to.equal(0);
        // Not before the timeout (a little slack: the server's clock starts when it accepts);
        // the HTTP server's own headersTimeout (20 s) would be far later.
        expect(at - connectedAt).to.be.at.least(400).and.below(15_000);
        expect(await (await fetch(`http://127.0.0.1:${http.port()}/`)).text()).to.equal('ok');
        expect(await tlsGet(http.port(), '/', agent)).to.include({ status: 200, body: 'ok', hsts: 'max-age=31536000' });
        // WebSocket in clear and over TLS on the plain port.
        for (const url of [`ws://127.0.0.1:${http.port()}/`, `wss://127.0.0.1:${http.port()}/`]) {
          const ws = await openWebSocket(url, certs.caCert);
          ws.send(url);
          expect(String(await new Promise((resolve) => ws.once('message', resolve)))).to.equal(url);
          ws.terminate();
        }
      } finally {
        agent.destroy();
        await http.stop();
      }
    });

    it('a stop closes connections that sent nothing and drains the TLS connections of the plain port with the HTTPS listener', async () => {
      const { http, https } = await listeners({ firstByteTimeoutMs: 60_000, shutdownTimeoutMs: 15_000 });
      const agent = new Agent({ keepAlive: true, maxSockets: 1, ca: certs.caCert });
      const idleAgent = new Agent({ keepAlive: true, maxSockets: 1, ca: certs.caCert });
      try {
        // A client that ends without a byte is let go at once, not after the first-byte timeout.
        const quitter = silentClient(http.port());
        await quitter.connected;
        quitter.socket.end();
        expect((await quitter.closed).received).to.equal(0);

        const silent = silentClient(http.port());
        await silent.connected;
        // WebSocket connections (MQTT over ws/wss): upgraded, they are no longer the HTTP server's.
        const sockets = await Promise.all([`ws://127.0.0.1:${http.port()}/`, `wss://127.0.0.1:${http.port()}/`, `wss://127.0.0.1:${https.port()}/`].map((url) => openWebSocket(url, certs.caCert)));
        const socketsClosed = Promise.all(sockets.map((ws) => new Promise((resolve) => ws.once('close', resolve))));
        expect(await tlsGet(http.port(), '/', agent)).to.include({ status: 200, connection: 'keep-alive' });
        // A TLS connection that stays idle through the stop.
        expect(await tlsGet(http.port(), '/', idleAgent)).to.include({ status: 200, connection: 'keep-alive' });
        const idleClosed = new Promise<void>((resolve) => Object.values(idleAgent.freeSockets).flat()[0]!.once('close', () => resolve()));
        const began = Date.now();
        const stopped = http.stop();
        // A request on the kept-alive TLS connection while the stop begins: answered, and told
        // that the connection ends (the HTTPS listener stops with the plain one).
        expect(await tlsGet(http.port(), '/', agent)).to.include({ status: 200, body: 'ok', connection: 'close' });
        await stopped;
        // The plain port's stop waits for every connection it accepted: the silent one, the idle
        // TLS one and the WebSocket ones were closed after the short grace (250 ms), not at the
        // first-byte (60 s) or shutdown (15 s) timeout, nor when keep-alive ran out (5 s).
        expect(Date.now() - began).to.be.below(4_000);
        expect((await silent.closed).received).to.equal(0);
        await idleClosed;
        await socketsClosed;
        expect(https.server.listening).to.equal(false);
        await https.stop();
      } finally {
        agent.destroy();
        idleAgent.destroy();
        await http.stop();
      }
    });
  });

  it("names the HTTPS port on the daemon's ready line (GATEWAYD_HTTPS_PORT)", async () => {
    const dataDir = tempDir('gatewayd-https-ready-');
    const daemon = await startDaemonProcess(dataDir);
    try {
      expect(daemon.ready.https).to.be.a('number').and.greaterThan(0);
      const health = await curl('--cacert', join(dataDir, 'pki', 'ca.cert.pem'), `https://localhost:${daemon.ready.https}/health`);
      expect(health.stdout, health.stderr).to.equal(`{"status":"ok","version":"${gatewaydVersion()}"}`);
    } finally {
      daemon.child.kill('SIGTERM');
      await daemon.exited;
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
