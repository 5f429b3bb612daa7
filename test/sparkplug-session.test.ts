// The parts of the Sparkplug edge node that the gateway tests cannot reach in reasonable time:
// metric values of every datatype on the wire (the daemon's protobufjs encoding read back with
// Google's runtime by the tests' host decoder), and the session on an in-memory MQTT link: seq
// wraps from 255 to 0, a rebirth keeps bdSeq, the primary host's STATE timestamps decide, and
// an intentional end publishes the NDEATH before a clean DISCONNECT.
import { expect } from 'chai';
import { once } from 'node:events';
import net from 'node:net';
import { Writable } from 'node:stream';
import { createLogger } from '../src/log/index.js';
import { realTimers } from '../src/mapping/drivers/types.js';
import { createBdSeqStore } from '../src/sparkplug/bdseq-store.js';
import { EdgeDevices } from '../src/sparkplug/edge-devices.js';
import { EdgeSession } from '../src/sparkplug/edge-session.js';
import { commandValue, DATATYPES, putValue, valueOf, type DatatypeName, type MetricValue } from '../src/sparkplug/metric-values.js';
import { openLink, type NodeLink } from '../src/sparkplug/node-link.js';
import { createPayloadCodec, type MetricMessage } from '../src/sparkplug/payload-codec.js';
import { edgeNodeTopics } from '../src/sparkplug/sparkplug-topics.js';
import { decodeSparkplug, encodeSparkplug, valueOfMetric } from './support/sparkplug-host.js';
import { until } from './mapping-support.js';

const codec = createPayloadCodec();
const quiet = createLogger({ level: 'error', stream: new Writable({ write: (_c, _e, cb) => cb() }) });

describe('Sparkplug metric values on the wire', () => {
  const cases: Array<[DatatypeName, unknown, MetricValue, string, unknown]> = [
    // type, reading, value, member on the wire, what the host reads there
    ['Int8', -1, -1, 'intValue', 0xffffffff],
    ['Int16', [-300], -300, 'intValue', 2 ** 32 - 300],
    ['Int32', '-2147483648', -2147483648, 'intValue', 2 ** 31],
    ['UInt8', 255, 255, 'intValue', 255],
    ['UInt16', [65535], 65535, 'intValue', 65535],
    ['UInt32', 4294967295, 4294967295, 'intValue', 4294967295],
    ['Int64', -5, -5, 'longValue', '18446744073709551611'],
    ['Int64', '9007199254740993', 9007199254740993n, 'longValue', '9007199254740993'],
    ['UInt64', '18446744073709551615', 18446744073709551615n, 'longValue', '18446744073709551615'],
    ['Float', 21.5, 21.5, 'floatValue', 21.5],
    ['Double', '0.1', 0.1, 'doubleValue', 0.1],
    ['Boolean', 1, true, 'booleanValue', true],
    ['String', { a: 1 }, '{"a":1}', 'stringValue', '{"a":1}'],
    ['DateTime', '2026-01-02T03:04:05.006Z', Date.parse('2026-01-02T03:04:05.006Z'), 'longValue', String(Date.parse('2026-01-02T03:04:05.006Z'))],
    ['Int32', 21.6, 22, 'intValue', 22],
  ];
  for (const [type, reading, value, member, onWire] of cases) {
    it(`${type}: ${JSON.stringify(reading)} → ${String(value)} in ${member}, and back from a command`, () => {
      expect(valueOf(type, reading)).to.equal(value);
      const metric: MetricMessage = { name: 'm', alias: 1, datatype: DATATYPES[type] };
      putValue(metric, type, value);
      const decoded = decodeSparkplug(codec.encode({ timestamp: 1, seq: 0, metrics: [metric] })).metrics[0]!;
      expect(decoded.datatype).to.equal(DATATYPES[type]);
      expect((decoded as Record<string, unknown>)[member]).to.equal(onWire);
      // A host's command carrying the same member gives the same value back.
      const command = codec.decode(Buffer.from(encodeSparkplug({ metrics: [{ alias: 1, [member]: onWire }] })));
      expect(commandValue(type, command.metrics[0]!)).to.equal(value);
    });
  }

  it('null is is_null; readings that are not of the type, or out of its range, are refused', () => {
    const metric: MetricMessage = { name: 'm' };
    putValue(metric, 'Float', valueOf('Float', null));
    expect(valueOfMetric(decodeSparkplug(codec.encode({ metrics: [metric] })).metrics[0]!)).to.equal(null);
    expect(() => valueOf('Int8', 128)).to.throw(/out of the range of Int8/);
    expect(() => valueOf('UInt16', -1)).to.throw(/out of the range/);
    expect(() => valueOf('Float', 'warm')).to.throw(/is not a Float/);
    expect(() => valueOf('Int32', [1, 2])).to.throw(/is not a Int32/);
    expect(() => valueOf('DateTime', 'yesterday')).to.throw(/is not a DateTime/);
    expect(() => commandValue('Boolean', { alias: 1, intValue: 1 })).to.throw(/carries no Boolean value/);
    expect(() => commandValue('Int32', { alias: 1, isNull: true })).to.throw(/no value/);
  });
});

