// Protocol-mapping benchmark: JSONata transform evaluations per second for a typical rule, and
// end-to-end latency from a Modbus poll answer to the MQTT message at a subscriber of the
// gateway's broker (Modbus TCP server on 127.0.0.1:0 → gatewayd poll → transform → data plane →
// mqtt.js client), plus the /req → /res round trip; services managed live: the time from a
// service file written (by hand into the watched directory, or PUT through the API) to its first
// value at an MQTT subscriber, and the poll-interval jitter of 100 polling services before and
// while another service is changed again and again. Every loop is bounded by a count and a time
// limit. 100 polled tags per protocol (Modbus, EtherNet/IP, S7): bench-mapping-tags.ts.
//
// Run: node dist/scripts/bench-mapping.js   (or import { benchMapping })
import { mkdirSync, writeFileSync } from 'node:fs';
import { Agent } from 'node:http';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import mqtt from 'mqtt';
import { compileRule, defaultRuleLimits } from '../src/mapping/rules.js';
import { startModbusServer } from '../test/mapping-support.js';
import { httpCall, now, percentile, startBenchGateway } from './bench-support.js';
import { benchTagPolling } from './bench-mapping-tags.js';

const TYPICAL = "{ 'machine': $context.vars.machine, 'temperature': $.value / 10, 'alarm': $.value > 800, 'unit': $uppercase($.unit), 'at': $context.topic }";
const ADMIN_PASSWORD = 'Bench-Passw0rd!';

async function benchTransform(): Promise<{ evalsPerSecond: number; p50Us: number; p99Us: number }> {
  const rule = compileRule(TYPICAL, defaultRuleLimits);
  const input = { value: 215, unit: 'c' };
  const context = { topic: 'factory/press-7/temp', vars: { machine: 'press-7' }, label: 'bench' };
  for (let i = 0; i < 2000; i++) await rule.evaluate(input, context); // warm up
  const samples: number[] = [];
  const started = now();
  let n = 0;
  while (n < 200_000 && now() - started < 2000) {
    const t = now();
    await rule.evaluate(input, context);
    samples.push(now() - t);
    n++;
  }
  const elapsed = now() - started;
  samples.sort((a, b) => a - b);
  return { evalsPerSecond: (n / elapsed) * 1000, p50Us: percentile(samples, 50) * 1000, p99Us: percentile(samples, 99) * 1000 };
}

/** A Modbus TCP server, the gateway with a services directory holding `files` (name → text), and an admin MQTT client. */
async function startMappingBench(prefix: string, files: (modbusPort: number) => Record<string, string>) {
  const modbus = await startModbusServer();
  let servicesDir = '';
  const bench = await startBenchGateway({
    adminPassword: ADMIN_PASSWORD,
    passwordHashCost: 10,
    prefix,
    prepare: (dataDir) => {
      servicesDir = join(dataDir, 'services');
      mkdirSync(servicesDir);
      for (const [name, text] of Object.entries(files(modbus.port))) writeFileSync(join(servicesDir, name), text);
      return { mapping: { servicesDir, watchDebounceMs: WATCH_DEBOUNCE_MS } };
    },
  });
  const client = await mqtt.connectAsync({ host: '127.0.0.1', port: bench.gateway.ports().mqtt, username: 'admin', password: ADMIN_PASSWORD, protocolVersion: 4, reconnectPeriod: 0 });
  const agent = new Agent({ keepAlive: true });
  return {
    modbus,
    bench,
    client,
    servicesDir,
    /** PUT /api/services/{id} with a YAML body; throws unless the status is `expected`. */
    async putService(id: string, text: string, expected: number): Promise<void> {
      const auth = { authorization: `Basic ${Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64')}`, 'content-type': 'application/yaml' };
      const res = await httpCall(agent, bench.port, 'PUT', `/api/services/${id}`, auth, Buffer.from(text));
      if (res.status !== expected) throw new Error(`PUT answered ${res.status}: ${res.body.toString()}`);
    },
    async stop() {
      agent.destroy();
      await client.endAsync(true);
      await bench.stop();
      await modbus.stop();
    },
  };
}

