// The outbound quota of MQTT 5 flow control (src/mqtt/mqtt5/flow-control.ts) on its own: what
// counts against a client's Receive Maximum, whatever order aedes writes and answers in. The
// broker-level behaviour (Paho test_flow_control1, the replay at reconnect) is tested with real
// clients in test/paho-mqtt5.test.ts and test/mqtt5-features.test.ts.
import { expect } from 'chai';
import { OutboundQuota, type QueuedDelivery } from '../src/mqtt/mqtt5/flow-control.js';

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** A quota whose aedes "writes" a delivery at once (or drops it) and answers a turn later, as aedes does. */
function quotaOf(max: number, forward: (p: QueuedDelivery) => boolean = () => true) {
  const written: string[] = [];
  let quota!: OutboundQuota;
  quota = new OutboundQuota(max, 10, {
    deliver: (packet, done) => {
      if (forward(packet)) {
        written.push(packet.topic);
        quota.sent(packet);
      }
      setImmediate(done);
    },
    connected: () => true,
    expired: () => {},
    dropped: () => {},
    replayHeld: () => () => {},
    now: Date.now,
  });
  let counter = 0;
  const message = (topic: string): QueuedDelivery => ({ topic, qos: 1, brokerId: 'b', brokerCounter: ++counter });
  return { quota, written, message };
}

describe('MQTT 5 outbound quota (Receive Maximum)', () => {
  it('counts a delivery once, also when the next one arrives between its write and aedes answering', async () => {
    const { quota, written, message } = quotaOf(2);
    quota.deliver(message('m1'), () => {}); // written now, answered a turn later
    quota.deliver(message('m2'), () => {}); // arrives before that answer
    quota.deliver(message('m3'), () => {});
    await nextTurn();
    await nextTurn();
    expect(written).to.deep.equal(['m1', 'm2']);
    expect(quota.unacknowledged).to.equal(2);
    quota.acknowledged();
    expect(written).to.deep.equal(['m1', 'm2', 'm3']);
  });

  it('gives the slot of a delivery aedes did not write back, and counts what the replay writes', async () => {
    const { quota, written, message } = quotaOf(1, (p) => p.topic !== 'refused');
    quota.deliver(message('refused'), () => {});
    quota.deliver(message('next'), () => {}); // waits: the first one holds the slot until aedes answers
    expect(written).to.deep.equal([]);
    await nextTurn();
    expect(written).to.deep.equal(['next']);
    quota.acknowledged();
    quota.sent({ topic: 'replayed', qos: 1, brokerId: 'b', brokerCounter: 99 });
    expect(quota.unacknowledged).to.equal(1);
    let replay = false;
    void quota.replaySlot().then(() => (replay = true));
    await nextTurn();
    expect(replay, 'no room for the next replayed message').to.equal(false);
    quota.acknowledged();
    await nextTurn();
    expect(replay).to.equal(true);
  });
});
