// Broker authentication through the real gateway (users in LMDB, scrypt at the daemon's
// default cost, tokens, certificates from the gateway CA): connects per second per method,
// and the time until 1,000 clients connecting at once are all connected — what a gateway
// reboot looks like to the broker. Then bench-mqtt-connect: a cached password connect's broker
// CPU and CONNACK latency beside bare aedes.
import { generateKeyPairSync } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import mqtt, { type IClientOptions, type MqttClient } from 'mqtt';
import forge from 'node-forge';
import { benchMqttConnect } from './bench-mqtt-connect.js';
import { now, startBenchGateway } from './bench-support.js';

const ADMIN_PASSWORD = 'Bench-Adm1n-Password';
const DEVICE_PASSWORD = 'Dev1ce-Passw0rd!';
const PARALLEL = 16;
const MEASURE_MS = 3000;
const STORM_CLIENTS = 1000;
const STORM_DEADLINE_MS = 150_000;

function connectClient(port: number, options: IClientOptions): Promise<MqttClient> {
  const client = mqtt.connect({ host: '127.0.0.1', port, protocolVersion: 4, reconnectPeriod: 0, connectTimeout: STORM_DEADLINE_MS, clientId: `a-${Math.random().toString(16).slice(2, 14)}`, ...options });
  return new Promise((resolve, reject) => {
    client.once('connect', () => resolve(client));
    client.once('error', (err) => {
      client.end(true);
      reject(err);
    });
  });
}

async function connectRate(port: number, options: () => IClientOptions): Promise<number> {
  let done = 0;
  const t0 = now();
  const end = t0 + MEASURE_MS;
  await Promise.all(
    Array.from({ length: PARALLEL }, async () => {
      while (now() < end) {
        const c = await connectClient(port, options());
        await c.endAsync(true);
        done++;
      }
    }),
  );
  return (done * 1000) / (now() - t0);
}

async function storm(port: number, options: (i: number) => IClientOptions): Promise<number> {
  const t0 = now();
  const clients = await Promise.all(Array.from({ length: STORM_CLIENTS }, (_, i) => connectClient(port, options(i))));
  const ms = now() - t0;
  await Promise.all(clients.map((c) => c.endAsync(true).catch(() => undefined)));
  return ms;
}

function csrFor(cn: string): { csrPem: string; keyPem: string } {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const keyPem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const csr = forge.pki.createCertificationRequest();
  csr.publicKey = forge.pki.publicKeyFromPem(publicKey.export({ type: 'spki', format: 'pem' }).toString());
  csr.setSubject([{ name: 'commonName', value: cn }]);
  csr.sign(forge.pki.privateKeyFromPem(keyPem), forge.md.sha256.create());
  return { csrPem: forge.pki.certificationRequestToPem(csr), keyPem };
}

/** One gateway; `cache` false switches the verified-password cache off (a freshly booted gateway). */
async function measure(cache: boolean, results: Record<string, number>): Promise<void> {
  const bench = await startBenchGateway({
    adminPassword: ADMIN_PASSWORD,
    passwordHashCost: 15,
    prefix: 'gatewayd-bench-mqtt-auth-',
    auth: cache ? {} : { verifiedPasswordCacheSeconds: 0 },
  });
  try {
    const { users, auth, ca } = bench.gateway.services;
    const ports = bench.gateway.ports();
    const grant = [{ resource: 'devices/#', operation: 'readWrite' as const, context: 'mqtt' as const }];
    await users.create({ username: 'device-pw', password: DEVICE_PASSWORD, identityProvider: 'local', initialPermissions: grant });
    await users.create({
      username: 'device-cert',
      identityProvider: 'local',
      grantTypes: [{ method: 'certificate', isRequired: true }],
      initialPermissions: grant,
    });
    const { token } = await auth.login({ username: 'device-pw', password: DEVICE_PASSWORD });
    const { csrPem, keyPem } = csrFor('device-cert');
    const certPem = ca!.signCsr(csrPem, { expectedCommonName: 'device-cert' });
    const tls = { protocol: 'mqtts' as const, ca: ca!.caCertPem, cert: certPem, key: keyPem, servername: 'localhost' };

    if (!cache) {
      results.connectsPerSecondToken = await connectRate(ports.mqtt, () => ({ username: 'device-pw', password: token }));
      results.connectsPerSecondPassword = await connectRate(ports.mqtt, () => ({ username: 'device-pw', password: DEVICE_PASSWORD }));
      results.connectsPerSecondCertificate = await connectRate(ports.mqtts, () => tls);
      results.storm1000TokenMs = await storm(ports.mqtt, () => ({ username: 'device-pw', password: token }));
      results.storm1000PasswordMs = await storm(ports.mqtt, () => ({ username: 'device-pw', password: DEVICE_PASSWORD }));
    } else {
      // A network blip: the broker stays up and every device comes back with a password it
      // used before, so the verified-password cache answers.
      await (await connectClient(ports.mqtt, { username: 'device-pw', password: DEVICE_PASSWORD })).endAsync(true);
      results.connectsPerSecondPasswordCached = await connectRate(ports.mqtt, () => ({ username: 'device-pw', password: DEVICE_PASSWORD }));
      results.storm1000PasswordCachedMs = await storm(ports.mqtt, () => ({ username: 'device-pw', password: DEVICE_PASSWORD }));
    }
  } finally {
    await bench.stop();
  }
}

export async function benchMqttAuth(): Promise<Record<string, number>> {
  const results: Record<string, number> = {};
  await measure(false, results);
  await measure(true, results);
  console.log('broker authentication through the gateway (scrypt logN 15, 16 connects in flight):');
  console.log(`  connects/s: token ${results.connectsPerSecondToken!.toFixed(0)}, password ${results.connectsPerSecondPassword!.toFixed(1)}, certificate ${results.connectsPerSecondCertificate!.toFixed(0)}`);
  console.log(`  1,000 clients at once, all connected after: token ${(results.storm1000TokenMs! / 1000).toFixed(2)} s, password ${(results.storm1000PasswordMs! / 1000).toFixed(1)} s (cold, as after a gateway reboot)`);
  console.log(`  after a network blip (passwords verified before): ${results.connectsPerSecondPasswordCached!.toFixed(0)} connects/s, 1,000 at once in ${(results.storm1000PasswordCachedMs! / 1000).toFixed(2)} s`);
  console.log('  (cold password connects are bounded by scrypt: ~32 MiB and tens of ms of CPU each on 2 cores,');
  console.log('   and by mqtt.maxConcurrentAuth; devices that reconnect in storms should use tokens or certificates)');
  console.log('');
  // The connect cost beside bare aedes (each broker in its own process, CPU of every thread).
  Object.assign(results, await benchMqttConnect());
  return results;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  benchMqttAuth().then(
    () => process.exit(0),
    (err) => {
      console.error(err);
      process.exit(1);
    },
  );
}