/** An MQTT session in memory: what the edge node publishes, and messages delivered to it. */
function memoryLink() {
  const published: Array<{ topic: string; payload: Buffer; qos: number }> = [];
  const ends: boolean[] = [];
  let handler: (topic: string, payload: Buffer) => void = () => {};
  let close: (reason: string) => void = () => {};
  const link: NodeLink = {
    server: 'memory://',
    publish: async (topic, payload, options = {}) => void published.push({ topic, payload, qos: options.qos ?? 0 }),
    subscribe: async () => {},
    onMessage: (h) => (handler = h),
    confirm: async () => {},
    disconnectsWithWill: false,
    closed: new Promise<string>((resolve) => (close = resolve)),
    end: async (clean) => {
      ends.push(clean);
      close('ended');
    },
  };
  return { link, published, ends, deliver: (topic: string, payload: Buffer | string) => handler(topic, Buffer.from(payload)) };
}

function session(primaryHostId?: string, connect?: ConstructorParameters<typeof EdgeSession>[0]['connect']) {
  const topics = edgeNodeTopics('g', 'n', primaryHostId);
  const links: ReturnType<typeof memoryLink>[] = [];
  const births: boolean[] = [];
  const away: boolean[] = [];
  const s = new EdgeSession({
    groupId: 'g',
    edgeNodeId: 'n',
    topics,
    log: quiet,
    timers: realTimers,
    codec,
    bdSeq: createBdSeqStore(undefined),
    connect:
      connect ??
      (async () => {
        const l = memoryLink();
        links.push(l);
        return l.link;
      }),
    mayPublish: () => true,
    onBorn: (rebirth) => births.push(rebirth),
    onEnded: () => {},
    onAway: (tentative) => away.push(tentative),
    onDeviceCommand: () => {},
    changed: () => {},
  });
  const decoded = () => links.flatMap((l) => l.published.map((p) => ({ topic: p.topic, qos: p.qos, payload: decodeSparkplug(p.payload) })));
  return { s, links, births, decoded, away };
}

