// Store-and-forward through the real daemon process: 10,000 QoS 1 messages published while the
// uplink is cut (TCP proxy), the daemon killed with SIGKILL the moment the last PUBACK arrived,
// started again on the same data, the uplink restored: every message reaches the upstream
// Mosquitto, in order (duplicates are allowed and counted).
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import mqtt from 'mqtt';
import { ADMIN_PASSWORD, startDaemonProcess, tempDir } from './support/harness.js';
import { startMosquitto, type Mosquitto } from './support/mosquitto.js';
import { startTcpProxy, type TcpProxy } from './support/tcp-proxy.js';
import { connect, subscribe, withTimeout } from './support/mqtt-test-kit.js';
import { bridgeService } from './bridges-support.js';

const TOTAL = 10_000;

describe('bridge store-and-forward through kill -9 of the daemon', function () {
  this.timeout(120_000);
  let mosquitto: Mosquitto;
  let proxy: TcpProxy;
  let dataDir: string;
  let daemon: Awaited<ReturnType<typeof startDaemonProcess>> | undefined;

  before(async () => {
    mosquitto = await startMosquitto();
    proxy = await startTcpProxy({ port: mosquitto.port });
    dataDir = tempDir('gatewayd-bridge-daemon-');
  });
  after(async () => {
    if (daemon && daemon.child.exitCode === null) {
      daemon.child.kill('SIGTERM');
      await daemon.exited;
    }
    await proxy?.close();
    await mosquitto?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  // The publisher sends faster than the broker's default 1,000 publishes/s per client.
  const start = () => startDaemonProcess(dataDir, { GATEWAYD_SET__MAPPING__SERVICESDIR: join(dataDir, 'services'), GATEWAYD_SET__MQTT__MAXPUBLISHESPERSECOND: '1000000' });
  const api = async (method: string, path: string, token: string | undefined, body?: unknown, raw?: string) => {
    const headers: Record<string, string> = {};
    if (token) headers.authorization = `Bearer ${token}`;
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (raw !== undefined) headers['content-type'] = 'application/yaml';
    const res = await fetch(`http://127.0.0.1:${daemon!.ready.http}${path}`, { method, headers, body: raw ?? (body === undefined ? undefined : JSON.stringify(body)) });
    return { status: res.status, body: (await res.json()) as any };
  };
  /** Polls the bridge over REST (another process: no event to wait on); bounded. */
  const bridgeUntil = async (token: string, pred: (v: any) => boolean, ms = 20_000) => {
    const deadline = Date.now() + ms;
    let last: any;
    while (Date.now() < deadline) {
      last = (await api('GET', '/api/bridges/cloud.uplink', token)).body;
      if (pred(last)) return last;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`bridge state not reached: ${JSON.stringify(last)}`);
  };

  it('delivers every acknowledged message upstream in order after an outage, a SIGKILL and a restart', async () => {
    // Upstream: a persistent subscriber that records everything.
    const received: number[] = [];
    const sub = await connect(mosquitto.port, { clientId: 'historian', clean: false });
    sub.on('message', (_t, p) => received.push(Number(p.toString())));
    await subscribe(sub, 'site-a/#', 1);

    daemon = await start();
    const login = await api('POST', '/api/login', undefined, { username: 'admin', password: ADMIN_PASSWORD });
    let token: string = login.body.token;
    const user = await api('POST', '/api/users', token, {
      username: 'bridge-cloud',
      password: 'Str0ng-Password',
      identityProvider: 'local',
      initialPermissions: [{ context: 'mqtt', resource: 'plant/#', operation: 'read' }],
    });
    expect(user.status).to.equal(201);
    const text = bridgeService('uplink', { urls: [`mqtt://127.0.0.1:${proxy.port}`], runAs: 'bridge-cloud', topics: [{ pattern: 'plant/#', direction: 'out', qos: 1, remotePrefix: 'site-a/' }] });
    expect((await api('PUT', '/api/services/cloud', token, undefined, text)).status).to.equal(201);
    await bridgeUntil(token, (v) => v.currentState === 'connected');

    proxy.cut();
    await bridgeUntil(token, (v) => v.currentState !== 'connected');
    const publisher = await mqtt.connectAsync({ host: '127.0.0.1', port: daemon.ready.mqtt, username: 'admin', password: ADMIN_PASSWORD, reconnectPeriod: 0, clientId: 'plc-1' });
    // Pipelined, 200 in flight; SIGKILL right after the last PUBACK.
    for (let base = 0; base < TOTAL; base += 200) {
      await Promise.all(Array.from({ length: Math.min(200, TOTAL - base) }, (_, i) => publisher.publishAsync('plant/line-1/count', String(base + i), { qos: 1 })));
    }
    daemon.child.kill('SIGKILL');
    await daemon.exited;
    publisher.end(true);

    daemon = await start();
    token = (await api('POST', '/api/login', undefined, { username: 'admin', password: ADMIN_PASSWORD })).body.token;
    const queued = await bridgeUntil(token, (v) => v.queue.messages > 0);
    expect(queued.queue.messages, 'queued after the restart').to.equal(TOTAL);
    proxy.restore();
    await withTimeout(
      new Promise<void>((resolve) => {
        const check = () => (new Set(received).size >= TOTAL ? resolve() : setTimeout(check, 50));
        check();
      }),
      60_000,
      `only ${new Set(received).size} of ${TOTAL} arrived`,
    );
    // In order: each message's first arrival comes after the previous one's; a duplicate repeats an earlier one.
    const firsts: number[] = [];
    const seen = new Set<number>();
    for (const n of received) {
      if (seen.has(n)) continue;
      seen.add(n);
      firsts.push(n);
    }
    expect(firsts).to.deep.equal([...Array(TOTAL).keys()]);
    const duplicates = received.length - TOTAL;
    const view = await bridgeUntil(token, (v) => v.queue.messages === 0);
    expect(view.counters.forwarded).to.be.at.least(TOTAL);
    console.log(`      ${TOTAL} messages upstream in order, ${duplicates} duplicates, ${view.counters.resent} resent`);
    await sub.endAsync();
  });
});
