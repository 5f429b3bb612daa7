// The broker state of the real daemon process survives restarts (issue 12 points 1 and 4):
// retained messages, persistent sessions with their subscriptions and queued QoS 1 messages,
// after SIGTERM and after kill -9 the moment a PUBACK arrived; MQTT 3.1.1 and 5 alike; a
// returning session gets sessionPresent 1 also without subscriptions (point 3), for mqtt.js and
// for mosquitto_pub/mosquitto_sub.
import { expect } from 'chai';
import { rmSync } from 'node:fs';
import { expectAckedStateToSurviveKill, killable } from './support/broker-crash-kit.js';
import { ADMIN_PASSWORD, startDaemonProcess, tempDir } from './support/harness.js';
import { connackOf, connackRecorder, connect, connectWithInbox, runCli, subscribe } from './support/mqtt-test-kit.js';
import { sessionPresent } from './support/broker-crash-kit.js';

describe('broker state of the daemon across restarts', function () {
  this.timeout(120_000);
  let dataDir: string;
  beforeEach(() => {
    dataDir = tempDir('gatewayd-durable-');
  });
  afterEach(() => rmSync(dataDir, { recursive: true, force: true }));

  async function startDaemon() {
    const d = await startDaemonProcess(dataDir);
    return { ...killable(d.child, d.ready.mqtt as number, d.exited), lines: d.lines };
  }
  const admin = { username: 'admin', password: ADMIN_PASSWORD };

  it('keeps what it acknowledged through kill -9 (retained, queued QoS 1, the session)', async () => {
    await expectAckedStateToSurviveKill({ start: startDaemon, clientOptions: () => admin, topicRoot: 'plant' });
  });

  it('keeps what it acknowledged through kill -9 with MQTT 5 clients (session expiry interval set)', async () => {
    await expectAckedStateToSurviveKill({ start: startDaemon, clientOptions: () => ({ ...admin, protocolVersion: 5, properties: { sessionExpiryInterval: 3600 } }), topicRoot: 'plant' });
  });

  for (const protocolVersion of [4, 5] as const) {
    it(`keeps retained messages and persistent sessions across SIGTERM (MQTT ${protocolVersion === 4 ? '3.1.1' : '5'})`, async () => {
      const expiry = protocolVersion === 5 ? { properties: { sessionExpiryInterval: 3600 } } : {};
      const session = { ...admin, protocolVersion, clientId: `actuator-${protocolVersion}`, clean: false, ...expiry };
      const quiet = { ...admin, protocolVersion, clientId: `quiet-${protocolVersion}`, clean: false, ...expiry };
      let daemon = await startDaemon();
      try {
        expect(await connackOf(daemon.port, quiet), 'a session without subscriptions').to.deep.equal({ sessionPresent: false, code: 0 });
        const actuator = await connect(daemon.port, session);
        expect(await subscribe(actuator, 'cmd/valve/#', 1)).to.deep.equal([1]);
        await actuator.endAsync();
        const publisher = await connect(daemon.port, { ...admin, protocolVersion });
        await publisher.publishAsync('state/valve', 'open', { qos: 1, retain: true });
        await publisher.publishAsync('cmd/valve/1', 'close', { qos: 1 });
        await publisher.endAsync();
        await daemon.stop();

        daemon = await startDaemon();
        const back = await connectWithInbox(daemon.port, session);
        expect(sessionPresent(back.client), 'sessionPresent of the session with a subscription').to.equal(true);
        expect((await back.inbox.until((m) => m.topic === 'cmd/valve/1')).payload).to.equal('close');
        expect(await connackOf(daemon.port, quiet), 'sessionPresent of the session without subscriptions').to.deep.equal({ sessionPresent: true, code: 0 });
        back.client.end(true);
        const reader = await connectWithInbox(daemon.port, { ...admin, protocolVersion });
        await subscribe(reader.client, 'state/#', 1);
        expect((await reader.inbox.until((m) => m.topic === 'state/valve')).payload).to.equal('open');
        reader.client.end(true);
      } finally {
        await daemon.stop();
      }
    });
  }

  it('mosquitto_pub and mosquitto_sub -c (-V mqttv311 and mqttv5) find their sessions after SIGTERM and after kill -9', async () => {
    const login = ['-u', admin.username, '-P', admin.password, '-c'];
    // The kill -9 comes right after the clients came back (their session records rewritten at
    // connect and disconnect): LMDB keeps either version, both say the session exists.
    const clients = (port: number) =>
      ['mqttv311', 'mqttv5'].flatMap((v) => [
        ['mosquitto_pub', ['-h', '127.0.0.1', '-p', String(port), ...login, '-V', v, '-i', `pub-${v}`, '-t', `state/${v}`, '-m', 'on', '-q', '1', '-r']],
        ['mosquitto_sub', ['-h', '127.0.0.1', '-p', String(port), ...login, '-V', v, '-i', `sub-${v}`, '-t', `cmd/${v}/#`, '-q', '1', '-E']],
      ]) as [string, string[]][];
    const runAll = async (port: number) => {
      const relay = await connackRecorder(port);
      try {
        for (const [cmd, args] of clients(relay.port)) expect((await runCli(cmd, args)).code, cmd).to.equal(0);
        return relay.connacks.map((c) => (c.code === 0 ? Number(c.sessionPresent) : `refused ${c.code}`));
      } finally {
        await relay.close();
      }
    };
    let daemon = await startDaemon();
    try {
      expect(await runAll(daemon.port), 'first run').to.deep.equal([0, 0, 0, 0]);
      await daemon.stop();
      daemon = await startDaemon();
      expect(await runAll(daemon.port), 'after SIGTERM').to.deep.equal([1, 1, 1, 1]);
      daemon.kill();
      await daemon.exited;
      daemon = await startDaemon();
      expect(await runAll(daemon.port), 'after kill -9').to.deep.equal([1, 1, 1, 1]);
    } finally {
      await daemon.stop();
    }
  });
});
