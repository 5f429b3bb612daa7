// Sparkplug B benchmark: DDATA messages per second and daemon CPU per metric change. The daemon
// runs as shipped (npm start's node flags, a child process); a Modbus TCP server in this process
// holds 50 registers that change before every poll (5 devices of 10 metrics, each its own
// endpoint polled every 20 ms); the edge node publishes through the embedded broker to a host
// (an mqtt.js client of this process, decoding with the tests' host). The same service runs
// without the Sparkplug resource: the difference of the daemon's CPU is what Sparkplug costs
// (report by exception, encoding, publishing to the host through the broker) per metric change.
// Three edge nodes: uncapped (one DDATA per change), the defaults (at most 500 DDATA/s, the
// rest gathered), and aggregateMs = the poll interval.
//
// Run: npm run bench -- sparkplug
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startModbusServer, type ModbusTestServer } from '../test/mapping-support.js';
import { SparkplugHost } from '../test/support/sparkplug-host.js';
import { ADMIN_PASSWORD, shippedNodeFlags, startDaemonAt } from './bench-footprint.js';

const DEVICES = 5;
const METRICS = 10;
const POLL_MS = 20;
const WARMUP_MS = 2000;
const MEASURE_MS = 8000;
const CLOCK_TICKS = 100; // USER_HZ on Linux

interface EdgeOptions {
  aggregateMs: number;
  maxMessagesPerSecond: number;
}

/**
 * A service file: devices × metrics Modbus endpoints (holding registers 0.., each polled every
 * pollMs) and, with `edge` (the edge node's own property lines), the Sparkplug edge node
 * `gw` of group `bench` with a device d<i> of metrics m<j> (UInt16) per endpoint.
 */
export function benchService(o: { port: number; devices: number; metrics: number; pollMs: number; edge?: string[] }): string {
  const lines = ['resources:', '  plc:', '    type: Connection', `    properties: {protocol: Modbus, configuration: {host: 127.0.0.1, port: ${o.port}}}`];
  for (let d = 0; d < o.devices; d++) {
    for (let m = 0; m < o.metrics; m++) {
      lines.push(`  r${d}_${m}:`, '    type: Endpoint', `    properties: {connection: !ref plc, operation: read, address: {table: holding, address: ${d * o.metrics + m}}, pollIntervalMs: ${o.pollMs}, transform: "$[0]"}`);
    }
  }
  if (o.edge) {
    lines.push('  edge:', '    type: Sparkplug', '    properties:', '      groupId: bench', '      edgeNodeId: gw', ...o.edge.map((l) => `      ${l}`), '      devices:');
    for (let d = 0; d < o.devices; d++) {
      lines.push(`        - deviceId: d${d}`, '          metrics:');
      for (let m = 0; m < o.metrics; m++) lines.push(`            - {name: m${m}, endpoint: !ref r${d}_${m}, datatype: UInt16}`);
    }
  }
  return lines.join('\n') + '\n';
}

const service = (port: number, edge: EdgeOptions | undefined) =>
  benchService({ port, devices: DEVICES, metrics: METRICS, pollMs: POLL_MS, ...(edge ? { edge: ['runAs: edge', `aggregateMs: ${edge.aggregateMs}`, `maxMessagesPerSecond: ${edge.maxMessagesPerSecond}`] } : {}) });

/** User + system CPU of a process so far, in ms. */
export function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS;
}

async function api(port: number, method: string, path: string, body: string, contentType: string): Promise<void> {
  const res = await fetch(`http://127.0.0.1:${port}${path}`, { method, headers: { authorization: `Basic ${Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64')}`, 'content-type': contentType }, body });
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
}

interface Run {
  cpuMs: number;
  ddataPerSecond: number;
  metricChangesPerSecond: number;
}

