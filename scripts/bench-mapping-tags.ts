// Tag polling benchmark (issue 29): 100 read endpoints on one connection, each polled every
// 100 ms, against the test kit's devices in a process of their own (Modbus TCP server, CIP
// server for EtherNet/IP, snap7's S7 server): values per second reaching an MQTT subscriber of
// the gateway, and the gateway process's CPU time per value (user + system; the subscriber runs
// in that process too, the device does not). EtherNet/IP reads that fall due together travel in
// Multiple Service Packets; S7 endpoints poll in rounds, their items packed into as few requests
// as the PDU allows (100 REALs back to back: one merged range, one request a round; 100 INTs 10
// bytes apart: five requests of 20 items); Modbus reads go one request each. Every loop is
// bounded.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import mqtt from 'mqtt';
import { startSnap7Server } from '../test/support/snap7-server.js';
import { now, startBenchGateway } from './bench-support.js';

const TAGS = 100;
const POLL_MS = 100;
const MEASURE_MS = 10_000;
const ADMIN_PASSWORD = 'Bench-Passw0rd!';
const deviceScript = fileURLToPath(new URL('../test/support/device-process.js', import.meta.url));

type Kind = 'modbus' | 'cip' | 's7' | 's7-apart';

async function startDevice(kind: Kind): Promise<{ port: number; stop(): Promise<void> }> {
  if (kind === 's7' || kind === 's7-apart') {
    const s7 = await startSnap7Server({ dbs: { 1: 1024 } });
    return { port: s7.port, stop: () => s7.stop() };
  }
  const child: ChildProcess = spawn(process.execPath, [deviceScript, kind], { stdio: ['ignore', 'pipe', 'inherit'] });
  const [line] = (await Promise.race([once(createInterface({ input: child.stdout! }), 'line'), once(child, 'exit').then(() => Promise.reject(new Error(`${kind} device exited`)))])) as [string];
  return {
    port: (JSON.parse(line) as { port: number }).port,
    async stop() {
      child.kill('SIGTERM');
      await once(child, 'exit');
    },
  };
}

const PROTOCOLS: Record<Kind, { protocol: string; address: (i: number) => string }> = {
  modbus: { protocol: 'Modbus', address: (i) => `{table: holding, address: ${i}}` },
  cip: { protocol: 'EtherNetIp', address: (i) => `{tag: "Tags[${i}]", type: DINT}` },
  s7: { protocol: 'S7', address: (i) => `{area: DB, dbNumber: 1, offset: ${i * 4}, type: REAL}` },
  's7-apart': { protocol: 'S7', address: (i) => `{area: DB, dbNumber: 1, offset: ${i * 10}, type: INT}` },
};

function service(kind: Kind, port: number): string {
  const { protocol, address } = PROTOCOLS[kind];
  let text = `resources:\n  plc:\n    type: Connection\n    properties: {protocol: ${protocol}, configuration: {host: 127.0.0.1, port: ${port}}}\n`;
  for (let i = 0; i < TAGS; i++) text += `  t${i}:\n    type: Endpoint\n    properties: {connection: !ref plc, operation: read, address: ${address(i)}, pollIntervalMs: ${POLL_MS}}\n`;
  return text;
}

export interface TagPollingResult {
  valuesPerSecond: number;
  cpuUsPerValue: number;
  cpuPercent: number;
}

async function benchOne(kind: Kind): Promise<TagPollingResult> {
  const device = await startDevice(kind);
  const bench = await startBenchGateway({
    adminPassword: ADMIN_PASSWORD,
    passwordHashCost: 10,
    prefix: `gatewayd-bench-tags-${kind}-`,
    prepare: (dataDir) => {
      const servicesDir = join(dataDir, 'services');
      mkdirSync(servicesDir);
      writeFileSync(join(servicesDir, 'bench.yaml'), service(kind, device.port));
      return { mapping: { servicesDir } };
    },
  });
  const client = await mqtt.connectAsync({ host: '127.0.0.1', port: bench.gateway.ports().mqtt, username: 'admin', password: ADMIN_PASSWORD, protocolVersion: 4, reconnectPeriod: 0 });
  try {
    let values = 0;
    const seen = new Set<string>();
    client.on('message', (topic) => {
      values++;
      seen.add(topic);
    });
    await client.subscribeAsync('services/bench/+');
    // Warm up until every endpoint has published (bounded).
    const warm = now();
    while (seen.size < TAGS && now() - warm < 20_000) await new Promise((r) => setTimeout(r, 100));
    if (seen.size < TAGS) throw new Error(`only ${seen.size} of ${TAGS} ${kind} endpoints published`);
    await new Promise((r) => setTimeout(r, 1000));
    const v0 = values;
    const cpu0 = process.cpuUsage();
    const t0 = now();
    await new Promise((r) => setTimeout(r, MEASURE_MS));
    const cpu = process.cpuUsage(cpu0);
    const elapsed = now() - t0;
    const n = values - v0;
    const cpuUs = cpu.user + cpu.system;
    return { valuesPerSecond: (n / elapsed) * 1000, cpuUsPerValue: cpuUs / n, cpuPercent: (cpuUs / 1000 / elapsed) * 100 };
  } finally {
    await client.endAsync(true);
    await bench.stop();
    await device.stop();
  }
}

/** Every protocol, one after the other on the same machine. */
export async function benchTagPolling(): Promise<{ modbus: TagPollingResult; etherNetIp: TagPollingResult; s7: TagPollingResult; s7Apart: TagPollingResult }> {
  const modbus = await benchOne('modbus');
  const etherNetIp = await benchOne('cip');
  const s7 = await benchOne('s7');
  const s7Apart = await benchOne('s7-apart');
  for (const [name, r] of [['Modbus TCP', modbus], ['EtherNet/IP', etherNetIp], ['S7 (REALs back to back)', s7], ['S7 (INTs 10 bytes apart)', s7Apart]] as const) {
    console.log(
      `mapping: ${TAGS} ${name} tags polled every ${POLL_MS} ms on one connection: ${r.valuesPerSecond.toFixed(0)} values/s at an MQTT subscriber (ideal ${(TAGS * 1000) / POLL_MS}), gateway CPU ${r.cpuUsPerValue.toFixed(1)} µs per value (${r.cpuPercent.toFixed(1)} % of one core)`,
    );
  }
  return { modbus, etherNetIp, s7, s7Apart };
}