async function benchEndToEnd(): Promise<{ pollP50Ms: number; pollP99Ms: number; pollSamples: number; reqResP50Ms: number; reqResP99Ms: number }> {
  const setup = await startMappingBench('gatewayd-bench-mapping-', (port) => ({
    'bench.yaml': `resources:
  plc:
    type: Connection
    properties: {protocol: Modbus, configuration: {host: 127.0.0.1, port: ${port}}}
  temp:
    type: Endpoint
    properties:
      connection: !ref plc
      operation: read
      address: {table: holding, address: 0, quantity: 4}
      pollIntervalMs: 10
      transform: "{'temperature': $[0] / 10, 'raw': $}"
`,
  }));
  const { modbus, client } = setup;
  try {
    // Poll answer → broker message.
    let lastAnswer = 0;
    modbus.events.on('request', (fc: number) => {
      if (fc === 3) lastAnswer = now();
    });
    const poll: number[] = [];
    await client.subscribeAsync('services/bench/temp');
    await new Promise<void>((resolve) => {
      const deadline = setTimeout(resolve, 15_000);
      client.on('message', (topic) => {
        if (topic !== 'services/bench/temp' || lastAnswer === 0) return;
        poll.push(now() - lastAnswer);
        if (poll.length >= 500) {
          clearTimeout(deadline);
          resolve();
        }
      });
    });
    await client.unsubscribeAsync('services/bench/temp');
    client.removeAllListeners('message');

    // /req → /res round trip (publish, Modbus read, transform, publish).
    const rt: number[] = [];
    await client.subscribeAsync('services/bench/temp/res');
    for (let i = 0; i < 300; i++) {
      const t = now();
      const got = new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('no /res within 5 s')), 5000);
        client.once('message', () => {
          clearTimeout(timer);
          resolve();
        });
      });
      await client.publishAsync('services/bench/temp/req', '');
      await got;
      rt.push(now() - t);
    }
    poll.sort((a, b) => a - b);
    rt.sort((a, b) => a - b);
    return { pollP50Ms: percentile(poll, 50), pollP99Ms: percentile(poll, 99), pollSamples: poll.length, reqResP50Ms: percentile(rt, 50), reqResP99Ms: percentile(rt, 99) };
  } finally {
    await setup.stop();
  }
}

const pollService = (port: number, transform = '$[0]') => `resources:
  plc:
    type: Connection
    properties: {protocol: Modbus, configuration: {host: 127.0.0.1, port: ${port}}}
  temp:
    type: Endpoint
    properties: {connection: !ref plc, operation: read, address: {table: holding, address: 0}, pollIntervalMs: ${POLL_MS}, transform: "${transform}"}
`;
const POLL_MS = 100;
/** mapping.watchDebounceMs: the default. */
const WATCH_DEBOUNCE_MS = 200;
const POLLING_SERVICES = 100;
/** Rounds of the jitter bench: a quiet second, then one apply. */
const ROUNDS = 20;
const QUIET_MS = 1000;

/** Resolves with the time of the first message on `topic` (bounded). */
function firstMessage(client: mqtt.MqttClient, topic: string, timeoutMs = 10_000): Promise<number> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      client.removeListener('message', on);
      reject(new Error(`no message on ${topic} within ${timeoutMs} ms`));
    }, timeoutMs);
    const on = (t: string) => {
      if (t !== topic) return;
      clearTimeout(timer);
      client.removeListener('message', on);
      resolve(now());
    };
    client.on('message', on);
  });
}

/** Time from a service file written to its first value on MQTT: by hand (watched directory) and through the API. */
async function benchServiceToFirstValue(): Promise<{ watchP50Ms: number; watchMaxMs: number; apiP50Ms: number; apiMaxMs: number; apiAnswerP50Ms: number; debounceMs: number; samples: number }> {
  const setup = await startMappingBench('gatewayd-bench-services-', () => ({}));
  const { modbus, client, servicesDir } = setup;
  try {
    await client.subscribeAsync('services/#');
    const watch: number[] = [];
    const api: number[] = [];
    const answer: number[] = [];
    const SAMPLES = 10;
    for (let i = 0; i < SAMPLES; i++) {
      const got = firstMessage(client, `services/file${i}/temp`);
      const t = now();
      writeFileSync(join(servicesDir, `file${i}.yaml`), pollService(modbus.port));
      watch.push((await got) - t);
    }
    for (let i = 0; i < SAMPLES; i++) {
      const got = firstMessage(client, `services/api${i}/temp`);
      const t = now();
      await setup.putService(`api${i}`, pollService(modbus.port), 201);
      answer.push(now() - t);
      api.push((await got) - t);
    }
    for (const list of [watch, api, answer]) list.sort((a, b) => a - b);
    return { watchP50Ms: percentile(watch, 50), watchMaxMs: watch.at(-1)!, apiP50Ms: percentile(api, 50), apiMaxMs: api.at(-1)!, apiAnswerP50Ms: percentile(answer, 50), debounceMs: WATCH_DEBOUNCE_MS, samples: SAMPLES };
  } finally {
    await setup.stop();
  }
}

