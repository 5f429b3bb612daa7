// The data plane's tap (bridges' store-and-forward): a client's QoS 1 publish that a tap sees is
// acknowledged only once the tap called back, even when the publish writes nothing to the
// broker's own store (not retained, no persistent session wants it) — the case the durable-ack
// gate lets through without holding.
import { expect } from 'chai';
import { brokerOnStore, endAllClients, makeCerts, rawClient, type Certs } from './support/mqtt-test-kit.js';
import { StaticMqttAccess } from './support/static-mqtt-access.js';

describe('mqtt data plane: tap', function () {
  let certs: Certs;
  let fixture: Awaited<ReturnType<typeof brokerOnStore>>;

  before(async () => {
    certs = await makeCerts();
  });
  after(async () => {
    await certs?.cleanup();
  });
  beforeEach(async () => {
    const access = new StaticMqttAccess([{ username: 'plc', password: 'plc-pw', permissions: [{ resource: 'plant/#', operation: 'readWrite' }] }]);
    fixture = await brokerOnStore('gatewayd-tap-', access, certs);
  });
  afterEach(async () => {
    await endAllClients();
    await fixture.close();
  });

  /** A full round trip of another connection: a PUBACK already written would have arrived by then. */
  async function roundTrip(port: number): Promise<void> {
    const other = await rawClient(port, { clientId: 'round-trip', username: 'plc', password: Buffer.from('plc-pw') });
    other.send({ cmd: 'pingreq' });
    await other.next('pingresp');
    other.end();
  }

  it('holds the PUBACK of a tapped QoS 1 publish until the tap called back; an untapped one is answered at once', async () => {
    const port = fixture.tb.port;
    const calls: Array<{ topic: string; done: () => void }> = [];
    let seen: () => void = () => {};
    const untap = fixture.tb.broker.dataPlane().tap('plant/out/#', (message, done) => {
      calls.push({ topic: message.topic, done });
      seen();
    });
    const publisher = await rawClient(port, { clientId: 'plc-1', username: 'plc', password: Buffer.from('plc-pw') });

    const tapped = new Promise<void>((resolve) => (seen = resolve));
    publisher.send({ cmd: 'publish', topic: 'plant/out/count', payload: Buffer.from('1'), qos: 1, messageId: 7, retain: false, dup: false });
    await tapped;
    await roundTrip(port);
    expect(publisher.received.filter((p) => p.cmd === 'puback'), 'no PUBACK while the tap holds the message').to.have.lengthOf(0);
    calls[0]!.done();
    expect(((await publisher.next('puback')) as { messageId: number }).messageId).to.equal(7);

    // Not tapped (and written nowhere): no hold.
    publisher.send({ cmd: 'publish', topic: 'plant/other', payload: Buffer.from('2'), qos: 1, messageId: 8, retain: false, dup: false });
    expect(((await publisher.next('puback')) as { messageId: number }).messageId).to.equal(8);

    // Untapped: the filter no longer holds anything.
    untap();
    publisher.send({ cmd: 'publish', topic: 'plant/out/count', payload: Buffer.from('3'), qos: 1, messageId: 9, retain: false, dup: false });
    expect(((await publisher.next('puback')) as { messageId: number }).messageId).to.equal(9);
    expect(calls).to.have.lengthOf(1);
    publisher.end();
  });
});
