// Operations kept in the store (docs/design.md §13): a targetState set through PUT …/{id}/operation
// survives restarts of the gateway (same data directory, real LMDB, a real Modbus TCP peer)
// until the service file changes that resource. And a services directory the daemon cannot
// write: the API answers 409 and changes nothing.
import { chmodSync, chownSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { ADMIN_PASSWORD, startDaemonProcess, startGateway, tempDir, type TestGateway } from './support/harness.js';
import { startModbusServer, until, type ModbusTestServer } from './mapping-support.js';

const plantYaml = (port: number, pollIntervalMs: number) => `resources:
  plc:
    type: Connection
    properties: {protocol: Modbus, configuration: {host: 127.0.0.1, port: ${port}}}
  temp:
    type: Endpoint
    properties: {connection: !ref plc, operation: read, address: {table: holding, address: 0}, pollIntervalMs: ${pollIntervalMs}}
  level:
    type: Endpoint
    properties: {connection: !ref plc, operation: read, address: {table: holding, address: 1}, pollIntervalMs: 100}
  routes:
    type: Mapping
    properties: {mappings: [{source: a/b, target: c/d}]}
`;

describe('protocol-mapping operations kept in the store', function () {
  this.timeout(60_000);
  let modbus: ModbusTestServer;
  let dataDir: string;
  let servicesDir: string;
  let gw: TestGateway | undefined;
  let admin: string;

  const start = async () => {
    gw = await startGateway({ dataDir, overrides: { mapping: { servicesDir } } });
    admin = await gw.login();
  };
  const restart = async () => {
    await gw!.stop();
    await start();
  };
  const view = async (kind: string, id: string) => (await gw!.api('GET', `/api/${kind}/${id}`, { token: admin })).body as { targetState: string; currentState: string };
  const operate = (kind: string, id: string, operation: string) => gw!.api('PUT', `/api/${kind}/${id}/operation`, { token: admin, body: { operation } });
  const stored = (id: string) => gw!.services.store.kv.get(['mapping-operation', id]) as { targetState: string; definitionHash: string } | undefined;

  before(async () => {
    modbus = await startModbusServer();
    dataDir = tempDir();
    servicesDir = join(dataDir, 'services');
    mkdirSync(servicesDir);
    writeFileSync(join(servicesDir, 'plant.yaml'), plantYaml(modbus.port, 50));
  });
  after(async () => {
    await gw?.stop();
    await modbus?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('keeps connect/disconnect and enable/disable across restarts until the file changes the resource', async () => {
    await start();
    await until(async () => ((await view('endpoints', 'plant.temp')).currentState === 'enabled' ? true : undefined), 10_000, 'temp enabled');
    expect((await operate('connections', 'plant.plc', 'disconnect')).status).to.equal(200);
    expect((await operate('endpoints', 'plant.temp', 'disable')).body.targetState).to.equal('disabled');
    expect((await operate('mappings', 'plant.routes', 'disable')).body.targetState).to.equal('disabled');
    expect(stored('plant.plc')).to.include({ targetState: 'disconnected' });
    expect(stored('plant.temp')!.definitionHash).to.match(/^[0-9a-f]{64}$/);

    await restart();
    const accepted = modbus.accepted;
    expect(await view('connections', 'plant.plc')).to.include({ targetState: 'disconnected', currentState: 'disconnected' });
    expect(await view('endpoints', 'plant.temp')).to.include({ targetState: 'disabled', currentState: 'disabled' });
    expect(await view('endpoints', 'plant.level')).to.include({ targetState: 'enabled', currentState: 'enabling' });
    expect(await view('mappings', 'plant.routes')).to.include({ targetState: 'disabled', currentState: 'disabled' });
    expect(modbus.accepted).to.equal(accepted); // it did not connect

    // The file changes temp (not plc, not routes): temp takes the file's target again, its record goes.
    const put = await gw!.api('PUT', '/api/services/plant', { token: admin, raw: plantYaml(modbus.port, 80), headers: { 'content-type': 'application/yaml' } });
    expect(put.status).to.equal(200);
    expect(put.body.changes.restarted).to.deep.equal(['plant.temp']);
    expect((await view('endpoints', 'plant.temp')).targetState).to.equal('enabled');
    expect(stored('plant.temp')).to.equal(undefined);
    expect(stored('plant.plc')).to.include({ targetState: 'disconnected' });

    await restart();
    expect(await view('connections', 'plant.plc')).to.include({ targetState: 'disconnected', currentState: 'disconnected' });
    expect((await view('endpoints', 'plant.temp')).targetState).to.equal('enabled');
    expect((await view('mappings', 'plant.routes')).targetState).to.equal('disabled');

    // Changed while the gateway was down: the stored operation is dropped at start.
    await gw!.stop();
    writeFileSync(join(servicesDir, 'plant.yaml'), plantYaml(modbus.port, 80).replace('port: ', 'timeoutMs: 900, port: '));
    await start();
    await until(async () => ((await view('connections', 'plant.plc')).currentState === 'connected' ? true : undefined), 10_000, 'plc connected');
    expect((await view('connections', 'plant.plc')).targetState).to.equal('connected');
    expect(stored('plant.plc')).to.equal(undefined);
    expect(gw!.logs().some((l) => l.message === 'stored operations dropped: their resources changed' && l.count === 1)).to.equal(true);

    // Changed by hand in the watched directory while running: the same.
    expect((await operate('endpoints', 'plant.level', 'disable')).body.targetState).to.equal('disabled');
    expect(stored('plant.level')).to.include({ targetState: 'disabled' });
    const text = readFileSync(join(servicesDir, 'plant.yaml'), 'utf8');
    writeFileSync(join(servicesDir, 'plant.yaml'), text.replace('address: 1}, pollIntervalMs: 100', 'address: 1}, pollIntervalMs: 120'));
    await until(async () => ((await view('endpoints', 'plant.level')).targetState === 'enabled' ? true : undefined), 10_000, 'level enabled by the edited file');
    await until(() => (stored('plant.level') === undefined ? true : undefined), 10_000, 'level record dropped');
  });
});

describe('a services directory the daemon cannot write', function () {
  this.timeout(60_000);

  it('answers 409 with the reason and changes nothing; reading and validating still work', async () => {
    const dataDir = tempDir();
    const servicesDir = join(dataDir, 'services');
    mkdirSync(servicesDir, { mode: 0o755 });
    const text = 'resources:\n  m:\n    type: Mapping\n    properties: {mappings: [{source: a/b, target: c/d}]}\n';
    writeFileSync(join(servicesDir, 'routes.yaml'), text, { mode: 0o644 });
    // Root writes anywhere: then the daemon runs as nobody, the directory staying root's (as
    // /etc/gatewayd/services under systemd); otherwise the directory is made read-only.
    const root = process.getuid?.() === 0;
    const as = root ? { uid: 65534, gid: 65534 } : {};
    if (root) chownSync(dataDir, 65534, 65534);
    else chmodSync(servicesDir, 0o555);
    const daemon = await startDaemonProcess(dataDir, { GATEWAYD_SET__MAPPING__SERVICES_DIR: servicesDir }, as);
    try {
      const base = `http://127.0.0.1:${daemon.ready.http}`;
      const auth = { authorization: `Basic ${Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64')}` };
      const call = async (method: string, path: string, body?: string) => {
        const res = await fetch(base + path, { method, headers: { ...auth, ...(body ? { 'content-type': 'application/yaml' } : {}) }, ...(body ? { body } : {}) });
        return { status: res.status, body: (await res.json()) as Record<string, any> };
      };
      expect((await call('GET', '/api/services')).body).to.have.length(1);
      const put = await call('PUT', '/api/services/more', text);
      expect(put.status).to.equal(409);
      expect(put.body.message).to.match(/^the services directory .* is not writable \((EACCES|EROFS|EPERM)\)/);
      const replace = await call('PUT', '/api/services/routes', text.replace('c/d', 'e/f'));
      expect(replace.status).to.equal(409);
      expect((await call('DELETE', '/api/services/routes')).status).to.equal(409);
      expect(readFileSync(join(servicesDir, 'routes.yaml'), 'utf8')).to.equal(text);
      expect((await call('GET', '/api/mappings/routes.m')).status).to.equal(200);
      expect((await call('POST', '/api/services/more/validate', text)).body.valid).to.equal(true);
    } finally {
      daemon.child.kill('SIGTERM');
      await daemon.exited;
      if (!root) chmodSync(servicesDir, 0o755);
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