/**
 * 100 services poll every 100 ms (one Modbus TCP connection each); the subscriber sees each
 * value. Jitter = |interval between two values of one endpoint - 100 ms|. Rounds alternate a
 * quiet second ("before") and the apply of one other, changed service through the API
 * ("during": the intervals that overlap the time from the PUT until the changed endpoint's
 * first new value, plus the watcher's rescan of the directory after the write), so that both
 * see the same load of the machine.
 */
async function benchApplyJitter(): Promise<{
  beforeP50Ms: number;
  beforeP99Ms: number;
  duringP50Ms: number;
  duringP99Ms: number;
  duringMaxMs: number;
  applies: number;
  applyP50Ms: number;
  before: number;
  during: number;
  /** Longest event-loop lag of the process (gateway, Modbus server and subscriber): a stall of the machine shows here too. */
  loopBeforeMaxMs: number;
  loopDuringMaxMs: number;
}> {
  const setup = await startMappingBench('gatewayd-bench-jitter-', (port) => {
    const files: Record<string, string> = { 'changing.yaml': pollService(port) };
    for (let i = 0; i < POLLING_SERVICES; i++) files[`poll${i}.yaml`] = pollService(port);
    return files;
  });
  const { modbus, client } = setup;
  const last = new Map<string, number>();
  const intervals: Array<{ start: number; end: number; jitter: number }> = [];
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const quiet: Array<[number, number]> = [];
  const applying: Array<[number, number]> = [];
  const applyTimes: number[] = [];
  try {
    client.on('message', (topic) => {
      if (!topic.startsWith('services/poll')) return;
      const t = now();
      const previous = last.get(topic);
      last.set(topic, t);
      if (previous !== undefined) intervals.push({ start: previous, end: t, jitter: Math.abs(t - previous - POLL_MS) });
    });
    await client.subscribeAsync('services/+/temp');
    await sleep(2000); // every service polling
    // Event-loop lag of the process (gateway, Modbus server, subscriber): how late a 5 ms timer fires.
    const lags: Array<{ at: number; lag: number }> = [];
    let due = now() + 5;
    const lagTimer = setInterval(() => {
      const t = now();
      lags.push({ at: t, lag: Math.max(0, t - due) });
      due = t + 5;
    }, 5);
    const started = now();
    for (let k = 0; k < ROUNDS && now() - started < 120_000; k++) {
      const q0 = now();
      await sleep(QUIET_MS);
      quiet.push([q0, now()]);

      const value = String(1000 + k);
      const first = new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('no value of the changed service within 10 s')), 10_000);
        const on = (topic: string, payload: Buffer) => {
          if (topic !== 'services/changing/temp' || payload.toString() !== value) return;
          clearTimeout(timer);
          client.removeListener('message', on);
          resolve();
        };
        client.on('message', on);
      });
      const t0 = now();
      await setup.putService('changing', pollService(modbus.port, `$[0] + ${value}`), 200);
      applyTimes.push(now() - t0);
      await first;
      await sleep(WATCH_DEBOUNCE_MS + 100); // the watcher reads the directory again after the write
      applying.push([t0, now()]);
    }
    clearInterval(lagTimer);
    const lagsIn = (windows: Array<[number, number]>) => lags.filter((l) => windows.some(([a, b]) => l.at >= a && l.at <= b)).map((l) => l.lag);
    const overlaps = (i: { start: number; end: number }, windows: Array<[number, number]>) => windows.some(([a, b]) => i.end >= a && i.start <= b);
    const within = (i: { start: number; end: number }, windows: Array<[number, number]>) => windows.some(([a, b]) => i.start >= a && i.end <= b);
    const before = intervals.filter((i) => within(i, quiet)).map((i) => i.jitter);
    const during = intervals.filter((i) => overlaps(i, applying)).map((i) => i.jitter);
    for (const list of [before, during, applyTimes]) list.sort((a, b) => a - b);
    return {
      beforeP50Ms: percentile(before, 50),
      beforeP99Ms: percentile(before, 99),
      duringP50Ms: percentile(during, 50),
      duringP99Ms: percentile(during, 99),
      duringMaxMs: during.at(-1) ?? NaN,
      applies: applyTimes.length,
      applyP50Ms: percentile(applyTimes, 50),
      before: before.length,
      during: during.length,
      loopBeforeMaxMs: Math.max(0, ...lagsIn(quiet)),
      loopDuringMaxMs: Math.max(0, ...lagsIn(applying)),
    };
  } finally {
    await setup.stop();
  }
}

