// What a malformed or oversized first packet meets (issue 35 point 3): nothing is buffered for
// a connection whose first byte does not start a CONNECT [MQTT-3.1.0-1], and a CONNECT declaring
// more than mqtt.maxPacketSizeBytes is refused from its fixed header — MQTT 5 clients with
// CONNACK 0x95 first, MQTT 3.1.1 ones (which have no code for it) by the close; a connected
// MQTT 5 client's oversized packet gets DISCONNECT 0x95 [MQTT-3.2.2-15] (the 3.1.1 case is in
// test/mqtt-transport.test.ts). Client ids that name Object members are ids like others; an MQTT 5
// property given twice is a Protocol Error.
import net from 'node:net';
import { once } from 'node:events';
import { expect } from 'chai';
import mqttPacket from 'mqtt-packet';
import { collect, connect, endAllClients, makeCerts, startBroker, subscribe, withTimeout, type Certs, type TestBroker } from './support/mqtt-test-kit.js';
import { StaticMqttAccess } from './support/static-mqtt-access.js';

const user = { username: 'device', password: 'Device-Passw0rd!' };

/** A raw connection: what the broker sends back, and when it closes. */
async function raw(port: number): Promise<{ socket: net.Socket; received: () => Buffer; closed: Promise<unknown> }> {
  const socket = net.connect(port, '127.0.0.1');
  const chunks: Buffer[] = [];
  socket.on('data', (c: Buffer) => chunks.push(c));
  socket.on('error', () => {});
  const closed = once(socket, 'close');
  await once(socket, 'connect');
  return { socket, received: () => Buffer.concat(chunks), closed };
}

