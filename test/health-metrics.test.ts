// Health probes and Prometheus metrics (issue 13 points 2 and 3) on the real gateway.
import { expect } from 'chai';
import { gatewaydVersion } from '../src/maintenance/version.js';
import { startGateway, type TestGateway } from './support/harness.js';
import { connect, endAllClients } from './support/mqtt-test-kit.js';

describe('health and metrics', function () {
  describe('probes', () => {
    let gw: TestGateway;
    before(async () => {
      gw = await startGateway({ overrides: { health: { minFreeDiskBytes: 1024 } } });
    });
    after(() => gw.stop());

    it('answers GET /health and /health/ready anonymously, with nothing sensitive', async () => {
      const live = await gw.api('GET', '/health');
      expect(live.status).to.equal(200);
      expect(live.body).to.deep.equal({ status: 'ok', version: gatewaydVersion() });
      expect(gatewaydVersion()).to.match(/^\d+\.\d+\.\d+$/);
      const ready = await gw.api('GET', '/health/ready');
      expect(ready.status).to.equal(200);
      expect(ready.body).to.deep.equal({ status: 'ready', checks: { store: 'ok', broker: 'ok', disk: 'ok', maintenance: 'ok' } });
      expect(JSON.stringify(ready.body)).to.not.include(gw.dataDir);
    });

    it('is not ready while free disk space is below health.minFreeDiskBytes', async () => {
      const tight = await startGateway({ overrides: { health: { minFreeDiskBytes: Number.MAX_SAFE_INTEGER } } });
      try {
        const ready = await tight.api('GET', '/health/ready');
        expect(ready.status).to.equal(503);
        expect(ready.body.checks.disk).to.equal('failing');
        expect((await tight.api('GET', '/health')).status, 'still alive').to.equal(200);
      } finally {
        await tight.stop();
      }
    });
  });

  describe('GET /metrics', () => {
    let gw: TestGateway;
    let admin: string;
    before(async () => {
      gw = await startGateway();
      admin = await gw.login();
    });
    after(async () => {
      await endAllClients();
      await gw.stop();
    });

    it('needs a read permission on /metrics: 401 anonymous, 403 without it; the admin role holds it', async () => {
      expect((await gw.api('GET', '/metrics')).status).to.equal(401);
      const nobody = await gw.userWith([{ resource: '/api/#', operation: 'read', context: 'http' }]);
      expect((await gw.api('GET', '/metrics', { token: nobody.token })).status).to.equal(403);
      const scraper = await gw.userWith([{ resource: '/metrics', operation: 'read', context: 'http' }]);
      expect((await gw.api('GET', '/metrics', { token: scraper.token })).status).to.equal(200);
      expect((await gw.api('GET', '/metrics', { token: admin })).status).to.equal(200);
    });

    it('reports HTTP by route template, MQTT, permissions, logins, store, disk and process figures', async () => {
      const id = (await gw.api('GET', '/api/users/ids', { token: admin })).body[0];
      expect((await gw.api('GET', `/api/users/${id}`, { token: admin })).status).to.equal(200);
      await gw.api('POST', '/api/login', { body: { username: 'admin', password: 'wrong-Passw0rd' } });
      const device = await connect(gw.ports.mqtt, { username: 'admin', password: (await import('./support/harness.js')).ADMIN_PASSWORD });
      await device.publishAsync('metrics/probe', 'x', { qos: 1 });
      const res = await gw.api('GET', '/metrics', { token: admin });
      expect(res.headers.get('content-type')).to.match(/^text\/plain/);
      const text = res.body as string;
      expect(text).to.match(/gatewayd_http_requests_total\{route="\/api\/users\/\{id\}",method="GET",status="200"\} [1-9]/);
      expect(text).to.match(/gatewayd_http_request_duration_seconds_bucket\{route="\/api\/users\/\{id\}",method="GET",status="200",le="\+Inf"\} [1-9]/);
      expect(text).to.not.include(`/api/users/${id}"`);
      expect(text).to.match(/gatewayd_mqtt_clients_connected [1-9]/);
      expect(text).to.match(/gatewayd_mqtt_messages_total\{direction="received"\} [1-9]/);
      expect(text).to.match(/gatewayd_mqtt_connects_refused_total\{reason="bad_credentials"\} \d/);
      expect(text).to.match(/gatewayd_permission_decisions_total\{result="allowed"\} [1-9]/);
      expect(text).to.match(/gatewayd_logins_total\{result="failed"\} [1-9]/);
      expect(text).to.match(/gatewayd_store_bytes [1-9]/);
      expect(text).to.match(/gatewayd_store_writable 1/);
      expect(text).to.match(/gatewayd_disk_free_bytes [1-9]/);
      // The store wrote (the admin user, the CA): the kernel's count of this process's writes and the commits.
      expect(text).to.match(/gatewayd_storage_written_bytes_total [1-9]/);
      expect(text).to.match(/gatewayd_storage_commits_total [1-9]/);
      expect(text).to.match(/gatewayd_storage_staged_writes \d/);
      expect(text).to.match(/gatewayd_storage_writes_total\{outcome="committed"\} \d/);
      expect(text).to.match(/gatewayd_process_resident_memory_bytes [1-9]/);
      expect(text).to.match(/gatewayd_nodejs_eventloop_lag_seconds /);
      expect(text).to.match(/gatewayd_process_cpu_seconds_total [0-9.e-]+/);
      expect(text).to.match(/gatewayd_mqtt_bytes_total\{direction="received"\} [1-9]/);
      expect(text).to.match(/gatewayd_mqtt_connects_total [1-9]/);
      expect(text).to.match(/gatewayd_mqtt_messages_dropped_total 0/);
      expect(text).to.match(/gatewayd_mqtt_queued_messages \d/);
      expect(text).to.match(/gatewayd_permission_decisions_total\{result="denied"\} \d/);
      // Families whose series appear once there is something to report (a mapping connection, a backup).
      for (const family of ['gatewayd_mapping_connection_up', 'gatewayd_mapping_messages_total', 'gatewayd_last_backup_age_seconds']) {
        expect(text).to.include(`# TYPE ${family} `);
      }
      await device.endAsync();
    });

    it('can be opened to anonymous scrapers (metrics.anonymous)', async () => {
      const open = await startGateway({ overrides: { metrics: { anonymous: true } } });
      try {
        const res = await open.api('GET', '/metrics');
        expect(res.status).to.equal(200);
        expect(res.body).to.include('gatewayd_http_requests_total');
      } finally {
        await open.stop();
      }
    });
  });
});