export async function benchMapping(): Promise<Record<string, number>> {
  const t = await benchTransform();
  console.log(`mapping: transform ${t.evalsPerSecond.toFixed(0)} evaluations/s (p50 ${t.p50Us.toFixed(1)} µs, p99 ${t.p99Us.toFixed(1)} µs) for ${TYPICAL}`);
  const e = await benchEndToEnd();
  console.log(`mapping: Modbus poll answer → broker subscriber p50 ${e.pollP50Ms.toFixed(2)} ms, p99 ${e.pollP99Ms.toFixed(2)} ms (${e.pollSamples} samples); /req → /res round trip p50 ${e.reqResP50Ms.toFixed(2)} ms, p99 ${e.reqResP99Ms.toFixed(2)} ms`);
  const f = await benchServiceToFirstValue();
  console.log(
    `mapping: service file → first value on MQTT: written to the watched directory p50 ${f.watchP50Ms.toFixed(0)} ms, max ${f.watchMaxMs.toFixed(0)} ms (includes mapping.watchDebounceMs ${f.debounceMs} ms); PUT /api/services p50 ${f.apiP50Ms.toFixed(0)} ms, max ${f.apiMaxMs.toFixed(0)} ms (answer after p50 ${f.apiAnswerP50Ms.toFixed(1)} ms); ${f.samples} services each`,
  );
  const j = await benchApplyJitter();
  console.log(
    `mapping: ${POLLING_SERVICES} services polling every ${POLL_MS} ms, poll-interval jitter before p50 ${j.beforeP50Ms.toFixed(1)} ms, p99 ${j.beforeP99Ms.toFixed(1)} ms (${j.before} intervals); during ${j.applies} applies of another changed service, interleaved (PUT answered after p50 ${j.applyP50Ms.toFixed(1)} ms) p50 ${j.duringP50Ms.toFixed(1)} ms, p99 ${j.duringP99Ms.toFixed(1)} ms, max ${j.duringMaxMs.toFixed(1)} ms (${j.during} intervals); longest event-loop lag quiet ${j.loopBeforeMaxMs.toFixed(0)} ms, during ${j.loopDuringMaxMs.toFixed(0)} ms`,
  );
  const tags = await benchTagPolling();
  return {
    modbusTagValuesPerSecond: tags.modbus.valuesPerSecond,
    modbusCpuUsPerValue: tags.modbus.cpuUsPerValue,
    etherNetIpTagValuesPerSecond: tags.etherNetIp.valuesPerSecond,
    etherNetIpCpuUsPerValue: tags.etherNetIp.cpuUsPerValue,
    s7TagValuesPerSecond: tags.s7.valuesPerSecond,
    s7CpuUsPerValue: tags.s7.cpuUsPerValue,
    s7ApartTagValuesPerSecond: tags.s7Apart.valuesPerSecond,
    s7ApartCpuUsPerValue: tags.s7Apart.cpuUsPerValue,
    serviceFileToFirstValueP50Ms: f.watchP50Ms,
    servicePutToFirstValueP50Ms: f.apiP50Ms,
    pollJitterBeforeP99Ms: j.beforeP99Ms,
    pollJitterDuringApplyP99Ms: j.duringP99Ms,
    applyP50Ms: j.applyP50Ms,
    transformEvalsPerSecond: t.evalsPerSecond,
    transformP50Us: t.p50Us,
    transformP99Us: t.p99Us,
    modbusPollToBrokerP50Ms: e.pollP50Ms,
    modbusPollToBrokerP99Ms: e.pollP99Ms,
    reqResP50Ms: e.reqResP50Ms,
    reqResP99Ms: e.reqResP99Ms,
  };
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  benchMapping().then(
    (r) => {
      console.log(JSON.stringify(r, null, 1));
      process.exit(0);
    },
    (err) => {
      console.error(err);
      process.exit(1);
    },
  );
}