describe('MQTT ingress limits before and at CONNECT', function () {
  this.timeout(20_000);
  let certs: Certs;
  let tb: TestBroker;
  before(async () => {
    certs = await makeCerts();
    tb = await startBroker(new StaticMqttAccess([{ ...user, permissions: [{ resource: '#', operation: 'readWrite' }] }]), certs, { maxPacketSizeBytes: 4096 });
  });
  after(async () => {
    await endAllClients();
    await tb.stop();
    await certs.cleanup();
  });

  for (const [name, header] of [
    ['a PUBLISH header declaring 200 KiB', [0x30, 0x80, 0xb4, 0x0c]],
    ['TLS on the plain port', [0x16, 0x03, 0x01, 0x02, 0x00]],
    ['a PINGREQ', [0xc0, 0x00]],
  ] as const) {
    it(`closes a connection whose first packet is ${name}, at once and without an answer`, async () => {
      const c = await raw(tb.port);
      c.socket.write(Buffer.from(header));
      await withTimeout(c.closed, 2000, 'connection not closed');
      expect(c.received()).to.have.length(0);
    });
  }

  it('refuses an MQTT 5 CONNECT declaring more than maxPacketSizeBytes with CONNACK 0x95, from its header alone', async () => {
    const oversized = tb.broker.stats().oversizeDisconnects;
    const c = await raw(tb.port);
    // Fixed header (remaining length 100,000), protocol name, level 5: the body never comes.
    c.socket.write(Buffer.from([0x10, 0xa0, 0x8d, 0x06, 0x00, 0x04, 0x4d, 0x51, 0x54, 0x54, 0x05]));
    await withTimeout(c.closed, 2000, 'connection not closed');
    expect([...c.received()]).to.deep.equal([0x20, 0x03, 0x00, 0x95, 0x00]);
    expect(tb.broker.stats().oversizeDisconnects).to.equal(oversized + 1);
  });

  it('closes an MQTT 3.1.1 connection whose CONNECT declares more than maxPacketSizeBytes, without a CONNACK (3.1.1 has no code for it)', async () => {
    const c = await raw(tb.port);
    c.socket.write(Buffer.from([0x10, 0xa0, 0x8d, 0x06, 0x00, 0x04, 0x4d, 0x51, 0x54, 0x54, 0x04]));
    await withTimeout(c.closed, 2000, 'connection not closed');
    expect(c.received()).to.have.length(0);
  });

  it('sends a connected MQTT 5 client DISCONNECT 0x95 for a PUBLISH declaring more than maxPacketSizeBytes', async () => {
    const c = await raw(tb.port);
    const parser = mqttPacket.parser({ protocolVersion: 5 });
    const packets: mqttPacket.Packet[] = [];
    parser.on('packet', (p: mqttPacket.Packet) => packets.push(p));
    c.socket.on('data', (chunk: Buffer) => parser.parse(chunk));
    c.socket.write(mqttPacket.generate({ cmd: 'connect', protocolId: 'MQTT', protocolVersion: 5, clean: true, clientId: 'big-sender', keepalive: 30, username: user.username, password: Buffer.from(user.password) }, { protocolVersion: 5 }));
    await withTimeout(
      new Promise<void>((resolve) => parser.once('packet', () => resolve())),
      2000,
      'no CONNACK',
    );
    expect(packets[0]).to.include({ cmd: 'connack', reasonCode: 0 });
    c.socket.write(Buffer.from([0x30, 0x80, 0x80, 0x01])); // PUBLISH declaring 16,384 bytes
    await withTimeout(c.closed, 2000, 'connection not closed');
    expect(packets.map((p) => [p.cmd, (p as { reasonCode?: number }).reasonCode])).to.deep.equal([
      ['connack', 0],
      ['disconnect', 0x95],
    ]);
  });

  it('serves clients whose ids are the names of Object members (__proto__, constructor, toString), a takeover included: they ended the process', async () => {
    for (const clientId of ['__proto__', 'constructor', 'toString', 'hasOwnProperty']) {
      const first = await connect(tb.port, { ...user, clientId });
      const again = await connect(tb.port, { ...user, clientId }); // takes the session over
      const inbox = collect(again);
      await subscribe(again, `ids/${clientId}`, 1);
      await again.publishAsync(`ids/${clientId}`, 'ok', { qos: 1 });
      expect((await inbox.until((m) => m.topic === `ids/${clientId}`)).payload).to.equal('ok');
      expect(first.connected, `${clientId}: the first connection was taken over`).to.equal(false);
      expect(tb.broker.admin().client(clientId)?.clientId).to.equal(clientId);
      await again.endAsync();
    }
    expect(tb.broker.admin().client('valueOf')).to.equal(undefined);
  });

  /** A connected MQTT 5 client on a raw socket, with the packets the broker sent it. */
  const session = async (clientId: string) => {
    const c = await raw(tb.port);
    const parser = mqttPacket.parser({ protocolVersion: 5 });
    const packets: mqttPacket.Packet[] = [];
    const connack = new Promise<void>((resolve) => parser.once('packet', () => resolve()));
    parser.on('packet', (p: mqttPacket.Packet) => packets.push(p));
    c.socket.on('data', (chunk: Buffer) => parser.parse(chunk));
    c.socket.write(mqttPacket.generate({ cmd: 'connect', protocolId: 'MQTT', protocolVersion: 5, clean: true, clientId, keepalive: 30, username: user.username, password: Buffer.from(user.password), properties: { sessionExpiryInterval: 30 } }, { protocolVersion: 5 }));
    await withTimeout(connack, 2000, 'no CONNACK');
    return { ...c, packets };
  };

  it('refuses an MQTT 5 property given twice as a Protocol Error: DISCONNECT 0x82 for a PUBLISH, and a DISCONNECT with two Session Expiry Intervals no longer ends the process', async () => {
    // PUBLISH "t" with two Message Expiry Intervals (0x02): properties length 10.
    const pub = await session('twice-publish');
    pub.socket.write(Buffer.from([0x30, 0x0f, 0x00, 0x01, 0x74, 0x0a, 0x02, 0, 0, 0, 5, 0x02, 0, 0, 0, 6, 0x78]));
    await withTimeout(pub.closed, 2000, 'connection not closed');
    expect(pub.packets.map((p) => [p.cmd, (p as { reasonCode?: number }).reasonCode])).to.deep.equal([
      ['connack', 0],
      ['disconnect', 0x82],
    ]);
    // DISCONNECT with Session Expiry Interval 0xe0000012 and 0.
    const bye = await session('twice-disconnect');
    bye.socket.write(Buffer.from([0xe0, 0x0c, 0x00, 0x0a, 0x11, 0xe0, 0, 0, 0x12, 0x11, 0, 0, 0, 0]));
    await withTimeout(bye.closed, 2000, 'connection not closed');
    const after = await connect(tb.port, { ...user, protocolVersion: 5 });
    expect(after.connected, 'the broker still serves').to.equal(true);
    await after.endAsync();
  });

  it('refuses an MQTT 5 property that runs past its packet as a Malformed Packet: DISCONNECT 0x81 (a null Response Topic ended the daemon: fuzz finding)', async () => {
    const c = await session('past-the-end');
    // PUBLISH "t", QoS 0, properties length 3: a Response Topic (0x08) declaring 16 bytes, none there.
    c.socket.write(Buffer.from([0x30, 0x07, 0x00, 0x01, 0x74, 0x03, 0x08, 0x00, 0x10]));
    await withTimeout(c.closed, 2000, 'connection not closed');
    expect(c.packets.map((p) => [p.cmd, (p as { reasonCode?: number }).reasonCode])).to.deep.equal([
      ['connack', 0],
      ['disconnect', 0x81],
    ]);
    const after = await connect(tb.port, { ...user, protocolVersion: 5 });
    expect(after.connected, 'the broker still serves').to.equal(true);
    await after.endAsync();
  });

  it('answers two PUBRELs of one QoS 2 packet id sent together with two PUBCOMPs (the second delete rejected unhandled: the daemon exited)', async () => {
    const rejections: unknown[] = [];
    const onRejection = (reason: unknown) => rejections.push(reason);
    process.on('unhandledRejection', onRejection);
    const c = await raw(tb.port);
    const parser = mqttPacket.parser({ protocolVersion: 4 });
    const packets: mqttPacket.Packet[] = [];
    let waiter: { n: number; resolve: () => void } | undefined;
    parser.on('packet', (p: mqttPacket.Packet) => {
      packets.push(p);
      if (waiter && packets.length >= waiter.n) waiter.resolve();
    });
    c.socket.on('data', (chunk: Buffer) => parser.parse(chunk));
    const until = (n: number) => withTimeout(new Promise<void>((resolve) => (packets.length >= n ? resolve() : (waiter = { n, resolve }))), 2000, `${n} packets`);
    c.socket.write(mqttPacket.generate({ cmd: 'connect', protocolId: 'MQTT', protocolVersion: 4, clean: false, clientId: 'pubrel-twice', keepalive: 30, username: user.username, password: Buffer.from(user.password) }));
    await until(1);
    c.socket.write(mqttPacket.generate({ cmd: 'publish', topic: 'qos2/x', payload: Buffer.from('once'), qos: 2, messageId: 5, retain: false, dup: false }));
    await until(2);
    c.socket.write(Buffer.concat([mqttPacket.generate({ cmd: 'pubrel', messageId: 5 }), mqttPacket.generate({ cmd: 'pubrel', messageId: 5 })]));
    await until(4);
    expect(packets.map((p) => p.cmd)).to.deep.equal(['connack', 'pubrec', 'pubcomp', 'pubcomp']);
    await new Promise((resolve) => setTimeout(resolve, 100));
    process.removeListener('unhandledRejection', onRejection);
    expect(rejections.map(String), 'unhandled rejections').to.deep.equal([]);
    c.socket.destroy();
    const after = await connect(tb.port, user);
    expect(after.connected, 'the broker still serves').to.equal(true);
    await after.endAsync();
  });
});
