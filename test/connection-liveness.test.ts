// Connections that must not stay `connected` while nothing is read (issue 35 point 2 and its
// general rule, docs/mapping.md "States"): the S7 attempt whose setup answer came with garbage
// behind it in the same TCP chunk (the root cause of the S7 connection left dead by a burst of
// broken replies), a loss reported while a connect is finishing, every request failing for
// timeoutMs × 3, device refusals (which are answers), and slow peers that cost one request's
// timeout. The mapping runtime runs on its own with the real drivers against scripted devices.
import { PassThrough } from 'node:stream';
import { expect } from 'chai';
import { createLogger } from '../src/log/index.js';
import { createProtocolDrivers } from '../src/mapping/drivers/index.js';
import type { ConnectionDriver } from '../src/mapping/drivers/types.js';
import { defaultRuleLimits } from '../src/mapping/rules.js';
import { createMappingRuntime, type MappingRuntime } from '../src/mapping/runtime.js';
import { parseServiceFile, type ConnectionDef } from '../src/mapping/service-files.js';
import { FakeClock, startModbusServer, until, type ModbusTestServer } from './mapping-support.js';
import { startScriptedS7, type S7Reply, type ScriptedS7 } from './support/scripted-s7.js';

/** A logger whose JSON lines the test reads. */
function recordedLog() {
  const stream = new PassThrough();
  const lines: Array<Record<string, any>> = [];
  stream.on('data', (chunk: Buffer) => {
    for (const l of chunk.toString().split('\n')) if (l) lines.push(JSON.parse(l));
  });
  return { log: createLogger({ level: 'info', stream }), lines };
}

const s7Yaml = (port: number, timeoutMs = 300) => `
resources:
  plc: {type: Connection, properties: {protocol: S7, configuration: {host: 127.0.0.1, port: ${port}, rack: 0, slot: 1, timeoutMs: ${timeoutMs}}}}
  level: {type: Endpoint, properties: {connection: !ref plc, operation: read, address: {area: DB, dbNumber: 1, offset: 8, type: INT}, pollIntervalMs: 50}}
`;
const modbusYaml = (port: number, timeoutMs = 200) => `
resources:
  plc: {type: Connection, properties: {protocol: Modbus, configuration: {host: 127.0.0.1, port: ${port}, timeoutMs: ${timeoutMs}}}}
  level: {type: Endpoint, properties: {connection: !ref plc, operation: read, address: {table: holding, address: 3}, pollIntervalMs: 50}}
`;

/** Every state the connection passes through from now on, as the runtime announces them (until it stops). */
function watchStates(rt: MappingRuntime, id: string): string[] {
  const states: string[] = [];
  const record = () => {
    const s = rt.getConnection(id).currentState;
    if (states[states.length - 1] !== s) states.push(s);
    return false;
  };
  record();
  rt.waitFor(record, 60_000).catch(() => undefined);
  return states;
}

/** Readings the connection has taken (polled: figures change without a state change). */
const readsOf = (rt: MappingRuntime, id = 'line.plc') => rt.getConnection(id).figures.reads;

