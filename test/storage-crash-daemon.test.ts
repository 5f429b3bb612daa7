// kill -9 of the real daemon inside the storage policy's hold, inside a group-commit window
// (issue 28 point 2) and among fast acknowledgements made durable in the commit journal while
// compactions run (issue 36): what was acknowledged survives, in order; what was not acknowledged
// yet was never promised. The hold and the window are stretched by configuration so that the kill
// provably lands inside them.
import { rmSync } from 'node:fs';
import { expect } from 'chai';
import type { MqttClient } from 'mqtt';
import { killable, type KillableBroker } from './support/broker-crash-kit.js';
import { ADMIN_PASSWORD, startDaemonProcess, tempDir } from './support/harness.js';
import { connect, connectWithInbox, endAllClients, subscribe, withTimeout } from './support/mqtt-test-kit.js';

describe('storage policy: kill -9 of the daemon inside a hold and inside a commit window', function () {
  this.timeout(90_000);
  let dataDir: string;
  const admin = { username: 'admin', password: ADMIN_PASSWORD };
  beforeEach(() => {
    dataDir = tempDir('gatewayd-storage-crash-');
  });
  afterEach(async () => {
    await endAllClients();
    rmSync(dataDir, { recursive: true, force: true });
  });

  async function start(env: Record<string, string>): Promise<KillableBroker> {
    const d = await startDaemonProcess(dataDir, env);
    return killable(d.child, d.ready.mqtt as number, d.exited);
  }

  /** Publishes QoS 1; resolves with the time its PUBACK arrived. */
  function puback(client: MqttClient, topic: string, payload: string): Promise<number> {
    return new Promise((resolve, reject) => client.publish(topic, payload, { qos: 1 }, (err) => (err ? reject(err) : resolve(Date.now()))));
  }

  it('a copy held for a connected subscriber that never acknowledges: the PUBACK comes only after the hold, and what it acknowledged survives kill -9', async () => {
    const HOLD_MS = 2500;
    let daemon = await start({ GATEWAYD_SET__STORAGE__HOLD_MS: String(HOLD_MS) });
    try {
      const slow = await connect(daemon.port, { ...admin, clientId: 'hold-slow', clean: false });
      await subscribe(slow, 'hold/#', 1);
      const unacknowledged: string[] = [];
      // mqtt.js acknowledges a QoS 1 message once handleMessage calls back: this subscriber never does.
      slow.handleMessage = (packet, _callback) => void unacknowledged.push(String(packet.payload));
      const publisher = await connect(daemon.port, { ...admin, clientId: 'hold-publisher' });
      const sent = Date.now();
      const acked = puback(publisher, 'hold/valve', 'open');
      // The subscriber has the message, not the disk: the publisher waits.
      await withTimeout(
        (async () => {
          while (unacknowledged.length === 0) await new Promise((r) => setTimeout(r, 10));
        })(),
        5000,
        'the subscriber did not get the message',
      );
      // Kill in the PUBACK callback: the acknowledged copy must be on disk by then.
      const at = await new Promise<number>((resolve, reject) =>
        acked.then((t) => {
          daemon.kill();
          resolve(t);
        }, reject),
      );
      expect(at - sent, 'not acknowledged before the hold was over').to.be.at.least(HOLD_MS - 200);
      await daemon.exited;
      slow.end(true);
      publisher.end(true);

      daemon = await start({ GATEWAYD_SET__STORAGE__HOLD_MS: String(HOLD_MS) });
      const back = await connectWithInbox(daemon.port, { ...admin, clientId: 'hold-slow', clean: false });
      expect((await back.inbox.until((m) => m.topic === 'hold/valve')).payload, 'the unacknowledged copy survived').to.equal('open');
    } finally {
      await daemon.stop();
    }
  });

  it('copies for a session away wait for a group commit: everything acknowledged survives kill -9 inside the next window, in order', async () => {
    const WINDOW_MS = 3000;
    // No wear budget: every commit waits for the interval (with one, a waiting copy is committed at once).
    const env = { GATEWAYD_SET__STORAGE__COMMIT_INTERVAL_MS: String(WINDOW_MS), GATEWAYD_SET__STORAGE__FLASH__BURST_BYTES: '0' };
    let daemon = await start(env);
    try {
      const away = await connect(daemon.port, { ...admin, clientId: 'window-away', clean: false });
      await subscribe(away, 'window/#', 1);
      await away.endAsync();
      const publisher = await connect(daemon.port, { ...admin, clientId: 'window-publisher' });
      // A batch published at once: acknowledged together, by one group commit.
      const batch = Array.from({ length: 20 }, (_, i) => puback(publisher, 'window/seq', `m${i}`));
      const acks = await Promise.all(batch);
      expect(Math.max(...acks) - Math.min(...acks), 'one commit acknowledged the batch').to.be.below(WINDOW_MS / 2);
      // The next message waits for the next window: kill -9 inside it, before its PUBACK.
      let lateAcked = false;
      void puback(publisher, 'window/seq', 'late').then(() => (lateAcked = true), () => undefined);
      await new Promise((r) => setTimeout(r, 300));
      expect(lateAcked, 'inside the window: not acknowledged yet').to.equal(false);
      daemon.kill();
      await daemon.exited;
      publisher.end(true);

      daemon = await start(env);
      const back = await connectWithInbox(daemon.port, { ...admin, clientId: 'window-away', clean: false });
      await back.inbox.until((m) => m.payload === 'm19');
      const got = back.inbox.messages.filter((m) => m.topic === 'window/seq').map((m) => m.payload);
      expect(got.slice(0, 20), 'every acknowledged message, in order').to.deep.equal(Array.from({ length: 20 }, (_, i) => `m${i}`));
    } finally {
      await daemon.stop();
    }
  });

  it('fast acknowledgements (journal frames, compactions every 300 ms meanwhile): one message in flight, kill -9 in the last PUBACK callback, every acknowledged message survives in order', async () => {
    const COUNT = 150;
    const env = { GATEWAYD_SET__STORAGE__BACKGROUND_COMMIT_MS: '300' };
    let daemon = await start(env);
    try {
      const away = await connect(daemon.port, { ...admin, clientId: 'fast-away', clean: false });
      await subscribe(away, 'fast/#', 1);
      await away.endAsync();
      const publisher = await connect(daemon.port, { ...admin, clientId: 'fast-publisher' });
      const started = Date.now();
      for (let i = 0; i < COUNT - 1; i++) await puback(publisher, 'fast/seq', `m${i}`);
      const perMessage = (Date.now() - started) / (COUNT - 1);
      expect(perMessage, 'acknowledged as the journal commits, not once per commit interval (500 ms)').to.be.below(100);
      await new Promise<void>((resolve, reject) =>
        puback(publisher, 'fast/seq', `m${COUNT - 1}`).then(() => {
          daemon.kill();
          resolve();
        }, reject),
      );
      await daemon.exited;
      publisher.end(true);

      daemon = await start(env);
      const back = await connectWithInbox(daemon.port, { ...admin, clientId: 'fast-away', clean: false });
      await back.inbox.until((m) => m.payload === `m${COUNT - 1}`);
      const got = back.inbox.messages.filter((m) => m.topic === 'fast/seq').map((m) => m.payload);
      expect(got, 'every acknowledged message, in order, once').to.deep.equal(Array.from({ length: COUNT }, (_, i) => `m${i}`));
    } finally {
      await daemon.stop();
    }
  });
});
