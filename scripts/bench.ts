// npm run bench [-- name ...]: runs the benchmarks and prints their numbers. Names:
// startup, footprint, permissions, identity, mqtt, mqtt-auth, mqtt-persistence, maintenance, mapping (default: all).
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const mainScript = fileURLToPath(new URL('../src/main.js', import.meta.url));

function rssKiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
}

/** Start-up time to the ready line and resident memory at idle, first start and restart. */
export async function benchStartup(): Promise<Record<string, number>> {
  const dataDir = mkdtempSync(join(tmpdir(), 'gatewayd-bench-'));
  const run = async () => {
    const started = process.hrtime.bigint();
    const child = spawn(process.execPath, [mainScript], {
      env: { PATH: process.env.PATH ?? '', GATEWAYD_DATA_DIR: dataDir, GATEWAYD_HOST: '127.0.0.1', GATEWAYD_HTTP_PORT: '0', GATEWAYD_MQTT_PORT: '0', GATEWAYD_MQTTS_PORT: '0', GATEWAYD_ADMIN_PASSWORD: 'Bench-Passw0rd!', GATEWAYD_LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    await new Promise<void>((resolve, reject) => {
      createInterface({ input: child.stdout! }).on('line', (l) => l.includes('"ready"') && resolve());
      child.once('exit', (c) => reject(new Error(`daemon exited ${c}`)));
    });
    const ms = Number(process.hrtime.bigint() - started) / 1e6;
    // Let start-up garbage settle before reading idle memory.
    await new Promise((r) => setTimeout(r, 1000));
    const rss = rssKiB(child.pid!);
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
    return { ms, rssMiB: rss / 1024 };
  };
  const first = await run();
  const second = await run();
  rmSync(dataDir, { recursive: true, force: true });
  console.log(`startup: first start ${first.ms.toFixed(0)} ms (creates CA and admin), restart ${second.ms.toFixed(0)} ms; RSS at idle ${second.rssMiB.toFixed(1)} MiB`);
  return { firstStartMs: first.ms, restartMs: second.ms, idleRssMiB: second.rssMiB };
}

const suites: Record<string, () => Promise<Record<string, number>>> = {
  startup: benchStartup,
  footprint: async () => (await import('./bench-footprint.js')).benchFootprint(),
  permissions: async () => (await import('./bench-permissions.js')).benchPermissions(),
  identity: async () => (await import('./bench-identity.js')).benchIdentity(),
  mqtt: async () => (await import('./bench-mqtt.js')).benchMqtt(),
  'mqtt-auth': async () => (await import('./bench-mqtt-auth.js')).benchMqttAuth(),
  'mqtt-persistence': async () => (await import('./bench-mqtt-persistence.js')).benchMqttPersistence(),
  maintenance: async () => (await import('./bench-maintenance.js')).benchMaintenance(),
  mapping: async () => (await import('./bench-mapping.js')).benchMapping(),
};

async function main(): Promise<void> {
  const wanted = process.argv.slice(2).filter((a) => a in suites);
  const names = wanted.length ? wanted : Object.keys(suites);
  const results: Record<string, Record<string, number>> = {};
  for (const name of names) {
    console.log(`\n== ${name}`);
    try {
      results[name] = await suites[name]!();
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ERR_MODULE_NOT_FOUND') console.log(`(${name}: not built yet)`);
      else throw err;
    }
  }
  console.log('\n== summary (JSON)');
  console.log(JSON.stringify(results, null, 1));
}

if (process.argv[1] && import.meta.url === new URL(`file://${process.argv[1]}`).href) {
  main().then(
    () => process.exit(0),
    (err) => {
      console.error(err);
      process.exit(1);
    },
  );
}