describe('Sparkplug edge node session (in-memory link)', () => {
  it('seq runs 0..255 and wraps to 0 across node and device messages; a rebirth starts at 0 with the same bdSeq', async () => {
    const { s, links, decoded, births } = session();
    s.start();
    await until(() => (s.born ? true : undefined), 5000, 'born');
    for (let i = 0; i < 300; i++) expect(s.send(i % 2 ? 'DDATA' : 'DBIRTH', 'd', [])).to.equal(true);
    const seqs = decoded().map((m) => m.payload.seq);
    expect(seqs).to.have.lengthOf(301);
    seqs.forEach((seq, i) => expect(seq).to.equal(i % 256));
    const rebirth = codec.encode({ metrics: [{ name: 'Node Control/Rebirth', booleanValue: true }] });
    links[0]!.deliver('spBv1.0/g/NCMD/n', rebirth);
    const after = decoded().slice(301);
    expect(after[0]!.topic).to.equal('spBv1.0/g/NBIRTH/n');
    expect(after[0]!.payload.seq).to.equal(0);
    const bdSeqs = decoded().filter((m) => m.topic.includes('NBIRTH')).map((m) => m.payload.metrics.find((x) => x.name === 'bdSeq')!.longValue);
    expect(bdSeqs).to.deep.equal(['0', '0']);
    expect(births).to.deep.equal([false, true]);
    expect(s.commands.NCMD.accepted).to.equal(1);
    // Anything else in an NCMD is refused, and a payload that is not Sparkplug B too.
    links[0]!.deliver('spBv1.0/g/NCMD/n', codec.encode({ metrics: [{ name: 'Node Control/Reboot', booleanValue: true }] }));
    links[0]!.deliver('spBv1.0/g/NCMD/n', 'not protobuf');
    expect(s.commands.NCMD.refused).to.equal(2);
    await s.stop();
    const last = decoded().at(-1)!;
    expect(last.topic).to.equal('spBv1.0/g/NDEATH/n');
    expect(last.qos).to.equal(1);
    expect(last.payload.seq).to.equal(undefined);
    expect(links[0]!.ends).to.deep.equal([true]); // DISCONNECT: the broker drops the will
    expect(s.state).to.equal('disabled');
  });

  it('primary host: births on online; an older timestamp is ignored; offline ends the session with an NDEATH, the next one waits for online', async () => {
    const { s, links, decoded } = session('scada');
    s.start();
    await until(() => (s.state === 'waitingForHost' ? true : undefined), 5000, 'waiting');
    const state = (online: boolean, timestamp: number, link = links.at(-1)!) => link.deliver('spBv1.0/STATE/scada', JSON.stringify({ online, timestamp }));
    links[0]!.deliver('spBv1.0/STATE/scada', 'ONLINE'); // Sparkplug 2.2's plain text: not 3.0's JSON
    expect(s.state).to.equal('waitingForHost');
    state(true, 1000);
    expect(s.state).to.equal('born');
    state(false, 999);
    expect(s.state).to.equal('born');
    state(false, 1000);
    await until(() => (links.length === 2 && s.state === 'waitingForHost' ? true : undefined), 5000, 'a new session waiting');
    expect(decoded().map((m) => m.topic.split('/')[2])).to.deep.equal(['NBIRTH', 'NDEATH']);
    expect(links[0]!.ends).to.deep.equal([true]);
    state(true, 500); // older than the last online: a stale birth
    expect(s.state).to.equal('waitingForHost');
    state(true, 2000);
    expect(s.state).to.equal('born');
    const nbirths = decoded().filter((m) => m.topic.includes('NBIRTH'));
    expect(nbirths.map((m) => m.payload.metrics[0]!.longValue)).to.deep.equal(['0', '1']);
    // Offline at 3000: an online STATE older than that (2500) is a leftover, not the host coming back.
    state(false, 3000);
    await until(() => (links.length === 3 && s.state === 'waitingForHost' ? true : undefined), 5000, 'waiting again');
    state(true, 2500, links[2]);
    expect(s.state).to.equal('waitingForHost');
    state(true, 3000, links[2]);
    expect(s.state).to.equal('born');
    await s.stop();
  });

  it('away from the host (values are kept): tentatively while the first session waits for a STATE, for good once one says offline or a born session ends', async () => {
    const first = session('scada');
    first.s.start();
    await until(() => (first.s.state === 'waitingForHost' ? true : undefined), 5000, 'waiting');
    expect(first.away).to.deep.equal([true]);
    expect(first.s.awayFromHost).to.equal(true);
    first.links[0]!.deliver('spBv1.0/STATE/scada', JSON.stringify({ online: true, timestamp: 1 }));
    expect(first.s.born).to.equal(true);
    expect(first.s.awayFromHost).to.equal(false);
    expect(first.away, 'born within the grace: what was kept is taken back').to.deep.equal([true]);
    first.links[0]!.deliver('spBv1.0/STATE/scada', JSON.stringify({ online: false, timestamp: 2 }));
    await until(() => (first.s.state === 'waitingForHost' ? true : undefined), 5000, 'waiting again');
    expect(first.away).to.deep.equal([true, false]);
    expect(first.s.awayFromHost).to.equal(true);
    await first.s.stop();

    const offline = session('scada');
    offline.s.start();
    await until(() => (offline.s.state === 'waitingForHost' ? true : undefined), 5000, 'waiting');
    offline.links[0]!.deliver('spBv1.0/STATE/scada', JSON.stringify({ online: false, timestamp: 1 }));
    expect(offline.away, 'said offline: for good at once').to.deep.equal([true, false]);
    await offline.s.stop();

    const silent = session('scada');
    silent.s.start();
    await until(() => (silent.away.length === 2 ? true : undefined), 5000, 'the grace over');
    expect(silent.away, 'no STATE within the grace: for good').to.deep.equal([true, false]);
    await silent.s.stop();
  });

  it('a stop while connecting abandons the connect (a broker that accepts TCP and never answers CONNECT)', async () => {
    const silent = net.createServer(() => {});
    silent.listen(0, '127.0.0.1');
    await once(silent, 'listening');
    const port = (silent.address() as net.AddressInfo).port;
    const will = { topic: 'spBv1.0/g/NDEATH/n', payload: Buffer.alloc(0) };
    let attempts = 0;
    const { s } = session(undefined, (w, _attempt, signal) => {
      attempts++;
      return openLink({ url: `mqtt://127.0.0.1:${port}`, clientId: 'n', protocolVersion: 4, keepaliveSeconds: 30, connectTimeoutMs: 60_000, will: w ?? will }, signal);
    });
    try {
      s.start();
      await until(() => (attempts === 1 ? true : undefined), 5000, 'connecting');
      const t = Date.now();
      await s.stop();
      expect(Date.now() - t).to.be.lessThan(5000);
      expect(s.state).to.equal('disabled');
    } finally {
      silent.close();
    }
  });
});

