// The broker state of the real daemon process survives restarts (issue 12 points 1 and 4):
// retained messages, persistent sessions with their subscriptions and queued QoS 1 messages,
// after SIGTERM and after kill -9 the moment a PUBACK arrived; MQTT 3.1.1 and 5 alike.
import { expect } from 'chai';
import { rmSync } from 'node:fs';
import { expectAckedStateToSurviveKill, killable } from './support/broker-crash-kit.js';
import { ADMIN_PASSWORD, startDaemonProcess, tempDir } from './support/harness.js';
import { connect, connectWithInbox, subscribe } from './support/mqtt-test-kit.js';

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

  for (const protocolVersion of [4, 5] as const) {
    it(`keeps retained messages and persistent sessions across SIGTERM (MQTT ${protocolVersion === 4 ? '3.1.1' : '5'})`, async () => {
      const session = { ...admin, protocolVersion, clientId: `actuator-${protocolVersion}`, clean: false, ...(protocolVersion === 5 ? { properties: { sessionExpiryInterval: 3600 } } : {}) };
      let daemon = await startDaemon();
      try {
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
        expect((await back.inbox.until((m) => m.topic === 'cmd/valve/1')).payload).to.equal('close');
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
});