describe('connections that stop answering properly are reopened, never left connected', function () {
  this.timeout(30_000);
  let rt: MappingRuntime | undefined;
  let s7: ScriptedS7 | undefined;
  let modbus: ModbusTestServer | undefined;
  afterEach(async () => {
    await rt?.stop();
    await s7?.stop();
    await modbus?.stop();
    rt = undefined;
    s7 = undefined;
    modbus = undefined;
  });

  const start = (yaml: string, log = recordedLog().log, driverFor?: (def: ConnectionDef) => ConnectionDriver) => {
    rt = createMappingRuntime({ services: [parseServiceFile('line', 'line.yaml', yaml)], dataPlane: undefined, log, limits: defaultRuleLimits, agentName: 'test', ...(driverFor ? { driverFor } : {}) });
    rt.start();
    return rt;
  };

  it('S7: a setup answer followed by garbage in the same TCP chunk fails that attempt (retried), instead of a dead session reported connected', async () => {
    const block = Buffer.alloc(64);
    block.writeInt16BE(1234, 8);
    // The first connection's setup answer arrives glued to bytes that are no TPKT frame.
    s7 = await startScriptedS7({ block, script: (step, connection, answer) => (step === 'setup' && connection === 1 ? Buffer.concat([answer, Buffer.from([0x04, 0, 0, 9, 1, 2, 3, 4, 5])]) : answer) });
    const { log, lines } = recordedLog();
    const r = start(s7Yaml(s7.port), log);
    const states = watchStates(r, 'line.plc');
    await until(() => (readsOf(r) >= 5 ? true : undefined), 10_000, '5 readings');
    expect(states.slice(0, 3)).to.deep.equal(['connecting', 'reconnecting', 'connected']);
    expect(lines.find((l) => l.message === 'connection failed, retrying')).to.deep.include({ reason: 'not a TPKT frame' });
    const view = r.getConnection('line.plc');
    // Before the fix: connected from the first attempt, every read failing at once ("not a TPKT frame"), nothing read.
    expect(view.figures.failures).to.equal(0);
    expect(s7.accepted).to.equal(2);
  });

  it('retries an attempt that failed on a malformed answer after 1 s each time: the backoff grows only for devices that cannot be reached', async () => {
    const block = Buffer.alloc(64);
    // The first four connections answer the communication setup with bytes that are not S7.
    s7 = await startScriptedS7({ block, script: (step, connection, answer) => (step === 'setup' && connection <= 4 ? Buffer.from([0x03, 0x00, 0x00, 0x09, 0xff, 0xff, 0xff, 0xff, 0xff]) : answer) });
    const clock = new FakeClock();
    const r = createMappingRuntime({ services: [parseServiceFile('line', 'line.yaml', s7Yaml(s7.port))], dataPlane: undefined, log: recordedLog().log, limits: defaultRuleLimits, agentName: 'test', timers: clock.timers });
    rt = r;
    r.start();
    for (let attempt = 1; attempt <= 4; attempt++) {
      await r.waitFor(() => r.getConnection('line.plc').currentState === 'reconnecting' && clock.pending().length === 1, 10_000);
      expect(clock.pending(), `after attempt ${attempt}`).to.deep.equal([1000]);
      expect(r.getConnection('line.plc').message).to.match(/COTP header longer than its frame|S7 PDU|TPKT/);
      clock.advance(1000);
    }
    await r.waitFor(() => r.getConnection('line.plc').currentState === 'connected', 10_000);
    expect(s7.accepted).to.equal(5);
  });

  it('a loss the driver reports while its connect is finishing makes that attempt a failure (reconnecting, with the reason)', async () => {
    modbus = await startModbusServer();
    let attempts = 0;
    const real = createProtocolDrivers({ log: recordedLog().log, opcua: () => undefined });
    const r = start(modbusYaml(modbus.port), undefined, (def) => {
      const driver = real(def)!;
      let lost: (reason: string) => void = () => {};
      return {
        ...driver,
        onLost(listener) {
          lost = listener;
          driver.onLost(listener);
        },
        async connect() {
          await driver.connect();
          // Fault: the first session is lost before the runtime hears that it is up.
          if (++attempts === 1) lost('lost during the connect (injected)');
        },
      };
    });
    const states = watchStates(r, 'line.plc');
    await until(() => (readsOf(r) >= 2 ? true : undefined), 10_000, '2 readings');
    expect(states.slice(0, 3)).to.deep.equal(['connecting', 'reconnecting', 'connected']);
    expect(attempts).to.equal(2);
  });

  it('reopens a connection whose every request fails for timeoutMs × 3: reconnecting with the reason, then reads again', async () => {
    modbus = await startModbusServer();
    modbus.holding[3] = 42;
    let failing = false;
    const real = createProtocolDrivers({ log: recordedLog().log, opcua: () => undefined });
    const { log, lines } = recordedLog();
    const r = start(modbusYaml(modbus.port, 200), log, (def) => {
      const driver = real(def)!;
      // Fault: reads fail without an answer, and the driver does not see its session as lost.
      return { ...driver, onLost: (l) => driver.onLost(l), read: (ep) => (failing ? Promise.reject(new Error('no answer (injected)')) : driver.read(ep)) };
    });
    await until(() => (readsOf(r) >= 2 ? true : undefined), 10_000, '2 readings');
    failing = true;
    const since = Date.now();
    await r.waitFor(() => r.getConnection('line.plc').currentState === 'reconnecting');
    const took = Date.now() - since;
    expect(took).to.be.within(600, 600 + 2000);
    expect(r.getConnection('line.plc').message).to.match(/^every request failed for \d+ ms \(more than 3 × timeoutMs\): no answer \(injected\)$/);
    expect(lines.find((l) => l.message === 'connection not answering, reopened')).to.have.property('reason').that.matches(/no answer \(injected\)/);
    expect(r.getEndpoint('line.level').currentState).to.equal('enabling');
    failing = false;
    const reads = readsOf(r);
    await until(() => (r.getConnection('line.plc').currentState === 'connected' && readsOf(r) > reads + 2 ? true : undefined), 10_000, 'readings again');
    expect(modbus.accepted).to.equal(2);
  });

  it('keeps a connection whose device answers every request with a refusal: refusals are answers', async () => {
    modbus = await startModbusServer();
    modbus.exception = 2; // illegal data address, for every request
    // A timeout a loaded test machine keeps (at 100 ms, answers of the test's own server that came
    // late three times running reopened the connection: a timeout, not a refusal, under test).
    const r = start(modbusYaml(modbus.port, 400));
    await until(() => (r.getConnection('line.plc').figures.failures >= 1 ? true : undefined), 20_000, 'a refusal');
    // Refusals for two and a half liveness windows (3 x 400 ms), and more than a few of them.
    const since = Date.now();
    await until(() => (r.getConnection('line.plc').figures.failures >= 6 && Date.now() - since > 3000 ? true : undefined), 20_000, 'refusals over 3 s');
    expect(r.getConnection('line.plc').currentState).to.equal('connected');
    expect(modbus.accepted).to.equal(1);
  });

  for (const [name, slow] of [
    ['a header, then silence', (answer: Buffer): S7Reply => answer.subarray(0, 4)],
    ['1 byte every 200 ms', (answer: Buffer): S7Reply => ({ drip: answer, everyMs: 200 })],
  ] as const) {
    it(`S7 slow peer (${name}) costs one request's timeout: that read fails, the connection is reopened and reads again`, async () => {
      const block = Buffer.alloc(64);
      block.writeInt16BE(7, 8);
      let slowFrom = Infinity;
      s7 = await startScriptedS7({ block, script: (step, connection, answer) => (step === 'read' && connection === 1 && s7!.reads >= slowFrom ? slow(answer) : answer) });
      const r = start(s7Yaml(s7.port, 400));
      await until(() => (readsOf(r) >= 3 ? true : undefined), 10_000, '3 readings');
      slowFrom = s7.reads + 1;
      const since = Date.now();
      await r.waitFor(() => r.getConnection('line.plc').currentState === 'reconnecting', 5000);
      // The slow answer is asked for within one poll interval (50 ms), then it costs its 400 ms timeout.
      expect(Date.now() - since).to.be.within(400, 400 + 50 + 1000);
      expect(r.getConnection('line.plc').message).to.equal('the PLC did not answer within 400 ms');
      const reads = readsOf(r);
      await until(() => (r.getConnection('line.plc').currentState === 'connected' && readsOf(r) > reads ? true : undefined), 10_000, 'readings again');
      expect(s7.accepted).to.equal(2);
    });
  }
});