describe('Sparkplug devices: report by exception', () => {
  const device = (aggregateMs: number, maxMessagesPerSecond = 1000) => {
    const sent: Array<{ type: string; metrics: MetricMessage[] }> = [];
    const devices = new EdgeDevices(
      [{ deviceId: 'd', metrics: [{ name: 'a', datatype: 'Int32', readEndpoint: 'e1' }, { name: 'b', datatype: 'Int32', readEndpoint: 'e2' }] }],
      { nodeBorn: () => true, awayFromHost: () => false, send: (type, _id, metrics) => (sent.push({ type, metrics }), true) },
      realTimers,
      { birthWaitMs: 0, aggregateMs, maxMessagesPerSecond, datatypeInData: false },
    );
    const d = devices.devices[0]!;
    devices.setAlive(d, true);
    return { devices, d, sent };
  };
  const turn = () => new Promise((r) => setImmediate(r));

  it('sends only what changed; aggregateMs gathers the changes of separate I/O turns into one DDATA', async () => {
    const { devices, d, sent } = device(0);
    devices.reading(d, d.metrics[0]!, 1, 1);
    devices.reading(d, d.metrics[1]!, 2, 1);
    expect(sent.map((s) => s.type)).to.deep.equal(['DBIRTH']);
    devices.reading(d, d.metrics[0]!, 1, 2); // the same value: nothing to say
    await turn();
    expect(sent).to.have.lengthOf(1);
    devices.reading(d, d.metrics[0]!, 5, 3);
    await turn();
    devices.reading(d, d.metrics[1]!, 6, 4);
    await turn();
    expect(sent.slice(1).map((s) => s.metrics.map((m) => [m.alias, m.intValue]))).to.deep.equal([[[1, 5]], [[2, 6]]]);

    const gathered = device(30);
    gathered.devices.reading(gathered.d, gathered.d.metrics[0]!, 1, 1);
    gathered.devices.reading(gathered.d, gathered.d.metrics[1]!, 2, 1);
    gathered.devices.reading(gathered.d, gathered.d.metrics[0]!, 7, 2);
    await turn();
    gathered.devices.reading(gathered.d, gathered.d.metrics[1]!, 8, 3);
    await until(() => (gathered.sent.length === 2 ? true : undefined), 2000, 'one DDATA');
    expect(gathered.sent[1]!.metrics.map((m) => [m.alias, m.intValue, m.timestamp])).to.deep.equal([
      [1, 7, 2],
      [2, 8, 3],
    ]);
    gathered.devices.stop();
  });

  it('maxMessagesPerSecond: beyond it, changes wait and are gathered; the latest value goes out', async () => {
    const { devices, d, sent } = device(0, 2);
    devices.reading(d, d.metrics[0]!, 0, 1);
    devices.reading(d, d.metrics[1]!, 0, 1);
    for (let v = 1; v <= 10; v++) {
      devices.reading(d, d.metrics[0]!, v, v);
      await turn();
    }
    const ddata = () => sent.filter((s) => s.type === 'DDATA');
    expect(ddata()).to.have.lengthOf(2); // the burst: one second's worth
    await until(() => (ddata().length === 3 ? true : undefined), 2000, 'the gathered DDATA');
    expect(ddata()[2]!.metrics.map((m) => m.intValue)).to.deep.equal([10]);
    devices.stop();
  });
});
