// Protocol-mapping benchmark: JSONata transform evaluations per second for a typical rule, and
// end-to-end latency from a Modbus poll answer to the MQTT message at a subscriber of the
// gateway's broker (Modbus TCP server on 127.0.0.1:0 → gatewayd poll → transform → data plane →
// mqtt.js client), plus the /req → /res round trip. Every loop is bounded by a count and a time
// limit.
//
// Run: node dist/scripts/bench-mapping.js   (or import { benchMapping })
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import mqtt from 'mqtt';
import { compileRule, defaultRuleLimits } from '../src/mapping/rules.js';
import { startModbusServer } from '../test/mapping-support.js';
import { now, percentile, startBenchGateway } from './bench-support.js';

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

async function benchEndToEnd(): Promise<{ pollP50Ms: number; pollP99Ms: number; pollSamples: number; reqResP50Ms: number; reqResP99Ms: number }> {
  const modbus = await startModbusServer();
  const bench = await startBenchGateway({
    adminPassword: ADMIN_PASSWORD,
    passwordHashCost: 10,
    prefix: 'gatewayd-bench-mapping-',
    prepare: (dataDir) => {
      const servicesDir = join(dataDir, 'services');
      mkdirSync(servicesDir);
      writeFileSync(
        join(servicesDir, 'bench.yaml'),
        `resources:
  plc:
    type: Connection
    properties: {protocol: Modbus, configuration: {host: 127.0.0.1, port: ${modbus.port}}}
  temp:
    type: Endpoint
    properties:
      connection: !ref plc
      operation: read
      address: {table: holding, address: 0, quantity: 4}
      pollIntervalMs: 10
      transform: "{'temperature': $[0] / 10, 'raw': $}"
`,
      );
      return { mapping: { servicesDir } };
    },
  });
  const { gateway } = bench;
  const client = await mqtt.connectAsync({ host: '127.0.0.1', port: gateway.ports().mqtt, username: 'admin', password: ADMIN_PASSWORD, protocolVersion: 4, reconnectPeriod: 0 });
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
    await client.endAsync(true);
    await bench.stop();
    await modbus.stop();
  }
}

export async function benchMapping(): Promise<Record<string, number>> {
  const t = await benchTransform();
  console.log(`mapping: transform ${t.evalsPerSecond.toFixed(0)} evaluations/s (p50 ${t.p50Us.toFixed(1)} µs, p99 ${t.p99Us.toFixed(1)} µs) for ${TYPICAL}`);
  const e = await benchEndToEnd();
  console.log(`mapping: Modbus poll answer → broker subscriber p50 ${e.pollP50Ms.toFixed(2)} ms, p99 ${e.pollP99Ms.toFixed(2)} ms (${e.pollSamples} samples); /req → /res round trip p50 ${e.reqResP50Ms.toFixed(2)} ms, p99 ${e.reqResP99Ms.toFixed(2)} ms`);
  return {
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