async function run(modbus: ModbusTestServer, edge?: EdgeOptions): Promise<Run> {
  const dataDir = mkdtempSync(join(tmpdir(), 'gatewayd-bench-sparkplug-'));
  mkdirSync(join(dataDir, 'services'));
  // The broker's limit per client (1000 publishes/s) raised: the uncapped run measures what the edge node can do.
  const started = await startDaemonAt(dataDir, shippedNodeFlags(), { GATEWAYD_SET__MQTT__MAXPUBLISHESPERSECOND: '1000000' });
  const daemon = { child: started.child, http: started.ready.http as number, mqtt: started.ready.mqtt as number };
  let host: SparkplugHost | undefined;
  // Every register changes before every poll.
  const changer = setInterval(() => {
    for (let i = 0; i < DEVICES * METRICS; i++) modbus.holding[i] = (modbus.holding[i]! + 1) & 0xffff;
  }, POLL_MS / 4);
  try {
    await api(daemon.http, 'POST', '/api/users', JSON.stringify({ username: 'edge', password: ADMIN_PASSWORD, identityProvider: 'local', initialPermissions: [{ context: 'mqtt', operation: 'readWrite', resource: 'spBv1.0/bench/#' }] }), 'application/json');
    host = await SparkplugHost.connect(`mqtt://127.0.0.1:${daemon.mqtt}`, 'bench', { username: 'admin', password: ADMIN_PASSWORD, protocolVersion: 4 });
    await api(daemon.http, 'PUT', '/api/services/bench', service(modbus.port, edge), 'application/yaml');
    if (edge) {
      const deadline = Date.now() + 20_000;
      while (host.of('DBIRTH').length < DEVICES && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      if (host.of('DBIRTH').length < DEVICES) throw new Error('the devices were not born within 20 s');
    }
    await new Promise((r) => setTimeout(r, WARMUP_MS));
    const from = host.messages.length;
    const cpu0 = cpuMs(daemon.child.pid!);
    const t0 = performance.now();
    await new Promise((r) => setTimeout(r, MEASURE_MS));
    const cpu1 = cpuMs(daemon.child.pid!);
    const seconds = (performance.now() - t0) / 1000;
    const ddata = host.messages.slice(from).filter((m) => m.type === 'DDATA');
    const changes = ddata.reduce((n, m) => n + m.payload.metrics.length, 0);
    return { cpuMs: cpu1 - cpu0, ddataPerSecond: ddata.length / seconds, metricChangesPerSecond: changes / seconds };
  } finally {
    clearInterval(changer);
    await host?.end();
    daemon.child.kill('SIGTERM');
    await new Promise((r) => (daemon.child.exitCode !== null ? r(undefined) : daemon.child.once('exit', r)));
    rmSync(dataDir, { recursive: true, force: true });
  }
}

export async function benchSparkplug(): Promise<Record<string, number>> {
  const modbus = await startModbusServer();
  try {
    const without = await run(modbus);
    const percent = (r: Run) => (r.cpuMs / MEASURE_MS) * 100;
    console.log(`sparkplug: ${DEVICES}×${METRICS} metrics, each its own endpoint polled every ${POLL_MS} ms, all changing; without the edge node the daemon uses ${percent(without).toFixed(0)}% of a core`);
    const out: Record<string, number> = { cpuPercentWithout: percent(without) };
    const runs: Array<[string, EdgeOptions]> = [
      ['uncapped', { aggregateMs: 0, maxMessagesPerSecond: 1_000_000 }],
      ['defaults', { aggregateMs: 0, maxMessagesPerSecond: 500 }],
      ['aggregate20', { aggregateMs: POLL_MS, maxMessagesPerSecond: 500 }],
    ];
    for (const [name, edge] of runs) {
      const r = await run(modbus, edge);
      const changes = r.metricChangesPerSecond * (MEASURE_MS / 1000);
      const sparkplugUs = ((r.cpuMs - without.cpuMs) * 1000) / changes;
      console.log(
        `  ${name} (aggregateMs ${edge.aggregateMs}, maxMessagesPerSecond ${edge.maxMessagesPerSecond}): ${r.ddataPerSecond.toFixed(0)} DDATA/s carrying ${r.metricChangesPerSecond.toFixed(0)} metric changes/s; ` +
          `${percent(r).toFixed(0)}% of a core, ${((r.cpuMs * 1000) / changes).toFixed(1)} µs per metric change in all (polls included), ${sparkplugUs.toFixed(1)} µs of it the edge node's`,
      );
      Object.assign(out, {
        [`${name}_ddataPerSecond`]: r.ddataPerSecond,
        [`${name}_metricChangesPerSecond`]: r.metricChangesPerSecond,
        [`${name}_sparkplugCpuUsPerMetricChange`]: sparkplugUs,
        [`${name}_cpuPercent`]: percent(r),
      });
    }
    return out;
  } finally {
    await modbus.stop();
  }
}
