// $SYS/broker/... statistics under Mosquitto's topic names (issue 12 point 3), readable only with
// a read permission on them: `#` does not reach them.
import { expect } from 'chai';
import { connect, connectWithInbox, endAllClients, makeCerts, startBroker, subscribe, type Certs, type TestBroker } from './support/mqtt-test-kit.js';
import { StaticMqttAccess } from './support/static-mqtt-access.js';

describe('$SYS broker statistics', function () {
  let certs: Certs;
  let tb: TestBroker;
  before(async () => {
    certs = await makeCerts();
    const access = new StaticMqttAccess([
      { username: 'monitor', password: 'monitor-pw', permissions: [{ resource: '$SYS/broker/#', operation: 'read' }, { resource: 'data/#', operation: 'write' }] },
      { username: 'everything', password: 'everything-pw', permissions: [{ resource: '#', operation: 'readWrite' }] },
    ]);
    tb = await startBroker(access, certs, { sysIntervalSeconds: 1 });
  });
  after(async () => {
    await endAllClients();
    await tb?.stop();
    await certs?.cleanup();
  });

  it('publishes clients, messages, bytes, uptime, version, retained and subscription counts', async () => {
    const monitor = await connectWithInbox(tb.port, { username: 'monitor', password: 'monitor-pw' });
    expect(await subscribe(monitor.client, '$SYS/broker/#', 0)).to.deep.equal([0]);
    await monitor.client.publishAsync('data/x', 'one', { qos: 1 });
    for (const name of ['version', 'uptime', 'clients/connected', 'messages/received', 'messages/sent', 'bytes/received', 'bytes/sent', 'retained messages/count', 'subscriptions/count', 'load/messages/received/1min']) {
      const m = await monitor.inbox.until((x) => x.topic === `$SYS/broker/${name}`, 5000);
      expect(m.payload, name).to.be.a('string').and.not.equal('');
    }
    const connected = await monitor.inbox.until((x) => x.topic === '$SYS/broker/clients/connected' && Number(x.payload) >= 1, 5000);
    expect(Number(connected.payload)).to.be.at.least(1);
    const received = await monitor.inbox.until((x) => x.topic === '$SYS/broker/messages/received' && Number(x.payload) >= 1, 5000);
    expect(Number(received.payload)).to.be.at.least(1);
    expect((await monitor.inbox.until((x) => x.topic === '$SYS/broker/uptime', 5000)).payload).to.match(/^\d+ seconds$/);
  });

  it('refuses $SYS to a user holding only #, and # does not deliver it', async () => {
    const other = await connectWithInbox(tb.port, { username: 'everything', password: 'everything-pw' });
    expect(await subscribe(other.client, '$SYS/#', 0)).to.deep.equal([128]);
    expect(await subscribe(other.client, '#', 0)).to.deep.equal([0]);
    const c = await connect(tb.port, { username: 'everything', password: 'everything-pw' });
    await c.publishAsync('probe/after', 'x', { qos: 1 });
    await other.inbox.until((x) => x.topic === 'probe/after', 5000);
    expect(other.inbox.messages.some((x) => x.topic.startsWith('$SYS'))).to.equal(false);
  });

  it('the same for MQTT 5 clients: SUBACK 0x87 for $SYS/# without a read permission on it, $SYS readable with one, never writable', async () => {
    const other = await connectWithInbox(tb.port, { username: 'everything', password: 'everything-pw', protocolVersion: 5 });
    expect(await subscribe(other.client, '$SYS/#', 0)).to.deep.equal([0x87]);
    const monitor = await connectWithInbox(tb.port, { username: 'monitor', password: 'monitor-pw', protocolVersion: 5 });
    expect(await subscribe(monitor.client, '$SYS/broker/#', 0)).to.deep.equal([0]);
    await monitor.inbox.until((x) => x.topic === '$SYS/broker/uptime', 5000);
    const err = await other.client.publishAsync('$SYS/broker/uptime', 'forged', { qos: 1 }).then(() => undefined, (e: { code?: number }) => e);
    expect(err?.code).to.equal(0x87);
    expect(other.client.connected).to.equal(true);
  });
});
