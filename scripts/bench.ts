// npm run bench [-- name ...]: runs the benchmarks and prints their numbers. Names:
// startup, footprint, permissions, identity, mqtt, mqtt-auth (includes mqtt-connect), mqtt-connect, mqtt-persistence, mqtt-shipped, mqtt-malformed, idle-clients, reboot, maintenance, mapping, sparkplug, sparkplug-history, https, hooks, bridge, flash, ack-latency, hostile, site (default: all).

/** Start-up time to the ready line and resident memory at idle, first start and restart (the flags of npm start). */
export async function benchStartup(): Promise<Record<string, number>> {
  const { shippedNodeFlags, startAndRestart } = await import('./bench-footprint.js');
  const { first, restart } = await startAndRestart(shippedNodeFlags());
  console.log(`startup: first start ${first.ms.toFixed(0)} ms (creates CA and admin), restart ${restart.ms.toFixed(0)} ms; RSS at idle ${restart.rssMiB.toFixed(1)} MiB (20 s after ready: ${restart.rssLaterMiB.toFixed(1)} MiB)`);
  return { firstStartMs: first.ms, restartMs: restart.ms, idleRssMiB: restart.rssMiB, idleRss20sMiB: restart.rssLaterMiB };
}

const suites: Record<string, () => Promise<Record<string, number>>> = {
  startup: benchStartup,
  footprint: async () => (await import('./bench-footprint.js')).benchFootprint(),
  permissions: async () => (await import('./bench-permissions.js')).benchPermissions(),
  identity: async () => (await import('./bench-identity.js')).benchIdentity(),
  mqtt: async () => (await import('./bench-mqtt.js')).benchMqtt(),
  'mqtt-auth': async () => (await import('./bench-mqtt-auth.js')).benchMqttAuth(),
  'mqtt-connect': async () => (await import('./bench-mqtt-connect.js')).benchMqttConnect(),
  'mqtt-persistence': async () => (await import('./bench-mqtt-persistence.js')).benchMqttPersistence(),
  'mqtt-shipped': async () => (await import('./bench-mqtt-shipped.js')).benchMqttShipped(),
  'mqtt-malformed': async () => (await import('./bench-mqtt-malformed.js')).benchMqttMalformed(),
  'idle-clients': async () => (await import('./bench-idle-clients.js')).benchIdleClients(),
  reboot: async () => (await import('./bench-reboot.js')).benchReboot(),
  maintenance: async () => (await import('./bench-maintenance.js')).benchMaintenance(),
  mapping: async () => (await import('./bench-mapping.js')).benchMapping(),
  sparkplug: async () => (await import('./bench-sparkplug.js')).benchSparkplug(),
  'sparkplug-history': async () => (await import('./bench-sparkplug-history.js')).benchSparkplugHistory(),
  https: async () => (await import('./bench-https.js')).benchHttps(),
  hooks: async () => (await import('./bench-hooks.js')).benchHooks(),
  bridge: async () => (await import('./bench-bridge.js')).benchBridge(),
  flash: async () => (await import('./bench-flash.js')).benchFlash(),
  'ack-latency': async () => (await import('./bench-ack-latency.js')).benchAckLatency(),
  hostile: async () => (await import('./bench-hostile.js')).benchHostile(),
  site: async () => (await import('./bench-site.js')).benchSite(),
};

async function main(): Promise<void> {
  const wanted = process.argv.slice(2).filter((a) => a in suites);
  // mqtt-auth runs mqtt-connect itself.
  const names = wanted.length ? wanted : Object.keys(suites).filter((n) => n !== 'mqtt-connect');
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
